"""target-gym's environments (aircraft, process control, energy) by id.

target-gym writes its environments to gymnax's API, so they are served by the gymnax adapter.
Ids are the keys of target-gym's own registry (``target_gym/plane``, ``target_gym/cstr``, ...),
plus the names the performance page uses: ``Plane`` and ``Plane3DCircle``.

Some registry entries are variants of one environment told apart by their parameters
(``plane_sine`` is the aircraft with a sinusoidal target). target-gym records those in each
entry's test parameters, together with a shortened episode; the variant's parameters are
kept as defaults here and the episode length is left at the environment's own.
"""

from __future__ import annotations

import warnings
from typing import Any

from ajax.envs.gymnax_adapter import GymnaxAdapter, import_gymnax, override

#: The performance page's names for two registry entries.
ALIASES = {"Plane": "plane", "Plane3DCircle": "plane3d_circle"}


def _registry() -> dict[str, Any]:
    import_gymnax()
    with warnings.catch_warnings():
        # do-mpc, which target-gym's process-control tasks use, warns at import about its
        # optional features (ONNX, OPC UA, PyTorch), none of which Ajax uses.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"do_mpc(\.|$)")
        from target_gym.registry import REGISTRY

    return REGISTRY


class TargetGymEnv(GymnaxAdapter):
    """A target-gym environment; ``env_params`` override its parameters."""

    def __init__(self, name: str, **env_params: Any):
        spec = _registry()[ALIASES.get(name, name)]
        variant = {k: v for k, v in spec.test_params.items() if k != "max_steps_in_episode"}
        defaults = spec.params_cls(**variant)
        env_id = f"target_gym/{name}"
        super().__init__(spec.make_env(), override(defaults, env_params, env_id), env_id)
