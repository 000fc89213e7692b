"""Every guard that failed at a recompile, not the first (real torch, backend "eager").

PyTorch names one failed guard per cached variant (``TORCH_LOGS=recompiles``); capture records
every one. A padded pair (``input_ids``, ``attention_mask`` of one length) then gets one cause
covering both and one mark of both, whose patch, applied with ``git apply``, removes the
recompile; a flag the program sets on its first call is named a first-call artifact. The rule
that picks a recompile's explaining guards is tested without torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from trial_checks import inside, run_here

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "workloads", "trials", "padded_pair.py")

# --- the rule, torch-free -------------------------------------------------------------------------


def test_a_reason_with_several_guards_splits_into_them():
    from seamscope.analyze.findings_churn import split_guards

    entry = "0/0: tensor 'a' size mismatch at index 1. expected 8, actual 12; self.flag is None\nUser stack trace:\n  x"
    assert split_guards(entry) == ["tensor 'a' size mismatch at index 1. expected 8, actual 12", "self.flag is None"]


def test_what_failed_against_every_variant_explains_the_recompile():
    from seamscope.analyze.causes import parse_change
    from seamscope.analyze.findings_churn import cause_guards

    size = "tensor 'x' size mismatch at index 0. expected 4, actual 6"
    # the latest variant (listed first) was compiled for a call that passed an extra argument
    full = ["0/1: len(L['kwargs']) == 1; " + size, "0/0: " + size]
    assert cause_guards(full) == [size]
    # PyTorch's log (first guard of each variant): nothing failed against both, the first variant names it
    first_only = ["0/1: len(L['kwargs']) == 1", "0/0: " + size]
    assert cause_guards(first_only) == [size]
    assert parse_change(first_only).subject == parse_change(full).subject == "x"


def test_the_fuller_reason_keeps_pytorchs_first_and_its_user_stack():
    from seamscope.capture.adapter.guard_failures import tensor_reason, with_every_failed_guard

    class T:  # what the tensor guard reads of a tensor
        shape, dtype, requires_grad = (2, 12), "torch.float32", False

        def stride(self):
            return (12, 1)

    code = ("check_tensor(L['attention_mask'], Tensor, DispatchKeySet(CPU), torch.float32, device=None, "
            "requires_grad=False, size=[2, 8], stride=[8, 1])  # x")
    mask = tensor_reason("L['attention_mask']", code, T())
    assert mask == "tensor 'attention_mask' size mismatch at index 1. expected 8, actual 12"
    first = "0/0: tensor 'input_ids' size mismatch at index 1. expected 8, actual 12\nUser stack trace:\n  f"
    again = "tensor 'input_ids' size mismatch at index 0. expected 2, actual 3"  # a tensor PyTorch named already
    assert with_every_failed_guard(first, [again, mask, "self.flag is None"]) == (
        "0/0: tensor 'input_ids' size mismatch at index 1. expected 8, actual 12; " + mask
        + "; self.flag is None\nUser stack trace:\n  f")


def _ledger(guards_per_recompile):
    import msgspec

    from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
    from seamscope.model.ledger import Compilation

    led = play(FakeProgram(calls=[FakeCall([FakeStep("compile", 10, "0/0"), FakeStep("region", 100, "0/0")])])).build()
    comps = [Compilation(compile_id=f"0/{i}", frame_name="forward", file="m.py", line=3, status="ok", call_index=i,
                         duration_ns=10, failed_guards=list(g))
             for i, g in enumerate([[], *guards_per_recompile])]
    return msgspec.structs.replace(led, compilations=comps)


def test_churn_findings_and_causes_name_a_recompile_by_the_same_guard():
    from seamscope.analyze.causes import recompile_causes
    from seamscope.analyze.findings_churn import churn_findings

    # the latest variant lists a flag first; what failed against both variants is the size
    size = "tensor 'x' size mismatch at index 0. expected 4, actual 6"
    led = _ledger([["0/0: self.mode == 1"], ["0/1: self.mode == 1; " + size, "0/0: " + size]])
    churn = {f.churn.compile_ids[0]: f.churn.pattern for f in churn_findings(led) if f.churn}
    causes = {c.compile_ids[0]: c.family for c in recompile_causes(led)}
    assert churn == {"0/1": "value", "0/2": "shape"} and causes == {"0/1": "value", "0/2": "size"}


# --- live capture -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    pytest.importorskip("torch")
    from seamscope.ingest.receipt import load_receipt

    d = tmp_path_factory.mktemp("pair")
    shutil.copy(SCRIPT, d / "padded_pair.py")
    with inside(d):
        raw, graphs = run_here("padded_pair.py", [], d / "base")
        lazy, _ = run_here("padded_pair.py", ["--lazy-flag"], d / "lazy")
    return d, raw, graphs, load_receipt(str(d / "base" / "receipt.json")), lazy


@pytest.mark.torch
def test_the_recompile_records_both_inputs_of_the_padded_length(pair):
    _, raw, graphs, receipt, _ = pair
    assert raw["summary"]["recompile_count"] == 1 and graphs == 2  # PyTorch's count: two graphs
    (guards,) = [c.failed_guards for c in receipt.ledger.compilations if c.is_recompile]
    (entry,) = guards
    # PyTorch's own first reason stays first; the mask's failed guard follows it
    assert entry.startswith("0/0: tensor 'input_ids' size mismatch at index 1. expected 8, actual 12; ")
    assert "tensor 'attention_mask' size mismatch at index 1. expected 8, actual 12" in entry
    (cause,) = receipt.findings.causes
    assert "attention_mask dim 1" in cause.change and "mark_dynamic(attention_mask, 1)" in cause.remedy.text
    (churn,) = [f.churn for f in receipt.findings.findings if f.churn is not None]
    assert churn.subjects == ["attention_mask[1]", "input_ids[1]"]


@pytest.mark.torch
def test_one_mark_of_both_applied_with_git_removes_the_recompile(pair):
    from seamscope.experiments.trials.catalogue import catalogue
    from seamscope.experiments.trials.patches import spec_patch, write_patch

    d, _, _, receipt, _ = pair
    with inside(d):
        marks = [x for x in catalogue(receipt, script="padded_pair.py") if x.spec.mark_dynamic]
        assert [list(m.spec.mark_dynamic) for m in marks] == [["L['attention_mask']:1", "L['input_ids']:1"]]
        patch = spec_patch(marks[0].spec, "padded_pair.py")
        assert patch is not None
        path = write_patch(str(d), "mark", patch)
        subprocess.run(["git", "init", "-q"], check=True)
        subprocess.run(["git", "apply", path], check=True)
        raw, graphs = run_here("padded_pair.py", [], d / "patched")
    assert raw["summary"]["recompile_count"] == 0 and graphs == 1


@pytest.mark.torch
def test_a_flag_set_on_the_first_call_is_named_a_first_call_artifact(pair):
    *_, lazy = pair
    causes = lazy["findings"]["causes"]
    flag = next(c for c in causes if c["family"] == "flag")
    assert flag["subject"] == "self.problem_type" and flag["compile_ids"] == ["0/1"]
    assert "first-call artifact" in flag["change"] and flag["remedy"]["action"] == "warm_first_call"
    size = next(c for c in causes if c["family"] == "size")
    assert size["compile_ids"] == ["0/2"] and "attention_mask dim 1" in size["change"]
    assert "problem_type" not in size["change"]  # it failed against the first variant only
