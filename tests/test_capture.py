"""Live capture on small workloads with known structure, checked against PyTorch's own counters
and ``torch._dynamo.explain`` (sources the capture itself does not read)."""

from __future__ import annotations

import contextlib
import os
import re
import sys

import pytest

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import observe, session  # noqa: E402
from seamscope.model.ledger import BreakEvent, FallbackEvent, IslandEvent, RegionEvent  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "workloads"))
import breaks  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def counters():
    return adapter.dynamo_counters()


def quiet():
    """stdout as a C-level file: pytest's Python-level capture would add frames that Dynamo
    converts and skips (counted in ``frames["ok"]`` though nothing compiles)."""
    return contextlib.redirect_stdout(open(os.devnull, "w"))  # noqa: SIM115


def test_summary_equals_pytorch_counters_and_explain():
    with quiet(), session() as s:
        breaks.main(n_calls=4, sizes=(8, 16))
    led = s.ledger
    self_check(led)
    r = s.receipt()
    c = counters()
    sm = r.summary
    assert sm.call_count == 8
    assert sm.compile_count == c["frames"]["ok"]
    assert sm.graph_count == c["stats"]["unique_graphs"]
    assert sm.fallback_count == c["frames"]["total"] - c["frames"]["ok"]
    assert sm.recompile_count == sum(1 for comp in led.compilations if comp.compile_id.split("/")[1] != "0")
    assert sm.recompile_count > 0  # the size change recompiled
    # Break sites: the same innermost (file, line) set as explain reports.
    torch._dynamo.reset()
    with quiet():
        ex = torch._dynamo.explain(breaks.f)(torch.ones(8))
    explain_sites = {
        (os.path.basename(br.user_stack[-1].filename), br.user_stack[-1].lineno) for br in ex.break_reasons
    }
    ours = {(os.path.basename(b.file), b.line) for b in sm.break_sites}
    # explain lists only breaks attached to a compiled graph; the disabled call's frame has none.
    assert explain_sites <= ours
    no_graph = {
        (os.path.basename(b.file), b.line)
        for b in sm.break_sites
        if all(comp.graph_count == 0 for comp in led.compilations if b.site_id in comp.break_site_ids)
    }
    assert ours - explain_sites == no_graph
    # every break PyTorch counted, by its code, and no other
    counted_codes = {
        "GB" + re.search(r"/gb/gb(\d{4})\.html", reason).group(1) for reason in c["graph_break"]
    }
    codes = {b.gb_code for b in sm.break_sites}
    assert codes == counted_codes == {"GB0059", "GB0124", "GB0098"}
    helper_site = next(b for b in sm.break_sites if b.gb_code == "GB0059")
    assert helper_site.function == "helper"  # the innermost user frame is the site...
    assert [fr.function for fr in helper_site.user_stack][-2:] == ["f", "helper"]  # ...the caller is in the stack


def test_each_site_crossed_once_per_call_and_disabled_island_is_measured():
    with quiet(), session() as s:
        breaks.main(n_calls=5, sizes=(8,))
    led = s.ledger
    steady = [c for c in led.calls if c.phase == "steady"]
    assert len(steady) == 4
    site_by_code = {b.gb_code: b.site_id for b in led.break_sites}
    disabled = site_by_code["GB0098"]
    comps = {c.compile_id: c for c in led.compilations}
    for call in steady:
        crossed = [e.site_id for e in call.events if isinstance(e, BreakEvent)]
        assert sorted(crossed) == sorted(site_by_code.values())
        ev = call.events
        after = [i for i, e in enumerate(ev) if isinstance(e, IslandEvent) and e.after_site_id == disabled]
        assert len(after) == 1, "the 2 ms sleep is one island"
        i = after[0]
        assert ev[i].duration_ns >= 2_000_000
        before = [e for e in ev[:i] if isinstance(e, RegionEvent)][-1]
        after = next(e for e in ev[i + 1 :] if isinstance(e, RegionEvent))
        # exactly between the region before the disabled call and the resume right after it
        assert comps[after.compile_id].resume_site_id == disabled
        assert comps[before.compile_id].frame_name == "helper"


def test_recompile_limit_fallback():
    def fn(x):
        return (x * 2).sum()

    with torch._dynamo.config.patch(recompile_limit=2), session() as s:
        g = torch.compile(fn, backend="eager", dynamic=False)
        for n in range(2, 8):
            g(torch.ones(n))
    led = s.ledger
    c = counters()
    r = s.receipt()
    assert r.summary.fallback_count == c["frames"]["total"] - c["frames"]["ok"] >= 1
    fb = [call for call in led.calls if any(isinstance(e, FallbackEvent) for e in call.events)]
    assert fb and fb[0].outcome == "fallback"
    later = [call for call in led.calls if call.index > fb[0].index]
    assert later and all(call.phase == "fallback" for call in later)
    assert all(not any(isinstance(e, RegionEvent) for e in call.events) for call in later)
    assert "recompile" in r.summary.fallbacks[0].reason.lower()


def test_shape_recompile_names_the_failed_guard():
    def fn(x):
        return x.cos() + 1

    with session() as s:
        g = torch.compile(fn, backend="eager", dynamic=False)
        g(torch.ones(3))
        g(torch.ones(5))
    (rc,) = s.receipt().summary.recompiles
    assert "size mismatch" in rc.failed_guards[0] and "expected 3, actual 5" in rc.failed_guards[0]
    assert [c.outcome for c in s.ledger.calls] == ["compile", "recompile"]


def test_module_compile_decorator_and_observe():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).relu()

    with session() as s:
        m = M()
        om = torch.compile(m, backend="eager")
        om(torch.ones(2, 4))
        om(torch.ones(2, 4))
        m2 = M()
        m2.compile(backend="eager")
        m2(torch.ones(2, 4))

        @torch.compile(backend="eager")
        def deco(x):
            return x + 1

        deco(torch.ones(2))
        obs = observe(lambda x: x * 3, backend="eager")
        obs(torch.ones(2))
    assert s.ledger.totals.calls == 5
    outcomes = [c.outcome for c in s.ledger.calls]
    assert outcomes[:2] == ["compile", "hit"]
    assert outcomes[3:] == ["compile", "compile"]  # m2 shares M.forward's code: it may hit
    assert isinstance(om, torch.nn.Module) and om._orig_mod is m


def test_a_tracked_module_keeps_its_forwards_signature():
    """A module whose calls are the run's calls (``--calls-of``, ``--regional``) has its ``forward``
    tracked on the instance; without the signature, transformers' ``generate`` (which reads it)
    stopped passing ``logits_to_keep`` and ``position_ids`` and the program returned full logits:
    observing it changed it."""
    import inspect

    class M(torch.nn.Module):
        def forward(self, x, logits_to_keep=0):
            return x[:, -logits_to_keep:] if logits_to_keep else x

    with session() as s:
        m = M()
        before = inspect.signature(m.forward)
        assert s.track(m) is m
        assert inspect.signature(m.forward) == before and "logits_to_keep" in before.parameters
        m(torch.ones(1, 3), logits_to_keep=1)
    assert s.ledger.totals.calls == 1
    # and under try's output fingerprints (what its runs observe the same way)
    from seamscope.experiments.remedy_plan import _tracker
    from seamscope.experiments.trials.fingerprint import Recorder

    m = M()
    assert _tracker(Recorder())(m) is m and inspect.signature(m.forward) == before


def test_model_that_raises_in_compiled_code_is_recorded():
    def bad(x):
        y = x + 1
        if y.shape[0] == 3:
            raise ValueError("boom")
        return y

    with session() as s:
        g = torch.compile(bad, backend="eager")
        g(torch.ones(2))
        with pytest.raises(ValueError, match="boom"):
            g(torch.ones(3))
    last = s.ledger.calls[-1]
    assert last.outcome == "error" and "ValueError: boom" in (last.error or "")
    self_check(s.ledger)


def test_training_step_records_compiled_backward():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with session() as s:
        cm = torch.compile(model, backend="aot_eager")
        for _ in range(3):
            loss = cm(torch.randn(4, 8)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
    led = s.ledger
    assert led.totals.calls == 3
    back = [o for o in led.outside if o.kind == "backward"]
    assert len(back) == 3 and [o.attributed_call for o in back] == [0, 1, 2]
    assert led.totals.outside_runs == 3


@pytest.mark.parametrize("native", [True, False], ids=["C hot path", "Python path"])
def test_accumulated_backwards_are_each_attributed_to_their_own_forward(native):
    """Two forwards, then both backwards (gradient accumulation): each compiled backward is
    timed once, attributed to the call whose forward made it; once the session stops, the
    compiled backward is PyTorch's own again and nothing more is recorded."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    s = session()
    if not native:
        s.native = None
    with s:
        cm = torch.compile(model, backend="aot_eager")
        for _ in range(3):
            a = cm(torch.randn(4, 8)).sum()
            b = cm(torch.randn(4, 8)).sum()
            b.backward()
            a.backward()
        kinds = list(s._backward_kinds)
    led = s.ledger
    self_check(led)
    back = [o.attributed_call for o in led.outside if o.kind == "backward"]
    assert back == [1, 0, 3, 2, 5, 4]
    (kind,) = kinds
    assert "timed_backward" not in kind._forward_cls.backward.__qualname__
    cm(torch.randn(4, 8)).sum().backward()  # after the session: PyTorch's own backward
    assert len(s.builder.build().outside) == len(led.outside)


def test_degrades_when_an_internal_is_missing(monkeypatch):
    def broken(_wrap, _on_graph=None):
        raise adapter.AdapterProblem("OutputGraph.call_user_compiler is gone: regions cannot be timed")

    monkeypatch.setattr(adapter, "wrap_compiled_graphs", broken)
    with session() as s:
        g = torch.compile(lambda x: x + 1, backend="eager")
        g(torch.ones(2))
    led = s.ledger
    assert led.totals.calls == 1
    assert any("regions cannot be timed" in w for w in led.run.warnings)
    assert led.compilations  # compile events still arrive


def test_compiled_optimizer_step_is_a_call():
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with session() as s:
        step = torch.compile(opt.step, backend="eager")
        for _ in range(3):
            model(torch.randn(2, 8)).sum().backward()
            step()
            opt.zero_grad()
    led = s.ledger
    assert [c.outcome for c in led.calls] == ["compile", "hit", "hit"]
    assert all(any(isinstance(e, RegionEvent) for e in c.events) for c in led.calls)


def test_a_swallowed_ctrl_c_stops_the_run_at_the_next_call():
    """`seamscope run` marks the session on Ctrl-C; if library code swallowed the interrupt (a
    ``__del__``, a weakref callback), the next observed call raises it again."""
    with session() as s:
        g = torch.compile(lambda x: x + 1, backend="eager")
        g(torch.ones(2))
        s.interrupted = True
        with pytest.raises(KeyboardInterrupt):
            g(torch.ones(2))
    assert s.ledger is not None and s.ledger.totals.calls == 1


@pytest.mark.parametrize("kind", ["function", "module"])
def test_a_compiled_callable_called_from_a_compiled_caller_is_traced_through(kind):
    """The call wrapper must not break the caller's graph: Dynamo, tracing the caller, inlines
    the inner compiled function (or module) as it does without seamscope, and the inner calls at
    run time are part of the caller's calls."""

    def run(observed: bool) -> tuple[int, int, object]:
        torch._dynamo.reset()
        adapter.clear_counters()
        with contextlib.ExitStack() as stack:
            s = stack.enter_context(session()) if observed else None
            fn = (lambda x: x.sin() * 2) if kind == "function" else torch.nn.Linear(4, 4)
            inner = torch.compile(fn, backend="eager")
            outer = torch.compile(lambda x: inner(x + 1).cos(), backend="eager")
            for _ in range(6):
                outer(torch.ones(4))
        c = counters()
        return sum(c.get("graph_break", {}).values()), c["stats"]["unique_graphs"], s

    breaks_plain, graphs_plain, _ = run(False)
    breaks_obs, graphs_obs, s = run(True)
    assert (breaks_obs, graphs_obs) == (breaks_plain, graphs_plain) == (0, 1)
    assert s is not None and s.ledger is not None
    assert s.ledger.totals.calls == 6  # the outer calls only: the inner one is in their graph
    self_check(s.ledger)


def test_callbacks_and_family_labels_on_the_c_path_and_off_it():
    seen = []
    with session() as s:
        s.on_call_end.append(lambda sess: seen.append(sess is s))
        g = torch.compile(lambda x: x * 2, backend="eager")
        for _ in range(5):
            g(torch.ones(2))
        with s.family("labelled"):
            g(torch.ones(2))
        g(torch.ones(2))
    assert seen == [True] * 7
    assert s.ledger is not None
    assert [c.family for c in s.ledger.calls] == [None] * 5 + ["labelled", None]


@pytest.mark.parametrize("with_c", [True, False])
def test_calls_on_other_threads_while_one_is_open_are_counted_apart(with_c):
    """One call is observed at a time: a call another thread makes meanwhile runs unobserved and
    is counted, and its graphs are runs outside any call, never mixed into the open call."""
    import threading
    import time

    from seamscope import _native
    from seamscope.capture.session import Session

    @torch.compiler.disable
    def pause():
        time.sleep(0.001)  # releases the GIL: the threads' calls overlap

    def f(x):
        x = x.sin()
        pause()
        return x.cos()

    s = Session()
    s.native = _native.NATIVE if with_c else None
    threads_calls = 4 * 25
    with quiet():
        s.start()
        try:
            g = torch.compile(f, backend="eager")
            g(torch.ones(8))

            def work():
                for _ in range(25):
                    g(torch.ones(8))

            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            s.stop()
    led = s.ledger
    assert led is not None
    self_check(led)
    (warning,) = [w for w in led.run.warnings if "another thread" in w]
    # "N call(s) made on another thread ...", or with the graph runs they made outside any call,
    # "R compiled graph run(s) happened outside any observed call, and N call(s) were made on ..."
    foreign = int(re.search(r"(\d+) call\(s\) (?:were )?made on another thread", warning).group(1))
    assert 0 < foreign < threads_calls
    assert led.totals.calls + foreign == 1 + threads_calls
    # every observed call ran both graphs once; the other threads' runs are outside any call
    assert sorted(r.runs for r in led.totals.regions) == [led.totals.calls] * 2
    assert led.totals.outside_runs == 2 * foreign
