"""try's catalogue on real torch (backend "eager"), on programs it was not built on.

One input's new size recompiles every frame a break made of one program (a compiled training
step whose model breaks inside, ``workloads/trials/split_step.py``): each frame names the tensor
its own way (``batch``, ``x``, ``h``). ``try``'s catalogue makes one mark candidate for the cause,
marking every frame's source, and its flags leave one recompile where a mark on one frame's source
leaves three (PyTorch's counts).

A program Dynamo compiles nothing of (a mixture of experts' boolean-mask routing,
``workloads/trials/moe_mask.py``: it gives up on the only frame it traces) pays the tracing on
every process start and runs eagerly all the same. ``try``'s catalogue offers running it eagerly
(``--stance force_eager``, a ``set_stance`` line as its patch), which compiles nothing (PyTorch's
count), and no recompile limit (no frame hit one: its compilation failed).
"""

from __future__ import annotations

import os

import pytest
from trial_checks import catalogued, inside, run_patched

TRIALS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "trials")

pytestmark = pytest.mark.torch

# --- one mark candidate for a cause that recompiled several frames -------------------------------


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    pytest.importorskip("torch")
    d, raw, _, receipt, drafts = catalogued(tmp_path_factory, os.path.join(TRIALS, "split_step.py"))
    marks = [x for x in drafts if x.spec.flags()[0] == "--mark-dynamic"]
    with inside(d):
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


# --- a program Dynamo compiled no graph of ----------------------------------------------------------


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    pytest.importorskip("torch")
    from seamscope.experiments.trials.patches import spec_patch

    d, raw, graphs, _, drafts = catalogued(tmp_path_factory, os.path.join(TRIALS, "moe_mask.py"))
    eager = next((x for x in drafts if x.spec.flags() == ["--stance", "force_eager"]), None)
    with inside(d):
        patch = spec_patch(eager.spec, "moe_mask.py") if eager else None
        after = run_patched("moe_mask.py", ["--stance", "force_eager"], d / "eager")
    return raw, graphs, drafts, eager, patch, after


def test_dynamo_compiled_no_graph_and_gave_up_on_the_frame(moe):
    raw, graphs, *_ = moe
    assert graphs == 0 and raw["summary"]["graph_count"] == 0
    assert [f["status"] for f in raw["summary"]["fallbacks"]] == ["failed"]


def test_the_candidate_runs_it_eagerly_with_no_recompile_limit_offered(moe):
    _, _, drafts, eager, patch, _ = moe
    assert eager is not None and eager.name == "force-eager" and "compiled no graph" in eager.targets
    assert eager.cost_ns > 0
    assert not any("recompile_limit=64" in " ".join(d.spec.flags()) for d in drafts)
    assert patch is not None and 'torch.compiler.set_stance("force_eager")' in patch.diff


def test_run_eagerly_it_traces_nothing(moe):
    *_, after = moe
    compiles, recompiles, breaks, graphs = after
    assert (compiles, recompiles, breaks, graphs) == (0, 0, 0, 0)


# --- an item of a dict subclass (transformers' ModelOutput) -----------------------------------------


@pytest.fixture(scope="module")
def model_output(tmp_path_factory):
    pytest.importorskip("transformers")
    d, raw, _, receipt, drafts = catalogued(tmp_path_factory, os.path.join(TRIALS, "model_output_arg.py"))
    marks = [x for x in drafts if x.spec.mark_dynamic]
    with inside(d):
        after = run_patched("model_output_arg.py", marks[0].spec.flags(), d / "marked") if marks else None
    guards = " ".join(g for c in receipt.ledger.compilations for g in c.failed_guards)
    return raw, guards, marks, after


def test_the_mark_names_the_items_as_dynamo_builds_them(model_output):
    """The guards name the tensor two ways (``kwargs['enc'][0]``-like and Dynamo's
    ``dict.__getitem__(...)``); only the second is a source a mark matches (BART's
    ``encoder_outputs``: the first marked nothing and the candidate 'did not remove its target')."""
    _, guards, marks, _ = model_output
    assert "dict.__getitem__(kwargs['enc']" in guards  # PyTorch's own source name
    assert [m.spec.mark_dynamic for m in marks] == [(r"dict\.__getitem__\(L\['kwargs'\]\['enc'\].*:1",)]
    assert marks[0].name == "mark-dynamic-enc-items-1"


def test_its_flags_compile_every_length_once(model_output):
    raw, _, _, after = model_output
    assert raw["summary"]["recompile_count"] >= 1
    assert after is not None and after[:2] == (1, 0) and after[3] == 1  # compiles, recompiles; PyTorch's graphs
