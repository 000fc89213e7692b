"""The TORCH_TRACE reader's fast paths against the plain ones (no torch).

Finding the record lines a buffer at a time (``scan.record_scan``, C or Python) must give the
reader exactly what reading the file one line at a time gives (``scan.each_line``): the same
records, payloads, counts, problems and notes, on the project's real logs and on generated ones
with payloads, blank lines, junk, CRLF ends, a missing last newline and lines longer than a read.
The C scans must equal their Python versions byte for byte.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.ingest import scan
from seamscope.ingest.compile_events import IGNORED_EVENTS
from seamscope.ingest.torch_trace import ParseStats, import_torch_trace, iter_records

INPUTS = os.path.join(os.path.dirname(__file__), "inputs", "torch_trace")
REAL_LOGS = sorted(glob.glob(os.path.join(INPUTS, "*", "dedicated_log_torch_trace_*.log")))
SKIP = frozenset(k.encode() for k in IGNORED_EVENTS)
PREFIX = b"V1129 06:53:46.830000 5223 torch/_dynamo/x.py:1] "

needs_c = pytest.mark.skipif(scan.NATIVE is None, reason="seamscope._logscan not built (or SEAMSCOPE_PURE_PYTHON)")


def _read(path: str, lines) -> tuple[list, dict]:
    stats = ParseStats()
    recs = list(iter_records(path, stats, lines=lines))
    seen = {k: v for k, v in vars(stats).items()}
    return recs, seen


def _same_reading(path: str) -> None:
    fast, fast_stats = _read(path, scan.record_scan)
    slow, slow_stats = _read(path, scan.each_line)
    assert fast == slow
    assert fast_stats == slow_stats


def test_the_real_logs_are_read_the_same_both_ways():
    assert len(REAL_LOGS) >= 8
    for path in REAL_LOGS:
        _same_reading(path)


@pytest.mark.parametrize("path", REAL_LOGS[:3], ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_real_logs_with_crlf_and_without_a_last_newline_read_the_same(tmp_path: Path, path: str):
    data = Path(path).read_bytes()
    for i, variant in enumerate((data.replace(b"\n", b"\r\n"), data.rstrip(b"\n"), data[: len(data) // 2])):
        p = tmp_path / f"dedicated_log_torch_trace_{i}.log"
        p.write_bytes(variant)
        _same_reading(str(p))


def _record(key: str, payload: list[str] | None, md5_ok: bool = True) -> bytes:
    meta: dict = {key: {"name": "recompile_reasons"} if key == "artifact" else {}, "frame_id": 0,
                  "frame_compile_id": 1, "attempt": 0}
    if payload is not None:
        text = "\n".join(payload).encode()
        meta["has_payload"] = hashlib.md5(text if md5_ok else text + b"x").hexdigest()
    out = PREFIX + json.dumps(meta).encode() + b"\n"
    if payload is not None:
        out += b"".join(b"\t" + ln.encode() + b"\n" for ln in payload)
    return out


_line = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=12)
_piece = st.one_of(
    st.builds(_record, st.sampled_from(["artifact", "chromium_event", "describe_tensor", "dynamo_start",
                                        "compilation_metrics", "no_such_event", "str"]),
              st.one_of(st.none(), st.lists(_line, max_size=4)), st.booleans()),
    st.just(b"\n"),  # a blank line
    st.just(b"\t a stray payload line\n"),
    st.binary(max_size=30).map(lambda b: b.replace(b"\n", b" ") + b"\n"),
    st.just(PREFIX + b'{"chromium_event": {}, "has_payload": "00"}\n'),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_piece, max_size=25), st.sampled_from([b"", b"\r"]), st.integers(0, 3), st.sampled_from([7, 64, 1 << 20])
)
def test_generated_logs_read_the_same_both_ways(tmp_path_factory, pieces, cr, cut, chunk):
    data = b"".join(pieces)
    if cr:
        data = data.replace(b"\n", b"\r\n")
    if cut == 1:
        data = data.rstrip(b"\n")  # no last newline
    elif cut == 2 and data:
        data = data[: len(data) * 2 // 3]  # cut anywhere
    p = tmp_path_factory.mktemp("scan") / "dedicated_log_torch_trace_x.log"
    p.write_bytes(data)
    old = scan.CHUNK
    scan.CHUNK = chunk  # reads smaller than a line: the line source joins them
    try:
        _same_reading(str(p))
        assert import_torch_trace(str(p)).stats.sha256 == hashlib.sha256(data).hexdigest()
    finally:
        scan.CHUNK = old


def test_an_ignored_record_still_ends_the_payload_before_it(tmp_path: Path):
    """The C scan counts ignored records without handing them out, except the first after a
    record whose payload is read: a record of a skipped kind right after it ends that payload."""
    data = (_record("artifact", ["a", "b"]) + PREFIX + b'{"chromium_event": {}}\n'
            + b"\tnot the payload's\n" + PREFIX + b'{"describe_tensor": {}}\n')
    p = tmp_path / "dedicated_log_torch_trace_x.log"
    p.write_bytes(data)
    recs, stats = _read(str(p), scan.record_scan)
    assert [r[2] for r in recs] == ["a\nb"]
    assert stats["records"] == 3 and stats["events"] == 3 and stats["last_record"] == 6
    assert not stats["skipped"]
    _same_reading(str(p))


_buffers = st.lists(st.one_of(_piece, st.sampled_from([b"\t\n", b"\n\n", b"\t\t\tx\n"])), max_size=20).map(b"".join)


@needs_c
@settings(max_examples=examples(300), deadline=None)
@given(_buffers, st.booleans())
def test_record_lines_in_c_equal_python(buf, skip):
    end = buf.rfind(b"\n") + 1
    kinds = SKIP if skip else frozenset()
    assert scan.NATIVE.record_lines(buf, end, kinds) == scan.record_lines_py(buf, end, kinds)


_digits = st.lists(
    st.one_of(st.integers(0, 45).map(lambda n: b"7" * n), st.sampled_from([b"[", b"{", b"a", b" ", b"-", b"."])),
    max_size=30,
).map(b"".join)


@needs_c
@settings(max_examples=examples(500), deadline=None)
@given(_digits, st.integers(0, 5))
def test_limits_prefilter_in_c_equals_python(line, start):
    assert scan.NATIVE.limits_prefilter(line, start) == scan.limits_prefilter_py(line, start)
    runs = [len(m) for m in re.findall(rb"\d+", line[start:])]
    assert scan.limits_prefilter_py(line, start)[0] == any(n >= 20 for n in runs)


@needs_c
def test_the_c_prefilter_finds_a_digit_run_at_every_offset():
    for lead in range(45):
        for n in (19, 20, 21, 40):
            line = b"x" * lead + b"1" * n + b"]"
            assert scan.NATIVE.limits_prefilter(line, 0) == (n >= 20, 0), (lead, n)


_blocks = st.lists(st.binary(max_size=12).map(lambda b: b.translate(bytes.maketrans(b"\x00\x01\x02", b"\t\n\r"))),
                   min_size=1, max_size=5)


@needs_c
@settings(max_examples=examples(500), deadline=None)
@given(_blocks)
def test_payload_text_in_c_equals_python(blocks):
    """A payload's blocks joined, their tabs dropped and lines counted in one pass: the same bytes
    and count as the join, replace and count in Python, tabs and newlines anywhere (a block
    boundary is a newline: "\\n\\t" across it too)."""
    assert scan.NATIVE.payload_text(blocks) == scan.payload_text_py(blocks)


@needs_c
def test_payload_text_in_c_on_payloads_as_read():
    cases = [[b"\tone"], [b"\ta\n\tb", b"\tc"], [b"\t\t[\n\t\t\"x\",", b"\t\t\"y\"\n\t]"], [b"\t"], [b"\n\t\n\t"],
             [b"\tx\r\n\ty\r"], [b"", b"", b"\t"]]
    for blocks in cases:
        assert scan.NATIVE.payload_text(blocks) == scan.payload_text_py(blocks), blocks
    with pytest.raises(TypeError):
        scan.NATIVE.payload_text([b"\tx", "\ty"])
    sink = scan.PayloadSink()
    sink.add(b"\t[\n\t\"a\",")
    sink.add(b"\t\"b\"\n\t]")
    assert sink.take() == (b'[\n"a",\n"b"\n]', 4) and sink.take() == (b"", 0)


def _reasons_plain(payload: str | None, cwd: str | None) -> list[str]:
    """``parse_recompile_reasons`` without its memo of decoded strings: the reference."""
    from seamscope.model.normalize import normalize_text

    if not payload:
        return []
    text = payload.strip()
    if text.startswith("["):
        try:
            val = json.loads(text)
            reasons = list(map(str, val)) if isinstance(val, list) else [str(val)]
        except (ValueError, RecursionError):
            reasons = [text]
    else:
        reasons = [text]
    return [normalize_text(r, cwd) for r in map(str.strip, reasons) if r]


_reason = st.one_of(
    st.sampled_from(["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3", "  padded  ", "", " ",
                     "at 0x7f3a2b1c object at 0x55d0 /work/p/x.py:3", "\u2028é"]),
    st.text(max_size=6), st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False),
    st.lists(st.integers(0, 2), max_size=2), st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2)),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.lists(_reason, max_size=8), min_size=1, max_size=4), st.sampled_from([None, "/work/p"]),
       st.sampled_from([None, 0, 1]))
def test_recompile_reasons_read_once_equal_the_plain_reading(payloads, cwd, indent):
    """Each distinct decoded reason is stripped and normalised once and looked up after: the same
    list as the plain path, whatever the list holds (strings, blanks, numbers, lists, objects),
    on a payload seen first or again."""
    from seamscope.ingest.compile_events import parse_recompile_reasons

    for val in [*payloads, *payloads]:
        payload = json.dumps(val, indent=indent)
        assert parse_recompile_reasons(payload, cwd) == _reasons_plain(payload, cwd), payload
    for payload in ("0/0: plain text", "[not json", "[1, 2", "", "[]", '["only"]', '"x"'):
        assert parse_recompile_reasons(payload, cwd) == _reasons_plain(payload, cwd), payload
    from seamscope.model import normalize

    assert normalize._STRIPPED[cwd]["only"] == "only"  # read once, kept for the repeats


def test_recompile_reasons_of_the_real_logs_equal_the_plain_reading():
    from seamscope.ingest.compile_events import parse_recompile_reasons

    seen = 0
    for path in REAL_LOGS:
        for _, meta, payload in iter_records(path, ParseStats()):
            art = meta.get("artifact")
            if isinstance(art, dict) and art.get("name") == "recompile_reasons":
                seen += 1
                for cwd in (None, os.path.dirname(path)):
                    assert parse_recompile_reasons(payload, cwd) == _reasons_plain(payload, cwd), path
    assert seen >= 5
