"""Import of real ``TORCH_TRACE`` logs, compared with tlparse and with PyTorch's own counters.

GIVEN a small workload run in a process of its own with ``TORCH_TRACE`` set (the script is
``WORKLOAD`` below, forked from the test run's ``fresh_server``; it also dumps
``torch._dynamo.utils.counters``), WHEN seamscope imports the log, THEN per compile id it agrees
with ``tlparse`` on the same log (compile ids, restarts and failures, break reasons and codes,
recompile reasons), and the summary counts equal the counters. The test process itself never
imports torch. (A transformers BERT run's log is checked the same way in ``test_census_torch.py``,
on the census's BERT run.)
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fakes import script_forked
from tlparse_check import compare_with_tlparse

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.ingest.torch_trace import find_logs, import_torch_trace

pytestmark = pytest.mark.torch


WORKLOAD = r'''
import json, sys
import torch
import torch._dynamo
from torch._dynamo.utils import counters

backend, counters_out, kind = sys.argv[1], sys.argv[2], sys.argv[3]

def helper(x):
    print("inner")                    # a break inside an inlined helper
    return x * 2

def f(x):
    y = x.sin()
    print("hi")                       # a print break (GB0059)
    y = y + 1
    if y.sum().item() > 0:            # a .item() branch (GB0124)
        y = y * 3
    y = helper(y)
    return y.cos()

def g(x, k):
    return x * k

if kind == "basic":
    cf = torch.compile(f, backend=backend)
    for n in (4, 4, 5, 6):            # shape recompiles
        cf(torch.randn(n))
    torch._dynamo.config.recompile_limit = 2
    cg = torch.compile(g, backend=backend, dynamic=False)
    for k in range(5):                # a recompile-limit hit
        cg(torch.randn(3), k)
json.dump({"frames": dict(counters["frames"]), "stats": dict(counters["stats"])},
          open(counters_out, "w"))
'''


def run_workload(server: Any, tmp: Path, backend: str, kind: str) -> tuple[Path, dict]:
    """``WORKLOAD`` forked from ``server`` with ``TORCH_TRACE`` set: the log's folder, the counters."""
    tmp.mkdir(parents=True, exist_ok=True)
    script = tmp / "workload.py"
    script.write_text(WORKLOAD)
    trace_dir = tmp / "trace"
    counters = tmp / "counters.json"
    p = script_forked(server, [script, backend, counters, kind], tmp, env={"TORCH_TRACE": str(trace_dir)},
                      unset=("TORCH_LOGS",), timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    return trace_dir, json.loads(counters.read_text())


@pytest.fixture(scope="module", params=["eager", "aot_eager"])
def basic(request, tmp_path_factory, fresh_server):
    tmp = tmp_path_factory.mktemp(f"basic-{request.param}")
    trace_dir, counters = run_workload(fresh_server, tmp, request.param, "basic")
    (log,) = find_logs(str(trace_dir))
    return tmp, log, counters


def test_log_matches_tlparse_and_counters(basic, tmp_path):
    tmp, log, counters = basic
    compare_with_tlparse(log, tmp_path / "tl", str(tmp))
    imp = import_torch_trace(log, cwd=str(tmp))
    assert imp.stats.problem_count == 0, imp.issues
    s = make_receipt(imp.ledger).summary
    assert s.compile_count == counters["frames"]["ok"]
    assert s.graph_count == counters["stats"]["unique_graphs"]
    assert s.fallback_count == counters["frames"]["total"] - counters["frames"]["ok"]
    # what the workload contains, as a user reads it
    codes = {(b.function, b.gb_code) for b in imp.ledger.break_sites}
    assert {("f", "GB0059"), ("f", "GB0124"), ("helper", "GB0059")} <= codes
    assert [f.status for f in s.fallbacks] == ["fallback"]
    assert s.recompile_count > 0 and s.has_runtime is False and s.call_count == 0
    assert imp.ledger.environment.torch_version and imp.ledger.run.source == "torch_trace"
    assert imp.ledger.run.input_trace_sha256 and imp.ledger.run.absent


def test_imported_findings_are_ranked_by_compile_time_and_carry_their_basis(basic, tmp_path):
    tmp, log, counters = basic
    imp = import_torch_trace(log, cwd=str(tmp))
    sec = make_receipt(imp.ledger).findings
    assert sec is not None and sec.headline is not None
    comps = {c.compile_id: c for c in imp.ledger.compilations}
    breaks = [f for f in sec.findings if f.axis == "fragmentation"]
    assert breaks and all(f.basis and "no runtime data" in f.basis for f in breaks)
    for f in breaks:
        site = next(s for s in imp.ledger.break_sites if s.site_id == f.finding_id)
        ids = {cid.split("_", 1)[0] for cid in site.compile_ids}
        assert f.cost_ns == sum(comps[i].duration_ns for i in ids)
    # ranked by what the log measures, in one unit across axes, and said so
    assert [f.cost_ns for f in breaks] == sorted((f.cost_ns for f in breaks), reverse=True)
    assert sec.ranked and all(i.cost_ns is not None and i.basis for i in sec.ranked)
    assert [i.cost_ns for i in sec.ranked] == sorted((i.cost_ns for i in sec.ranked), reverse=True)
    assert "compile time" in sec.ranked_by and sec.headline.sentence.startswith("No runtime data")
    # every recompile of the log (tlparse's ids were checked against these above) is in one cause
    recompiles = [c for c in imp.ledger.compilations if c.is_recompile]
    assert sorted(i for c in sec.causes for i in c.compile_ids) == sorted(c.compile_id for c in recompiles)


def test_cli_writes_receipt(basic, tmp_path):
    tmp, log, counters = basic
    with pytest.raises(SystemExit) as e:
        main(["import", os.path.dirname(log), "--out", str(tmp_path / "out"), "--strict"])
    assert e.value.code == 0
    r = json.loads((tmp_path / "out" / "receipt.json").read_text())
    assert r["ledger"]["run"]["source"] == "torch_trace"
    assert r["summary"]["compile_count"] == counters["frames"]["ok"]
    assert (tmp_path / "out" / "calls.csv").exists()


def test_cut_log_recovers_everything_before_the_cut(basic, tmp_path):
    """Cut a real log at many byte offsets: every compilation complete before the cut is the same."""
    tmp, log, _ = basic
    data = Path(log).read_bytes()
    full = {c.compile_id: c for c in import_torch_trace(log, cwd=str(tmp)).ledger.compilations}
    ends: list[tuple[int, str]] = []  # (offset just past the metrics record and its payload, id)
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        if b'{"compilation_metrics"' in line:
            cid = json.loads(line[line.index(b"] {") + 2 :])["compilation_metrics"]["compile_id"]
            ends.append((pos, cid.split("_")[0]))
    cuts = sorted({*range(1, len(data), max(1, len(data) // 37)), *(e - 1 for e, _ in ends)})
    cut_log = tmp_path / "dedicated_log_torch_trace_cut.log"
    for cut in cuts:
        cut_log.write_bytes(data[:cut])
        imp = import_torch_trace(str(cut_log), cwd=str(tmp))
        got = {c.compile_id: c for c in imp.ledger.compilations}
        done = {cid for end, cid in ends if end <= cut}
        for cid in done:
            assert got.get(cid) == full[cid], (cut, cid)
        if not data[:cut].endswith(b"\n"):
            # cut, unless only the newline of a whole last line (not inside a payload) is missing
            whole = data[cut : cut + 1] == b"\n" and data[cut + 1 : cut + 2] != b"\t"
            assert imp.stats.skipped.get("truncated", 0) == (0 if whole else 1), cut


def _edit(log: str, tmp_path: Path, fn) -> str:  # type: ignore[no-untyped-def]
    lines = Path(log).read_bytes().split(b"\n")
    out = tmp_path / "dedicated_log_torch_trace_edit.log"
    out.write_bytes(b"\n".join(fn(lines)))
    return str(out)


def _index(lines: list[bytes], needle: bytes) -> int:
    return next(i for i, ln in enumerate(lines) if needle in ln)


def test_bad_lines_are_reported_with_their_line_and_the_rest_kept(basic, tmp_path):
    tmp, log, _ = basic
    full = import_torch_trace(log, cwd=str(tmp)).ledger
    unknown = b'V1129 06:53:46.830000 5223 torch/x.py:1] {"brand_new_event": {}, "frame_id": 0}'

    def damage(lines: list[bytes]) -> list[bytes]:
        at = _index(lines, b'"dynamo_start"')
        return lines[:at] + [b"garbage line", b"\x00\xff\xfe binary \x9c", unknown] + lines[at:]

    path = _edit(log, tmp_path, damage)
    imp = import_torch_trace(path, cwd=str(tmp))
    assert imp.ledger.compilations == full.compilations
    assert imp.ledger.break_sites == full.break_sites
    assert imp.stats.skipped == {"bad_line": 2, "unknown_event": 1}
    first = _index(Path(log).read_bytes().split(b"\n"), b'"dynamo_start"') + 1
    assert [(i.line, i.kind) for i in imp.issues] == [
        (first, "bad_line"), (first + 1, "bad_line"), (first + 2, "unknown_event")
    ]
    assert f"{path}:{first}: " in str(imp.issues[0]) and "brand_new_event" in str(imp.issues[2])
    # the CLI: warnings and exit 0; --strict exits 2
    with pytest.raises(SystemExit) as e:
        main(["import", path, "--out", str(tmp_path / "o")])
    assert e.value.code == 0
    with pytest.raises(SystemExit) as e:
        main(["import", path, "--out", str(tmp_path / "o"), "--strict"])
    assert e.value.code == 2


def test_non_utf8_and_missing_payload(basic, tmp_path):
    tmp, log, _ = basic

    def damage(lines: list[bytes]) -> list[bytes]:
        lines = list(lines)
        i = _index(lines, b'"dynamo_start"')
        lines[i] = lines[i].replace(b'"name": "f"', b'"name": "\xff\xfe"')
        j = _index(lines, b'"name": "dynamo_graph_break_reason"')
        k = j + 1
        while lines[k].startswith(b"\t"):
            k += 1
        return lines[: j + 1] + lines[k:]  # the break reason's payload is gone

    imp = import_torch_trace(_edit(log, tmp_path, damage), cwd=str(tmp))
    # the unreadable dynamo_start leaves its compilation's metrics without a start: said too
    assert imp.stats.skipped == {"bad_json": 1, "payload": 1, "no_start": 1}
    kinds = [i.kind for i in imp.issues]
    assert kinds[:2] == ["bad_json", "payload"] and "no_start" in kinds
    # compilations after the damage are all there
    full = import_torch_trace(log, cwd=str(tmp)).ledger
    assert {c.compile_id for c in imp.ledger.compilations} == {c.compile_id for c in full.compilations}


def test_cut_payload_is_reported(basic, tmp_path):
    tmp, log, _ = basic

    def damage(lines: list[bytes]) -> list[bytes]:
        j = _index(lines, b'"name": "dynamo_graph_break_reason"')
        return lines[: j + 3] + lines[j + 6 :]  # three payload lines missing: MD5 differs

    imp = import_torch_trace(_edit(log, tmp_path, damage), cwd=str(tmp))
    assert imp.stats.skipped == {"payload": 1}
    assert "MD5" in imp.issues[0].text


def test_log_from_another_pytorch_version(basic, tmp_path):
    tmp, log, _ = basic
    path = _edit(log, tmp_path, lambda ls: [
        re.sub(rb'"pytorch_version": "[^"]+"', b'"pytorch_version": "2.99.0+cpu"', ln) for ln in ls
    ])
    imp = import_torch_trace(path, cwd=str(tmp))
    assert imp.stats.skipped == {"version": 1}
    assert "2.99.0+cpu" in imp.issues[0].text
    assert imp.ledger.environment.torch_version == "2.99.0+cpu"
    assert len(imp.ledger.compilations) == len(import_torch_trace(log).ledger.compilations)


def test_empty_file_and_empty_directory(tmp_path):
    empty = tmp_path / "logs" / "dedicated_log_torch_trace_abc.log"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    imp = import_torch_trace(str(empty))
    assert imp.stats.skipped == {"empty": 1} and imp.ledger.compilations == []
    # no structured-trace record in the file, or in any file of the directory: refused
    with pytest.raises(SystemExit) as e:
        main(["import", str(empty.parent), "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["import", str(empty), "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    (tmp_path / "none").mkdir()
    with pytest.raises(SystemExit) as e:
        main(["import", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
    assert e.value.code == 2
