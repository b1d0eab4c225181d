"""Stress check for an intermittent stall in XLA's CPU runtime: 40 logged PPO runs.

With evaluation written as a data-dependent ``while_loop`` one execution eventually never
completed (every XLA worker idle), in 4 tries of 4, whether async dispatch, donation,
XNNPACK or multi-threaded Eigen were on or off. With the fixed-length evaluation loop all 40
runs finished, twice; the same stall was then seen once in a full test suite inside a
training segment whose iteration count was a runtime argument, so segments now compile
their length in too. Exits with a traceback if a run takes past 200 s."""

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
