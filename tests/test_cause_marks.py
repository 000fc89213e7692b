"""One input's new size recompiles every frame a break made of one program (a compiled training
step whose model breaks inside, ``workloads/trials/split_step.py``): each frame names the tensor
its own way (``batch``, ``x``, ``h``). ``try``'s catalogue makes one mark candidate for the cause,
marking every frame's source, and its flags leave one recompile where a mark on one frame's source
leaves three (PyTorch's counts, real torch, backend "eager")."""

from __future__ import annotations

import os
import shutil

import pytest
from trial_checks import inside, run_here, run_patched

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "workloads", "trials", "split_step.py")

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    pytest.importorskip("torch")
    from seamscope.experiments.trials.catalogue import catalogue
    from seamscope.ingest.receipt import load_receipt

    d = tmp_path_factory.mktemp("split")
    shutil.copy(SCRIPT, d / "split_step.py")
    with inside(d):
        raw, _ = run_here("split_step.py", [], d / "base")
        receipt = load_receipt(str(d / "base" / "receipt.json"))
        drafts = catalogue(receipt, script=str(d / "split_step.py"))
        marks = [x for x in drafts if x.spec.flags()[0] == "--mark-dynamic"]
        merged = run_patched("split_step.py", marks[0].spec.flags(), d / "merged") if marks else None
        one = run_patched("split_step.py", ["--mark-dynamic", "L['batch']:0"], d / "one")
    return raw, receipt, marks, merged, one


def test_the_cause_recompiled_several_frames(split):
    raw, receipt, *_ = split
    (cause,) = receipt.findings.causes
    assert raw["summary"]["recompile_count"] == 4 and len(cause.churn_finding_ids) == 4


def test_one_mark_candidate_marks_every_frames_source(split):
    _, _, marks, _, _ = split
    assert [m.name for m in marks] == ["mark-dynamic-batch-0-in-3-frames"]
    # Dynamo's ___stack0 (the value a resume frame receives) is no user source: not marked
    assert marks[0].spec.flags()[1::2] == ["L['batch']:0", "L['h']:0", "L['x']:0"]


def test_its_flags_leave_one_recompile_where_one_frames_mark_leaves_three(split):
    *_, merged, one = split
    compiles, recompiles, _, _ = merged
    assert recompiles == 1  # the resume frame's ___stack0, which only dynamic=True reaches
    assert one[1] == 3
