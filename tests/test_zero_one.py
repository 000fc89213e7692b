"""A size first compiled as 1 (or 0): PyTorch specializes those sizes under every shape policy, so
a mark or ``dynamic=True`` recompiles once for the first larger size (seen on a DistilBERT served
a batch of 1, then of 2, 4 and 8). The finding says so, ``try`` gets a candidate that sets
``torch.fx.experimental._config.backed_size_oblivious`` with ``dynamic=True``, and a shape policy
that leaves that one recompile is not ``did not remove its target`` for it."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest
from trial_checks import inside, run_patched

from seamscope.analyze.findings_churn import zero_one

BATCH_ONE = "tensor 'kwargs['input_ids']' size mismatch at index 0. expected 1, actual 2"
LENGTH = "tensor 'kwargs['input_ids']' size mismatch at index 1. expected 16, actual 24"


@pytest.mark.parametrize("guard, special", [
    (BATCH_ONE, True),
    ("tensor 'x' size mismatch at index 2. expected 0, actual 7", True),
    ("tensor 'x' size mismatch at index 0. expected 1, actual 12", True),
    (LENGTH, False),
    ("tensor 'x' size mismatch at index 0. expected 11, actual 2", False),
    ("tensor 'x' size mismatch at index 0. expected 1, actual 0", False),  # 0 is specialized as well
    ("tensor 'x' stride mismatch at index 0. expected 1, actual 2", False),
])
def test_a_size_first_compiled_as_zero_or_one_is_told_apart(guard, special):
    assert zero_one(guard) is special


def _evidence(guards):
    from seamscope.model.findings import ChurnEvidence

    return ChurnEvidence(frame_name="forward", file="m.py", line=3, recompiles=len(guards), variants=len(guards) + 1,
                         compile_ns=10, pattern="shape", subjects=["input_ids[0]"], guards=guards, calls=[1],
                         compile_ids=["0/1"], values_seen=["size 1"], fallback=False)


def test_the_finding_names_the_specialized_size_and_the_setting():
    from seamscope.analyze.findings_churn import _shape_remedies

    rs = _shape_remedies(_evidence([BATCH_ONE, LENGTH]), dynamic_false=False)
    assert [r.action for r in rs] == ["mark_dynamic_or_bucket", "size_oblivious"]
    last = rs[-1]
    assert "kwargs['input_ids'][0] was compiled at size 1" in last.text
    assert "torch.fx.experimental._config.backed_size_oblivious = True with dynamic=True" in last.text
    assert last.try_with == ("seamscope run --dynamo-config backed_size_oblivious=True "
                             "--compile-option dynamic=true SCRIPT")
    assert [r.action for r in _shape_remedies(_evidence([LENGTH]), dynamic_false=False)] == ["mark_dynamic_or_bucket"]


def _receipt(guards):
    churn = NS(pattern="shape", compile_ns=500, guards=guards, frame_name="forward", fallback=False, subjects=[])
    f = NS(finding_id="FR1", site_id=None, sentence="FR1 recompiles", cost=None, remedies=[], churn=churn)
    return NS(findings=NS(findings=[f], compile_time=None),
              ledger=NS(compilations=[], break_sites=[], environment=NS(torch_version=None)),
              summary=NS(fallback_count=0, fallbacks=[]))


def test_try_gets_a_candidate_only_where_a_size_was_first_one():
    from seamscope.experiments.trials.catalogue import catalogue

    flags = {d.name: d.spec.flags() for d in catalogue(_receipt([BATCH_ONE, LENGTH]))}
    assert flags["backed-size-oblivious"] == ["--dynamo-config", "backed_size_oblivious=True",
                                              "--compile-option", "dynamic=true"]
    assert "backed-size-oblivious" not in {d.name for d in catalogue(_receipt([LENGTH]))}


def test_the_one_recompile_no_policy_removes_is_not_held_against_a_mark_but_against_the_setting():
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.trials.draft import Draft
    from seamscope.experiments.trials.targets import kept_target, target_of
    from seamscope.model.trials import RunFigures

    base = [RunFigures(label="rep-1", ok=True, exit_code=0, recompiles=3, size_guards=[BATCH_ONE, LENGTH])]
    left = [RunFigures(label="rep-1", ok=True, exit_code=0, recompiles=1, size_guards=[BATCH_ONE])]
    receipt = _receipt([BATCH_ONE, LENGTH])

    def target(words):
        return target_of(Draft(name="c", spec=spec_from_words(words), origin="FR1", targets="t"), receipt, base)

    mark = target(["--mark-dynamic", "L['kwargs']['input_ids']:0", "--mark-dynamic", "L['kwargs']['input_ids']:1"])
    assert kept_target(mark, left) is None
    dyn = target(["--compile-option", "dynamic=true"])
    assert kept_target(dyn, left) is None
    assert kept_target(dyn, base).startswith("the guard it targeted failed again")  # the length: its own target
    oblivious = target(["--dynamo-config", "backed_size_oblivious=True", "--compile-option", "dynamic=true"])
    assert "expected 1, actual 2" in kept_target(oblivious, left)


def test_the_setting_is_written_where_it_lives():
    from seamscope.experiments.remedy_spec import code_change, spec_from_words

    spec = spec_from_words(["--dynamo-config", "backed_size_oblivious=True", "--compile-option", "dynamic=true"])
    assert "torch.fx.experimental._config.backed_size_oblivious = True" in code_change(spec)


# --- on PyTorch: a batch of 1, then larger ones ------------------------------------------------------

SCRIPT = """import torch


def f(x):
    return (x * 2).sum(0)


g = torch.compile(f, backend="eager")
for b in (1, 2, 4, 1, 3):
    g(torch.randn(b, 5))
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The script under dynamic=True, under the setting's flags and under its patch: (compiles,
    recompiles, break sites, PyTorch's count of graphs) of each, the receipts and the patch."""
    pytest.importorskip("torch")
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.trials.patches import spec_patch

    d = tmp_path_factory.mktemp("zero_one")
    (d / "serve.py").write_text(SCRIPT)
    words = ["--dynamo-config", "backed_size_oblivious=True", "--compile-option", "dynamic=true"]
    with inside(d):
        dyn = run_patched("serve.py", ["--compile-option", "dynamic=true"], d / "dyn")
        flags = run_patched("serve.py", words, d / "flags")
        patch = spec_patch(spec_from_words(words), "serve.py")
        assert patch is not None
        (d / "p.patch").write_text(patch.diff)
        patched = run_patched("serve.py", ["--patch", "p.patch"], d / "patched")
    with open(d / "flags" / "receipt.json") as f:
        receipt = json.load(f)
    with open(d / "dyn" / "receipt.json") as f:
        base = json.load(f)
    return dyn, flags, patched, receipt, base, patch.diff


@pytest.mark.torch
def test_dynamic_true_still_recompiles_once_for_the_size_one_and_says_why(served):
    dyn, _, _, _, base, _ = served
    assert dyn == (2, 1, 0, 2)
    actions = [r["action"] for f in base["findings"]["findings"] for r in f["remedies"]]
    assert "size_oblivious" in actions


@pytest.mark.torch
def test_the_setting_with_dynamic_true_compiles_one_graph_for_every_batch(served):
    _, flags, patched, receipt, _, diff = served
    assert flags == (1, 0, 0, 1) and patched == (1, 0, 0, 1)
    env = receipt["ledger"]["environment"]["dynamo_config"]
    assert env["torch.fx.experimental._config.backed_size_oblivious"] == "True"
    assert "+import torch.fx.experimental._config" in diff
    assert "+torch.fx.experimental._config.backed_size_oblivious = True" in diff
    assert "dynamic=True" in diff
