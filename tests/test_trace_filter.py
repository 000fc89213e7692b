"""Capture asks PyTorch only for the structured-trace records it reads.

Checked against what PyTorch itself does: which records its own ``TORCH_TRACE`` file holds, and
whether it renders a graph (``GraphModule.print_readable``, the payload of ``dynamo_output_graph``).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import sys

import pytest
from fakes import script_forked, seamscope_forked

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402
from seamscope.ingest.compile_events import (  # noqa: E402
    METADATA,
    PAYLOAD,
    SKIP,
    CompileEventAssembler,
    event_key,
    needed,
    parse_break_reason,
)

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "workloads", "breaks.py")


def breaks_and_recompiles():
    """Breaks of several kinds (an inlined helper's print, a disabled function, a host read) and a
    recompile on a new size."""
    sys.path.insert(0, os.path.dirname(SCRIPT))
    try:
        import breaks
    finally:
        sys.path.pop(0)
    with contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115
        breaks.main(n_calls=2, sizes=(8, 16))


def record_spies():
    """A record whose metadata and payload count how often PyTorch built them."""
    built = {"metadata": 0, "payload": 0}

    def metadata():
        built["metadata"] += 1
        return {"name": "x"}

    def payload():
        built["payload"] += 1
        return "p"

    return built, metadata, payload


@contextlib.contextmanager
def sole_reader():
    """Only seamscope reads the structured trace, as in a user's script.

    PyTorch attaches a handler for ``TORCH_TRACE`` at import; when the variable is not set, that
    handler removes itself on the first record (built whole, with or without seamscope). pytest
    attaches its log capture to every logger that does not propagate, the trace logger included,
    for each phase of a test: inside this block it is set aside.
    """
    torch._logging.trace_structured("describe_tensor", dict)
    log = adapter.trace_logger()
    others = list(log.handlers)
    for h in others:
        log.removeHandler(h)
    try:
        yield
    finally:
        for h in others:
            log.addHandler(h)


def test_a_record_nobody_reads_is_not_built_and_a_read_payload_is_built_once():
    got = []
    with sole_reader(), session() as s:
        remove = adapter.add_trace_handler(lambda meta, payload: got.append((meta, payload)), wants=needed)
        try:
            assert adapter.trace_filter_installed()
            skipped, m1, p1 = record_spies()
            torch._logging.trace_structured("describe_tensor", m1, payload_fn=p1)
            meta_only, m2, p2 = record_spies()
            torch._logging.trace_structured("dynamo_output_graph", m2, payload_fn=p2)
            read = {"payload": 0}

            def reason():
                read["payload"] += 1
                return "Graph break in user code at f.py:1\nGraph Break Reason: r"

            torch._logging._internal.trace_structured_artifact("dynamo_graph_break_reason", "string", reason)
            art, _, p3 = record_spies()
            torch._logging._internal.trace_structured_artifact("inductor_output_code", "string", p3)
        finally:
            remove()
    assert skipped == {"metadata": 0, "payload": 0}
    assert meta_only == {"metadata": 1, "payload": 0}
    assert read == {"payload": 1}  # built once, seen by both handlers
    assert art == {"metadata": 0, "payload": 0}
    got = [(meta, payload) for meta, payload in got if event_key(meta) != "str"]  # the callers' file names
    assert [event_key(meta) for meta, _ in got] == ["dynamo_output_graph", "artifact"]
    assert got[0][1] is None and got[1][1].startswith("Graph break in user code")
    # no fallback warning from the filter (other warnings, e.g. graphs a reset left behind, may be)
    assert not any("structured-trace" in w for w in s.warnings), s.warnings
    assert not adapter.trace_filter_installed()


def test_any_other_handler_gets_every_record_whole():
    """TORCH_TRACE's handler, a user's: the filter stands aside, as if seamscope were not there."""
    other: list[logging.LogRecord] = []

    class Other(logging.Handler):
        def emit(self, record):
            other.append(record)

    log = adapter.trace_logger()
    h = Other()
    log.addHandler(h)
    with session():  # attached before: no filter at all
        assert not adapter.trace_filter_installed()
    log.removeHandler(h)
    with sole_reader(), session():  # attached while the session runs: the filter stands aside
        assert adapter.trace_filter_installed()
        log.addHandler(h)
        try:
            built, m, p = record_spies()
            torch._logging.trace_structured("describe_tensor", m, payload_fn=p)
        finally:
            log.removeHandler(h)
    assert built == {"metadata": 1, "payload": 1}
    # (torch may log a string-interning record first, the first time a file shows in a stack)
    (rec,) = [r for r in other if "describe_tensor" in r.metadata]
    assert rec.payload == "p"


def test_no_graph_is_rendered_for_the_trace_inside_a_session(monkeypatch):
    """``dynamo_output_graph``'s payload is ``print_readable``: never asked for, never built."""
    rendered = []
    original = torch.fx.GraphModule.print_readable

    def spy(self, *a, **k):
        rendered.append(1)
        return original(self, *a, **k)

    monkeypatch.setattr(torch.fx.GraphModule, "print_readable", spy)
    with sole_reader(), session() as s:
        breaks_and_recompiles()
    assert s.ledger is not None and s.ledger.totals.calls == 4
    assert rendered == []
    torch._dynamo.reset()
    whole = session()
    whole.trace_filter = False  # every record built, as before the filter
    with sole_reader(), whole:
        breaks_and_recompiles()
    assert rendered, "without the filter PyTorch renders every graph"


def test_what_the_assembler_reads_is_declared():
    """Every record of a real run, fed whole, and fed as the filter would let it through, give the
    same compilations and break sites: ``needed`` declares all that ``feed`` reads."""
    events = []
    remove = adapter.add_trace_handler(lambda meta, payload: events.append((meta, payload)))
    try:
        breaks_and_recompiles()
        torch._dynamo.reset()
        torch.compile(lambda x: x.sum().item(), backend="aot_eager")(torch.ones(3))
    finally:
        remove()
    whole, filtered = CompileEventAssembler(), CompileEventAssembler()
    levels = set()
    for meta, payload in events:
        whole.feed(meta, payload, 0)
        key = event_key(meta) or ""
        art = meta.get("artifact", {}).get("name") if key == "artifact" else None
        need = needed(key, art)
        levels.add(need)
        if need != SKIP:
            filtered.feed(meta, payload if need == PAYLOAD else None, 0)
    assert levels == {SKIP, METADATA, PAYLOAD}
    assert whole.compilations and whole.sites
    assert filtered.compilations == whole.compilations
    assert filtered.sites == whole.sites


def test_break_reasons_without_dynamos_frames_parse_to_the_same_sites(monkeypatch):
    """The lean break-reason payload, next to the one Dynamo would have built, on real breaks."""
    pairs = []
    lean_of = adapter.lean_break_reason

    def both(payload_fn):
        lean = lean_of(payload_fn)
        assert lean is not payload_fn, "Dynamo builds this payload differently: the lean one is off"

        def build():
            text = lean()
            pairs.append((payload_fn(), text))
            return text

        return build

    monkeypatch.setattr(adapter.structured_trace, "lean_break_reason", both)  # where the filter looks it up
    with sole_reader(), session() as s:
        breaks_and_recompiles()
    assert len(pairs) >= 3
    for full, lean in pairs:
        assert len(lean) < len(full) and "Traceback (most recent call last):" in lean
        assert parse_break_reason(lean) == parse_break_reason(full)
    assert s.ledger is not None and len(s.ledger.break_sites) >= 3


def test_lean_break_reason_leaves_an_unknown_payload_alone():
    def other():
        return "x"

    assert adapter.lean_break_reason(other) is other
    user_stack_trace = "head"

    def same_variable_other_text():
        return f"{user_stack_trace}\n{os.getcwd()}"

    assert adapter.lean_break_reason(same_variable_other_text) is same_variable_other_text


def test_exception_chain_text_is_format_exc_less_the_frames():
    import traceback

    def inner():
        raise ValueError("inner\nsecond line")

    def outer():
        try:
            inner()
        except ValueError as e:
            raise KeyError("outer") from e

    def during():
        try:
            outer()
        except KeyError:
            raise RuntimeError("while handling")  # noqa: B904 - the implicit chain is the point

    def suppressed():
        try:
            inner()
        except ValueError:
            raise RuntimeError("alone") from None

    for fn in (inner, outer, during, suppressed):
        try:
            fn()
        except Exception as e:
            full = traceback.format_exc()
            frames = [ln for ln in full.splitlines(keepends=True) if not ln.startswith("  ")]
            assert adapter.exception_chain_text(e) == "".join(frames)
    group = getattr(builtins, "ExceptionGroup", None)
    if group is not None:
        assert adapter.exception_chain_text(group("g", [ValueError()])) is None


def test_the_filter_falls_back_with_a_warning_when_trace_structured_changed(monkeypatch):
    import torch._logging._internal as internal

    original = internal.trace_structured

    def changed(name, metadata=dict, payload=None):  # another signature
        return original(name, metadata)

    monkeypatch.setattr(internal, "trace_structured", changed)
    with sole_reader(), session() as s:
        assert not adapter.trace_filter_installed()
    assert any("cannot filter" in w for w in s.warnings)
    assert s.ledger is not None


def test_the_filter_is_taken_away_everywhere_after_the_session():
    import torch._logging._internal as internal

    original = internal.trace_structured
    with sole_reader(), session():
        filt = internal.trace_structured
        assert filt is not original and torch._logging.trace_structured is filt
        import torch._inductor.comms_debug as late  # imported while the session runs (one of the lightest such)

        assert late.trace_structured is filt
    holders = [m for m in list(sys.modules.values()) if getattr(m, "trace_structured", None) is filt]
    assert holders == []
    assert torch._logging.trace_structured is original and late.trace_structured is original


# --- whole runs, in fresh processes ------------------------------------------------------------


def _trace_kinds(trace_dir):
    """The records of a TORCH_TRACE directory, in order: kind, whether a payload follows, and the
    file and line of the code that logged it (times and process ids differ between runs)."""
    kinds = []
    for name in sorted(os.listdir(trace_dir)):
        with open(os.path.join(trace_dir, name)) as f:
            for line in f:
                if line.startswith("\t"):
                    continue  # a payload line
                brace = line.index("{")
                where = line[:brace].split()[3:]  # after level+date, time, pid: the caller's file:line
                meta = json.loads(line[brace:])
                key = event_key(meta)
                if key == "artifact":
                    key += ":" + meta["artifact"]["name"]
                kinds.append((key, "has_payload" in meta, tuple(where)))
    return kinds


def test_a_users_torch_trace_is_complete_under_seamscope_run(tmp_path, fresh_server):
    def trace(name, run, *args, **extra):
        # a fresh process each, forked from the test run's one server: TORCH_TRACE as set for it
        env = {"TORCH_TRACE": str(tmp_path / name), **extra}
        p = run(fresh_server, [*args, SCRIPT], tmp_path, env=env, unset=() if extra else ("SEAMSCOPE_FULL_TRACE",))
        assert p.returncode == 0, p.stderr
        return _trace_kinds(tmp_path / name)

    observe = ("run", "--quiet")
    plain = trace("plain", script_forked)
    observed = trace("observed", seamscope_forked, *observe, "--out", "o")
    unfiltered = trace("unfiltered", seamscope_forked, *observe, "--out", "u", SEAMSCOPE_FULL_TRACE="1")
    assert len(plain) > 100 and ("dynamo_output_graph", True) in [k[:2] for k in plain]
    assert any("convert_frame.py:" in w for k in plain for w in k[2])
    assert observed == unfiltered  # record for record, with the caller's file and line
    # the same records as without seamscope, but for the file names of seamscope's own frames (in
    # the compiled frames' stacks), each interned once as a "str" record
    assert [k for k in observed if k[0] != "str"] == [k for k in plain if k[0] != "str"]


def test_receipts_with_and_without_the_filter_agree(tmp_path, fresh_server):
    def run(name, full):
        # a fresh process each (forked from the test run's one server)
        p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", name, SCRIPT], tmp_path,
                             env={"SEAMSCOPE_FULL_TRACE": "1"} if full else {},
                             unset=("TORCH_TRACE",) if full else ("TORCH_TRACE", "SEAMSCOPE_FULL_TRACE"))
        assert p.returncode == 0, p.stderr
        from seamscope.analyze.verify import load_raw  # failed guards expanded from the guard table

        return load_raw(tmp_path / name / "receipt.json")

    filtered, whole = run("filtered", False), run("whole", True)
    assert filtered["structure_sha256"] == whole["structure_sha256"]
    assert filtered["ledger"]["break_sites"] == whole["ledger"]["break_sites"]
    assert len(whole["ledger"]["break_sites"]) >= 3

    def reasons(r):
        return [
            (c["compile_id"], c["failed_guards"], c["fail_reason"], c["restart_reasons"], c["break_site_ids"],
             c["graph_count"], c["status"])
            for c in r["ledger"]["compilations"]
        ]

    assert reasons(filtered) == reasons(whole)
    assert any(c["failed_guards"] for c in whole["ledger"]["compilations"])
    assert filtered["ledger"]["run"]["warnings"] == whole["ledger"]["run"]["warnings"]


def test_two_filters_installed_then_taken_away_leave_none():
    import torch._logging._internal as internal

    original = internal.trace_structured
    with sole_reader():
        first = adapter.filter_trace_records()
        second = adapter.filter_trace_records()
        first()
        first()  # twice: counted once
        assert adapter.trace_filter_installed() and internal.trace_structured is not original
        second()
    assert not adapter.trace_filter_installed() and internal.trace_structured is original
    assert "findCaller" not in vars(adapter.trace_logger())
