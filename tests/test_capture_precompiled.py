"""Calls of callables compiled before seamscope started (decorators at import, ``model.compile()``,
``torch.compile(model)`` before the session, a compiled optimizer step) are observed by a session,
a budget and the pytest marker; counts are checked against what the test called and against
PyTorch's own counters (which capture does not read)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import seamscope  # noqa: E402
from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import Session, active_session, observe, session  # noqa: E402
from seamscope.gates.budget import BudgetExceeded, budget  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "workloads"))
from precompiled import Block, decorated, scaled  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]

X = torch.ones(2, 4)


def quiet():
    """stdout as a C-level file: pytest's Python-level capture would add frames that Dynamo
    converts and skips (counted in ``frames["ok"]`` though nothing compiles)."""
    return contextlib.redirect_stdout(open(os.devnull, "w"))  # noqa: SIM115


def _ways() -> dict[str, object]:
    """One callable per way of compiling, each compiled before any session."""
    m = Block()
    m.compile(backend="eager")  # nn.Module.compile()
    om = torch.compile(Block(), backend="eager")  # torch.compile(model)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    @torch.compile(backend="eager")
    def step():  # a compiled optimizer step
        opt.step()

    model(X).sum().backward()
    return {"decorator at import": decorated, "model.compile()": m, "torch.compile(model)": om,
            "imported function": scaled, "optimizer step": step}


def _call(fn: object, name: str) -> None:
    if name == "optimizer step":
        fn()  # type: ignore[operator]
    else:
        fn(X)  # type: ignore[operator]


@pytest.mark.parametrize("way", ["decorator at import", "model.compile()", "torch.compile(model)",
                                 "imported function", "optimizer step"])
def test_a_session_observes_every_call_of_a_callable_compiled_before_it(way: str) -> None:
    fn = _ways()[way]
    # PyTorch keeps only the last 64 entries: start from none, whatever ran before in this process
    torch._dynamo.utils.clear_compilation_metrics()
    with quiet(), session() as s:
        for _ in range(4):
            _call(fn, way)
    led = s.ledger
    self_check(led)
    c = adapter.dynamo_counters()
    assert led.totals.calls == 4
    assert [call.outcome for call in led.calls] == ["compile", "hit", "hit", "hit"]
    assert [call.phase for call in led.calls] == ["cold", "steady", "steady", "steady"]
    assert len(led.compilations) == len(torch._dynamo.utils.get_compilation_metrics()) >= 1
    assert s.receipt().summary.graph_count == c["stats"]["unique_graphs"]
    assert led.totals.outside_runs == 0  # every graph ran inside an observed call
    assert not any("outside any observed call" in w for w in led.run.warnings)
    assert s.receipt().summary.call_count == 4


def test_all_ways_at_once_in_one_session_already_warm() -> None:
    ways = _ways()
    for name, fn in ways.items():  # compiled and called before the session: warm
        _call(fn, name)
    with session() as s:
        for _ in range(3):
            for name, fn in ways.items():
                _call(fn, name)
    assert s.ledger.totals.calls == 15
    assert {call.outcome for call in s.ledger.calls} == {"hit"}
    assert s.ledger.environment.backend == "eager"
    assert len(s.ledger.compilations) == 0  # all compiled before
    (w,) = [w for w in s.ledger.run.warnings if "compiled before the session began" in w]
    assert int(w.split()[2]) == adapter.dynamo_counters()["stats"]["unique_graphs"] >= 5


def test_no_graphs_compiled_before_the_session_after_a_reset() -> None:
    """After ``torch._dynamo.reset()`` nothing compiled earlier can run: no graph is said to be
    compiled before the session, however many compiles and resets came first."""
    for _ in range(3):
        for name, fn in _ways().items():
            _call(fn, name)
        torch._dynamo.reset()
    fn = _ways()["torch.compile(model)"]  # a live compile context, compiled nothing yet
    with session() as s:
        _call(fn, "torch.compile(model)")
    assert s.graphs_before == 0
    assert not any("compiled before the session began" in w for w in s.ledger.run.warnings)
    assert s.ledger.calls[0].phase == "cold"


def test_calls_are_observed_when_graphs_compiled_before_cannot_be_counted(monkeypatch) -> None:
    import torch._dynamo.convert_frame as convert_frame

    fn = _ways()["torch.compile(model)"]
    _call(fn, "torch.compile(model)")  # warm, before the session
    monkeypatch.setattr(convert_frame, "input_codes", object())  # a Dynamo whose code tracker changed
    with session() as s:
        _call(fn, "torch.compile(model)")
    assert s.ledger.totals.calls == 1 and s.ledger.calls[0].outcome == "hit"
    assert any("are not counted" in w for w in s.ledger.run.warnings)
    assert not any("Dynamo holds" in w for w in s.ledger.run.warnings)
    # how many graphs ran untimed is unknown: the split is said to be unknown, never islands
    assert s.ledger.run.untimed_graphs is None
    sentence = s.receipt().findings.headline.sentence
    assert "unknown way" in sentence and "eager islands," not in sentence


def _regions(call) -> list[tuple[str, int]]:
    return [(e.compile_id, e.graph_index) for e in call.events if type(e).__name__ == "RegionEvent"]


def _broken(x):
    y = x.sin()
    print("", end="")  # a graph break: two regions per call
    return y.cos()


@pytest.mark.parametrize("native", [True, False], ids=["C hot path", "Python path"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_second_session_times_the_graphs_the_first_compiled(native: bool, backend: str) -> None:
    """A notebook cell run again: the graphs compiled in an earlier session are timed in the
    next ones, the same regions per call as the first session's steady calls, and put back as
    they were when each stops."""
    from seamscope.analyze.receipt import make_receipt

    fn = torch.compile(_broken, backend=backend)
    x = torch.ones(2, 4, requires_grad=backend == "aot_eager")
    ledgers = []
    for _ in range(3):
        s = session()
        if not native:
            s.native = None
        with quiet(), s:
            for _ in range(3):
                out = fn(x)
                if x.requires_grad:
                    out.sum().backward()
        self_check(s.ledger)
        ledgers.append(s.ledger)
    first, second, third = ledgers
    steady = [_regions(c) for c in first.calls if c.phase == "steady"]
    assert len(steady) == 2 and all(len(r) == 2 for r in steady)
    assert [_regions(c) for c in second.calls] == [steady[0]] * 3 == [_regions(c) for c in third.calls]
    for led in (second, third):
        assert [c.phase for c in led.calls] == ["steady"] * 3
        split = make_receipt(led).findings.headline.split[0]
        assert split.region_ns > 0 and split.island_ns < split.wall_ns
        assert led.run.untimed_graphs == 0 and not [o for o in led.outside if o.kind == "forward"]
        assert any("2 graph(s) compiled before the session began: their runs are timed" in w
                   for w in led.run.warnings)
    if backend == "aot_eager":  # the compiled backward of a graph compiled before is timed too
        assert all(sum(1 for o in led.outside if o.kind == "backward") == 6 for led in ledgers)
    with quiet():
        fn(x)  # after the sessions: the graphs run as they did, seamscope's timers inert
    assert s.outside_graph_runs == 0


class _Entry:
    """A cache entry as Dynamo's, whose frame globals seamscope reads from ``scope``."""

    def __init__(self, real, scope):
        self.code, self.compile_id = real.code, real.compile_id
        self.guard_manager = type("G", (), {"global_scope": {"G": scope}})()


def test_a_graph_that_cannot_be_swapped_is_counted_and_its_split_said_unknown(monkeypatch) -> None:
    from seamscope.capture.adapter import contexts

    fn = _ways()["torch.compile(model)"]
    _call(fn, "torch.compile(model)")  # warm, before the session
    real = contexts._live_entries

    def entries():  # one graph stored where seamscope cannot recognise it as Dynamo's
        found = real()
        scope = found[0].guard_manager.global_scope["G"]
        (name,) = [n for n in found[0].code.co_names if n.startswith(adapter.COMPILED_FN_PREFIX)]
        return [_Entry(found[0], {name: scope[name]._torchdynamo_orig_callable}), *found[1:]]

    monkeypatch.setattr(contexts, "_live_entries", entries)
    with quiet(), session() as s:
        _call(fn, "torch.compile(model)")
        _call(fn, "torch.compile(model)")
    assert s.ledger.totals.calls == 2 and not _regions(s.ledger.calls[0])
    assert s.ledger.run.untimed_graphs == 1 and s.graphs_before == 1
    assert any("1 graph(s) compiled before the session began could not be timed" in w
               for w in s.ledger.run.warnings)
    sentence = s.receipt().findings.headline.sentence
    assert "unknown way (1 graph compiled before capture began could not be timed)" in sentence
    assert "eager islands," not in sentence


@pytest.mark.parametrize("way", ["decorator at import", "model.compile()", "torch.compile(model)",
                                 "imported function", "optimizer step"])
def test_a_budget_observes_a_callable_compiled_before_it(way: str) -> None:
    fn = _ways()[way]
    _call(fn, way)  # warm, before the budget
    with budget(recompiles=0, phase="steady") as w:
        for _ in range(3):
            _call(fn, way)
    assert w.result is not None and w.result.ok and w.result.calls == 3


def test_a_budget_judges_the_breaks_of_a_callable_compiled_at_import() -> None:
    with pytest.raises(BudgetExceeded, match="1 break site"):
        with budget(breaks=0):
            decorated(X)
            decorated(X)


def test_hooks_are_removed_when_the_session_stops() -> None:
    ways = _ways()
    assert adapter.hooked_contexts() == 0
    for _ in range(3):  # each start scans gc (0.1-0.3 s); a leak shows on the second
        with session():
            assert adapter.hooked_contexts() >= len(ways)
        assert adapter.hooked_contexts() == 0
    assert adapter.hooked_contexts() == 0
    with session() as s:  # and the callables still work, observed once each
        decorated(X)
        scaled(X)
    assert s.ledger.totals.calls == 2


def test_a_call_nested_in_an_island_is_part_of_the_outer_call() -> None:
    @torch.compile(backend="eager")
    def outer(x):
        y = x + 1
        torch._dynamo.graph_break()
        with torch._dynamo.config.patch(error_on_recompile=False):
            pass
        return scaled(y) + decorated_eager(y)

    @torch.compiler.disable
    def decorated_eager(y):
        return decorated(y)  # a real, nested call of a callable compiled at import

    with session() as s:
        for _ in range(3):
            outer(X)
    assert s.ledger.totals.calls == 3


def test_a_session_opened_inside_a_compiled_call_ignores_that_calls_exit() -> None:
    opened: list[Session] = []

    @torch.compiler.disable
    def open_one():
        s = session()
        s.start()
        opened.append(s)

    @torch.compile(backend="eager")
    def g(x):
        y = x * 2
        open_one()  # in the island: the call was entered before the session existed
        return y + 1

    g(X)
    s = opened[0]
    try:
        scaled(X)  # a call of its own, after g's exit
    finally:
        s.stop()
    assert s.ledger is not None and s.ledger.totals.calls == 1


def test_a_session_inside_another_pauses_it_and_each_keeps_its_own_calls() -> None:
    g = torch.compile(lambda x: x.cos() + 1, backend="eager")
    with session() as outer:
        g(torch.ones(3))
        with session() as inner:
            assert active_session() is inner
            g(torch.ones(3))
            g(torch.ones(3))
        assert active_session() is outer
        g(torch.ones(3))
    assert active_session() is None
    assert inner.ledger is not None and inner.ledger.totals.calls == 2
    assert outer.ledger is not None and outer.ledger.totals.calls == 2
    assert any("seamscope.session() opened during this run" in w for w in outer.ledger.run.warnings)
    for s in (inner, outer):
        self_check(s.ledger)


def test_a_backend_that_fails_at_first_call_records_the_error_and_raises() -> None:
    def broken(gm, example_inputs):
        raise ValueError("backend exploded")

    g = torch.compile(lambda x: x * 2, backend=broken)
    with torch._dynamo.config.patch(suppress_errors=False), session() as s:
        with pytest.raises(Exception, match="backend exploded"):
            g(X)
    (call,) = s.ledger.calls
    assert call.outcome == "error" and "BackendCompilerFailed" in (call.error or "")


def test_a_call_raising_inside_an_except_block_is_told_apart() -> None:
    def bad(x):
        if x.shape[0] == 3:
            raise ValueError("boom")
        return x + 1

    g = torch.compile(bad, backend="eager")
    with session() as s:
        try:
            raise KeyError("handled by the user")
        except KeyError:
            g(torch.ones(2))  # an exception is being handled, the call itself succeeds
            with pytest.raises(ValueError):
                g(torch.ones(3))
    assert [c.error is None for c in s.ledger.calls] == [True, False]
    assert "ValueError: boom" in (s.ledger.calls[1].error or "")


def test_graph_runs_outside_any_observed_call_are_counted_and_said() -> None:
    compile_early = torch.compile  # a reference taken before the session: not seamscope's
    with session() as s:
        g = compile_early(lambda x: x - 1, backend="eager")
        for _ in range(3):
            g(X)
    (w,) = [w for w in s.ledger.run.warnings if "outside any observed call" in w]
    assert w.startswith("3 compiled graph run(s)")
    assert s.ledger.totals.calls == 0 and s.ledger.totals.outside_runs == 3
    with pytest.raises(BudgetExceeded, match="3 compiled graph run"):
        with budget(breaks=0):
            h = compile_early(lambda x: x - 2, backend="eager")
            for _ in range(3):
                h(X)


def test_observe_outside_a_session_claims_nothing() -> None:
    original = torch.compile
    obs = observe(lambda x: x * 5, backend="eager")
    assert active_session() is None and torch.compile is original
    obs(X)
    with seamscope.session() as s:  # starts normally, and sees the observed callable's calls
        obs(X)
        obs(X)
    assert s.ledger.totals.calls == 2


def test_calls_on_another_thread_while_one_is_open_are_not_observed() -> None:
    barrier = threading.Event()
    done = threading.Event()

    @torch.compiler.disable
    def wait(y):
        barrier.set()
        done.wait(10)
        return y

    @torch.compile(backend="eager")
    def slow(x):
        return wait(x + 1) * 2

    def other():
        barrier.wait(10)
        scaled(X)
        done.set()

    done.set()  # the first call (compiling, outside the session) does not wait for another thread
    slow(X)
    barrier.clear()
    done.clear()
    with session() as s:
        t = threading.Thread(target=other)
        t.start()
        slow(X)
        t.join()
    assert s.ledger.totals.calls == 1
    assert any("1 call(s) made on another thread" in w for w in s.ledger.run.warnings)


def test_graph_runs_of_another_threads_call_after_the_open_one_ended_are_named_as_such() -> None:
    """A call on another thread starts while one is open (unobserved) and runs its last graph after
    that call ended: a run outside any call, to be named as the other thread's, not blamed on a
    callable seamscope could not hook."""
    barrier, done, first_ended = threading.Event(), threading.Event(), threading.Event()

    @torch.compiler.disable
    def wait(y):
        barrier.set()
        done.wait(10)
        return y

    @torch.compiler.disable
    def hand_over(y):
        done.set()
        first_ended.wait(10)
        return y

    @torch.compile(backend="eager")
    def first(x):
        return wait(x + 1) * 2

    @torch.compile(backend="eager")
    def second(x):
        return hand_over(x - 1) * 3  # its second graph runs once `first`'s call has ended

    def other():
        barrier.wait(10)
        second(X)

    done.set()
    first_ended.set()
    first(X)  # compiled outside the session: no thread waits for another
    second(X)
    for e in (barrier, done, first_ended):
        e.clear()
    with session() as s:
        t = threading.Thread(target=other)
        t.start()
        first(X)
        first_ended.set()
        t.join()
    assert s.ledger.totals.calls == 1 and s.ledger.totals.outside_runs == 2
    (w,) = [w for w in s.ledger.run.warnings if "outside any observed call" in w]
    assert "1 call(s) were made on another thread while a call was open" in w
    assert "compile it with torch.compile inside the session" not in w


def test_a_breaks_budget_around_graphs_compiled_before_it_fails_saying_it_cannot_judge() -> None:
    with quiet():
        decorated(X)  # compiled and run before the budget: its break was made then
    with pytest.raises(BudgetExceeded, match="2 call.s. in scope ran only graphs compiled before"):
        with quiet(), budget(breaks=0):
            decorated(X)
            decorated(X)
    with budget(recompiles=0) as w:  # recompiles are still judged: a guard fails inside the call
        decorated(X)
    assert w.result is not None and w.result.ok
    torch.compiler.reset()
    with pytest.raises(BudgetExceeded, match="1 break site"):
        with quiet(), budget(breaks=0):
            decorated(X)


def test_a_budget_tells_a_graph_compiled_after_a_reset_from_one_compiled_before_by_identity() -> None:
    """After ``torch.compiler.reset()`` Dynamo numbers compile ids from 0/0 again: the graph the
    budget's own code compiles reuses the id of the graph compiled before it (as a test's fixture
    that resets, after an earlier test in the same process, does)."""
    with quiet():
        scaled(X)  # compiled and run before the budget, as 0/0
    with quiet(), budget(breaks=0) as w:
        torch.compiler.reset()
        scaled(X)  # compiled inside the budget, as 0/0 again
        scaled(X)
    assert w.result is not None and w.result.ok, w.result.message()
    assert {e.compile_id for c in w._calls for e in c.events if type(e).__name__ == "RegionEvent"} == {"0/0"}


def test_a_swallowed_ctrl_c_is_raised_again_by_a_callable_compiled_before_the_session() -> None:
    scaled(X)
    with session() as s:
        scaled(X)
        s.interrupted = True
        with pytest.raises(KeyboardInterrupt):
            scaled(X)
    assert s.ledger is not None and s.ledger.totals.calls == 1
    scaled(X)  # the context's other hooks were exited: the callable still works
