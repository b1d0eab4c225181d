"""A trained policy's deterministic episodes, drawn frame by frame into a GIF or an MP4.

The episodes are played as one compiled program, which keeps the bare environment's state
of every step; the frames are drawn on the host afterwards, by the renderer of the library
the environment comes from: gymnasium's for gymnax's classic-control tasks (as gymnax's own
visualiser draws them), MuJoCo's for Brax's and Playground's tasks.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import operator
import os
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from ajax._xla import compiler_options, unrolled_threefry
from ajax.envs.core import Env, bare_state
from ajax.envs.gymnax_adapter import GymnaxEnv, import_gymnax
from ajax.envs.physics import GL_PACKAGES, BraxEnv, PlaygroundEnv, SimulatorEnv
from ajax.envs.registry import is_registered
from ajax.envs.target_gym_adapter import TargetGymEnv
from ajax.evaluation import start_episodes, step_episodes
from ajax.policy import acting_state

if TYPE_CHECKING:
    from ajax.result import TrainResult

#: The file types written, each by its imageio plugin (Pillow's GIF, imageio-ffmpeg's MP4).
SUFFIXES = (".gif", ".mp4")
_INSTALL = 'from the root of your clone of Ajax, pip install -e ".[video]"'
#: The rate target-gym's clips play at (its gallery's, ``runners.GIF_FPS``): most of its
#: renderers draw about 100 frames an episode, a time-lapse.
TARGET_GYM_FPS = 10.0


class NoOpenGL(RuntimeError):
    """MuJoCo could not make the OpenGL context that drawing a Brax or Playground task needs."""


@dataclass(frozen=True)
class Renderer:
    """How one environment's bare states become RGB frames."""

    #: One ``[height, width, 3]`` uint8 frame per state of an episode, in order.
    draw: Callable[[list[Any]], Iterable[np.ndarray]]
    #: The frame rate the file plays at: the rate the environment's own renderer shows.
    fps: float


def use_egl_without_display() -> None:
    """Sets ``MUJOCO_GL=egl`` where MuJoCo's default, GLFW, cannot draw: on Linux without a
    display (no ``DISPLAY`` or ``WAYLAND_DISPLAY``), with EGL installed and ``MUJOCO_GL``
    unset. MuJoCo reads the variable once, when imported, so this must run before it is;
    ``ajax eval --video`` calls it first, and a user's own Python sets the variable."""
    if (
        sys.platform.startswith("linux")
        and "MUJOCO_GL" not in os.environ
        and not os.environ.get("DISPLAY")
        and not os.environ.get("WAYLAND_DISPLAY")
        and "mujoco" not in sys.modules
        and ctypes.util.find_library("EGL")
    ):
        os.environ["MUJOCO_GL"] = "egl"


def record_video(
    result: TrainResult, path: str | Path, seed_index: int = 0, episodes: int = 1, seed: int = 0
) -> dict[str, Any]:
    """Write ``episodes`` deterministic episodes of seed ``seed_index``'s policy to ``path``,
    a ``.gif`` or ``.mp4`` file, one frame per step the policy acted in (the state it saw),
    or for target-gym the frames its renderers pick.

    The episodes are those ``ajax.evaluate(result, num_episodes=episodes, seed=seed)`` scores
    for that seed: the same evaluation copies, normalisation statistics and keys. gymnax's
    classic-control tasks (CartPole-v1, Pendulum-v1, Acrobot-v1, MountainCar-v0,
    MountainCarContinuous-v0), Brax's, Playground's and target-gym's tasks render (target-gym's
    as its renderers' time-lapse, about 100 frames an episode); other environments are
    refused before anything is compiled. MuJoCo's renderer needs an OpenGL context: on a machine
    without a display, start Python with ``MUJOCO_GL=egl``. A GIF stores consecutive
    identical frames as one frame shown for their total time (Pillow's GIF writer), so a
    reader may count fewer frames in it than were written; an MP4 keeps every frame.

    Returns ``path``, ``frames`` (written), ``fps`` (the rate the file plays at: the
    environment's renderer's, in whole hundredths of a second per frame for a GIF), and each
    episode's ``episode_lengths`` and ``episode_returns`` (undiscounted, raw rewards).
    """
    path = Path(path)
    _check(result, path, seed_index, episodes)
    renderer = renderer_for(result.agent.env.unwrapped)
    options, fps = _writer_options(path, renderer.fps)
    states, returns, lengths = _play(result, seed_index, episodes, seed)
    frames = _write(path, options, _episode_frames(renderer, states, lengths))
    return {
        "path": str(path),
        "frames": frames,
        "fps": fps,
        "episode_lengths": [int(n) for n in lengths],
        "episode_returns": [float(r) for r in returns],
    }


def _check(result: TrainResult, path: Path, seed_index: int, episodes: int) -> None:
    """Refuses what ``record_video`` cannot do, before anything is compiled."""
    n_seeds = len(result.seeds)
    if isinstance(seed_index, bool) or not isinstance(seed_index, int):
        raise ValueError(f"seed_index must be an integer, got {seed_index!r}.")
    if not 0 <= seed_index < n_seeds:
        raise ValueError(
            f"seed_index must lie in 0..{n_seeds - 1}, the positions of the run's seeds "
            f"{result.seeds}; got {seed_index}."
        )
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}.")
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(
            f"record_video writes {' or '.join(SUFFIXES)} files, got {path.name!r}: end the "
            "path in one of them."
        )
    _require("imageio")
    if path.suffix.lower() == ".mp4":
        _require("imageio_ffmpeg")
    _require_writable(path)


def _require_writable(path: Path) -> None:
    """Refuses a path the video could not be written to, before the episodes are run: its
    directory is created, and the file opened for writing (and removed if it was new)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with open(path, "ab"):
            pass
        if not existed:
            path.unlink()
    except OSError as error:
        raise OSError(
            f"record_video cannot write {path}: {error.strerror or error}. Give a path in a "
            "directory you can write."
        ) from error


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"record_video needs {module}: {_INSTALL}.", name=module)


def renderer_for(env: Env) -> Renderer:
    """The renderer of ``env``, a bare environment; refuses one that nothing here draws."""
    if isinstance(env, (BraxEnv, PlaygroundEnv)):
        return _mujoco(env)
    vis_gym = _vis_gym()
    name = (env.env_id or "").removeprefix("gymnax/")
    if isinstance(env, GymnaxEnv) and name in vis_gym.SUPPORTED_GYM_ENVS:
        return _classic_control(env, name, vis_gym)
    if isinstance(env, TargetGymEnv):
        return _target_gym(env)
    shown = (
        env.env_id
        if is_registered(env.env_id)
        else f"an environment object ({env.env_id or type(env).__name__})"
    )
    classic = ", ".join(f"gymnax/{n}" for n in vis_gym.SUPPORTED_GYM_ENVS)
    raise ValueError(
        f"record_video renders gymnax's classic-control tasks ({classic}), Brax's tasks "
        f"(brax/...), Playground's (playground/...) and target-gym's (target_gym/...), not "
        f"{shown}."
    )


def _vis_gym() -> types.ModuleType:
    """gymnax's visualiser of its classic-control tasks, which draws them with gymnasium."""
    import_gymnax()
    from gymnax.visualize import vis_gym

    return vis_gym


def _classic_control(env: GymnaxEnv, name: str, vis_gym: types.ModuleType) -> Renderer:
    """gymnasium's drawing of ``name``, set from gymnax's parameters and states as gymnax's
    ``vis_gym.render_gym_frame`` sets it, but through one gymnasium environment per episode
    rather than one per frame: making one costs far more than drawing a frame."""
    _require("pygame")
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    def draw(states: list[Any]) -> Iterator[np.ndarray]:
        _offscreen_pygame()
        gym_env = gym.make(name, render_mode="rgb_array")
        try:
            gym_env.reset()
            screen = gym_env.unwrapped
            vis_gym.set_gym_params(screen, name, env.params)
            for state in states:
                screen.state = vis_gym.get_gym_state(state, name)
                if name == "Pendulum-v1":  # The arrow of the torque last applied.
                    screen.last_u = np.asarray(state.last_u, np.float64)
                yield gym_env.render()
        finally:
            gym_env.close()

    fps = load_env_creator(gym.spec(name).entry_point).metadata["render_fps"]
    return Renderer(draw, float(fps))


def _offscreen_pygame() -> None:
    """Has pygame draw offscreen, unless the user chose its drivers: it would otherwise look
    for a display and a sound card, open a window where there is one, and print errors about
    both on a machine that has neither."""
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _target_gym(env: TargetGymEnv) -> Renderer:
    """target-gym's own drawing of its states. Every task has the same hook, ``render(screen,
    state, params, frames, clock)``, which appends a frame where the task's stride says: about
    100 an episode (a time-lapse of the aircraft's 10,000 steps), but every step for the
    patrol tasks. The stride is set from the episode's own length, not the time limit, so an
    episode that ends early (an aircraft's crash at step 28) is drawn step by step to its end,
    not as its first two frames. They play at 10 frames a second, target-gym's gallery's
    rate."""
    _require("pygame")

    def draw(states: list[Any]) -> Iterator[np.ndarray]:
        _offscreen_pygame()
        params = env.params.replace(max_steps_in_episode=len(states))
        frames, screen, clock = [], None, None
        for state in states:
            drawn = len(frames)
            frames, screen, clock = env.env.render(screen, state, params, frames, clock)
            yield from frames[drawn:]
            # The renderers read an empty list as a new episode; the frames need not stay
            # (a patrol episode's 10,000 would be 14 GB).
            del frames[:-1]

    return Renderer(draw, TARGET_GYM_FPS)


def _mujoco(env: SimulatorEnv) -> Renderer:
    """The simulator's own drawing of its states (Brax's ``render`` of its pipeline states,
    Playground's of its MJX states; MuJoCo's renderer both), at the control rate. Checks
    first that MuJoCo can make an OpenGL context."""
    import mujoco

    brax = isinstance(env, BraxEnv)
    model = env.env.sys.mj_model if brax else env.env.mj_model
    try:
        with mujoco.Renderer(model, 1, 1):
            pass
    except Exception as error:
        setting = os.environ.get("MUJOCO_GL") or "unset"
        raise NoOpenGL(
            f"Rendering {env.env_id} needs an OpenGL context, which MuJoCo could not make "
            f"(MUJOCO_GL={setting}: {type(error).__name__}: {error}). Without a display, "
            f"start Python with MUJOCO_GL=egl and EGL installed ({GL_PACKAGES['egl']}), or "
            f"MUJOCO_GL=osmesa with OSMesa ({GL_PACKAGES['osmesa']})."
        ) from error

    def draw(states: list[Any]) -> list[np.ndarray]:
        if brax:
            return env.env.render([state.inner.pipeline_state for state in states])
        return env.env.render([state.inner for state in states])

    return Renderer(draw, round(1.0 / float(env.env.dt), 3))


def _play(
    result: TrainResult, seed_index: int, episodes: int, seed: int
) -> tuple[Any, np.ndarray, np.ndarray]:
    """The bare environment's states ``[T, episodes, ...]`` before each step ``t`` of
    ``episodes`` deterministic episodes, one on each evaluation copy, and each episode's
    return and length: one jitted scan over the time limit."""
    agent = result.agent
    env = agent.env_copies(episodes).for_evaluation()
    params, env_state = acting_state(result.state, seed_index)
    # ajax.evaluate's key for this seed, so that these are the episodes it scores.
    key = jax.random.split(jax.random.PRNGKey(seed), len(result.seeds))[seed_index]

    def play(params, source_env_state, key):
        def one_step(running, _):
            seen = bare_state(env, running.env_state)
            return step_episodes(agent, env, params, running), seen

        start = start_episodes(agent, env, params, key, source_env_state)
        final, states = jax.lax.scan(one_step, start, length=env.max_episode_steps)
        return states, final.returns, final.lengths

    program = jax.jit(play, compiler_options=compiler_options(agent))
    with unrolled_threefry(agent):
        played = program(params, env_state, key)
    return jax.device_get(played)


def _episode_frames(renderer: Renderer, states: Any, lengths: np.ndarray) -> Iterator[np.ndarray]:
    """Every episode's frames, one after the other: episode ``i``'s first ``lengths[i]``
    states, the ones its policy acted in."""
    for i, length in enumerate(lengths):
        episode = [jax.tree.map(operator.itemgetter((t, i)), states) for t in range(length)]
        yield from renderer.draw(episode)


def _writer_options(path: Path, fps: float) -> tuple[dict[str, Any], float]:
    """imageio's options for writing ``path`` at about ``fps``, and the rate it plays at."""
    if path.suffix.lower() == ".gif":
        # A GIF holds each frame's time in whole hundredths of a second.
        duration = 10 * max(1, round(100 / fps))
        return {"duration": duration, "loop": 0}, 1000 / duration
    # Frames whose sides are even pass unscaled (H.264's 4:2:0 needs no more); the default
    # block of 16 would stretch CartPole's 600 x 400 frames to 608 x 400.
    return {"fps": fps, "macro_block_size": 2}, fps


def _write(path: Path, options: dict[str, Any], frames: Iterable[np.ndarray]) -> int:
    """Writes ``frames`` to ``path`` with imageio and returns how many there were."""
    import imageio.v2 as imageio

    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with warnings.catch_warnings():
        # imageio-ffmpeg starts ffmpeg as a subprocess, which execs at once after the fork:
        # JAX's warning that forking a multithreaded process may deadlock does not apply.
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        with imageio.get_writer(path, **options) as writer:
            for frame in frames:
                writer.append_data(frame)
                count += 1
    return count
