"""seamscope's own trace: round trip, bounds, schema and bad input (no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.errors import UnusableInput
from seamscope.ingest.seamscope_trace import import_seamscope_trace
from seamscope.model.canonical import pretty_bytes
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.trace import trace_json_schema
from seamscope.render.seamscope_trace import TraceRenderer, write_trace

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "trace.schema.json"


def ledger(calls: int, regions: int = 3):  # type: ignore[no-untyped-def]
    ids = [f"{i}/0" for i in range(regions)]
    breaks = {cid: f"site{i}" for i, cid in enumerate(ids[:-1])}
    first = [s for cid in ids for s in (FakeStep("compile", 900, cid), FakeStep("region", 50, cid),
                                        FakeStep("island", 7))]
    steady = [s for cid in ids for s in (FakeStep("region", 40, cid), FakeStep("island", 5),
                                         FakeStep("overhead", 1))]
    prog = FakeProgram(breaks=breaks, calls=[FakeCall(first, family="cold")]
                       + [FakeCall(steady, family=f"s{i % 3}") for i in range(calls - 1)])
    return play(prog).build()


def test_round_trip_gives_the_same_receipt_byte_for_byte(tmp_path):
    led = ledger(calls=10)
    path = write_trace(led, str(tmp_path / "t.seamscope-trace.jsonl"))
    imp = import_seamscope_trace(path)
    assert imp.stats.problem_count == 0
    assert imp.ledger == led
    assert pretty_bytes(make_receipt(imp.ledger)) == pretty_bytes(make_receipt(led))


def test_bounds_cut_calls_and_events_declared_and_totals_kept(tmp_path):
    led = ledger(calls=100, regions=8)  # 8 regions → ~30 events per call
    text = TraceRenderer().render_ledger(led)
    header = json.loads(text.splitlines()[0])
    assert header["bounds"] == {"max_calls": 64, "max_events_per_call": 16}
    assert header["cut"]["calls_written"] == 64 and len(header["cut"]["calls_omitted"]) == 36
    assert header["cut"]["calls_omitted"] == list(range(32, 68))  # first 32 and last 32 kept
    assert all(c["events_written"] == 16 and c["events_total"] > 16 for c in header["cut"]["calls_cut"])
    p = tmp_path / "t.jsonl"
    p.write_bytes(text)
    back = import_seamscope_trace(str(p)).ledger
    assert back.totals == led.totals and back.compilations == led.compilations
    assert len(back.calls) == 64 and all(len(c.events) <= 16 for c in back.calls)
    assert back.retention.retained == 64 and back.retention.dropped == 36
    assert any("bounds" in w for w in back.run.warnings)
    s0, s1 = make_receipt(led).summary, make_receipt(back).summary
    assert (s0.call_count, s0.compile_count, s0.calls_by_phase) == (s1.call_count, s1.compile_count, s1.calls_by_phase)
    # the cut ledger is a fixed point: exporting it again changes nothing
    assert TraceRenderer().render_ledger(back) == TraceRenderer().render_ledger(back) and \
        import_seamscope_trace(str(p)).ledger == back
    p.write_bytes(TraceRenderer().render_ledger(back))
    assert import_seamscope_trace(str(p)).ledger == back
    # parameters change both bounds
    small = json.loads(TraceRenderer(max_calls=5, max_events=2).render_ledger(led).splitlines()[0])
    assert small["cut"]["calls_written"] == 5 and small["bounds"]["max_events_per_call"] == 2


def test_schema_file_is_generated_and_validates_every_line():
    jsonschema = pytest.importorskip(
        "jsonschema", reason="jsonschema (a dev extra) is not installed: schema validation not checked"
    )
    schema = json.loads(SCHEMA.read_text())
    assert schema == json.loads(json.dumps(trace_json_schema())), (
        "run: python -m seamscope.model.trace > docs/trace.schema.json"
    )
    validator = jsonschema.Draft202012Validator(schema)
    for line in TraceRenderer(max_calls=4).render_ledger(ledger(calls=6, regions=6)).splitlines():
        validator.validate(json.loads(line))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"record": "call", "call": {"index": "x"}})


def test_bad_lines_are_skipped_with_their_line_number(tmp_path):
    lines = TraceRenderer(max_events=100).render_ledger(ledger(calls=6)).splitlines()
    call_at = next(i for i, ln in enumerate(lines) if ln.startswith(b'{"call"'))
    lines[call_at] = lines[call_at].replace(b'"wall_ns":', b'"wall_ns":"oops","x":')
    lines.insert(call_at + 1, b"\xff\xfe not json")
    p = tmp_path / "bad.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    imp = import_seamscope_trace(str(p))
    assert [(i.line, i.kind) for i in imp.issues[:2]] == [(call_at + 1, "schema"), (call_at + 2, "schema")]
    assert imp.stats.skipped == {"schema": 2, "count": 1}
    assert len(imp.ledger.calls) == 5 and imp.ledger.retention.retained == 5
    assert imp.ledger.totals.calls == 6  # totals still count everything
    with pytest.raises(SystemExit) as e:
        main(["import", str(p), "--out", str(tmp_path / "o")])
    assert e.value.code == 0
    with pytest.raises(SystemExit) as e:
        main(["import", str(p), "--out", str(tmp_path / "o"), "--strict"])
    assert e.value.code == 2


def test_over_bounds_and_cut_file_are_reported(tmp_path):
    text = TraceRenderer(max_events=100).render_ledger(ledger(calls=6))
    header = json.loads(text.splitlines()[0])
    header["bounds"] = {"max_calls": 2, "max_events_per_call": 3}
    lines = [json.dumps(header).encode(), *text.splitlines()[1:]]
    p = tmp_path / "over.jsonl"
    p.write_bytes(b"\n".join(lines[:-1]) + b"\n" + lines[-1][:10])  # the last line is cut
    imp = import_seamscope_trace(str(p))
    assert imp.stats.skipped["bounds"] == 1 + 5  # too many calls; 5 complete calls over 3 events
    assert imp.stats.skipped["truncated"] == 1 and imp.stats.skipped["count"] == 1
    assert len(imp.ledger.calls) == 5


def test_not_a_trace_or_unknown_version_is_unusable(tmp_path):
    p = tmp_path / "t.jsonl"
    text = TraceRenderer().render_ledger(ledger(calls=2))
    p.write_bytes(text.replace(b'"trace_version":1', b'"trace_version":99', 1))
    with pytest.raises(UnusableInput, match="trace version 99"):
        import_seamscope_trace(str(p))
    p.write_bytes(b"")
    with pytest.raises(UnusableInput, match="empty"):
        import_seamscope_trace(str(p))
    with pytest.raises(SystemExit) as e:
        main(["import", str(tmp_path / "missing.jsonl")])
    assert e.value.code == 2
