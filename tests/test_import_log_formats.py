"""Import of ``TORCH_TRACE`` logs of every PyTorch log generation, each compared with tlparse.

GIVEN a real log made with torch 2.13 (``tests/inputs/torch_trace/*``, made by
``tests/inputs/make_torch_traces.py``), or a small variant of one edited into an older layout
(null ``compiled_autograd_id`` on every record, cumulative-only timing fields, a metrics id that
differs from its record's, CRLF, no final newline, renamed rank files), WHEN seamscope imports it,
THEN it counts the compilations tlparse lists on the same file (compile ids, attempts folded;
for ids reused after a reset, the number of compilation_metrics tlparse files under each), and
every disagreement or decision is said: a warning naming the line, or a note.
No torch needed: tlparse is a Rust binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.ingest.torch_trace import TraceImport, find_logs, import_torch_trace
from seamscope.model.ledger import compile_frame_index

INPUTS = Path(__file__).parent / "inputs" / "torch_trace"
TLPARSE = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))


def real_log(name: str) -> Path:
    (log,) = find_logs(str(INPUTS / name))
    return Path(log)


def tlparse_compilations(log: Path, out: Path) -> Counter[str]:
    """Compile id (attempt folded) → compilation_metrics records tlparse filed under it."""
    subprocess.run([TLPARSE, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                   check=True, capture_output=True, timeout=120)
    directory = json.loads((out / "compile_directory.json").read_text())
    got: Counter[str] = Counter()
    for key, entry in directory.items():
        n = sum(1 for a in entry["artifacts"] if a["name"].startswith("compilation_metrics"))
        if n:
            got[key.strip("[]").split("_", 1)[0]] += n
    return got


def seamscope_compilations(imp: TraceImport) -> Counter[str]:
    """The same, from the ledger: a later generation's ``x/y@g`` counts under ``x/y``."""
    return Counter(c.compile_id.split("@", 1)[0] for c in imp.ledger.compilations)


def variant(src: Path, dst: Path, edit: Callable[[list[bytes]], list[bytes]]) -> Path:
    """A copy of a log with its lines (newline kept) edited."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(b"".join(edit(src.read_bytes().splitlines(keepends=True))))
    return dst


def edit_metrics(fn: Callable[[dict], None]) -> Callable[[list[bytes]], list[bytes]]:
    """Edit the payload of every ``compilation_metrics`` record (json.dumps, as PyTorch writes)."""

    def edit(lines: list[bytes]) -> list[bytes]:
        out = []
        for ln in lines:
            if b'] {"compilation_metrics": ' in ln:
                j = ln.index(b"] {") + 2
                rec = json.loads(ln[j:])
                fn(rec["compilation_metrics"])
                ln = ln[:j] + json.dumps(rec).encode() + b"\n"
            out.append(ln)
        return out

    return edit


def cli(*args: str) -> int:
    with pytest.raises(SystemExit) as e:
        main(list(args))
    return int(e.value.code or 0)


def matches_tlparse(log: Path, tmp_path: Path, **kw) -> TraceImport:  # type: ignore[no-untyped-def]
    imp = import_torch_trace(str(log), **kw)
    assert seamscope_compilations(imp) == tlparse_compilations(log, tmp_path / "tl")
    return imp


# --- the real torch 2.13 logs ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["breaks", "limit", "autograd", "reset", "failure", "breaks-torch-2.14.1",
                                  "autograd-torch-2.14.1", "breaks-torch-2.15.0", "autograd-torch-2.15.0"])
def test_real_logs_match_tlparse_and_say_their_format(name, tmp_path):
    imp = matches_tlparse(real_log(name), tmp_path)
    assert imp.stats.problem_count == 0, imp.issues
    notes = {n.kind: n.text for n in imp.stats.notes}
    assert "log format duration_us" in notes["log_format"] and "log_format_version 3" in notes["log_format"]
    assert any("note: log format duration_us" in w for w in imp.ledger.run.warnings)
    s = make_receipt(imp.ledger).summary
    assert s.compile_count + s.fallback_count == len(imp.ledger.compilations)


def test_compiled_autograd_compilations_are_counted_with_their_id(tmp_path):
    imp = matches_tlparse(real_log("autograd"), tmp_path)
    ids = [c.compile_id for c in imp.ledger.compilations]
    assert ids == ["0/0", "!0/1/0", "!1/2/0"]
    assert all(c.graph_count == 1 and c.status == "ok" and c.duration_ns for c in imp.ledger.compilations)
    assert [compile_frame_index(i) for i in ids] == [(0, 0), (1, 0), (2, 0)]
    assert "2 compilation(s) of compiled autograd" in {n.kind: n.text for n in imp.stats.notes}["compiled_autograd"]
    assert make_receipt(imp.ledger).summary.compile_count == 3


def test_ids_reused_after_reset_start_a_new_generation(tmp_path):
    imp = matches_tlparse(real_log("reset"), tmp_path)
    ids = [c.compile_id for c in imp.ledger.compilations]
    assert ids == ["0/0", "1/0", "0/0@2", "1/0@2", "0/0@3", "1/0@3"]
    assert len({compile_frame_index(i)[0] for i in ids}) == 6  # six frames, no recompiles
    s = make_receipt(imp.ledger).summary
    assert (s.compile_count, s.recompile_count, s.graph_count) == (6, 0, 6)
    assert "3 generations" in {n.kind: n.text for n in imp.stats.notes}["generations"]


def test_a_failed_backend_keeps_its_cause(tmp_path):
    imp = matches_tlparse(real_log("failure"), tmp_path)
    (fb,) = make_receipt(imp.ledger).summary.fallbacks
    assert fb.reason == "backend='broken_backend' raised: RuntimeError: boom: this backend always fails"


# --- older layouts, edited from the real logs ----------------------------------------------------


def _null_autograd(lines: list[bytes]) -> list[bytes]:
    return [ln.replace(b', "frame_id": ', b', "compiled_autograd_id": null, "frame_id": ', 1) for ln in lines]


@pytest.mark.parametrize("metrics_id", [True, False], ids=["metrics-id", "no-metrics-id"])
def test_null_compiled_autograd_id_is_an_ordinary_record(metrics_id, tmp_path):
    def edit(lines: list[bytes]) -> list[bytes]:
        lines = _null_autograd(lines)
        return lines if metrics_id else edit_metrics(lambda m: m.pop("compile_id"))(lines)

    log = variant(real_log("failure"), tmp_path / "dedicated_log_torch_trace_null.log", edit)
    assert log.read_bytes().count(b'"compiled_autograd_id": null') > 10
    imp = matches_tlparse(log, tmp_path)
    assert imp.stats.problem_count == 0, imp.issues
    s = make_receipt(imp.ledger).summary
    assert (s.compile_count, s.fallback_count, s.graph_count) == (1, 1, 1)
    assert "RuntimeError: boom" in s.fallbacks[0].reason
    assert "null compiled_autograd_id" in {n.kind: n.text for n in imp.stats.notes}["log_format"]


def test_the_records_own_id_wins_over_the_metrics_id_with_a_warning(tmp_path):
    src = real_log("breaks")

    def say_0_1(m: dict) -> None:
        if m["compile_id"] in ("1/1", "2/1"):
            m["compile_id"] = "0/1"

    log = variant(src, tmp_path / "dedicated_log_torch_trace_ids.log", edit_metrics(say_0_1))
    imp = matches_tlparse(log, tmp_path)
    full = import_torch_trace(str(src))
    assert [c.compile_id for c in imp.ledger.compilations] == [c.compile_id for c in full.ledger.compilations]
    s, s0 = make_receipt(imp.ledger).summary, make_receipt(full.ledger).summary
    assert (s.compile_count, s.recompile_count, s.graph_count) == (s0.compile_count, s0.recompile_count, s0.graph_count)
    assert set(imp.stats.skipped) == {"id_mismatch"} and imp.stats.skipped["id_mismatch"] == 2
    lines = log.read_bytes().split(b"\n")
    for issue in imp.issues:
        assert b'"compilation_metrics": {"compile_id": "0/1"' in lines[issue.line - 1]
        assert "names compile id 0/1 but its record is" in issue.text
    assert cli("import", str(log), "--out", str(tmp_path / "o"), "--strict") == 2


def test_cumulative_only_timing_fields_give_compile_time(tmp_path):
    def late_2024(m: dict) -> None:
        for k in ("duration_us", "entire_frame_compile_time_s", "log_format_version"):
            m.pop(k, None)

    src = real_log("breaks")
    log = variant(src, tmp_path / "dedicated_log_torch_trace_cum.log", edit_metrics(late_2024))
    imp = matches_tlparse(log, tmp_path)
    full = {c.compile_id: c for c in import_torch_trace(str(src)).ledger.compilations}
    for c in imp.ledger.compilations:
        assert c.duration_ns and c.duration_ns == c.dynamo_ns == full[c.compile_id].dynamo_ns
    assert "log format cumulative_us" in {n.kind: n.text for n in imp.stats.notes}["log_format"]
    findings = make_receipt(imp.ledger).findings
    assert findings is not None
    breaks = [f for f in findings.findings if f.axis == "fragmentation"]
    assert breaks and all(f.cost_ns for f in breaks)


def test_unknown_version_is_a_note_not_a_strict_failure(tmp_path):
    def no_version(m: dict) -> None:
        m.pop("pytorch_version", None)

    log = variant(real_log("limit"), tmp_path / "dedicated_log_torch_trace_nov.log", edit_metrics(no_version))
    imp = matches_tlparse(log, tmp_path)
    assert imp.stats.problem_count == 0 and "version_unknown" in {n.kind for n in imp.stats.notes}
    assert cli("import", str(log), "--out", str(tmp_path / "o"), "--strict") == 0
    r = json.loads((tmp_path / "o" / "receipt.json").read_text())
    assert any("note: " in w and "PyTorch version unknown" in w for w in r["ledger"]["run"]["warnings"])


def test_runtime_metrics_records_are_known_events(tmp_path):
    def add_runtime(lines: list[bytes]) -> list[bytes]:
        out = []
        for ln in lines:
            out.append(ln)
            if b'] {"bwd_compilation_metrics": ' in ln:
                out.append(ln.replace(b'{"bwd_compilation_metrics": ', b'{"bwd_compilation_metrics_runtime": '))
                out.append(ln.replace(b'{"bwd_compilation_metrics": ', b'{"compilation_metrics_runtime": '))
        return out

    src = real_log("failure")
    log = variant(src, tmp_path / "dedicated_log_torch_trace_rt.log", add_runtime)
    assert log.read_bytes().count(b"_metrics_runtime") == 2
    imp = matches_tlparse(log, tmp_path)
    assert imp.stats.problem_count == 0 and imp.stats.unknown_events == {}, imp.issues
    assert imp.ledger.compilations == import_torch_trace(str(src)).ledger.compilations


def test_crlf_line_ends_match_their_md5(tmp_path):
    src = real_log("breaks")
    log = variant(src, tmp_path / "dedicated_log_torch_trace_crlf.log",
                  lambda ls: [ln.replace(b"\n", b"\r\n") for ln in ls])
    imp = matches_tlparse(log, tmp_path)
    assert imp.stats.problem_count == 0, imp.issues
    full = import_torch_trace(str(src)).ledger
    assert imp.ledger.break_sites == full.break_sites
    assert imp.ledger.compilations == full.compilations


def test_no_final_newline_is_no_cut_when_the_last_record_is_whole(tmp_path):
    src = real_log("breaks")  # ends inside a chromium_event payload (read back to check its MD5)
    data = src.read_bytes()
    whole = tmp_path / "whole" / "dedicated_log_torch_trace_nonl.log"
    whole.parent.mkdir()
    whole.write_bytes(data[:-1])
    imp = matches_tlparse(whole, tmp_path)
    assert imp.stats.problem_count == 0, imp.issues
    cut = tmp_path / "cut" / "dedicated_log_torch_trace_cut.log"
    cut.parent.mkdir()
    cut.write_bytes(data[:-12])
    imp = import_torch_trace(str(cut))
    assert imp.stats.skipped == {"truncated": 1} and imp.issues[0].line == data[:-12].count(b"\n") + 1
    # a log ending in a payload the ledger reads, and in a record without payload
    lim = real_log("failure").read_bytes()
    last = lim.rstrip(b"\n")
    assert b"\n\t" not in last[last.rindex(b"\n") :]
    whole.write_bytes(last)
    assert import_torch_trace(str(whole)).stats.problem_count == 0
    whole.write_bytes(last[:-3])
    assert import_torch_trace(str(whole)).stats.skipped == {"truncated": 1}


def test_rank_from_renamed_files_wins_over_copied_rank_fields(tmp_path):
    def rank0(lines: list[bytes]) -> list[bytes]:
        return [ln.replace(b', "frame_id": ', b', "rank": 0, "frame_id": ', 1) for ln in lines]

    d = tmp_path / "trace"
    for rank in (0, 1, 2):
        log = variant(real_log("limit"), d / f"dedicated_log_torch_trace_rank_{rank}.log", rank0)
        assert tlparse_compilations(log, tmp_path / f"tl{rank}") == Counter({"0/0": 1, "0/1": 1, "0/2": 1, "1/0": 1})
    assert cli("import", str(d), "--out", str(tmp_path / "o")) == 0
    assert sorted(os.listdir(tmp_path / "o")) == ["rank-0", "rank-1", "rank-2"]
    for rank in (0, 1, 2):
        r = json.loads((tmp_path / "o" / f"rank-{rank}" / "receipt.json").read_text())
        assert r["ledger"]["run"]["rank"] == rank
        mism = [w for w in r["ledger"]["run"]["warnings"] if "record says rank" in w]
        assert bool(mism) == (rank != 0)
        if mism:
            assert re.search(rf"_rank_{rank}\.log:\d+: record says rank 0, the file's name rank {rank}", mism[0])


# --- files that are no log -----------------------------------------------------------------------


def test_files_without_records_are_refused(tmp_path, capsys):
    receipt = tmp_path / "receipt.json"
    receipt.write_text(json.dumps({"schema_version": 1, "ledger": {"run": {}}}, indent=2))
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 8)
    for f in (str(receipt), str(noise), os.devnull):
        capsys.readouterr()
        assert cli("import", f, "--out", str(tmp_path / "o")) == 2
        err = capsys.readouterr().err.strip().splitlines()
        if f == os.devnull:  # a device is no file: refused before it is read
            assert err == [f"seamscope: {f}: a character device, not a file: seamscope reads regular files only"], err
            continue
        assert err == [f"seamscope: error: no structured-trace records in {f}"] or (
            len(err) == 1 and err[0].endswith(f"no structured-trace records in {f}")
        ), err
    assert not (tmp_path / "o").exists()
    d = tmp_path / "logs"
    d.mkdir()
    (d / "dedicated_log_torch_trace_a.log").write_bytes(b"")
    (d / "dedicated_log_torch_trace_b.log").write_bytes(b"not a log\n")
    assert cli("import", str(d), "--out", str(tmp_path / "o")) == 2
    # beside a real log, such a file is skipped with a warning
    shutil.copy(real_log("limit"), d / "dedicated_log_torch_trace_rank_0_x.log")
    capsys.readouterr()
    assert cli("import", str(d), "--out", str(tmp_path / "o")) == 0
    err = capsys.readouterr().err
    assert err.count("no structured-trace records") == 2 and "skipped" in err
    assert (tmp_path / "o" / "receipt.json").exists()


@pytest.mark.parametrize("version", ["2.14.1", "2.15.0"])
def test_newer_torch_logs_read_like_2_13(version, tmp_path):
    """The same workloads under torch 2.14.1 and 2.15.0 give the same ledger shape as 2.13."""
    for name in ("breaks", "autograd"):
        new = matches_tlparse(real_log(f"{name}-torch-{version}"), tmp_path / name)
        old = import_torch_trace(str(real_log(name)))
        assert new.ledger.environment.torch_version.startswith(version)
        assert [c.compile_id for c in new.ledger.compilations] == [c.compile_id for c in old.ledger.compilations]
        assert [(c.status, c.graph_count) for c in new.ledger.compilations] == [
            (c.status, c.graph_count) for c in old.ledger.compilations]
        assert [(s.function, s.gb_code) for s in new.ledger.break_sites] == [
            (s.function, s.gb_code) for s in old.ledger.break_sites]


def test_seconds_only_logs_of_2024_give_compile_time_and_an_unknown_version(tmp_path):
    def early_2024(m: dict) -> None:
        for k in [k for k in m if k.endswith("_us") or k in ("log_format_version", "pytorch_version")]:
            del m[k]

    src = real_log("breaks")
    log = variant(src, tmp_path / "dedicated_log_torch_trace_s.log", edit_metrics(early_2024))
    assert b"duration_us" not in log.read_bytes() and b"entire_frame_compile_time_s" in log.read_bytes()
    imp = matches_tlparse(log, tmp_path)
    assert imp.stats.problem_count == 0, imp.issues
    full = {c.compile_id: c for c in import_torch_trace(str(src)).ledger.compilations}
    for c in imp.ledger.compilations:  # the same span, in seconds rounded to the microsecond
        assert c.duration_ns == full[c.compile_id].duration_ns and c.dynamo_ns is None
    notes = {n.kind: n.text for n in imp.stats.notes}
    assert notes["log_format"].startswith("log format seconds") and "version_unknown" in notes
    assert cli("import", str(log), "--out", str(tmp_path / "o"), "--strict") == 0


def test_each_generation_keeps_its_own_cache_outcome(tmp_path):
    """Rounds after a reset hit the caches the first round filled: each round keeps its outcome."""
    def cache_hits(lines: list[bytes]) -> list[bytes]:
        out, round_of = [], Counter()
        for ln in lines:
            if b'] {"compilation_metrics": ' in ln:
                rec = json.loads(ln[ln.index(b"] {") + 2 :])
                cid = rec["compilation_metrics"]["compile_id"]
                round_of[cid] += 1
                name = "fx_graph_cache_miss" if round_of[cid] == 1 else "fx_graph_cache_hit"
                x, y = cid.split("/")
                meta = {"artifact": {"name": name, "encoding": "json"}, "frame_id": int(x),
                        "frame_compile_id": int(y), "attempt": 0, "has_payload": hashlib.md5(b"{}").hexdigest()}
                out.append(b"V1201 09:58:50.000000 1 torch/_inductor/codecache.py:1] " + json.dumps(meta).encode()
                           + b"\n\t{}\n")
            out.append(ln)
        return out

    log = variant(real_log("reset"), tmp_path / "dedicated_log_torch_trace_cache.log", cache_hits)
    imp = matches_tlparse(log, tmp_path)
    assert [(c.compile_id, c.fx_cache) for c in imp.ledger.compilations] == [
        ("0/0", "miss"), ("1/0", "miss"), ("0/0@2", "hit"), ("1/0@2", "hit"), ("0/0@3", "hit"), ("1/0@3", "hit")]
