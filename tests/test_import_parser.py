"""The TORCH_TRACE line parser on arbitrary and hand-made input (no torch)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.ingest.torch_trace import ParseStats, import_torch_trace, iter_records

PREFIX = b"V1129 06:53:46.830000 5223 torch/_dynamo/x.py:1] "


def record(meta: dict, payload: str | None = None) -> bytes:
    if payload is not None:
        meta = {**meta, "has_payload": hashlib.md5(payload.encode()).hexdigest()}
    out = PREFIX + json.dumps(meta).encode() + b"\n"
    if payload is not None:
        out += b"".join(b"\t" + ln.encode() + b"\n" for ln in payload.split("\n"))
    return out


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_crash(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("h") / "dedicated_log_torch_trace_x.log"
    p.write_bytes(data)
    stats = ParseStats()
    recs = list(iter_records(str(p), stats))
    assert stats.bytes == len(data)
    assert all(isinstance(m, dict) for _, m, _ in recs)
    imp = import_torch_trace(str(p))
    if not data.startswith(b"\x1f\x8b"):  # a gzip'd log is hashed as the log it decompresses to
        assert imp.ledger.run.input_trace_sha256 == hashlib.sha256(data).hexdigest()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=80), st.just(b"\t payload")), max_size=20))
def test_good_records_survive_any_garbage_between_them(tmp_path_factory, junk):
    good = record({"str": ["/a/b.py", 0]}) + record(
        {"artifact": {"name": "recompile_reasons", "encoding": "json"}, "frame_id": 0,
         "frame_compile_id": 1, "attempt": 0}, "x == 1")
    noise = b"\n".join(j.replace(b"\n", b" ") for j in junk if not j.startswith(b"\t"))
    p = tmp_path_factory.mktemp("g") / "dedicated_log_torch_trace_x.log"
    p.write_bytes(noise + b"\n" + good if noise else good)
    recs = list(iter_records(str(p), ParseStats()))
    assert recs[-1][1]["artifact"]["name"] == "recompile_reasons" and recs[-1][2] == "x == 1"
    assert recs[-2][1] == {"str": ["/a/b.py", 0]}


def test_payloads_are_read_only_when_needed(tmp_path: Path):
    data = (
        record({"artifact": {"name": "fx_graph_cache_hit", "encoding": "json"}, "frame_id": 0,
                "frame_compile_id": 0, "attempt": 0}, '{"key": "components"}')
        + record({"chromium_event": {}}, "big")
        + record({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"},
                  "frame_id": 0, "frame_compile_id": 0, "attempt": 0}, "Graph break in user code at /a.py:3\nx")
    )
    p = tmp_path / "dedicated_log_torch_trace_rank_3_x.log"
    p.write_bytes(data)
    stats = ParseStats()
    recs = list(iter_records(str(p), stats))
    assert [r[2] for r in recs] == [None, "Graph break in user code at /a.py:3\nx"]
    assert stats.payloads_read == 1 and stats.decoded == 2 and stats.records == 3
    assert import_torch_trace(str(p)).ledger.run.rank == 3
