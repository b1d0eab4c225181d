"""Reproduces an intermittent stall: repeated logged PPO runs; one execution eventually
never completes (all XLA CPU workers idle). Seen with async dispatch on or off, with or
without donation, XNNPACK or multi-threaded Eigen. Exits with a traceback after 200 s."""

import faulthandler
import tempfile
import time

from ajax import PPO, LoggingConfig

faulthandler.dump_traceback_later(200, exit=True)

a = PPO(env_id="CartPole-v1", n_envs=4, n_steps=32)
t = time.time()
for _ in range(40):
    a.train(
        seed=[0, 1, 2],
        n_timesteps=6144,
        logging_config=LoggingConfig(log_frequency=2048, log_dir=tempfile.mkdtemp()),
    )
print(f"40 runs finished in {time.time() - t:.0f} s", flush=True)
