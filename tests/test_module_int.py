"""An int Dynamo keeps a constant, changed every call: an attribute of an nn.Module (a KV cache's
fill position, ``workloads/trials/decoder_pos.py``) and a module global (a step counter,
``workloads/trials/global_step.py``), found, named and remedied (real torch, backend "eager").

Dynamo keeps such an int a constant: every position recompiles the whole model. Capture lists the
guard below the parent's ``_modules`` dict (a ``DictGuardManager``'s entries, which the guard
tree's ``get_child_managers`` does not list), so the recompiles are put down to the position, not
to the prompt's length; the finding's remedy and ``try``'s candidate are the Dynamo setting PyTorch's
own hint names, and the patch made from it leaves two graphs by PyTorch's count. The rules that
recognise the guard and tell a remedy that recompiles once from one that left the churn are tested
without torch. A global int has no setting: ``dynamic=True`` leaves it a constant too (PyTorch's
count), so it gets no policy candidate, and the remedy and the folded line say to pass it in.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from trial_checks import catalogued, inside, run_here

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "workloads", "trials", "decoder_pos.py")
GLOBAL = os.path.join(HERE, "workloads", "trials", "global_step.py")
HINT = ("  # self.calls += 1  # counter.py:13 in forward (HINT: torch.compile considers integer attributes of the "
        "nn.Module to be static. If you are observing recompilation, you might want to make this integer dynamic "
        "using torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this integer into a tensor.)")

# --- the rules, torch-free --------------------------------------------------------------------------


@pytest.mark.parametrize(("guards", "subject"), [
    (["self.calls == 0" + HINT], "self.calls"),  # PyTorch's reason, with its hint
    (["tensor 'ids' size mismatch at index 1. expected 8, actual 1",
      "self._modules['blocks']._modules['0'].pos == 0"], "self._modules['blocks']._modules['0'].pos"),
    (["L['self'].step == 12"], "L['self'].step"),
    (["n == 3"], None),  # an argument: dynamic=True reaches it
    (["self.scale == 0.5"], None),  # a float attribute: the setting is for ints (tensor-attr makes it a buffer)
    (["L['self'].training == True"], None),  # a flag
    (["___stack0 == 4"], None),
])
def test_a_guard_on_a_modules_int_is_recognised(guards, subject):
    from seamscope.analyze.findings_churn import module_int_subject

    assert module_int_subject(guards) == subject


@pytest.mark.parametrize(("guards", "subject"), [
    (["G['step'] == 3                                # return x * 2 + step  # s.py:4 in f"], "G['step']"),
    (["G['lr'] == 0.5"], None),  # a global float is made symbolic after one recompile
    (["L['n'] == 3"], None),
    (["self.calls == 0"], None),
])
def test_a_guard_on_a_global_int_is_recognised(guards, subject):
    from seamscope.analyze.findings_churn import global_int_subject

    assert global_int_subject(guards) == subject


def test_the_remedy_names_the_setting_and_under_dynamic_false_drops_it():
    from seamscope.analyze.findings_churn import module_int_remedy

    r = module_int_remedy("self.pos")
    assert r.action == "allow_unspec_int_on_nn_module" and r.config == {"allow_unspec_int_on_nn_module": "True"}
    assert "self.pos is an int attribute of an nn.Module" in r.text and "dynamic=False" not in r.text
    assert "remove dynamic=False" in module_int_remedy("self.pos", dynamic_false=True).text


def test_under_dynamic_false_the_candidate_also_drops_that_option():
    from types import SimpleNamespace as NS

    from seamscope.experiments.trials.catalogue import _unspec_int

    def receipt(options):
        return NS(ledger=NS(environment=NS(compile_options=options)))

    setting = ["--dynamo-config", "allow_unspec_int_on_nn_module=True"]
    assert _unspec_int(receipt({})) == _unspec_int(receipt({"dynamic": "True"})) == setting
    assert _unspec_int(receipt({"dynamic": "False"})) == [*setting, "--compile-option", "dynamic=none"]


def _figures(causes: dict[str, int] | None, guards: list[str] | None = None):
    from seamscope.model.trials import RunFigures

    texts = guards if guards is not None else list(causes or {})
    return RunFigures(label="rep-1", ok=True, exit_code=0, cause_guards=texts, cause_counts=causes or {})


def test_a_value_recompiled_on_once_is_removed_and_one_still_churning_is_kept():
    from seamscope.experiments.trials.targets import Target, cause_key, kept_target

    pos = "self._modules['blocks']._modules['0'].pos == 0"
    target = Target(guards={}, sites=frozenset(), causes={cause_key(pos): pos})
    base = [_figures({pos: 7})]
    assert kept_target(target, [_figures({pos: 1})], base) is None  # symbolic after one recompile
    assert kept_target(target, [_figures({pos: 2})], base) is None  # and one more for a branch on it
    assert "failed again in each of its 2 run(s)" in kept_target(target, [_figures({pos: 7})] * 2, base)
    assert kept_target(target, [_figures({pos: 7}), _figures({pos: 1})], base) is None  # not in every run
    # a flag is kept by one recompile; so is a value the baseline recompiled on once
    flag = "L['mask'] is None"
    assert kept_target(Target(guards={}, sites=frozenset(), causes={cause_key(flag): flag}),
                       [_figures({flag: 1})], [_figures({flag: 3})]) is not None
    assert kept_target(target, [_figures({pos: 1})], [_figures({pos: 1})]) is not None
    # a run recorded before the counts: any recompile on it counts once
    assert kept_target(target, [_figures(None, [pos])], [_figures(None, [pos])]) is not None


# --- live capture -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    pytest.importorskip("torch")
    return catalogued(tmp_path_factory, SCRIPT)  # the folder, the receipt as JSON, graphs, receipt, drafts


@pytest.mark.torch
def test_the_first_variants_reason_lists_each_blocks_position(decoder):
    _, raw, graphs, receipt, _ = decoder
    assert graphs == 8 and raw["summary"]["fallback_count"] == 1  # PyTorch's count: the limit was reached
    last = [c for c in receipt.ledger.compilations if c.is_recompile][-1]
    first_variant = next(g for g in last.failed_guards if g.startswith("0/0: "))
    # PyTorch names the prompt's length; the positions of both blocks failed as well
    assert first_variant.startswith("0/0: tensor 'ids' size mismatch at index 1. expected 8, actual 1; ")
    for block in ("0", "1"):
        assert f"self._modules['blocks']._modules['{block}'].pos == 0" in first_variant


@pytest.mark.torch
def test_the_recompiles_are_put_down_to_the_position_with_the_setting_as_remedy(decoder):
    _, _, _, receipt, _ = decoder
    by_family = {c.family: c for c in receipt.findings.causes}
    size, value = by_family["size"], by_family["value"]
    assert size.recompiles == 1 and size.subject == "ids"  # the prompt, then one token: once
    assert value.subject == "self._modules['blocks']._modules['0'].pos" and value.recompiles >= 6
    assert value.remedy.action == "allow_unspec_int_on_nn_module"
    # shown as the user writes it; the subject (and the id made from it) keeps PyTorch's spelling
    assert value.change.startswith("self.blocks[0].pos: 0 → another value"), value.change
    assert value.remedy.text.startswith("self.blocks[0].pos is an int attribute of an nn.Module")
    churn = next(f for f in receipt.findings.findings if f.churn is not None and f.churn.pattern == "value")
    assert churn.remedies[0].config == {"allow_unspec_int_on_nn_module": "True"}


@pytest.mark.torch
def test_the_candidate_is_the_setting_and_its_patch_leaves_two_graphs(decoder):
    from seamscope.experiments.trials.patches import spec_patch, write_patch

    d, _, _, receipt, drafts = decoder
    with inside(d):
        assert drafts[0].spec.flags() == ["--dynamo-config", "allow_unspec_int_on_nn_module=True"]
        churn = next(f for f in receipt.findings.findings if f.churn is not None and f.churn.pattern == "value")
        # dynamic=True leaves a module's int a constant: not tried for this finding
        assert not any(x.origin == churn.finding_id and "dynamic=true" in x.spec.flags() for x in drafts)
        patch = spec_patch(drafts[0].spec, "decoder_pos.py")
        assert patch is not None and "+torch._dynamo.config.allow_unspec_int_on_nn_module = True" in patch.diff
        path = write_patch(str(d), "unspec", patch)
        subprocess.run(["git", "init", "-q"], check=True)
        subprocess.run(["git", "apply", path], check=True)
        raw, graphs = run_here("decoder_pos.py", [], d / "patched")
    assert graphs == 2 and raw["summary"]["recompile_count"] == 1 and raw["summary"]["fallback_count"] == 0


@pytest.mark.torch
def test_a_runs_figures_count_the_recompiles_each_guard_explained(decoder):
    from seamscope.experiments.trials.runs import recompile_causes

    _, _, _, receipt, _ = decoder
    counts = recompile_causes(receipt)
    pos = next(n for g, n in counts.items() if g.startswith("self._modules['blocks']._modules['0'].pos == "))
    ids = next(n for g, n in counts.items() if g.startswith("tensor 'ids' size mismatch"))
    # every recompile failed on block 0's position against the first variant; the length only at the first
    assert ids == 1 and pos == receipt.summary.recompile_count


@pytest.fixture(scope="module")
def global_step(tmp_path_factory):
    pytest.importorskip("torch")
    from seamscope.ingest.receipt import load_receipt

    d = tmp_path_factory.mktemp("global")
    _, graphs = run_here(GLOBAL, [], d / "base")
    _, dynamic_graphs = run_here(GLOBAL, ["--dynamic"], d / "dynamic")
    return load_receipt(str(d / "base" / "receipt.json")), graphs, dynamic_graphs


@pytest.mark.torch
def test_a_global_int_is_named_with_no_policy_candidate(global_step):
    from seamscope.experiments.trials.catalogue import catalogue

    receipt, graphs, dynamic_graphs = global_step
    assert graphs == dynamic_graphs == 8  # PyTorch's count: dynamic=True leaves the global a constant
    (cause,) = receipt.findings.causes
    assert cause.subject == "G['step']" and "a global int" in cause.remedy.text
    assert "as an argument" in cause.remedy.text
    folded: list[str] = []
    drafts = catalogue(receipt, script=GLOBAL, folded=folded)
    assert not any("dynamic=true" in d.spec.flags() for d in drafts)  # it would leave the churn as it is
    assert any(line.startswith("none: ") and "G['step'] is a global int" in line for line in folded)
