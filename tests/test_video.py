"""record_video: a trained policy's deterministic episodes, one frame per step, in a GIF or an
MP4; each family's renderer; environments without one, and wrong arguments, refused before
anything compiles."""

import ctypes.util
import dataclasses
import os
import sys
import types
from pathlib import Path

import gymnax
import imageio.v3 as iio
import jax
import numpy as np
import pytest

import ajax
from ajax.envs import from_gymnax, make_env
from ajax.envs.core import bare_state
from ajax.evaluation import run_episodes
from ajax.video import record_video, renderer_for, use_egl_without_display


def _evaluation_episodes(result, seed_index, episodes, seed):
    """The returns and lengths of ``ajax.evaluate``'s episodes for one seed, as
    ``record_video`` promises to show them."""
    agent = result.agent
    env = agent.env_copies(episodes).for_evaluation()
    state = jax.tree.map(lambda leaf: leaf[seed_index], result.state)
    key = jax.random.split(jax.random.PRNGKey(seed), len(result.seeds))[seed_index]
    program = jax.jit(lambda params, key, source: run_episodes(agent, env, params, key, source))
    returns, lengths = program(state.params, key, state.cursor.env_state)
    return np.asarray(returns), np.asarray(lengths)


def _check_frames(frames, count, shape):
    assert frames.shape == (count, *shape, 3) and frames.dtype == np.uint8
    assert not all(np.array_equal(frames[0], frame) for frame in frames[1:])


def test_a_cartpole_gif_shows_the_evaluation_episodes_step_by_step(small_result, tmp_path):
    path = tmp_path / "cartpole.gif"
    out = record_video(small_result, path, seed_index=1, seed=7)

    returns, lengths = _evaluation_episodes(small_result, 1, 1, seed=7)
    assert out["episode_lengths"] == lengths.tolist()
    np.testing.assert_allclose(out["episode_returns"], returns)
    assert out["frames"] == lengths.sum() and out["path"] == str(path)
    # Pillow's GIF writer keeps a run of identical frames (the cart moving less than a pixel)
    # as one frame shown for their total time, so the time, not the count, is exact.
    frames = iio.imread(path, index=None)
    _check_frames(frames, len(frames), (400, 600))
    with iio.imopen(path, "r") as file:
        shown_ms = sum(file.metadata(index=i)["duration"] for i in range(len(frames)))
    assert out["fps"] == 50.0 and shown_ms == out["frames"] * 20


# Reading the MP4 starts ffmpeg, which execs as soon as it is forked.
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")
def test_a_pendulum_mp4_holds_every_step_of_every_episode(tmp_path):
    # Both normalisation wrappers, so that the renderer reaches the bare state through them.
    agent = ajax.PPO(
        env_id="Pendulum-v1",
        n_envs=2,
        n_steps=16,
        normalize_observations=True,
        normalize_rewards=True,
    )
    result = agent.train(seed=[0], n_timesteps=256)
    path = tmp_path / "pendulum.mp4"
    out = record_video(result, path, episodes=2)

    returns, lengths = _evaluation_episodes(result, 0, 2, seed=0)
    assert out["episode_lengths"] == lengths.tolist() == [200, 200]
    np.testing.assert_allclose(out["episode_returns"], returns, rtol=1e-5)
    frames = iio.imread(path, index=None, plugin="FFMPEG")
    _check_frames(frames, out["frames"], (500, 500))
    assert out["frames"] == 400


@pytest.mark.parametrize(
    ("env_id", "fps", "positions"),
    [
        ("brax/inverted_pendulum", 25.0, ("pipeline_state", "q")),
        ("playground/CartpoleBalance", 100.0, ("data", "qpos")),
    ],
)
def test_the_mujoco_families_draw_their_own_states(env_id, fps, positions):
    """Brax's and Playground's states are drawn by their own renderers, at the control rate:
    the pole of a reset state, tipped by one radian on the host (no step is compiled: MJX's
    took two minutes on a cold cache), is drawn where it is."""
    env = make_env(env_id)
    renderer = renderer_for(env)
    assert renderer.fps == fps
    start = jax.device_get(jax.jit(env.reset)(jax.random.PRNGKey(0))[0])
    holder, field = positions
    physics = getattr(start.inner, holder)
    tipped = physics.replace(**{field: getattr(physics, field) + np.array([0.0, 1.0])})
    tipped = start.replace(inner=start.inner.replace(**{holder: tipped}))
    frames = np.stack(renderer.draw([start, tipped]))
    _check_frames(frames, 2, (240, 320))


def test_target_gym_draws_its_own_states_as_a_time_lapse():
    """target-gym's tasks are drawn offscreen by their own renderers, about 100 frames an
    episode, at a stride set from the episode's length: an aircraft that crashes at step 12
    is drawn at every step to its end, one that flies all 10,000 steps once every 100 (and
    its first two). Its renderer reads an empty frame list as a new episode, so a second
    episode drawn after the first starts afresh: its frames are the first's, not a trace
    continued."""
    env = make_env("target_gym/Plane")
    renderer = renderer_for(env)
    assert renderer.fps == 10.0
    start = bare_state(env, jax.device_get(jax.jit(env.reset)(jax.random.PRNGKey(0))[0]))

    def episode(length):
        return [start.replace(time=np.int32(t), z=start.z + 10.0 * t) for t in range(length)]

    crashed = np.stack(list(renderer.draw(episode(12))))
    _check_frames(crashed, 12, (400, 1200))
    np.testing.assert_array_equal(np.stack(list(renderer.draw(episode(12)))), crashed)
    assert sum(1 for _ in renderer.draw(episode(10_000))) == 101


def test_egl_is_chosen_only_where_mujoco_could_not_draw_otherwise(monkeypatch):
    """MUJOCO_GL=egl is set on Linux without a display, with EGL installed, before MuJoCo is
    imported, and never over a user's own choice."""
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so.1")
    monkeypatch.delitem(sys.modules, "mujoco", raising=False)

    def chosen(**variables):
        """MUJOCO_GL after the call, in a process environment of ``variables`` alone."""
        monkeypatch.setattr(os, "environ", dict(variables))
        use_egl_without_display()
        return os.environ.get("MUJOCO_GL")

    assert chosen() == "egl"
    assert chosen(DISPLAY=":0") is None and chosen(WAYLAND_DISPLAY="wayland-0") is None
    assert chosen(MUJOCO_GL="osmesa") == "osmesa"
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert chosen() is None
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: f"lib{name}.so.1")
    monkeypatch.setitem(sys.modules, "mujoco", types.ModuleType("mujoco"))
    assert chosen() is None


@pytest.fixture(scope="module")
def user_env_result():
    """A result on a gymnax environment object (CartPole's dynamics under no registered id),
    which no renderer here draws; it is never trained or compiled."""
    env, params = gymnax.make("CartPole-v1")
    agent = ajax.PPO(env_id=from_gymnax(env, params), n_envs=2)
    return ajax.TrainResult(agent, state=None, seeds=[0], n_timesteps=0, evaluations={})


@pytest.mark.parametrize("env", ["user", "gymnax/Breakout-MinAtar"])
def test_an_environment_without_a_renderer_is_refused_before_compiling(
    env, user_env_result, monkeypatch, tmp_path
):
    result = user_env_result
    if env != "user":
        result = dataclasses.replace(result, agent=ajax.PPO(env_id=env, n_envs=2))

    def no_compiling(*args, **kwargs):
        raise AssertionError("record_video compiled before refusing")

    monkeypatch.setattr(jax, "jit", no_compiling)
    shown = "an environment object" if env == "user" else env
    with pytest.raises(ValueError, match=rf"gymnax/CartPole-v1.*brax/.*not {shown}") as error:
        record_video(result, tmp_path / "out.gif")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"path": "out.avi"}, r"writes \.gif or \.mp4 files, got 'out\.avi'"),
        ({"seed_index": 1}, r"seed_index must lie in 0\.\.0.*got 1"),
        ({"seed_index": -1}, r"seed_index must lie in 0\.\.0"),
        ({"seed_index": True}, r"seed_index must be an integer"),
        ({"episodes": 0}, r"episodes must be a positive integer"),
    ],
)
def test_wrong_arguments_are_refused(change, message, user_env_result, tmp_path):
    arguments = {"path": "out.gif"} | change
    arguments["path"] = tmp_path / arguments["path"]
    with pytest.raises(ValueError, match=message):
        record_video(user_env_result, **arguments)
    assert not Path(arguments["path"]).exists()


def test_a_missing_video_library_names_the_extra(user_env_result, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # As if not installed.
    with pytest.raises(ImportError, match=r'imageio_ffmpeg: .*pip install -e "\.\[video\]"'):
        record_video(user_env_result, tmp_path / "out.mp4")
