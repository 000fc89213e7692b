"""A stacked candidate's patch, torch-free: ``--regional CLASS`` with other remedies is one diff,
the loop's ``block.compile(...)`` given the compile options (over the script's keywords), the other
parts' lines beside it; a part that is no edit gives no patch; the trial's stacked candidates run it."""

from __future__ import annotations

import ast
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials.patches import attach, spec_patch
from seamscope.experiments.unified_diff import apply, parse

GIT = shutil.which("git")

SCRIPT = '''"""Blocks."""
import torch
from torch import nn


class Block(nn.Module):
    def forward(self, x):
        return x + 1


def helper(x):
    return x * 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return helper(x)


model = Net().eval()
compiled = torch.compile(model, backend="eager", dynamic=False)
compiled(torch.ones(2))
'''

RECEIPT = SimpleNamespace(findings=SimpleNamespace(compile_time=SimpleNamespace(findings=[SimpleNamespace(
    kind="repeated_block", block=SimpleNamespace(cls="Block", module="__main__", first_path="L['self'].layers.0"))])))


def _patch(tmp_path, monkeypatch, words, text=SCRIPT, receipt=RECEIPT):
    (tmp_path / "s.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return spec_patch(spec_from_words(words), "s.py", receipt)


def _applies(tmp_path, patch, text=SCRIPT):
    """The patched text (the project's applier), which parses and which ``git apply`` gives too."""
    new = apply(text, parse(patch.diff)[0])
    ast.parse(new)
    if GIT is not None:
        (tmp_path / "p.patch").write_text(patch.diff, encoding="utf-8")
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(["git", "apply", "--check", "p.patch"], cwd=tmp_path, check=True)
        subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path, check=True)
        assert (tmp_path / "s.py").read_text(encoding="utf-8") == new
    return new


def test_regional_with_dynamic_true_compiles_each_block_with_the_option_over_the_scripts_keywords(
        tmp_path, monkeypatch):
    p = _patch(tmp_path, monkeypatch, ["--regional", "Block", "--compile-option", "dynamic=true",
                                       "--compile-option", "fullgraph=true"])
    assert p is not None and p.calls_of == "compiled" and p.path == "s.py"
    new = _applies(tmp_path, p)
    assert '        block.compile(backend="eager", dynamic=True, fullgraph=True)\n' in new
    assert "for block in model.modules():" in new and "    if isinstance(block, Block):\n" in new
    assert "compiled = model\n" in new and "torch.compile(" not in new


def test_regional_with_settings_marks_and_a_disable_is_one_diff_holding_them_all(tmp_path, monkeypatch):
    p = _patch(tmp_path, monkeypatch, ["--dynamo-config", "capture_scalar_outputs=True", "--mark-dynamic", "L['x']:0",
                                       "--disable", "__main__:helper", "--regional", "Block"])
    assert p is not None and p.calls_of == "compiled"
    assert p.diff.count("+++ b/s.py") == 1
    new = _applies(tmp_path, p)
    lines = new.splitlines()
    setting = lines.index("torch._dynamo.config.capture_scalar_outputs = True")
    assert lines[setting + 1] == "torch.compiler.config.dynamic_sources = \"L['x']:0\""
    assert lines.index("from torch import nn") < setting < lines.index("class Block(nn.Module):")
    assert lines[lines.index("def helper(x):") - 1] == "@torch.compiler.disable"
    assert '        block.compile(backend="eager", dynamic=False)' in lines  # the script's own keywords


def test_the_loop_replaces_a_compile_on_the_files_last_line_without_a_newline(tmp_path, monkeypatch):
    text = SCRIPT.replace("compiled(torch.ones(2))\n", "").rstrip("\n")
    p = _patch(tmp_path, monkeypatch, ["--regional", "Block", "--compile-option", "dynamic=true"], text)
    assert p is not None
    new = _applies(tmp_path, p, text)
    assert new.endswith("        block.compile(backend=\"eager\", dynamic=True)\ncompiled = model")


@pytest.mark.parametrize("words", [
    ["--regional", "Block", "--disable", "helpers:noisy"],  # no such module beside the script
    ["--regional", "Block", "--compile-option", "backend=mod:fn"],  # a backend given as MODULE:QUALNAME
    ["--regional", "Block", "--patch", "mine.patch"],  # a user's own patch is no part of ours
    ["--regional", "Block", "--regional", "Other"],
    ["--regional", "Other", "--compile-option", "dynamic=true"],  # no finding saw that class
])
def test_a_stacked_spec_with_a_part_that_is_no_patch_gets_none(tmp_path, monkeypatch, words):
    assert _patch(tmp_path, monkeypatch, words) is None
    assert _patch(tmp_path, monkeypatch, ["--regional", "Block", "--compile-option", "dynamic=true"]) is not None


def test_without_the_baselines_finding_a_regional_spec_gets_none(tmp_path, monkeypatch):
    assert _patch(tmp_path, monkeypatch, ["--regional", "Block", "--compile-option", "dynamic=true"],
                  receipt=None) is None


def _receipt_of(cls, module):
    return SimpleNamespace(findings=SimpleNamespace(compile_time=SimpleNamespace(findings=[SimpleNamespace(
        kind="repeated_block", block=SimpleNamespace(cls=cls, module=module, first_path="L['self'].layer.0"))])))


LIB = "transformers.models.bert.modeling_bert"
MODEL = "model = BertModel(config)\ncompiled = torch.compile(model, backend=\"eager\")\n"


def test_a_compiled_forward_gets_the_loop_over_its_models_blocks(tmp_path, monkeypatch):
    text = "import torch\nfrom transformers import BertModel\n\n" + MODEL.replace("(model,", "(model.forward,")
    p = _patch(tmp_path, monkeypatch, ["--regional", "BertLayer"], text, _receipt_of("BertLayer", LIB))
    assert p is not None and p.calls_of == "compiled"
    new = _applies(tmp_path, p, text)
    assert "for block in model.modules():" in new and new.endswith("compiled = model.forward\n")


def test_a_model_compiled_in_place_keeps_its_name_with_no_self_assignment(tmp_path, monkeypatch):
    """``model = torch.compile(model)`` (a DistilBERT server's): the loop compiles its blocks and
    ``model`` already names the model; a ``model = model`` line after it would be dead code."""
    text = "import torch\nfrom transformers import BertModel\n\n" + MODEL.replace("compiled = ", "model = ")
    p = _patch(tmp_path, monkeypatch, ["--regional", "BertLayer"], text, _receipt_of("BertLayer", LIB))
    assert p is not None and p.calls_of == "model"
    new = _applies(tmp_path, p, text)
    assert "model = model" not in new and new.endswith('        block.compile(backend="eager")\n')


def test_a_forward_compiled_in_place_gets_the_loop_and_its_calls_observed_on_the_model(tmp_path, monkeypatch):
    """``model.forward = torch.compile(model.forward)`` (transformers' advice for ``generate``): the
    line goes, the loop compiles the blocks, and the run observes the model's calls (``--calls-of
    model``: what ``generate`` calls is the model's forward)."""
    text = ("import torch\nfrom transformers import BertModel\n\nmodel = BertModel(config)\n"
            "model.forward = torch.compile(model.forward, backend=\"eager\")\nmodel.generate(x)\n")
    p = _patch(tmp_path, monkeypatch, ["--regional", "BertLayer", "--compile-option", "dynamic=true"], text,
               _receipt_of("BertLayer", LIB))
    assert p is not None and p.calls_of == "model"
    new = _applies(tmp_path, p, text)
    assert "torch.compile(" not in new and "model.forward =" not in new
    assert '        block.compile(backend="eager", dynamic=True)\nmodel.generate(x)\n' in new
    other = text.replace("model.forward = torch.compile(model.forward", "model.forward = torch.compile(other.forward")
    assert _patch(tmp_path, monkeypatch, ["--regional", "BertLayer"], other, _receipt_of("BertLayer", LIB)) is None


@pytest.mark.parametrize("head,ref", [
    ("import torch\nfrom transformers import BertModel\n", "BertLayer"),  # the import added
    (f"import torch\nfrom {LIB} import BertLayer as Layer, BertModel\n", "Layer"),  # the script's own name
    (f"import torch\nimport {LIB} as mb\nfrom transformers import BertModel\n", "mb.BertLayer"),
], ids=["added", "from-import", "module-import"])
def test_the_regional_loop_names_the_class_the_run_saw_however_the_script_reaches_it(tmp_path, monkeypatch, head,
                                                                                     ref):
    """The blocks are found by class below the compiled model, wherever they sit (``model.encoder.layer``
    here, which the finding's path, relative to the encoder's frame, does not say)."""
    p = _patch(tmp_path, monkeypatch, ["--regional", "BertLayer"], head + "\n" + MODEL, _receipt_of("BertLayer", LIB))
    assert p is not None and p.calls_of == "compiled"
    new = _applies(tmp_path, p, head + "\n" + MODEL)
    assert f"    if isinstance(block, {ref}):\n        block.compile(backend=\"eager\")\ncompiled = model\n" in new
    assert new.count(f"from {LIB} import BertLayer\n") == (ref == "BertLayer")
    assert "model.layer" not in new and "model.encoder" not in new


@pytest.mark.parametrize("text,cls,module,why", [
    (SCRIPT, "make.<locals>.Block", "__main__", "defined inside a function"),
    (SCRIPT, "Inner", "__main__", "not a class at the script's top level"),
    ("import torch\nBertLayer = 1\n" + MODEL, "BertLayer", LIB, "uses the name BertLayer for something else"),
    (SCRIPT.replace("compiled = torch.compile(model,", "compiled = torch.compile(model, **{},"), "Block", "__main__",
     "**options"),
    (SCRIPT + "other = torch.compile(model)\n", "Block", "__main__", "one `NAME = torch.compile(MODEL, ...)`"),
    (SCRIPT.replace("compiled = torch.compile(model,", "def run(x):\n    return model(x)\n\n\n"
                    "compiled = torch.compile(run,"), "Block", "__main__", "compiles the function run, not a module"),
], ids=["local-class", "not-top-level", "name-taken", "star-options", "two-compiles", "a-function"])
def test_a_regional_patch_that_cannot_be_made_says_why_and_none_is_written(tmp_path, monkeypatch, text, cls, module,
                                                                          why):
    (tmp_path / "s.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    reasons: list[str] = []
    assert spec_patch(spec_from_words(["--regional", cls]), "s.py", _receipt_of(cls, module), reasons) is None
    (reason,) = reasons
    assert why in reason
    d = SimpleNamespace(name="regional-x", spec=spec_from_words(["--regional", cls]), origin="CT1", start=None, env={},
                        patch=None, diff=None, review=None, calls_of=None)
    notes: list[str] = []
    attach([d], "o", "s.py", _receipt_of(cls, module), notes)
    assert d.patch is None and not (tmp_path / "o").exists()  # its runs use the flag, which finds the blocks
    assert notes == [f"no patch: regional-x: {reason}; its runs use its flags (--regional {cls})"]


# --- the trial: the second wave's stacked candidates run their patch ---------------------------------


def _applied_words(flags, script_text):
    """What a fake run does: a ``--patch`` run's remedies read from the patched source, as the
    flags' would be (so the patched runs behave as the flags do)."""
    if not flags or flags[0] != "--patch":
        return flags
    with open(flags[1], encoding="utf-8") as f:
        text = apply(script_text, parse(f.read())[0])
    words = []
    if "block.compile(" in text:
        words += ["--regional", "Block"]
    if "dynamic=True" in text:
        words += ["--compile-option", "dynamic=true"]
    if "capture_scalar_outputs = True" in text:
        words += ["--dynamo-config", "capture_scalar_outputs=True"]
    return words


def test_stacked_candidates_run_their_composed_patch_and_the_recommended_one_hands_it_over(tmp_path, monkeypatch):
    import msgspec
    from trial_fakes import draft, leaf, prints, stack_runs

    from seamscope.experiments.trials import load as loadmod
    from seamscope.experiments.trials import runs as trial_runs
    from seamscope.experiments.trials import trial as tr
    from seamscope.experiments.trials.runs import Outcome

    text = SCRIPT.replace('backend="eager", dynamic=False', 'backend="eager"')
    (tmp_path / "s.py").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loadmod, "load_average", lambda: 0.8)
    monkeypatch.setattr(loadmod, "cpus", lambda: 2)
    ran: dict[str, list[str]] = {}
    count: dict[str, int] = {}
    clock = [0.0]

    def run_once(setup, flags, rel_dir, label, fingerprint=False, extra=None):
        clock[0] += 10.0
        ran[rel_dir] = list(flags)
        key = " ".join(_applied_words(flags, text))
        k = count[key] = count.get(key, -1) + 1
        fig = msgspec.structs.replace(stack_runs(key.split(), k), label=label, script_ns=9 * 10**9)
        receipt = RECEIPT if len(ran) == 1 else object()  # the baseline's first run: its finding
        return Outcome(fig, receipt, "", prints(leaf()) if fingerprint else None)

    reg = draft("regional", ["--regional", "Block"], cost=900)
    dyn = draft("dyn", ["--compile-option", "dynamic=true"], cost=800)
    cso = draft("cso", ["--dynamo-config", "capture_scalar_outputs=True"], cost=700)
    monkeypatch.setattr(tr, "run_once", run_once)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: [reg, dyn, cso])
    monkeypatch.setattr(tr, "rewrites", lambda receipt, script: [])
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out="o", repeat=3)
    t = tr.run_trials(spec, [], [], [], trial_runs.Services(clock=lambda: clock[0])).trials
    by = {c.name: c for c in t.candidates}
    retried, combined = by["regional+dyn"], by["combined"]
    assert spec_from_words(retried.flags) == spec_from_words(["--regional", "Block", "--compile-option",
                                                              "dynamic=true"])
    assert retried.patch == "o/trials/regional+dyn.patch" and retried.diff is not None
    assert ran["trials/regional+dyn/rep-4"] == ["--patch", retried.patch, "--calls-of", "compiled"]
    assert ran["trials/regional+dyn/check"] == ["--patch", retried.patch, "--calls-of", "compiled"]
    assert '+        block.compile(backend="eager", dynamic=True)' in retried.diff
    assert "--patch o/trials/regional+dyn.patch --calls-of compiled" in retried.command
    assert combined.patch == "o/trials/combined.patch" and combined.diff is not None
    assert "+torch._dynamo.config.capture_scalar_outputs = True" in combined.diff
    assert 'torch.compile(model, backend="eager", dynamic=True)' in combined.diff
    with open("o/trials/regional+dyn.patch", encoding="utf-8") as f:
        assert f.read() == retried.diff
    # the recommendation is the stacked one: the decision names its patch, --write-patch takes its diff
    assert t.chosen == "regional+dyn" and "(the patch: o/trials/regional+dyn.patch)" in t.decision
