"""Real 2-rank jobs on the CPU (gloo), each rank under ``seamscope run``, then merged.

Two jobs, each shared by several tests (module-scoped fixtures):
- ``ddp``: ``torchrun --standalone --nproc-per-node 2 -m seamscope run tests/workloads/ranks_job.py
  -- --mode ddp``: DDP over four Linear(512, 512) with ``bucket_cap_mb=1``; the ranks agree.
- ``diverge``: ``TORCH_TRACE=DIR seamscope run --nproc 2 tests/workloads/ranks_job.py -- --mode
  diverge``: rank 1 takes another branch inside the compiled function from call 3 on; the same
  job leaves a multi-rank ``TORCH_TRACE`` directory for import.

Each rank is a new interpreter started by torchrun; torchrun (``ddp``) and ``seamscope run --nproc``
are processes of their own forked from the test run's server (``fresh_server``: their torch or
seamscope imports done once), and the commands run on the jobs' output (``merge``, ``diff``,
``verify``, ``import``) run in this process.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from fakes import Forked, seamscope_forked, seamscope_here

from seamscope.analyze.ranks import gather, merge
from seamscope.ingest.receipt import load_receipt

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.distributed, pytest.mark.timeout(600)]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join("tests", "workloads", "ranks_job.py")
STRUCTURAL = {"compiled_graphs", "recompile_call", "sites", "call_count"}
ENV = {"OMP_NUM_THREADS": "1"}


def seamscope(*args):
    """A command on the jobs' output, in this process (not about the process)."""
    return seamscope_here(list(args), ROOT)


@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory, fresh_server):
    """torchrun itself forked from the test run's server (its torch import done there); the ranks
    it starts are new interpreters, as always."""
    out = tmp_path_factory.mktemp("ddp") / "out"
    r = seamscope_forked(fresh_server, ["--standalone", "--nproc-per-node", "2", "-m", "seamscope", "run", "--quiet",
                                        "--out", str(out), JOB, "--", "--mode", "ddp", "--steps", "4"],
                         ROOT, env=ENV, unset=("TORCH_TRACE",), entry="torch.distributed.run:main")
    assert r.returncode == 0, r.stderr[-6000:]
    return out


def _nproc(server, base, args, env):
    """``seamscope run --nproc 2 ARGS`` started in a process of its own, forked from the server."""
    return Forked(server, ["run", "--nproc", "2", *args], ROOT, stdout=base / "stdout", stderr=base / "stderr",
                  env={**ENV, **env}, unset=() if "TORCH_TRACE" in env else ("TORCH_TRACE",))


@pytest.fixture(scope="module")
def diverge_job(tmp_path_factory, fresh_server):
    base = tmp_path_factory.mktemp("diverge")
    out, trace = base / "out", base / "trace"
    p = _nproc(fresh_server, base, ["--out", str(out), JOB, "--", "--mode", "diverge", "--steps", "6", "--at", "3"],
               {"TORCH_TRACE": str(trace)})
    code = p.wait(420)
    r = subprocess.CompletedProcess(p.args, code, (base / "stdout").read_text(), (base / "stderr").read_text())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, trace, r


# --- the ranks agree; DDP splits and DDP's own breaks are labelled -------------------------------


def test_each_rank_writes_its_own_ledger_with_rank_and_world_size(ddp_job):
    for rank in (0, 1):
        run = load_receipt(str(ddp_job / f"rank-{rank}" / "receipt.json")).ledger.run
        assert (run.rank, run.world_size) == (rank, 2)


def test_ddp_splits_are_shown_as_such(ddp_job):
    sec = merge(gather(str(ddp_job))).ranks
    assert sec.ranks_present == [0, 1]
    for e in sec.ranks:
        # Each Linear(512, 512) holds 1.05 MB of parameters, over the 1 MB bucket cap: DDPOptimizer
        # puts each in its own bucket and splits the user's forward into 4 submodules.
        assert [(d.frame_name, d.submodules) for d in e.ddp_splits] == [("forward", 4)]
        # ... which Dynamo still counts as one graph (splits are not graph breaks).
        split = next(c for c in load_receipt(str(ddp_job / f"rank-{e.rank}" / "receipt.json")).ledger.compilations
                     if c.compile_id == e.ddp_splits[0].compile_id)
        assert split.graph_count == 1 and split.own_break_site_id is None


def test_breaks_inside_torch_ddp_code_are_framework_breaks(ddp_job):
    sec = merge(gather(str(ddp_job))).ranks
    for e in sec.ranks:
        assert e.sites, "DDP's forward breaks (logger call in _pre_forward)"
        assert {s.origin for s in e.sites} == {"ddp"}
        assert any("torch/nn/parallel/" in s.file for s in e.sites)


def test_ranks_that_agree_report_no_divergence(ddp_job):
    sec = merge(gather(str(ddp_job))).ranks
    # Timing is not judged: 3 steady calls per rank are fewer than the rule needs, so this
    # assertion does not depend on how loaded the machine is.
    assert sec.divergences == [] and sec.problems == []
    assert "not judged here: ranks 0, 1" in sec.time_rule
    r = seamscope("merge", str(ddp_job), "--fail-on-divergence")
    assert r.returncode == 0, r.stderr
    assert "no divergence between the ranks" in r.stdout
    assert "forward ran as 4 submodules, one per DDP bucket" in r.stdout
    assert "framework break in torch's DDP code" in r.stdout


# --- rank 1 takes another branch from call 3 on ---------------------------------------------------


def test_run_nproc_writes_ranks_and_the_merged_receipt(diverge_job):
    out, _, r = diverge_job
    assert (out / "rank-0" / "receipt.json").is_file() and (out / "rank-1" / "receipt.json").is_file()
    merged = load_receipt(str(out / "receipt.json"))
    assert merged.ranks is not None and merged.ranks.ranks_present == [0, 1]
    assert "recompile_call: rank(s) 1 from call 3" in r.stdout


def test_the_rank_that_branched_is_named_with_the_call(diverge_job):
    out, _, _ = diverge_job
    sec = merge(gather(str(out))).ranks
    found = {d.kind: d for d in sec.divergences if d.kind in STRUCTURAL}
    assert set(found) == {"compiled_graphs", "recompile_call", "sites"}
    for d in found.values():
        assert d.ranks == [1] and d.reference_ranks == [0] and d.first_call == 3, d
    assert "loud" in found["recompile_call"].detail  # the guard that failed
    assert "ranks_job.py" in found["sites"].detail and "(user)" in found["sites"].detail
    # Per call, rank 1 crossed the print's break from call 3 on and rank 0 never did.
    r0, r1 = sec.ranks
    assert [bool(c.sites) for c in r0.calls] == [False] * 6
    assert [bool(c.sites) for c in r1.calls] == [False, False, False, True, True, True]


def test_merged_receipt_works_with_diff_and_verify(diverge_job):
    out, _, _ = diverge_job
    merged = str(out / "receipt.json")
    r = seamscope("diff", str(out / "rank-0" / "receipt.json"), merged)
    assert r.returncode == 0, r.stderr
    r = seamscope("verify", merged)
    assert r.returncode == 0, r.stdout + r.stderr


def test_fail_on_divergence_exits_1(diverge_job):
    out, _, _ = diverge_job
    r = seamscope("merge", str(out), "--out", str(out.parent / "m"), "--fail-on-divergence")
    assert r.returncode == 1, r.stderr
    assert "rank(s) 1 from call 3" in r.stdout


def test_torch_trace_directory_merges_with_both_ranks(diverge_job):
    pytest.importorskip("seamscope.ingest.torch_trace")
    _, trace, _ = diverge_job
    sec = merge(gather(str(trace))).ranks
    assert sec.ranks_present == [0, 1]
    found = {d.kind: d for d in sec.divergences}
    # Compile-time evidence only: the ranks and what differs, but no call (logs carry no calls).
    assert found["recompile_call"].ranks == [1] and found["recompile_call"].first_call is None
    assert found["sites"].ranks == [1]
    # Via import: per-rank receipts, then merge.
    r = seamscope("import", str(trace), "--out", str(trace.parent / "imported"))
    assert r.returncode == 0, r.stderr
    r = seamscope("merge", str(trace.parent / "imported"), "--out", str(trace.parent / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "recompile_call: rank(s) 1" in r.stdout


# --- a job stopped from outside: the ranks' receipts are merged, not lost -------------------------


def test_sigterm_to_run_nproc_stops_the_ranks_and_merges_what_they_measured(tmp_path, fresh_server):
    """A scheduler sends SIGTERM to the process it started (``seamscope run --nproc 2``): the signal
    is passed on through torchrun to the ranks, each writes its receipt marked terminated, and the
    merged receipt is written before the exit status 143."""
    import signal
    import time

    out, ready = tmp_path / "out", tmp_path / "ready"
    ready.mkdir()
    p = _nproc(fresh_server, tmp_path, ["--quiet", "--out", str(out), JOB, "--", "--mode", "agree", "--steps", "3",
                                        "--linger-in", str(ready)], {})
    try:
        end = time.monotonic() + 300
        while len(os.listdir(ready)) < 2 and p.running() and time.monotonic() < end:
            time.sleep(0.05)
        assert sorted(os.listdir(ready)) == ["ready-0", "ready-1"], (tmp_path / "stderr").read_text()
        p.send_signal(signal.SIGTERM)
    finally:
        code = p.wait(120)
    err = (tmp_path / "stderr").read_text()
    assert code == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]  # torchrun's own stop is one line, not a crash
    merged = load_receipt(str(out / "receipt.json"))
    statuses = {e.rank: e.status for e in merged.ranks.ranks}
    assert statuses == {0: "terminated (SIGTERM)", 1: "terminated (SIGTERM)"}, err[-3000:]
    assert all(e.call_count == 3 for e in merged.ranks.ranks)
    assert "rank 1 terminated (SIGTERM)" in merged.ranks.ledger_note
