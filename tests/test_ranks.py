"""Merging ranks without torch: fake ledgers written as per-rank receipts, then merged.

GIVEN per-rank folders like a torchrun job's ``--out`` (``rank-N/receipt.json``), WHEN they are
merged, THEN divergences name the ranks and the first call, and bad input is named while the ranks
that could be read are still merged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgspec
import pytest
from fakes import seamscope_here

from seamscope.analyze.ranks import MIN_STEADY_CALLS, gather, merge, site_origin
from seamscope.analyze.receipt import make_receipt
from seamscope.ingest.receipt import load_receipt
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import BreakSite, Frame
from seamscope.render.receipt_json import write_receipt_files

MS = 1_000_000


def ledger(walls_ms, *, rank, world=2, recompile_at=None, sha="a" * 64):
    """Call 0 compiles 0/0; then one region per call lasting ``walls_ms[i]`` ms; optionally a
    recompile 0/1 at call ``recompile_at``."""
    calls = [FakeCall([FakeStep("compile", 5 * MS, "0/0"), FakeStep("region", MS, "0/0")])]
    for i, w in enumerate(walls_ms, start=1):
        steps = []
        if i == recompile_at:
            steps.append(FakeStep("compile", 5 * MS, "0/1"))
        steps.append(FakeStep("region", int(w * MS), "0/1" if recompile_at and i >= recompile_at else "0/0"))
        calls.append(FakeCall(steps))
    led = play(FakeProgram(calls=calls)).build()
    run = msgspec.structs.replace(led.run, source="live", rank=rank, world_size=world, input_trace_sha256=sha)
    return msgspec.structs.replace(led, run=run)


def write_rank(root, led, name=None):
    write_receipt_files(make_receipt(led), os.path.join(root, name or f"rank-{led.run.rank}"))


def merged(root, **kw):
    return merge(gather(str(root)), **kw).ranks


def kinds(section):
    return {d.kind: d for d in section.divergences}


def test_identical_ranks_do_not_diverge_and_keep_rank0_as_primary(tmp_path):
    walls = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95]
    for r in (0, 1):
        write_rank(tmp_path, ledger(walls, rank=r))
    receipt = merge(gather(str(tmp_path)))
    sec = receipt.ranks
    assert sec.ranks_present == [0, 1] and sec.world_size == 2 and sec.primary_rank == 0
    assert sec.divergences == [] and sec.problems == []
    assert [c.regions for c in sec.ranks[1].calls][:2] == [["0/0"], ["0/0"]]
    # The primary ledger is rank 0's, untouched: its structure hash is rank 0's own.
    rank0 = load_receipt(str(tmp_path / "rank-0" / "receipt.json"))
    assert receipt.structure_sha256 == rank0.structure_sha256
    assert receipt.ledger == rank0.ledger


def test_merged_receipt_reads_back_strictly(tmp_path):
    for r in (0, 1):
        write_rank(tmp_path, ledger([1, 1, 1], rank=r, recompile_at=2 if r else None))
    out = tmp_path / "merged"
    path = write_receipt_files(merge(gather(str(tmp_path))), str(out))
    back = load_receipt(path)
    assert back.ranks is not None and [e.rank for e in back.ranks.ranks] == [0, 1]
    # A folder holding an earlier merged receipt is not a rank.
    assert merged(tmp_path).ranks_present == [0, 1]


def test_recompile_at_a_different_call_names_the_rank_and_the_first_call(tmp_path):
    write_rank(tmp_path, ledger([1] * 6, rank=0, world=3, recompile_at=4))
    write_rank(tmp_path, ledger([1] * 6, rank=1, world=3, recompile_at=2))
    write_rank(tmp_path, ledger([1] * 6, rank=2, world=3, recompile_at=4))
    sec = merged(tmp_path)
    d = kinds(sec)["recompile_call"]
    assert d.ranks == [1] and d.reference_ranks == [0, 2]
    assert d.first_call == 2
    assert "call 2" in d.detail and "call 4" in d.detail
    assert sec.problems == []


def test_ranks_on_different_torch_python_or_library_versions_are_a_divergence_of_their_own(tmp_path):
    runs = ((0, "2.13.0", "3.11.9", "4.57.0"), (1, "2.14.1", "3.11.9", "4.57.0"), (2, "2.13.0", "3.12.1", "4.57.0"),
            (3, "2.13.0", "3.11.9", "4.56.2"), (4, "2.13.0", "3.11.9", "4.57.0"))
    for r, torch_v, py, hf in runs:
        led = ledger([1] * 3, rank=r, world=5)
        led = msgspec.structs.replace(led, environment=msgspec.structs.replace(
            led.environment, torch_version=torch_v, python_version=py, packages={"transformers": hf}))
        write_rank(tmp_path, led)
    sec = merged(tmp_path)
    found = [d for d in sec.divergences if d.kind == "versions"]
    assert [(d.ranks, d.reference_ranks) for d in found] == [([1], [0, 4]), ([2], [0, 4]), ([3], [0, 4])]
    assert "rank 1 ran torch 2.14.1, rank 0 torch 2.13.0" in found[0].detail
    assert "rank 2 ran Python 3.12.1, rank 0 Python 3.11.9" in found[1].detail
    assert "rank 3 ran transformers 4.56.2, rank 0 transformers 4.57.0" in found[2].detail
    assert {d.kind for d in sec.divergences} == {"versions"}  # the same program otherwise
    r = seamscope_here(["merge", str(tmp_path), "--out", str(tmp_path / "m")], tmp_path)
    assert r.returncode == 0 and "no divergence" not in r.stdout + r.stderr and "torch 2.14.1" in r.stdout + r.stderr


def test_steady_time_beyond_noise_is_a_divergence_from_its_first_slow_call(tmp_path):
    write_rank(tmp_path, ledger([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], rank=0))
    # Rank 1 becomes 60 % slower from call 2 on.
    write_rank(tmp_path, ledger([1.0, 1.6, 1.62, 1.58, 1.6, 1.61], rank=1))
    sec = merged(tmp_path)
    assert set(kinds(sec)) == {"steady_time"}
    d = kinds(sec)["steady_time"]
    assert d.ranks == [1] and d.reference_ranks == [0]
    assert d.first_call == 2
    assert "+60%" in d.detail


def test_steady_time_within_noise_or_floor_is_not_a_divergence(tmp_path):
    # 5 % apart: under the 10 % floor.
    write_rank(tmp_path, ledger([1.0] * 6, rank=0))
    write_rank(tmp_path, ledger([1.05] * 6, rank=1))
    assert merged(tmp_path).divergences == []


def test_noisy_ranks_widen_the_band(tmp_path):
    # Medians 1.0 and 1.3 ms (30 % apart), but each rank's own spread is wide (IQR ≈ 0.6 ms).
    write_rank(tmp_path, ledger([0.4, 1.0, 1.6, 0.5, 1.5, 1.0], rank=0))
    write_rank(tmp_path, ledger([0.7, 1.3, 1.9, 0.8, 1.8, 1.3], rank=1))
    assert merged(tmp_path).divergences == []


def test_too_few_steady_calls_are_not_judged_and_say_so(tmp_path):
    n = MIN_STEADY_CALLS - 1
    write_rank(tmp_path, ledger([1.0] * n, rank=0))
    write_rank(tmp_path, ledger([3.0] * n, rank=1))
    sec = merged(tmp_path)
    assert sec.divergences == []
    assert "not judged here: ranks 0, 1" in sec.time_rule


def test_different_call_counts_diverge_at_the_first_missing_call(tmp_path):
    write_rank(tmp_path, ledger([1] * 6, rank=0))
    write_rank(tmp_path, ledger([1] * 4, rank=1))
    d = kinds(merged(tmp_path))["call_count"]
    assert d.ranks == [1] and d.first_call == 5


# --- bad input ----------------------------------------------------------------------------------


def run_merge(*args):
    return subprocess.run([sys.executable, "-m", "seamscope", "merge", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_rank_that_never_wrote_its_ledger_is_named_and_the_rest_merged(tmp_path):
    write_rank(tmp_path, ledger([1] * 3, rank=0, world=3))
    write_rank(tmp_path, ledger([1] * 3, rank=2, world=3))
    (tmp_path / "rank-1").mkdir()  # crashed before writing
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"))
    assert r.returncode == 2, r.stderr
    assert "rank-1/: no receipt.json: rank 1 crashed or never wrote its ledger" in r.stderr
    assert "Traceback" not in r.stderr
    sec = load_receipt(str(tmp_path / "m" / "receipt.json")).ranks
    assert sec.ranks_present == [0, 2]
    assert [p.kind for p in sec.problems] == ["missing_rank"]  # named once, not twice


def test_a_rank_missing_from_the_world_size_is_named(tmp_path):
    write_rank(tmp_path, ledger([1] * 3, rank=0, world=4))
    write_rank(tmp_path, ledger([1] * 3, rank=1, world=4))
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m.json"))
    assert r.returncode == 2
    assert "world size is 4 but no ledger for rank(s) 2, 3" in r.stderr
    assert json.loads((tmp_path / "m.json").read_text())["ranks"]["ranks_present"] == [0, 1]


def test_ledgers_of_different_runs_are_named_and_left_out(tmp_path):
    write_rank(tmp_path, ledger([1] * 3, rank=0, world=3))
    write_rank(tmp_path, ledger([1] * 3, rank=1, world=3))
    write_rank(tmp_path, ledger([1] * 3, rank=2, world=3, sha="b" * 64))
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"))
    assert r.returncode == 2
    assert "receipts of different runs in one folder: rank-2/receipt.json" in r.stderr
    sec = load_receipt(str(tmp_path / "m" / "receipt.json")).ranks
    assert sec.ranks_present == [0, 1]
    mixed = [p for p in sec.problems if p.kind == "mixed_runs"]
    assert mixed and mixed[0].ranks == [2]


def test_a_world_size_that_does_not_match_the_files_is_named(tmp_path):
    for rk in (0, 1):
        write_rank(tmp_path, ledger([1] * 3, rank=rk, world=2))
    write_rank(tmp_path, ledger([1] * 3, rank=2, world=2))  # a stale rank-2 from a bigger job
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"))
    assert r.returncode == 2
    assert "world size is 2 but the folder holds rank(s) 2" in r.stderr
    # An explicit world size that the ranks contradict is named too.
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"), "--world-size", "3")
    assert r.returncode == 2 and "world size 3 was given but the ranks record 2" in r.stderr


def test_an_unreadable_receipt_is_named(tmp_path):
    write_rank(tmp_path, ledger([1] * 3, rank=0))
    (tmp_path / "rank-1").mkdir()
    (tmp_path / "rank-1" / "receipt.json").write_text("{not json")
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "rank-1/receipt.json" in r.stderr
    assert load_receipt(str(tmp_path / "m" / "receipt.json")).ranks.ranks_present == [0]


def test_a_folder_with_nothing_to_merge_is_unusable(tmp_path):
    r = run_merge(str(tmp_path))
    assert r.returncode == 2 and "no per-rank receipts" in r.stderr and "Traceback" not in r.stderr


def test_fail_on_divergence_exits_1(tmp_path):
    write_rank(tmp_path, ledger([1] * 6, rank=0))
    write_rank(tmp_path, ledger([1] * 6, rank=1, recompile_at=3))
    assert run_merge(str(tmp_path), "--out", str(tmp_path / "m")).returncode == 0
    r = run_merge(str(tmp_path), "--out", str(tmp_path / "m"), "--fail-on-divergence")
    assert r.returncode == 1 and "recompile_call: rank(s) 1 from call 3" in r.stdout


# --- whose code a break is in ------------------------------------------------------------------


def _site(file, stack):
    return BreakSite(site_id="B0", file=file, line=1, function="f", gb_code=None, gb_type=None, reason="",
                     user_stack=[Frame(file=f, line=1, function="f") for f in stack], compile_ids=[])


@pytest.mark.parametrize(
    ("file", "stack", "origin"),
    [
        ("train.py", ["train.py"], "user"),
        ("site-packages/torch/nn/parallel/distributed.py",
         ["train.py", "site-packages/torch/nn/parallel/distributed.py"], "ddp"),
        # A stdlib context manager entered from DDP's forward is still DDP's break.
        ("/usr/lib/python3.11/contextlib.py",
         ["train.py", "site-packages/torch/nn/parallel/distributed.py", "/usr/lib/python3.11/contextlib.py"], "ddp"),
        ("site-packages/transformers/x.py", ["train.py", "site-packages/transformers/x.py"], "framework"),
        # DDP's frames above the user's own code do not make the user's break a framework break.
        ("train.py", ["site-packages/torch/nn/parallel/distributed.py", "train.py"], "user"),
        # FSDP2's hook wrapper (fully_shard), reached from the user's forward: FSDP's, not DDP's.
        ("site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_common.py",
         ["train.py", "site-packages/torch/nn/modules/module.py",
          "site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_common.py"], "fsdp"),
        ("site-packages/torch/distributed/_composable/fsdp/fully_shard.py",
         ["train.py", "site-packages/torch/distributed/_composable/fsdp/fully_shard.py"], "fsdp"),
        # A collective's code reached from FSDP's state: the wrapper reached is FSDP.
        ("site-packages/torch/distributed/distributed_c10d.py",
         ["train.py", "site-packages/torch/distributed/fsdp/_fully_shard/_fsdp_state.py",
          "site-packages/torch/distributed/distributed_c10d.py"], "fsdp"),
        # Other torch.distributed code, through no wrapper: library code.
        ("site-packages/torch/distributed/tensor/_api.py",
         ["train.py", "site-packages/torch/distributed/tensor/_api.py"], "framework"),
    ],
)
def test_site_origin(file, stack, origin):
    assert site_origin(_site(file, stack)) == origin


@pytest.mark.parametrize("file", ["/usr/lib/python3.11/contextlib.py", "<frozen importlib._bootstrap>",
                                  "site-packages/transformers/x.py"])
def test_the_ranks_view_and_the_findings_agree_on_library_code(file):
    """One rule (``model.normalize.is_library``): a frame of the standard library is library code for the
    ranks view (not the user's break) and for the findings (a package, the user's frame found below it)."""
    from seamscope.analyze.findings import _where

    site = _site(file, ["train.py", file])
    where = _where(site)
    assert site_origin(site) == "framework"
    assert where.package is not None and where.package in file.replace("/", ".")
    assert where.user_frame is not None and where.user_frame.file == "train.py"
    user = _site("train.py", ["train.py"])
    assert site_origin(user) == "user" and _where(user).package is None
