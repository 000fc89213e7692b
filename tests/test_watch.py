"""Watch mode in a process: events after warm-up, ``fail_after_warmup``, and the same counts through
a Prometheus registry and OpenTelemetry's in-memory reader, checked against PyTorch's own
compilation metrics."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.torch

torch = pytest.importorskip("torch")


def model(x):
    x = x.sin() + 1
    torch._dynamo.graph_break()
    return x * 2


def _prom_value(registry, name: str, **labels: str) -> float:
    total = 0.0
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def _otel_points(reader, units: dict[str, str] | None = None) -> dict[str, list]:
    out: dict[str, list] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
                if units is not None:
                    units[m.name] = m.unit
    return out


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    """Warm-up of 4 calls with a recompile in it (4 → 8), then a new size (16) after warm-up, in a
    tagged request; then steady calls."""
    pc = pytest.importorskip("prometheus_client", reason="prometheus_client (the watch extra) is not installed")
    otel = pytest.importorskip(
        "opentelemetry.sdk.metrics", reason="opentelemetry-sdk (the watch extra) is not installed"
    )
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    import seamscope
    from seamscope.errors import RecompileAfterWarmup

    torch._dynamo.reset()
    from torch._dynamo.utils import counters, get_compilation_metrics

    counters.clear()
    torch._dynamo.utils.clear_compilation_metrics()
    events = tmp_path_factory.mktemp("watch") / "events.jsonl"
    registry = pc.CollectorRegistry()
    reader = InMemoryMetricReader()
    provider = otel.MeterProvider(metric_readers=[reader])
    raised: list[tuple[int, BaseException]] = []
    results = []
    with seamscope.watch(warmup=4, events=events, fail_after_warmup="raise", prometheus_registry=registry,
                         otel_meter_provider=provider, sync_every=0) as w:
        g = torch.compile(model, backend="eager", dynamic=False)
        sizes = [4, 8, 4, 8, 16, 16, 4, 8]
        for i, n in enumerate(sizes):
            try:
                with seamscope.watch.tag(request_id=f"req-{i}"):
                    results.append(g(torch.ones(n)))
            except RecompileAfterWarmup as e:
                raised.append((i, e))
        w.watcher.sync()
    metrics = get_compilation_metrics()
    return {"w": w, "raised": raised, "events": events, "registry": registry, "reader": reader,
            "metrics": metrics, "graphs": counters["stats"]["unique_graphs"], "frames": dict(counters["frames"]),
            "results": results}


def test_fail_after_warmup_raises_from_the_first_recompile_after_warmup_with_its_cause(watched) -> None:
    from seamscope.errors import RecompileAfterWarmup

    raised = watched["raised"]
    # the warm-up recompile (call 1, size 8) raised nothing; call 4 (size 16) did, once
    assert [i for i, _ in raised] == [4]
    e = raised[0][1]
    assert isinstance(e, RecompileAfterWarmup) and e.exit_code == 1
    assert e.cause == "size" and "size mismatch" in (e.failed_guard or "")
    assert e.event.kind == "recompile" and e.event.call_index == 4
    assert e.event.context == {"request_id": "req-4"}
    assert "x dim 0" in str(e) and "16" in str(e)
    assert len(watched["results"]) == len([4, 8, 4, 8, 16, 16, 4, 8]) - 1  # only call 4 lost its result


def test_events_after_warmup_only_match_pytorchs_compilation_metrics(watched) -> None:
    w = watched["w"]
    after = [m for m in watched["metrics"] if int(str(m.compile_id).split("/")[1].split("_")[0]) > 0]
    ids_after = sorted(str(m.compile_id) for m in after)
    # PyTorch recompiled each frame twice (8 at call 1, 16 at call 4); only call 4's are events
    events = [json.loads(line) for line in watched["events"].read_text().splitlines()]
    assert [e["kind"] for e in events] == ["recompile"] * len(events)
    assert {e["call_index"] for e in events} == {4}
    assert len(events) * 2 == len(ids_after)
    assert {e["compile_id"] for e in events} <= set(ids_after)
    assert all(e["cause"] == "size" and e["context"] == {"request_id": "req-4"} for e in events)
    assert all(e["compile_ns"] and e["compile_ns"] > 0 for e in events)
    assert [e.compile_id for e in w.events] == [e["compile_id"] for e in events]


def test_prometheus_counts_match_pytorch_and_the_ledger(watched) -> None:
    reg = watched["registry"]
    w = watched["w"]
    ledger = w.session.ledger
    n_recompiles = sum(1 for m in watched["metrics"] if "/0" not in str(m.compile_id))
    assert _prom_value(reg, "seamscope_recompiles_total") == n_recompiles == 4
    assert _prom_value(reg, "seamscope_recompiles_total", stage="serving", cause="size") == 2
    assert _prom_value(reg, "seamscope_compiles_total") == len(watched["metrics"]) == watched["frames"]["ok"]
    assert _prom_value(reg, "seamscope_fallbacks_total") == watched["frames"]["total"] - watched["frames"]["ok"] == 0
    assert _prom_value(reg, "seamscope_graphs") == watched["graphs"]
    assert _prom_value(reg, "seamscope_calls_total") == len(ledger.calls) == 8
    steady = sum(1 for c in ledger.calls if c.phase == "steady")
    assert _prom_value(reg, "seamscope_calls_total", phase="steady") == steady
    assert _prom_value(reg, "seamscope_steady_call_seconds_count") == steady
    assert _prom_value(reg, "seamscope_break_crossings_total") == 8  # one break, crossed once per call
    assert _prom_value(reg, "seamscope_watch_events_total", kind="recompile") == 2
    frames = {s.labels["frame"] for m in reg.collect() for s in m.samples if s.name == "seamscope_recompiles_total"}
    assert frames == {"tests.test_watch.model"}, frames  # module and qualified name: no line in the label
    # every series known before serving exists from warm-up's end, at 0 until its first event
    zero = {(s.name, tuple(sorted(s.labels.items()))): s.value for m in reg.collect() for s in m.samples}
    for kind, cause in (("fallback", "recompile_limit"), ("recompile", "value"), ("recompile", "dtype_device")):
        key = ("seamscope_watch_events_total", (("cause", cause), ("frame", "tests.test_watch.model"), ("kind", kind)))
        assert zero.get(key) == 0, sorted(k for k in zero if k[0] == "seamscope_watch_events_total")
    assert zero[("seamscope_calls_total", (("phase", "fallback"),))] == 0
    info = [s.labels for m in reg.collect() for s in m.samples if s.name == "seamscope_frame_info"]
    assert {"frame": "tests.test_watch.model", "file": "tests/test_watch.py", "line": str(model.__code__.co_firstlineno)
            } in info, info


def test_opentelemetry_in_memory_reader_sees_the_same_counts(watched) -> None:
    units: dict[str, str] = {}
    points = _otel_points(watched["reader"], units)
    reg = watched["registry"]
    assert units["seamscope.calls"] == "{call}" and units["seamscope.compile.time"] == "s", units
    assert sum(p.value for p in points["seamscope.compile.time"]) == pytest.approx(
        _prom_value(reg, "seamscope_compile_seconds_sum"))

    def total(name: str, **attrs: str) -> float:
        return sum(p.value for p in points.get(name, []) if all(p.attributes.get(k) == v for k, v in attrs.items()))

    for name in ("calls", "compiles", "recompiles", "fallbacks", "break_crossings", "watch_events"):
        assert total(f"seamscope.{name}") == _prom_value(reg, f"seamscope_{name}_total"), name
    assert total("seamscope.recompiles", stage="serving", cause="size") == 2
    assert total("seamscope.graphs") == watched["graphs"]


def test_warmup_parses_calls_and_seconds() -> None:
    from seamscope.capture.watch import parse_warmup
    from seamscope.errors import UnusableInput

    assert parse_warmup(100) == (100, None) and parse_warmup("100") == (100, None)
    assert (
        parse_warmup("30s") == (None, 30.0) and parse_warmup("2m") == (None, 120.0) and parse_warmup(1.5) == (None, 1.5)
    )
    for bad in ("-1", "abc", "1.5", True):
        with pytest.raises(UnusableInput):
            parse_warmup(bad)


def test_label_cap_counts_the_rest_as_other() -> None:
    from seamscope.capture.watch import LabelCap

    cap = LabelCap(2)
    assert [cap(x) for x in ("a", "b", "c", "a", "d")] == ["a", "b", "other", "a", "other"]


def test_steady_call_histogram_counts_every_steady_call_summed_in_c_or_not() -> None:
    """With no call kept in detail after the first, C sums the steady calls: its histogram and the
    builder's (the others) together count each steady call once, with the ledger's wall time."""
    pc = pytest.importorskip("prometheus_client", reason="prometheus_client (the watch extra) is not installed")
    import seamscope

    torch._dynamo.reset()
    registry = pc.CollectorRegistry()
    with seamscope.watch(warmup=0, prometheus_registry=registry, sync_every=0, first_calls=1, call_cap=4) as w:
        g = torch.compile(model, backend="eager")
        for _ in range(60):
            g(torch.ones(4))
        lane = w.session._lane
        in_c = sum(lane.wall_histogram()[0]) if lane is not None else 0
        w.watcher.sync()
    steady = next(p for p in w.session.ledger.totals.phases if p.phase == "steady")
    assert steady.calls == 59
    assert _prom_value(registry, "seamscope_steady_call_seconds_count") == steady.calls
    assert _prom_value(registry, "seamscope_steady_call_seconds_sum") == pytest.approx(steady.wall_ns / 1e9, rel=1e-9)
    if w.session.native is not None:
        assert 0 < in_c < steady.calls  # C summed most; the calls kept in detail went to the builder


def test_the_receipt_of_a_watched_run_lists_the_events_after_warmup(watched) -> None:
    from seamscope.analyze.watch_view import watch_timeline
    from seamscope.render.html import HtmlRenderer
    from seamscope.render.markdown import MarkdownRenderer
    from seamscope.render.terminal import TerminalRenderer

    w = watched["w"]
    receipt = w.session.receipt()
    timeline = watch_timeline(receipt)
    assert timeline is not None and timeline.warmup == "the first 4 calls"
    assert [(r.kind, r.compile_id, r.call_index) for r in timeline.rows] == [
        (e.kind, e.compile_id, e.call_index) for e in w.events]
    assert all(r.cause == "x dim 0: 8 → 16" or "→ 16" in r.cause for r in timeline.rows), timeline.rows
    text = TerminalRenderer().render(receipt)
    assert "after warm-up (the first 4 calls): 2 events" in text
    assert "**After warm-up** (the first 4 calls): 2 event(s)" in MarkdownRenderer().render(receipt)
    html = HtmlRenderer().render(receipt)
    assert 'id="after-warmup"' in html and all(f"<code>{e.compile_id}</code>" in html for e in w.events)


def test_an_unwatched_receipt_has_no_watch_timeline() -> None:
    from fakes import fake_receipt

    from seamscope.analyze.watch_view import watch_timeline

    assert watch_timeline(fake_receipt()) is None


def plain(x):
    return x.cos() * 3


def test_a_fallback_after_warmup_is_logged_at_error_with_fail_after_warmup_log(caplog) -> None:
    """The recompile limit (1 here) after warm-up: a ``fallback`` event, logged at ERROR, nothing
    raised; PyTorch's counters say the same (one frame more looked at than compiled)."""
    import logging

    import seamscope

    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    with torch._dynamo.config.patch(recompile_limit=1), caplog.at_level(logging.WARNING, logger="seamscope"), \
            seamscope.watch(warmup=1, fail_after_warmup="log", sync_every=0) as w:
        g = torch.compile(plain, backend="eager", dynamic=False)
        g(torch.ones(4))
        g(torch.ones(8))  # over the limit: runs eagerly
        g(torch.ones(8))
    assert counters["frames"]["total"] - counters["frames"]["ok"] == 1
    assert [(e.kind, e.cause, e.call_index) for e in w.events] == [("fallback", "recompile_limit", 1)]
    errors = [r for r in caplog.records if r.name == "seamscope" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "fallback after warm-up in call 1" in errors[0].getMessage()
    assert errors[0].seamscope_event["kind"] == "fallback"


@pytest.mark.parametrize("args, said", [
    (["--events", "e.jsonl"], "--events needs --watch"),
    (["--watch", "--warmup", "soon"], "--warmup soon"),
    (["--watch", "--metrics-port", "nine"], "--metrics-port nine"),
    (["--watch", "--nproc", "2"], "--nproc does not take --watch"),
])
def test_run_refuses_bad_watch_options_before_the_script_runs(tmp_path, args, said) -> None:
    from fakes import seamscope_here

    script = tmp_path / "s.py"
    script.write_text("open('ran', 'w').write('yes')\n")
    got = seamscope_here(["run", *args, "--out", str(tmp_path / "out"), str(script)], tmp_path)
    assert got.returncode == 2, got
    assert said in got.stderr, got.stderr
    assert not (tmp_path / "ran").exists()


SERVER = '''
import json, sys
import torch
from seamscope.errors import RecompileAfterWarmup

def f(x):
    return x.sin() + 1

g = torch.compile(f, backend="eager", dynamic=False)
caught = []
for i, n in enumerate([4, 8, 4, 4, 16, 16]):  # warm-up: calls 0-2 (a recompile at 1); 16 at call 4
    try:
        g(torch.ones(n))
    except RecompileAfterWarmup as e:
        caught.append({"call": i, "cause": e.cause, "guard": e.failed_guard, "kind": e.event.kind})
json.dump(caught, open(sys.argv[1], "w"))
'''


def test_run_fail_after_warmup_raises_in_the_script_only_after_warmup(tmp_path) -> None:
    from fakes import seamscope_here

    (tmp_path / "serve.py").write_text(SERVER)
    got = seamscope_here(["run", "--watch", "--warmup", "3", "--fail-after-warmup", "--quiet", "--out",
                          str(tmp_path / "out"), str(tmp_path / "serve.py"), "--", str(tmp_path / "caught.json")],
                         tmp_path)
    assert got.returncode == 0, got.stderr
    caught = json.loads((tmp_path / "caught.json").read_text())
    assert len(caught) == 1 and caught[0]["call"] == 4 and caught[0]["kind"] == "recompile", caught
    assert caught[0]["cause"] == "size" and "size mismatch" in caught[0]["guard"]
    receipt = json.loads((tmp_path / "out" / "receipt.json").read_text())
    assert "watch: warm-up = the first 3 calls" in receipt["decision"]["warmup_policy"]


def test_run_with_a_metrics_port_in_use_exits_2_before_the_script_runs(tmp_path) -> None:
    import socket

    from fakes import seamscope_here

    pytest.importorskip("prometheus_client", reason="prometheus_client (the watch extra) is not installed")
    script = tmp_path / "s.py"
    script.write_text("open('ran', 'w').write('yes')\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = seamscope_here(["run", "--watch", "--metrics-port", str(port), "--out", str(tmp_path / "out"),
                              str(script)], tmp_path)
    assert got.returncode == 2 and f"127.0.0.1:{port}" in got.stderr, got
    assert not (tmp_path / "ran").exists()


def test_with_no_warmup_each_first_compilation_and_break_site_is_an_event() -> None:
    import seamscope

    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    with seamscope.watch(warmup=0, sync_every=0) as w:
        g = torch.compile(model, backend="eager")
        g(torch.ones(4))
        g(torch.ones(4))
    kinds = sorted(e.kind for e in w.events)
    assert kinds == ["break", "graph", "graph"], w.events
    assert counters["stats"]["unique_graphs"] == 2
    brk = next(e for e in w.events if e.kind == "break")
    site = w.session.ledger.break_sites[0]
    assert brk.site_id == site.site_id and brk.cause == site.gb_type and brk.call_index == 0
    assert all(e.compile_ns for e in w.events if e.kind == "graph")


def test_a_tag_with_control_characters_is_shown_not_emitted_in_the_log_line(caplog, tmp_path) -> None:
    import logging
    import threading

    from seamscope.capture.watch import Watcher
    from seamscope.capture.watch_text import open_events
    from seamscope.model.watch import WatchEvent

    w = Watcher(0)
    w._lock = threading.Lock()
    w._fd = open_events(str(tmp_path / "e.jsonl"))
    forged = "r\x1b[31m1\nseamscope: recompile after warm-up in call 9: forged"
    ev = WatchEvent(kind="recompile", frame="f (a.py:1)", file="a.py", line=1, cause="size", detail="x dim 0: 1 → 2",
                    context={"request_id": forged, "body": "x" * 1_000_000})
    with caplog.at_level(logging.WARNING, logger="seamscope"):
        w._emit(ev)
    w._close_outputs()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "seamscope"]
    assert "\x1b" not in line and "request_id=r" in line
    assert "\n" not in line and "\\nseamscope: recompile" in line  # the newline shown, not a forged line
    assert len(line) <= 2000 + 20 and "…(+999700 chars)" in line  # cut as docs/safety.md says
    assert json.loads((tmp_path / "e.jsonl").read_text())["context"] == {"request_id": forged, "body": "x" * 1_000_000}


@pytest.mark.parametrize("missing, asked", [
    ("prometheus_client", {"metrics_port": 9464}),
    ("opentelemetry", {"otel_meter_provider": True}),
])
def test_metrics_without_the_watch_extra_say_what_to_install(monkeypatch, missing, asked) -> None:
    import sys

    import seamscope
    from seamscope.errors import UnusableInput

    for name in [m for m in sys.modules if m == missing or m.startswith(missing + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    with pytest.raises(UnusableInput, match=r"pip install 'seamscope\[watch\]'"):
        seamscope.watch(**asked)


def _held(x):
    return x


@pytest.mark.parametrize("compiled", ["inside", "before"])
def test_fail_after_warmup_raises_only_in_the_thread_whose_call_compiled(compiled) -> None:
    """Thread A's steady call is open (held in an eager function) while thread B's call of another
    function recompiles (a new size, after warm-up): B's call raises once it returned, A's returns;
    then both go on, and nothing is left to raise in a later call. The functions compiled inside
    the watch (its ``torch.compile``) or before it began (its hook on their compile contexts)."""
    import threading

    import seamscope
    from seamscope.errors import RecompileAfterWarmup

    torch._dynamo.reset()
    inside, done, holding = threading.Event(), threading.Event(), []

    @torch._dynamo.disable
    def hold(x):
        if holding:
            inside.set()
            done.wait(60)
        return x

    def steady(x):
        return hold(x.sin()) + 1

    def other(x):
        return x.cos() * 2

    got: dict[str, list[object]] = {"a": [], "b": []}

    def call(name: str, fn, n: int) -> None:
        try:
            got[name].append(tuple(fn(torch.ones(n)).shape))
        except RecompileAfterWarmup as e:
            got[name].append(e)

    def both() -> tuple:
        return torch.compile(steady, backend="eager", dynamic=False), torch.compile(other, backend="eager",
                                                                                   dynamic=False)

    a, b = both() if compiled == "before" else (None, None)
    with seamscope.watch(warmup=4, fail_after_warmup="raise", sync_every=0) as w:
        if compiled == "inside":
            a, b = both()
        for fn in (a, a, b, b):  # warm-up
            fn(torch.ones(4))
        holding.append(True)

        def run_b() -> None:
            inside.wait(60)
            try:
                call("b", b, 8)  # recompiles on this thread while A's call is open
            finally:
                done.set()

        threads = [threading.Thread(target=call, args=("a", a, 4)), threading.Thread(target=run_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        holding.clear()
        call("a", a, 4)
        call("b", b, 8)
    assert got["a"] == [(4,), (4,)], got
    assert isinstance(got["b"][0], RecompileAfterWarmup) and got["b"][1:] == [(8,)], got
    assert got["b"][0].event.kind == "recompile" and got["b"][0].cause == "size"  # type: ignore[union-attr]
    assert [e.kind for e in w.events] == ["recompile"]


def test_a_tag_keeps_its_values_and_a_failing_str_becomes_a_placeholder() -> None:
    from seamscope.capture.watch_text import _CONTEXT, current_tags, tag

    class Bad:
        def __str__(self) -> str:
            raise RuntimeError("no")

    value, bad = object(), Bad()
    with tag(request_id=value, user=bad, n=3):  # outside a watch: nothing made into text
        assert _CONTEXT.get() == {"request_id": value, "user": bad, "n": 3}
        tags = current_tags()
    assert tags == {"request_id": str(value), "user": "<Bad: str() failed>", "n": "3"}
    assert _CONTEXT.get() is None


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "s.py"
    path.write_text("import torch\n\ndef f(x):\n    return x.sin() + 1\n\n"
                    "g = torch.compile(f, backend='eager', dynamic=False)\n"
                    "for n in (4, 8, 16):\n    g(torch.ones(n))\nopen('ran', 'w').write('yes')\n")
    return path


@pytest.fixture
def full_tmpfs(tmp_path):
    """A file on a small tmpfs filled up (needs root and mount)."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("a full file system is a tmpfs mount here: needs root")
    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        (mnt / "events.jsonl").write_text("")
        with open(mnt / "fill", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 4096)
            except OSError:
                pass
        yield mnt / "events.jsonl"
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.parametrize("where", ["/dev/full", "tmpfs"])
def test_an_events_file_that_fails_is_one_warning_and_the_run_completes(tmp_path, fresh_server, script, where,
                                                                        request) -> None:
    """Three events (a new frame, two recompiles), none written: one warning, exit 0, the report
    written, the receipt says what was not written; the port bound for ``--metrics-port 0`` is
    printed and recorded."""
    import re

    from fakes import seamscope_forked

    events = "/dev/full" if where == "/dev/full" else str(request.getfixturevalue("full_tmpfs"))
    port = ["--metrics-port", "0"] if _has("prometheus_client") else []
    out = tmp_path / "out"
    got = seamscope_forked(fresh_server, ["run", "--watch", "--warmup", "0", "--events", events, *port, "--out",
                                          str(out), str(script)], tmp_path)
    assert got.returncode == 0, got.stderr
    said = [line for line in got.stderr.splitlines() if "cannot write" in line]
    assert len(said) == 1 and "No space left on device" in said[0], got.stderr
    assert (tmp_path / "ran").exists() and (out / "index.html").exists()
    receipt = json.loads((out / "receipt.json").read_text())
    assert receipt["ledger"]["run"]["status"]["state"] == "completed"
    assert any("3 of 3 events not written" in w for w in receipt["ledger"]["run"]["warnings"]), receipt["ledger"]["run"]
    if port:
        m = re.search(r"seamscope: watch: metrics at (http://127\.0\.0\.1:(\d+)/metrics)", got.stderr)
        assert m and int(m.group(2)) > 0, got.stderr
        assert f"metrics at {m.group(1)}" in receipt["decision"]["warmup_policy"]


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_a_fifo_for_events_is_refused_in_one_line_before_the_script_starts(tmp_path, script) -> None:
    import os

    from fakes import seamscope_here

    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    got = seamscope_here(["run", "--watch", "--events", str(fifo), "--out", str(tmp_path / "out"), str(script)],
                         tmp_path)
    assert got.returncode == 2, got
    assert got.stderr.strip().count("\n") == 0 and f"--events {fifo}: a FIFO" in got.stderr, got.stderr
    assert not (tmp_path / "ran").exists()


def test_a_forked_childs_events_go_to_the_same_file_with_its_pid(tmp_path) -> None:
    import os

    import seamscope

    torch._dynamo.reset()
    events = tmp_path / "e.jsonl"
    with seamscope.watch(warmup=0, events=events, sync_every=0):
        g = torch.compile(plain, backend="eager", dynamic=False)
        g(torch.ones(4))
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            try:
                g(torch.ones(8))  # recompiles in the child
            finally:
                os._exit(0)
        os.waitpid(child, 0)
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert [(e["kind"], e["pid"]) for e in lines] == [("graph", os.getpid()), ("recompile", child)], lines
