"""Break sites, recompiles, phases and remedies on real models, as PyTorch's own logs count them.

GIVEN small real workloads (``tests/workloads/census.py``: a function with one statement written
twice, and ``transformers`` Reformer and BERT models built from tiny configs) run in a process of
their own (forked from the test run's ``fresh_server``) under a seamscope session with
``TORCH_TRACE`` and ``TORCH_LOGS=graph_breaks,recompiles`` set, WHEN the live receipt is read and
the same run's ``TORCH_TRACE`` log is imported, THEN both agree with sources capture never reads:
the ``TORCH_LOGS`` text parsed here, tlparse's ``compile_directory.json`` and its pages,
``torch._dynamo.utils.counters`` and ``torch.profiler``'s compiled regions.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fakes import script_forked
from tlparse_check import compare_with_tlparse

from seamscope.analyze.findings import analyze_findings
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.verify import check_receipt, load_raw
from seamscope.ingest.receipt import load_receipt
from seamscope.ingest.torch_trace import find_logs, import_torch_trace
from seamscope.model.ledger import SITE_ID_SCHEME, RegionEvent
from seamscope.model.normalize import normalize_path
from seamscope.model.receipt import Receipt

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent
WORKLOAD = ROOT / "tests" / "workloads" / "census.py"
TLPARSE = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))
_BREAK_AT = re.compile(r"\[__graph_breaks\] Graph break in user code at (.*):(\d+)$", re.M)
_RECOMPILING = re.compile(r"\] \[(\d+/\d+)\] \[__recompiles\] Recompiling function (\S+) in ", re.M)


class Run:
    """One workload run: the live receipt, the imported one, and PyTorch's own records."""

    def __init__(self, tmp: Path, kind: str, server: Any) -> None:
        out, trace = tmp / "out", tmp / "trace"
        env = {"TORCH_TRACE": str(trace), "TORCH_LOGS": "graph_breaks,recompiles",
               "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor")}
        proc = script_forked(server, [WORKLOAD, kind, out], tmp, env=env, timeout=500)
        assert proc.returncode == 0, proc.stderr[-3000:]
        self.logs = proc.stderr
        self.live = load_receipt(out / "receipt.json")
        self.verification = check_receipt(load_raw(out / "receipt.json"))
        (log,) = find_logs(str(trace))
        self.log = log
        self.imported = make_receipt(import_torch_trace(log, cwd=str(tmp)).ledger)
        self.counters = json.loads((out / "counters.json").read_text())
        profile = out / "profile.json"
        self.profile = json.loads(profile.read_text()) if profile.exists() else None
        self.cwd = str(tmp)

    @functools.cached_property
    def compile_ids(self) -> set[str]:
        """tlparse's compile ids of the log: frame compilations only (tlparse also lists records
        outside any compile id). Run when a test first asks."""
        out = Path(self.cwd) / "tl"
        subprocess.run([TLPARSE, self.log, "-o", str(out), "--overwrite", "--no-browser"],
                       check=True, capture_output=True, timeout=120)
        return {cid for k in json.loads((out / "compile_directory.json").read_text())
                if re.fullmatch(r"\d+/\d+", cid := k.strip("[]").split("_", 1)[0])}

    def both(self) -> list[Receipt]:
        return [self.live, self.imported]

    def break_locations(self) -> set[tuple[str, int]]:
        """Distinct (file, line) of ``TORCH_LOGS=graph_breaks``, paths as receipts write them."""
        return {(normalize_path(path, self.cwd), int(line)) for path, line in _BREAK_AT.findall(self.logs)}

    def recompiling(self) -> list[tuple[str, str]]:
        return _RECOMPILING.findall(self.logs)


_RUNS: dict[str, Run] = {}


@pytest.fixture
def run(request, tmp_path_factory, fresh_server) -> Run:
    kind = request.param
    if kind not in _RUNS:
        _RUNS[kind] = Run(tmp_path_factory.mktemp(kind), kind, fresh_server)
    return _RUNS[kind]


def _sites(r: Receipt) -> set[tuple[str, int]]:
    return {(s.file, s.line) for s in r.summary.break_sites}


@pytest.mark.parametrize("run", ["dup"], indirect=True)
def test_one_statement_written_twice_is_two_sites_as_torch_logs_shows(run: Run) -> None:
    locs = run.break_locations()
    assert len(locs) == 2
    for r in run.both():
        assert r.ledger.site_id_scheme == SITE_ID_SCHEME
        assert _sites(r) == locs and r.summary.break_site_count == 2
        a, b = r.summary.break_sites
        assert a.statement == b.statement == "if must_pad: torch._dynamo.graph_break()  # noqa: E701"
        assert a.scope == b.scope == "pad_twice" and a.site_id != b.site_id
    assert [s.site_id for s in run.live.summary.break_sites] == [s.site_id for s in run.imported.summary.break_sites]
    # each site is crossed once per call, not merged into the other
    assert [s.crossings for s in run.live.summary.break_sites] == [3, 3]
    assert run.counters["stats"]["unique_graphs"] == run.live.summary.graph_count == 3


@pytest.mark.parametrize("run", ["reformer"], indirect=True)
def test_reformer_skipped_frame_break_is_one_site_with_its_real_type(run: Run) -> None:
    locs = run.break_locations()
    for r in run.both():
        assert _sites(r) == locs and r.summary.break_site_count == len(locs)  # one site per statement
        assert not any((s.gb_type or "").startswith("Failed to handle") for s in r.summary.break_sites)
        item = next(s for s in r.summary.break_sites if s.gb_code == "GB0124")
        assert item.gb_type == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
        assert item.frame_skipped and item.scope == "LSHSelfAttention._hash_vectors"
        # the branch on np.lcm(...) of sizes is host-side: no torch.cond remedy
        fs = [f for f in analyze_findings(r.ledger).findings if f.cause is not None and f.cause.gb_code == "GB0170"]
        assert len(fs) == 1 and [x.action for x in fs[0].remedies] == ["host_value_as_python", "pytorch_hint_class"]
        assert fs[0].remedies[1].config == {"class": "FUNDAMENTAL"}  # PyTorch's class of a data-dependent branch
        assert "Failed to handle graph break gracefully" in run.logs  # PyTorch did wrap it
    assert {s.site_id for s in run.live.summary.break_sites} == {s.site_id for s in run.imported.summary.break_sites}
    # the imported log's sites carry the hint classes live capture read from the running torch
    assert {s.site_id: (s.hint_classes, s.chained) for s in run.live.ledger.break_sites} == {
        s.site_id: (s.hint_classes, s.chained) for s in run.imported.ledger.break_sites}
    assert run.verification.ok, run.verification


@pytest.mark.xdist_group("census-bert")  # one worker builds the run for both BERT tests
@pytest.mark.parametrize("run", ["bert"], indirect=True)
def test_bert_recompiles_fallbacks_and_empty_frames_match_pytorch(run: Run) -> None:
    recompiling = run.recompiling()
    by_tlparse = {c for c in run.compile_ids if int(c.split("/")[1]) > 0}
    assert {cid for cid, _ in recompiling} == by_tlparse
    fallbacks = run.counters["frames"]["total"] - run.counters["frames"]["ok"]
    for r in run.both():
        s = r.summary
        # every compile id with y > 0, the attempt that hit the recompile limit included
        assert s.recompile_count == len(recompiling) == len(by_tlparse)
        assert {x.compile_id for x in s.recompiles} == by_tlparse
        limit = [x for x in s.recompiles if x.status == "fallback"]
        assert len(limit) == 1 and limit[0].compile_id in {f.compile_id for f in s.fallbacks}
        assert s.fallback_count == fallbacks
        assert {c.compile_id for c in r.ledger.compilations} == run.compile_ids
        assert s.compile_count + s.fallback_count == len(run.compile_ids)
        assert s.graph_count == run.counters["stats"]["unique_graphs"]
        # the recompile-limit record is named after its frame, with the variants it had
        frame = dict(recompiling)[limit[0].compile_id]
        assert limit[0].frame_name == frame == "wrapped_func"
        churn = analyze_findings(r.ledger).findings
        hit = next(f for f in churn if f.churn is not None and f.churn.pattern == "recompile_limit")
        assert hit.churn.frame_name == "wrapped_func" and hit.churn.variants == 8
        assert "(:0)" not in hit.sentence
        # every failed guard recorded: the deprecation wrapper serves several module classes, and
        # args[0]'s type fails against every variant beside the number of arguments: a type switch
        wrapped = [f for f in churn if f.churn is not None and f.churn.frame_name == "wrapped_func"]
        switch = next((f for f in wrapped if f.churn.pattern == "type"), None)
        assert switch is not None, [(f.churn.pattern, f.sentence) for f in wrapped]
        assert "args[0]" in switch.sentence
        # the only record of the break in `next()` on a C iterator is wrapped by PyTorch: the real
        # type is kept ("Missing tp_iternext", GB4347, in 2.13; "C-implemented special method
        # without VariableTracker model", GB9493, from 2.14), the registry's name for its code
        inner = [x for x in s.break_sites if x.file.endswith("output_capturing.py") and x.function == "<dictcomp>"]
        assert len(inner) == 1 and inner[0].frame_skipped
        assert inner[0].gb_type in _registry_names(inner[0].gb_code)
        assert (inner[0].gb_code, inner[0].gb_type) in {
            ("GB4347", "Missing tp_iternext"), ("GB9493", "C-implemented special method without VariableTracker model")}
        assert _sites(r) == run.break_locations()
        assert s.empty_frame_count == sum(1 for c in r.ledger.compilations if c.status == "ok" and not c.graph_count)
    assert run.live.summary.empty_frame_count == run.imported.summary.empty_frame_count > 0
    # torch.profiler marks every run of a compiled frame; seamscope only the runs of a graph: the
    # difference is exactly the runs of frames compiled to no graph
    assert run.profile is not None
    prof = Counter(name.split(": ", 1)[1] for name in run.profile)
    ours = Counter(e.compile_id for e in run.live.ledger.calls[-1].events if isinstance(e, RegionEvent))
    empty = {c.compile_id for c in run.live.ledger.compilations if c.status == "ok" and c.graph_count == 0}
    assert all(prof[k] == n for k, n in ours.items())
    assert set(prof) - set(ours) and set(prof) - set(ours) <= empty
    assert run.verification.ok, run.verification


@pytest.mark.xdist_group("census-bert")
@pytest.mark.parametrize("run", ["bert"], indirect=True)
def test_transformers_bert_log_imports_as_tlparse_reads_it_and_counts_as_pytorch(run: Run, tmp_path: Path) -> None:
    """The BERT run's ``TORCH_TRACE`` log, imported: per compile id what tlparse shows (ids,
    restarts and failures, break reasons, recompile reasons), the counts as the counters say."""
    compare_with_tlparse(run.log, tmp_path / "tl", run.cwd)
    s = run.imported.summary
    # Dynamo counts as "ok" frames it skips before giving them a compile id (transformers'
    # wrappers without tensors): those never reach the log, so here compile_count is the log's
    # own count of ids that produced code (the same ids tlparse lists, checked above).
    assert s.compile_count <= run.counters["frames"]["ok"]
    assert s.compile_count == sum(1 for c in run.imported.ledger.compilations if c.status == "ok")
    assert s.graph_count == run.counters["stats"]["unique_graphs"]
    assert s.fallback_count == run.counters["frames"]["total"] - run.counters["frames"]["ok"]
    assert s.break_site_count > 0 and s.recompile_count > 0


@pytest.mark.parametrize("run", ["bert_static"], indirect=True)
def test_calls_after_the_recompile_limit_are_labelled_by_what_they_ran(run: Run) -> None:
    """recompile_limit=2, dynamic=False, lengths A, B, C, A: C hits the limit and runs eagerly, the
    second A hits a cached variant and runs compiled code."""
    live = run.live
    assert [c.phase for c in live.ledger.calls] == ["cold", "cold", "fallback", "steady"]
    assert [c.outcome for c in live.ledger.calls] == ["compile", "recompile", "fallback", "hit"]
    assert any(isinstance(e, RegionEvent) for e in live.ledger.calls[3].events)
    assert not any(isinstance(e, RegionEvent) for e in live.ledger.calls[2].events)
    assert "hit config.recompile_limit (2)" in run.logs
    for r in run.both():
        assert r.summary.recompile_count == len(run.recompiling()) == 2
        assert r.summary.fallback_count == run.counters["frames"]["total"] - run.counters["frames"]["ok"] == 1
        assert r.ledger.environment.compile_options.get("dynamic") == "False" or r is run.imported
    shape = next(
        f for f in analyze_findings(live.ledger).findings if f.churn is not None and f.churn.pattern == "shape"
    )
    assert shape.remedies[0].action == "drop_dynamic_false"
    assert "kwargs['input_ids'][1]" in shape.churn.subjects
    assert run.verification.ok, run.verification


def _registry_names(code: str | None) -> set[str]:
    """The ``Gb_type`` names the running torch's registry gives a code."""
    import json

    import torch._dynamo

    path = os.path.join(os.path.dirname(torch._dynamo.__file__), "graph_break_registry.json")
    with open(path, encoding="utf-8") as f:
        return {e["Gb_type"] for e in json.load(f).get(code or "", [])}
