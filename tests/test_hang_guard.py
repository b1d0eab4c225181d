"""Runs never hang: no program holds a batched LAPACK call, and a program that never returns
stops the run with an error, its rows written."""

import dataclasses
import gc
import re
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax
from ajax import AGENTS, PPO, LoggingConfig, RunHungError, Watchdog
from ajax.run.lowering import lower_run
from ajax.run.plan import plan_run, seed_array, seed_key
from ajax.run.program import init_program
from ajax.watchdog import CallInterrupted, _Call, call_watched, in_flight

from .interrupts import join_helper_threads
from .states import SMALL


def test_the_guard_covers_every_agent():
    assert set(SMALL) == set(AGENTS)


_LAPACK = re.compile(r'custom_call_target="(lapack_\w+)".*?num_batch_dims="(\d+)"')


def lapack_calls(hlo_text: str) -> list[tuple[str, int]]:
    """Every LAPACK custom call of a program's HLO, with its number of batch axes. JAX's
    lowering emits them, batch axes stated; XLA's passes neither add nor batch any, so the
    lowered program shows what the compiled one runs, without the compile."""
    return [(name, int(batch)) for name, batch in _LAPACK.findall(hlo_text)]


def test_the_guard_sees_a_batched_qr():
    """The check can fail: vmapping the seeds' initialisation batches PPO's orthogonal QRs."""
    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    env = agent.env_copies(2)
    vmapped = jax.jit(jax.vmap(lambda s: agent.init(seed_key(s), env, 1)))
    calls = lapack_calls(vmapped.lower(seed_array([0, 1, 2])).as_text(dialect="hlo"))
    assert any(batch > 0 for _, batch in calls)


@pytest.mark.parametrize(
    # PPO's programs (the ones with QRs) in the quick tier; every agent's in the full suite.
    "name",
    [n if n == "PPO" else pytest.param(n, marks=pytest.mark.slow) for n in sorted(SMALL)],
)
def test_no_program_holds_a_batched_lapack_call(name):
    """The init and segment programs that ``train`` runs for 3 seeds, as lowered."""
    env_id, kwargs = SMALL[name]
    agent = AGENTS[name](env_id=env_id, n_envs=2, **kwargs)
    plan = plan_run(agent, 4 * agent.steps_per_iteration, LoggingConfig(log_frequency=1))
    programs = lower_run(agent, [0, 1, 2], plan, num_episode_test=2, evaluate=True)
    texts = [programs.init.as_text(dialect="hlo"), programs.segment.as_text(dialect="hlo")]
    calls = [call for text in texts for call in lapack_calls(text)]
    assert [call for call in calls if call[1] > 0] == []
    if name == "PPO":  # orthogonal initialisation: its QRs are there, one matrix at a time
        assert {"lapack_sgeqrf_ffi", "lapack_sorgqr_ffi"} <= {n for n, _ in calls}


def test_initial_state_of_a_seed_is_the_same_in_any_batch():
    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    init = init_program(agent, agent.env_copies(2), 1)
    batch, alone = init(seed_array([4, 9, 2]), {}), init(seed_array([9]), {})
    for a, b in zip(jax.tree.leaves(batch), jax.tree.leaves(alone), strict=True):
        np.testing.assert_array_equal(a[1], b[0])


def test_watchdog_limits():
    watchdog = Watchdog(factor=20, floor_s=600)
    assert watchdog.limit_s([]) == 600
    assert watchdog.limit_s([1.0, 50.0, 2.0]) == 600
    assert watchdog.limit_s([40.0, 50.0, 1.0]) == 20 * 40.0
    with pytest.raises(ValueError, match="floor_s must be a positive number"):
        Watchdog(floor_s=0)
    with pytest.raises(TypeError, match=r"watchdog must be an ajax\.Watchdog"):
        PPO(env_id="CartPole-v1").train(watchdog=5)


class _Tracked:
    """Notes the thread that frees it in ``freed``."""

    def __init__(self, freed: list[str]):
        self.freed = freed

    def __del__(self):
        self.freed.append(threading.current_thread().name)


def test_a_watched_calls_outputs_are_freed_by_the_caller():
    """Once ``wait`` has answered, the call holds neither the outputs nor the inputs: a JAX
    array freed on the daemon helper thread while the interpreter exits aborts the process
    (a run stopped by Ctrl-C did, 2 times in 10)."""
    freed: list[str] = []
    given = _Tracked(freed)
    call = _Call(lambda x: (jax.numpy.ones(2), _Tracked(freed)), (given,))
    call.start()
    finished, result = call.wait(60)
    assert finished
    join_helper_threads()
    del result
    gc.collect()
    assert freed == ["MainThread"]  # the output, while the call itself is still alive
    del given
    assert freed == ["MainThread"] * 2


def test_a_call_interrupted_before_it_starts_never_runs():
    ran = []
    call = _Call(ran.append, (1,))
    assert call.withdraw()
    call.start()
    join_helper_threads()
    assert ran == [] and call.wait(0.01) == (False, None)
    started = _Call(ran.append, (2,))
    started.start()
    assert started.wait(60)[0] and not started.withdraw() and ran == [2]


def test_an_interrupt_says_whether_the_call_is_in_flight(monkeypatch):
    """Ctrl-C may arrive anywhere in ``call_watched``, inside ``Thread.start`` too: before the
    call runs it is raised as it came, and the call never runs; once it runs, as
    CallInterrupted, whose call still gives the result."""
    ran = []

    def interrupted_start(self):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(_Call, "start", interrupted_start)
        with pytest.raises(KeyboardInterrupt) as raised:
            call_watched(ran.append, 1, limit_s=60)
    assert type(raised.value) is KeyboardInterrupt and ran == []
    # Nor is such a call in flight, which the interpreter's exit would wait for forever (a
    # script stopped by one SIGTERM was seen to hang in its atexit hook).
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", interrupted_start)
        with pytest.raises(KeyboardInterrupt):
            call_watched(ran.append, 1, limit_s=60)
    assert not in_flight()

    running, release = threading.Event(), threading.Event()

    def program(x):
        running.set()
        release.wait()
        return x + 1

    wait = _Call.wait

    def interrupted_wait(self, limit_s):
        running.wait()
        raise KeyboardInterrupt

    monkeypatch.setattr(_Call, "wait", interrupted_wait)
    with pytest.raises(CallInterrupted) as raised:
        call_watched(program, 1, limit_s=60)
    assert in_flight()  # what a second Ctrl-C would abandon, and exit wait for
    release.set()
    assert wait(raised.value.call, 60) == (True, 2) and not in_flight()


def test_a_segment_that_never_returns_stops_the_run(tmp_path, monkeypatch, capfd):
    """The third segment's outputs come from a program blocked on the host: the run raises
    RunHungError after the watchdog's limit, with the two finished segments' rows written."""
    release = threading.Event()
    blocked = jax.jit(
        lambda x: jax.pure_callback(
            lambda v: (release.wait(), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x
        )
    )
    original = ajax.loop.lower_run

    def lower_with_a_hang(*args, **kwargs):
        programs = original(*args, **kwargs)
        calls = []

        class Hanging:
            def compile(self, options=None):
                compiled = programs.segment.compile(options)

                def run(*args):
                    calls.append(1)
                    state, health, outputs = compiled(*args)
                    if len(calls) == 3:
                        outputs = jax.tree.map(blocked, outputs)
                    return state, health, outputs

                return run

        return dataclasses.replace(programs, segment=Hanging())

    monkeypatch.setattr(ajax.loop, "lower_run", lower_with_a_hang)
    config = LoggingConfig(log_frequency=512, log_dir=tmp_path, run_name="hung")
    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    try:
        with pytest.raises(RunHungError) as raised:
            agent.train(
                seed=[0, 1],
                n_timesteps=5 * 512,
                logging_config=config,
                watchdog=Watchdog(factor=20, floor_s=2.0),
            )
    finally:
        release.set()
    message = str(raised.value)
    assert "segment 3 of 5 (timesteps 1024 to 1536)" in message
    assert "gdb -p" in message and "hang_stacks.txt" in message
    stacks = (tmp_path / "hung" / "hang_stacks.txt").read_text()
    assert "test_a_segment_that_never_returns_stops_the_run" in stacks
    assert "the run hung" in capfd.readouterr().err
    rows = (tmp_path / "hung" / "metrics.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in rows[1:]] == ["512", "512", "1024", "1024"]


def _spin(seconds: float, busy: bool):
    """A host function that takes ``seconds``, keeping a core busy or asleep."""

    def host(v):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if not busy:
                time.sleep(0.05)
        return v

    x = jnp.zeros(())
    return jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((), x.dtype), x)), x


def test_a_busy_program_past_its_limit_is_slow_not_hung():
    # A long segment (a run without evaluations is one) keeps the CPU busy: waited for.
    program, x = _spin(1.5, busy=True)
    assert call_watched(program, x, limit_s=0.5)[0]
    # An idle one past its limit is what the deadlocks look like: declared hung.
    program, x = _spin(1.5, busy=False)
    assert call_watched(program, x, limit_s=0.5) == (False, None)
    join_helper_threads()
