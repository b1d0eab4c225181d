"""Ajax: Agents in JAX.

One ``train`` call compiles a whole run (environment, agent, evaluation) into two XLA
programs, the seeds' initialisation and a segment the run repeats, vmapped over seeds.
Importing ajax points JAX's persistent compile cache at ``~/.cache/ajax/jax_compile_cache``
(see ``ajax._compile_cache``) and makes each CPU core a JAX device, over which runs shard
their seeds (see ``ajax._devices``).
"""

from ajax import _compile_cache, _devices
from ajax._version import __version__

_compile_cache.configure()
_devices.configure()

from ajax import distributed  # noqa: E402
from ajax.agents import (  # noqa: E402
    AGENTS,
    APG,
    APO,
    ASAC,
    AVG,
    DQN,
    PPO,
    PQN,
    REDQ,
    SAC,
    TD3,
    TDMPC2,
    UDRL,
    DreamerV3,
)
from ajax.checkpoint import CheckpointConfig  # noqa: E402
from ajax.envs import make_env  # noqa: E402
from ajax.logging import LoggingConfig  # noqa: E402
from ajax.loop import RunInterrupted, resume  # noqa: E402
from ajax.result import TrainResult, evaluate, load  # noqa: E402
from ajax.watchdog import RunHungError, Watchdog  # noqa: E402

__all__ = [
    "AGENTS",
    "APG",
    "APO",
    "ASAC",
    "AVG",
    "DQN",
    "PPO",
    "PQN",
    "REDQ",
    "SAC",
    "TD3",
    "TDMPC2",
    "UDRL",
    "CheckpointConfig",
    "DreamerV3",
    "LoggingConfig",
    "RunHungError",
    "RunInterrupted",
    "TrainResult",
    "Watchdog",
    "__version__",
    "distributed",
    "evaluate",
    "load",
    "make_env",
    "resume",
]
