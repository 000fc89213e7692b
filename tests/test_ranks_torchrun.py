"""Real 2-rank jobs on the CPU (gloo), each rank under ``seamscope run``, then merged.

Three jobs, each shared by several tests (module-scoped fixtures):
- ``ddp``: ``seamscope run --nproc 2 tests/workloads/ranks_job.py -- --mode ddp --linger-in DIR``:
  DDP over four Linear(512, 512) with ``bucket_cap_mb=1``; the ranks agree. Once both ranks have
  made their calls the job is stopped as a scheduler stops one, with SIGTERM to the process it
  started: the ranks' receipts are written marked terminated and merged (one job serves the DDP
  assertions and the signal's).
- ``diverge``: ``TORCH_TRACE=DIR seamscope run --nproc 2 tests/workloads/ranks_job.py -- --mode
  diverge``: rank 1 takes another branch inside the compiled function from call 3 on; the same
  job leaves a multi-rank ``TORCH_TRACE`` directory for import (one ledger per rank).
- ``fsdp``: ``torchrun --standalone --nproc-per-node 2 -m seamscope run tests/workloads/ranks_job.py
  -- --mode fsdp --at 2 --pg-timeout 300``: FSDP2 ``fully_shard``; from call 2 on rank 1 feeds a
  batch of another size, so at call 2 it compiles alone while rank 0 waits at the barrier. Its
  rank-0 receipt is also the real receipt 256 synthetic ranks are made from (the scale test).

Each rank is a new interpreter started by torchrun; torchrun (``fsdp``) and ``seamscope run --nproc``
are processes of their own forked from the test run's server (``fresh_server``: their torch or
seamscope imports done once), and the commands run on the jobs' output (``merge``, ``diff``,
``verify``, ``import``) run in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

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
def fsdp_job(tmp_path_factory, fresh_server):
    out = tmp_path_factory.mktemp("fsdp") / "out"
    r = seamscope_forked(fresh_server, ["--standalone", "--nproc-per-node", "2", "-m", "seamscope", "run", "--quiet",
                                        "--out", str(out), JOB, "--", "--mode", "fsdp", "--steps", "8", "--at", "2",
                                        "--pg-timeout", "300"],
                         ROOT, env=ENV, unset=("TORCH_TRACE",), entry="torch.distributed.run:main")
    assert r.returncode == 0, r.stderr[-6000:]
    return out


def _nproc(server, base, args, env):
    """``seamscope run --nproc 2 ARGS`` started in a process of its own, forked from the server."""
    return Forked(server, ["run", "--nproc", "2", *args], ROOT, stdout=base / "stdout", stderr=base / "stderr",
                  env={**ENV, **env}, unset=() if "TORCH_TRACE" in env else ("TORCH_TRACE",))


@dataclass(frozen=True)
class Stopped:
    """A job stopped by SIGTERM once its ranks had made their calls: its output folder, its exit
    code and its stderr."""

    out: Path
    code: int | None
    stderr: str


DDP_STEPS = 4


@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory, fresh_server):
    """``seamscope run --nproc 2`` forked from the test run's server; the ranks it starts (through
    torchrun) are new interpreters, as always. Each rank writes ``ready-RANK`` after its calls and
    waits; then a scheduler's SIGTERM goes to the process the test started."""
    base = tmp_path_factory.mktemp("ddp")
    out, ready = base / "out", base / "ready"
    ready.mkdir()
    p = _nproc(fresh_server, base, ["--quiet", "--out", str(out), JOB, "--", "--mode", "ddp", "--steps",
                                    str(DDP_STEPS), "--linger-in", str(ready)], {})
    try:
        end = time.monotonic() + 300
        while len(os.listdir(ready)) < 2 and p.running() and time.monotonic() < end:
            time.sleep(0.05)
        assert sorted(os.listdir(ready)) == ["ready-0", "ready-1"], (base / "stderr").read_text()
        p.send_signal(signal.SIGTERM)
    finally:
        code = p.wait(120)
    return Stopped(out, code, (base / "stderr").read_text())


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
        run = load_receipt(str(ddp_job.out / f"rank-{rank}" / "receipt.json")).ledger.run
        assert (run.rank, run.world_size) == (rank, 2)


def test_ddp_splits_are_shown_as_such(ddp_job):
    sec = merge(gather(str(ddp_job.out))).ranks
    assert sec.ranks_present == [0, 1]
    for e in sec.ranks:
        # Each Linear(512, 512) holds 1.05 MB of parameters, over the 1 MB bucket cap: DDPOptimizer
        # puts each in its own bucket and splits the user's forward into 4 submodules.
        assert [(d.frame_name, d.submodules) for d in e.ddp_splits] == [("forward", 4)]
        # ... which Dynamo still counts as one graph (splits are not graph breaks).
        split = next(c for c in load_receipt(str(ddp_job.out / f"rank-{e.rank}" / "receipt.json")).ledger.compilations
                     if c.compile_id == e.ddp_splits[0].compile_id)
        assert split.graph_count == 1 and split.own_break_site_id is None


def test_breaks_inside_torch_ddp_code_are_framework_breaks(ddp_job):
    sec = merge(gather(str(ddp_job.out))).ranks
    for e in sec.ranks:
        assert e.sites, "DDP's forward breaks (logger call in _pre_forward)"
        assert {s.origin for s in e.sites} == {"ddp"}
        assert any("torch/nn/parallel/" in s.file for s in e.sites)


def test_ranks_that_agree_report_no_divergence(ddp_job):
    sec = merge(gather(str(ddp_job.out))).ranks
    # Timing is not judged: 3 steady calls per rank are fewer than the rule needs, so this
    # assertion does not depend on how loaded the machine is.
    assert sec.divergences == [] and sec.problems == []
    assert "not judged here: ranks 0, 1" in sec.time_rule
    r = seamscope("merge", str(ddp_job.out), "--fail-on-divergence")
    assert r.returncode == 0, r.stderr
    assert "no divergence between the ranks" in r.stdout
    assert "forward ran as 4 submodules, one per DDP bucket" in r.stdout
    assert "framework break in torch's DDP code" in r.stdout


# --- FSDP2: its breaks are FSDP's; one rank compiling a new shape alone is a compile skew ---------


def test_breaks_inside_fsdp2_are_tagged_fsdp(fsdp_job):
    sec = merge(gather(str(fsdp_job))).ranks
    for e in sec.ranks:
        fsdp = [s for s in e.sites if "torch/distributed/fsdp/" in s.file]
        assert fsdp, [(s.file, s.origin) for s in e.sites]  # FSDP2's hook wrapper, skipped by Dynamo
        assert {s.origin for s in fsdp} == {"fsdp"}
        assert "ddp" not in {s.origin for s in e.sites}
    r = seamscope("merge", str(fsdp_job), "--out", str(fsdp_job.parent / "m"))
    assert r.returncode == 0, r.stderr
    assert "framework break in torch's FSDP code" in r.stdout and "DDP code" not in r.stdout


def test_a_rank_compiling_a_new_shape_alone_is_a_compile_skew(fsdp_job):
    receipt = merge(gather(str(fsdp_job)))
    sec = receipt.ranks
    rank1 = load_receipt(str(fsdp_job / "rank-1" / "receipt.json")).ledger
    # PyTorch's own record of it: rank 1's recompile at call 2 failed a size guard.
    (rec,) = [c for c in rank1.compilations if c.is_recompile]
    assert rec.call_index == 2 and "size mismatch" in rec.failed_guards[0]
    compiled = next(e for e in sec.ranks if e.rank == 1).calls[2].compile_ns
    waited = next(e for e in sec.ranks if e.rank == 0).calls[2].compile_ns
    at2 = [k for k in sec.skews if k.call_index == 2]
    assert len(at2) == 1, sec.skews
    k = at2[0]
    assert (k.slow_ranks, k.idle_ranks) == ([1], [0]) and waited == 0
    assert k.wait_ns == compiled > 0
    assert f"{rec.compile_id} " in k.compile_ids[0]
    assert k.sentence.startswith("at call 2 rank 1 compiled for ") and "rank 0 did not compile" in k.sentence
    # The timeout the job set, as the ranks recorded it before the script destroyed its group.
    assert sec.pg_timeout_ns == 300 * 10**9 and sec.pg_timeout_source.startswith("recorded by ranks 0, 1 (300 s, gloo")
    assert k.warning is None
    assert k.skew_id in [i.item_id for i in receipt.findings.ranked if i.axis == "compile_skew"]


def test_256_ranks_merge_one_at_a_time_and_stay_readable(fsdp_job, tmp_path):
    """256 ranks made from one real receipt with varied figures (rank 17 compiles 5× longer at its
    first call, ranks 101 and 202 are 1.6× slower in steady calls): the merge names exactly those,
    holds one rank's receipt at a time, and groups the rest in the views."""
    import time
    import tracemalloc

    from rank_receipts import write_ranks

    from seamscope.analyze.report_view.ranks import build_ranks

    n, real = 256, str(fsdp_job / "rank-0" / "receipt.json")
    first = write_ranks(real, str(tmp_path / "ranks"), n, slow=(101, 202), cold=17)
    write_ranks(real, str(tmp_path / "warm"), 2)
    merge(gather(str(tmp_path / "warm")))  # imports and caches warmed before anything is measured
    tracemalloc.start()
    one = load_receipt(str(tmp_path / "ranks" / "rank-5" / "receipt.json"))
    one_size = tracemalloc.get_traced_memory()[0]
    del one
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    gathered = gather(str(tmp_path / "ranks"))
    held = tracemalloc.get_traced_memory()[0] - base
    receipt = merge(gathered)
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    print(f"merge of {n} ranks: {took:.2f} s; traced memory: {held / 2**20:.2f} MiB held for the ranks after "
          f"reading them, peak {peak / 2**20:.2f} MiB (hashing the merged receipt included); one parsed receipt "
          f"{one_size / 2**10:.0f} KiB, {n} of them {n * one_size / 2**20:.1f} MiB")
    # Not held per rank: what is kept of each rank is a fraction of its parsed receipt, and the
    # peak, the merged receipt's own hashing included, stays under every rank's receipt held at once.
    assert held < n * one_size / 4, (held, one_size)
    assert peak < n * one_size, (peak, one_size)

    sec = receipt.ranks
    assert sec.ranks_present == list(range(n)) and sec.world_size == n and sec.problems == []
    (k,) = sec.skews
    others = min(v for r, v in first.items() if r != 17)
    assert (k.call_index, k.slow_ranks, len(k.fast_ranks)) == (0, [17], n - 1)
    assert k.wait_ns == first[17] - others and k.max_ns == first[17]
    assert {d.kind: d.ranks for d in sec.divergences} == {"steady_time": [101, 202]}
    assert receipt.ledger == load_receipt(str(tmp_path / "ranks" / "rank-0" / "receipt.json")).ledger

    view = build_ranks(receipt)
    labels = [r.label for r in view.rows]
    assert labels == [f"0–16, 18–100, 102–201, 203–{n - 1} ({n - 3} ranks)", "17", "101", "202"], labels
    assert sorted(r for row in view.rows for r in row.ranks) == list(range(n))
    out = seamscope("merge", str(tmp_path / "ranks"), "--out", str(tmp_path / "m"))
    assert out.returncode == 0, out.stderr
    assert f"{n} ranks in 4 rows" in out.stdout and "steady_time: rank(s) 101, 202" in out.stdout
    assert len(out.stdout.splitlines()) < 30


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
    from seamscope.ingest.torch_trace import find_logs

    out, trace, _ = diverge_job
    assert len(find_logs(str(trace))) == 2  # one log per rank
    sec = merge(gather(str(trace))).ranks
    assert sec.ranks_present == [0, 1]
    found = {d.kind: d for d in sec.divergences}
    # Compile-time evidence only: the ranks and what differs, but no call (logs carry no calls).
    assert found["recompile_call"].ranks == [1] and found["recompile_call"].first_call is None
    assert found["sites"].ranks == [1]
    # Via import: per-rank receipts, each named by its rank and counting that rank's compilations as
    # its live capture did (rank 1 compiled more: ranks swapped or mixed would not match), then merge.
    r = seamscope("import", str(trace), "--out", str(trace.parent / "imported"))
    assert r.returncode == 0, r.stderr
    compiles = []
    for rank in (0, 1):
        imported = load_receipt(str(trace.parent / "imported" / f"rank-{rank}" / "receipt.json"))
        assert imported.ledger.run.rank == rank
        compiles.append(imported.summary.compile_count)
        assert compiles[-1] == load_receipt(str(out / f"rank-{rank}" / "receipt.json")).summary.compile_count
    assert compiles[1] > compiles[0]
    r = seamscope("merge", str(trace.parent / "imported"), "--out", str(trace.parent / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "recompile_call: rank(s) 1" in r.stdout


# --- a job stopped from outside: the ranks' receipts are merged, not lost -------------------------


def test_sigterm_to_run_nproc_stops_the_ranks_and_merges_what_they_measured(ddp_job):
    """A scheduler sends SIGTERM to the process it started (``seamscope run --nproc 2``): the signal
    is passed on through torchrun to the ranks, each writes its receipt marked terminated, and the
    merged receipt is written before the exit status 143."""
    err = ddp_job.stderr
    assert ddp_job.code == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]  # torchrun's own stop is one line, not a crash
    merged = load_receipt(str(ddp_job.out / "receipt.json"))
    statuses = {e.rank: e.status for e in merged.ranks.ranks}
    assert statuses == {0: "terminated (SIGTERM)", 1: "terminated (SIGTERM)"}, err[-3000:]
    assert all(e.call_count == DDP_STEPS for e in merged.ranks.ranks)
    assert "rank 1 terminated (SIGTERM)" in merged.ranks.ledger_note
