"""One test per private-API behaviour the adapter relies on, so a PyTorch upgrade that changes
one of them fails here, by name, rather than somewhere inside capture."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def test_version_is_in_the_tested_range():
    assert adapter.version_warning() is None
    v, mm = adapter.torch_version()
    assert v == str(torch.__version__) and mm >= (2, 9)


def test_version_warning_names_an_untested_version(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "9.1.0")
    msg = adapter.version_warning()
    assert msg and "torch 9.1.0" in msg and "may be incomplete" in msg


def test_trace_handler_receives_structured_events_with_compile_context():
    seen = []
    remove = adapter.add_trace_handler(lambda meta, payload: seen.append((meta, payload)))
    try:
        torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    finally:
        remove()
    keys = [k for meta, _ in seen for k in meta if k not in ("frame_id", "frame_compile_id", "attempt", "has_payload")]
    assert "dynamo_start" in keys and "compilation_metrics" in keys
    metrics = next(meta for meta, _ in seen if "compilation_metrics" in meta)
    assert metrics["frame_id"] == 0 and metrics["frame_compile_id"] == 0
    assert metrics["compilation_metrics"]["compile_id"] == "0/0"
    # and nothing after removal
    n = len(seen)
    torch.compile(lambda x: x * 3, backend="eager")(torch.ones(2))
    assert len(seen) == n


def test_graph_break_reason_arrives_as_an_artifact_with_payload():
    seen = []
    remove = adapter.add_trace_handler(lambda meta, payload: seen.append((meta, payload)))

    def f(x):
        x = x + 1
        print("side effect")
        return x * 2

    try:
        torch.compile(f, backend="eager")(torch.ones(2))
    finally:
        remove()
    reasons = [p for meta, p in seen if meta.get("artifact", {}).get("name") == "dynamo_graph_break_reason"]
    assert reasons and "Graph break in user code at" in reasons[0] and "gb0059" in reasons[0]


def test_wrap_compiled_graphs_sees_every_graph_with_its_compile_id():
    seen = []
    runs = []

    def wrap(fn, cid, autograd):
        seen.append(cid)
        assert autograd is False  # no input requires grad

        def run(*a, **k):
            runs.append(cid)
            return fn(*a, **k)

        return run

    undo = adapter.wrap_compiled_graphs(wrap)
    try:
        g = torch.compile(lambda x: x.sin() + 1, backend="eager")
        out = g(torch.ones(3))
        g(torch.ones(3))
    finally:
        undo()
    assert seen == ["0/0"] and runs == ["0/0", "0/0"]
    assert torch.allclose(out, torch.ones(3).sin() + 1)
    from torch._dynamo.output_graph import OutputGraph

    assert not hasattr(OutputGraph.call_user_compiler, "__wrapped__")


def test_only_non_graph_module_backends_may_have_a_compiled_backward():
    """eager hands back the GraphModule (plain autograd); aot_eager a function whose outputs carry
    a CompiledFunctionBackward node. The region wrapper looks for that node only in the latter."""
    seen = {}

    def wrap(fn, cid, autograd):
        assert autograd is True  # an input requires grad
        assert not hasattr(fn, "_torchdynamo_disable")  # Dynamo adds its own around the wrapper
        seen[backend] = adapter.may_have_compiled_backward(fn)
        return fn

    undo = adapter.wrap_compiled_graphs(wrap)
    try:
        for backend in ("eager", "aot_eager"):
            torch._dynamo.reset()
            out = torch.compile(lambda x: x.sin() + 1, backend=backend)(torch.ones(3, requires_grad=True))
            if backend == "aot_eager":
                assert "CompiledFunction" in type(out.grad_fn).__name__
            else:
                assert "CompiledFunction" not in type(out.grad_fn).__name__
    finally:
        undo()
        torch._dynamo.reset()
    assert seen == {"eager": False, "aot_eager": True}
    assert adapter.may_have_compiled_backward(lambda *a: a)


def test_graphs_compiled_without_autograd_are_told_so():
    """Only a graph compiled with autograd on and something requiring grad can get a compiled
    backward: the wrapper skips the per-run check for the others."""
    seen = []
    undo = adapter.wrap_compiled_graphs(lambda fn, cid, autograd: seen.append(autograd) or fn)
    try:
        model = torch.nn.Linear(3, 3)
        torch.compile(model, backend="aot_eager")(torch.ones(3))  # a parameter requires grad
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model, backend="aot_eager")(torch.ones(3))
        torch._dynamo.reset()
        torch.compile(lambda x: x.cos(), backend="aot_eager")(torch.ones(3))
    finally:
        undo()
        torch._dynamo.reset()
    assert seen == [True, False, False]


def test_current_compile_id_outside_compilation_is_none():
    assert adapter.current_compile_id() is None


def test_dynamo_settings_include_the_ones_that_decide_behaviour():
    s = adapter.dynamo_settings()
    assert s["recompile_limit"] == repr(torch._dynamo.config.recompile_limit)
    assert "capture_scalar_outputs" in s and "automatic_dynamic_shapes" in s


def test_is_compiling_false_in_eager():
    assert adapter.is_compiling() is False


def test_dynamo_config_patch_sets_and_restores_and_names_unknown_settings():
    before = torch._dynamo.config.capture_scalar_outputs
    with adapter.dynamo_config_patch({"capture_scalar_outputs": not before}):
        assert torch._dynamo.config.capture_scalar_outputs is (not before)
    assert torch._dynamo.config.capture_scalar_outputs is before
    with pytest.raises(KeyError, match="no_such_setting"):
        adapter.dynamo_config_patch({"no_such_setting": 1})


def test_hook_compiled_calls_sees_each_top_level_call_entry_and_exit_with_its_error():
    def maybe_raise(x):
        if x.shape[0] == 3:
            raise ValueError("boom")
        return x.sin()

    g = torch.compile(maybe_raise, backend="eager")  # compiled before the hook exists
    g(torch.ones(2))
    events = []

    def enter_for(ctx):
        assert adapter.context_backend_name(ctx) is not None

        def enter():
            events.append("enter")
            import sys

            return lambda: events.append(("exit", type(sys.exc_info()[1]).__name__))

        return enter

    undo = adapter.hook_compiled_calls(enter_for)
    try:
        assert adapter.hooked_contexts() >= 1
        g(torch.ones(2))
        with pytest.raises(ValueError):
            g(torch.ones(3))
    finally:
        undo()
    assert events == ["enter", ("exit", "NoneType"), "enter", ("exit", "ValueError")]
    assert adapter.hooked_contexts() == 0
    g(torch.ones(2))
    assert len(events) == 4  # removed: no more calls seen


def test_live_compile_contexts_and_their_backend_names():
    import gc

    gc.collect()
    before = len(adapter.live_compile_contexts())
    a = torch.compile(lambda x: x + 1, backend="eager")
    b = torch.compile(torch.nn.Linear(2, 2), backend="aot_eager")
    ctxs = adapter.live_compile_contexts()
    assert len(ctxs) == before + 2
    names = {adapter.context_backend_name(c) for c in ctxs[-2:]} | {
        adapter.context_backend_name(c) for c in ctxs
    }
    assert {"eager", "aot_eager"} <= names
    del a, b


def test_live_compile_contexts_are_kept_as_made_not_scanned_for(monkeypatch):
    """Once tracking began (at import, torch loaded: a fork server's children inherit it), a
    lookup scans no object: a context made by ``torch.compile``, by copying a compiled module or
    by unpickling one is found all the same, and a dropped one is gone."""
    import copy
    import gc
    import pickle

    from seamscope.capture.adapter import contexts

    assert contexts.track_compile_contexts() and contexts._made is not None

    def no_scan(*a, **k):
        raise AssertionError("a gc scan")

    a = torch.compile(lambda x: x + 1, backend="eager")
    m = torch.compile(torch.nn.Linear(2, 2), backend="eager")
    monkeypatch.setattr(gc, "get_objects", no_scan)
    before = adapter.live_compile_contexts()
    assert m.dynamo_ctx in before
    copied, unpickled = copy.deepcopy(m), pickle.loads(pickle.dumps(m))
    got = adapter.live_compile_contexts()
    assert copied.dynamo_ctx in got and unpickled.dynamo_ctx in got and len(got) >= len(before) + 2
    monkeypatch.undo()
    from torch._dynamo.eval_frame import OptimizeContext

    assert {id(c) for c in got} == {id(c) for c in contexts._scan(OptimizeContext)}  # what a scan finds
    import weakref

    gone = weakref.ref(copied.dynamo_ctx)
    del a, copied, unpickled, got
    gc.collect()
    after = adapter.live_compile_contexts()
    assert m.dynamo_ctx in after and gone() is None and len(after) < len(before) + 2
    assert {id(c) for c in after} == {id(c) for c in contexts._scan(OptimizeContext)}


def test_tracking_begun_late_finds_the_contexts_made_before(monkeypatch):
    """Begun after a context was made (seamscope imported before torch), the one scan finds it."""
    from torch._dynamo.eval_frame import OptimizeContext

    from seamscope.capture.adapter import contexts

    saved = OptimizeContext.__dict__.get("__new__")
    m = torch.compile(torch.nn.Linear(2, 2), backend="eager")
    monkeypatch.setattr(contexts, "_made", None)
    try:
        assert contexts.track_compile_contexts()
        assert m.dynamo_ctx in adapter.live_compile_contexts()
        later = torch.compile(torch.nn.Linear(2, 2), backend="eager")
        assert later.dynamo_ctx in adapter.live_compile_contexts()
    finally:
        if saved is None:
            del OptimizeContext.__new__
        else:
            OptimizeContext.__new__ = saved  # the staticmethod as it was


def test_hook_compiled_calls_degrades_when_contexts_have_no_hook_list():
    class Old:  # a context of a PyTorch without enter_exit_hooks
        pass

    with pytest.raises(adapter.AdapterProblem, match="enter_exit_hooks"):
        adapter.hook_compiled_calls(lambda ctx: (lambda: (lambda: None)), contexts=[Old()])


def test_graphs_compiled_so_far_counts_dynamos_installed_graphs():
    torch._dynamo.reset()
    assert adapter.graphs_compiled_so_far() == 0
    g = torch.compile(lambda x: x.sin() + 1, backend="eager")
    g(torch.ones(2))
    assert adapter.graphs_compiled_so_far() == adapter.dynamo_counters()["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()  # drops this graph with its cache entry
    assert adapter.graphs_compiled_so_far() == 0


def _two_graphs(x):
    x = x.sin()
    torch._dynamo.graph_break()
    return x.cos()


class _Breaks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        torch._dynamo.graph_break()
        return self.lin(y)


def test_graphs_compiled_so_far_counts_only_live_graphs_over_compiles_and_resets():
    """Dynamo leaves some ``__compiled_fn`` globals behind at each reset: they are not graphs it
    can run. The count follows PyTorch's own graph counter, cleared with each reset."""
    for _ in range(4):
        torch._dynamo.reset()
        adapter.clear_counters()
        f = torch.compile(_two_graphs, backend="eager")
        f(torch.ones(3))
        m = torch.compile(_Breaks(), backend="eager")
        m(torch.ones(2, 4))
        m(torch.ones(3, 4))  # a recompile: more graphs, the first ones still live
        graphs = adapter.dynamo_counters()["stats"]["unique_graphs"]
        assert graphs >= 6
        assert adapter.graphs_compiled_so_far() == graphs
    torch._dynamo.reset()
    assert adapter.graphs_compiled_so_far() == 0


def test_graphs_compiled_so_far_says_what_is_missing_when_dynamos_code_tracker_changed(monkeypatch):
    import torch._dynamo.convert_frame as convert_frame

    monkeypatch.setattr(convert_frame, "input_codes", object())  # no list of weak references
    with pytest.raises(adapter.AdapterProblem, match="graphs compiled before the session began are not counted"):
        adapter.graphs_compiled_so_far()


def test_torch_log_variables_are_the_names_torch_reads_at_import(monkeypatch):
    import sys

    import torch._logging._internal as internal

    names = adapter.torch_log_variables()
    assert {"TORCH_LOGS", "TORCH_LOGS_OUT", "TORCH_LOGS_FORMAT", "TORCH_TRACE", "TORCH_COMPILE_DEBUG"} <= set(names)
    assert internal.LOG_ENV_VAR in names and internal.TRACE_ENV_VAR in names
    monkeypatch.setenv("TORCH_LOGS_OUT", "x.txt")
    assert adapter.torch_log_environment()["TORCH_LOGS_OUT"] == "x.txt"
    # torch's logging not imported: nothing read yet, nothing to read again
    monkeypatch.delitem(sys.modules, "torch._logging._internal")
    assert adapter.torch_log_variables() == () and adapter.reread_torch_logs() is None


def test_reread_torch_logs_follows_the_environment_as_it_is_set_then_unset(fresh_server, tmp_path):
    """In a forked child: TORCH_TRACE and TORCH_LOGS set, torch's logs set up again, then one
    unset and the other moved, set up again: the trace goes to the new folder only and the
    graph-break log is off, as a new interpreter started with the last environment would have it."""
    from seamscope.experiments.fresh import Job

    a, b, log = tmp_path / "a", tmp_path / "b", tmp_path / "job.log"
    steps = [{"env": {"TORCH_TRACE": str(a), "TORCH_LOGS": "graph_breaks"}},
             {"env": {"TORCH_TRACE": str(b)}, "unset": ["TORCH_LOGS"]}]
    e = fresh_server.run(Job(entry="fresh_jobs:compile_a_break", arg={"steps": steps}, log=str(log)), 300)
    assert e.ok, log.read_text()
    assert not a.exists() and len(list(b.iterdir())) == 1
    assert "__graph_breaks" not in log.read_text()


def test_reread_torch_logs_names_what_this_torch_lacks(monkeypatch):
    import torch._logging._internal as internal

    handler = internal.LOG_TRACE_HANDLER
    monkeypatch.delattr(internal, "_init_logs")
    with pytest.raises(adapter.AdapterProblem, match="no _init_logs: TORCH_LOGS and TORCH_TRACE keep"):
        adapter.reread_torch_logs()
    assert internal.LOG_TRACE_HANDLER is handler  # nothing changed
