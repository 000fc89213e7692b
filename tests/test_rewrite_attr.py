"""The ``tensor-attr-lr`` rewrite on source text, torch-free: an optimizer's ``lr`` that the step
recompiled on (an LR scheduler's new value each step, guarded in the optimizer's own frame) becomes
a 0-d tensor where the script makes the optimizer, in each way a script names ``torch.optim``;
nothing where PyTorch refuses a tensor ``lr`` or the value may be a tensor already."""

from __future__ import annotations

import shutil
import subprocess
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials.rewrites.base import draft
from seamscope.experiments.trials.rewrites.syntax import Source
from seamscope.experiments.trials.rewrites.tensor_attr import TensorAttr

# the guard of a real run (torch 2.13, AdamW under StepLR), as its churn finding keeps it
GUARD = ("self.param_groups[0]['lr'] == 0.001                      # for group in self.param_groups:  "
         "# optim/adam.py:229 in step")


def _receipt(guards=(GUARD,)):
    churn = SimpleNamespace(file="site-packages/torch/optim/adam.py", frame_name="step", guards=list(guards),
                            compile_ns=9)
    finding = SimpleNamespace(churn=churn, finding_id="FR1", sentence="Adam.step recompiled")
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]))


def _find(text, receipt=None):
    return TensorAttr().find(receipt or _receipt(), "s.py", Source(text))  # type: ignore[arg-type]


@pytest.mark.parametrize("head,call", [
    ("import torch\n", "torch.optim.AdamW(model.parameters(), lr={})"),
    ("import torch\nfrom torch import optim\n", "optim.SGD(model.parameters(), momentum=0.9, lr={})"),
    ("import torch\nfrom torch.optim import AdamW as W\n", "W(model.parameters(), lr={}, weight_decay=0.1)"),
    ("from torch.optim import Adam\n", "Adam(model.parameters(), lr={})"),  # no `import torch`: added
])
@pytest.mark.parametrize("value", ["1e-3", "LR", "-cfg.lr", "LR * 2"])
def test_the_lr_becomes_a_tensor_where_the_optimizer_is_made(head, call, value):
    text = f"{head}LR = 1e-3\nopt = {call.format(value)}\n"
    (e,) = _find(text)
    assert e.name == "tensor-attr-lr" and e.origin == "FR1" and e.cost_ns == 9 and "review" in e.change
    assert f"opt = {call.format(f'torch.tensor({value})')}\n" in e.after
    assert e.after.count("import torch\n") == 1 and e.after.index("import torch\n") < e.after.index("opt = ")


@pytest.mark.parametrize("text", [
    "import torch\nopt = torch.optim.AdamW(ps, lr=torch.tensor(1e-3))\n",  # a tensor already
    "import torch\nopt = torch.optim.AdamW(ps, lr=make_lr())\n",  # a call: may be a tensor
    "import torch\nopt = torch.optim.AdamW(ps, lr=-make_lr() * 2)\n",
    "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3, foreach=True)\n",  # PyTorch refuses a tensor lr there
    "import torch\nopt = torch.optim.AdamW(ps)\n",  # the default lr: nothing written to edit
    "import torch\nopt = build(ps, lr=1e-3)\n",  # not an optimizer of torch.optim
    "import torch\nopt = torch.optim.AdamW(ps, lr='1e-3')\n",
])
def test_no_candidate_where_the_lr_cannot_safely_become_a_tensor(text):
    assert _find(text) == []


def test_foreach_with_capturable_takes_a_tensor_and_other_guards_get_nothing():
    text = "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3, foreach=True, capturable=True)\n"
    assert len(_find(text)) == 1
    plain = "import torch\nopt = torch.optim.AdamW(ps, lr=1e-3)\n"
    assert _find(plain, _receipt(["self.param_groups[0]['weight_decay'] == 0.01", "scale == 0.5"])) == []


# the guard of a real run (torch 2.13, ``x * self.scale`` in forward, ``model.scale = v`` between calls)
ATTR_GUARD = "self.scale == 0.5                                        # return self.lin(x) * self.scale + 1  # s.py:7"
MODULE = '''import torch
from torch import nn


class Scaled(nn.Module):
    def __init__(self, lin):
        super().__init__()
        self.lin = lin
        self.scale = {init}

    def forward(self, x):
        return {expr}


model = Scaled(nn.Linear(8, 8))
cmodel = torch.compile(model)
for v in (0.5, 0.7):
    model.scale = v
    cmodel(torch.randn(2, 8))
'''


def _attr_receipt(guards=(ATTR_GUARD,), frame="forward", line=11):
    churn = SimpleNamespace(file="s.py", frame_name=frame, line=line, guards=list(guards), compile_ns=7)
    finding = SimpleNamespace(churn=churn, finding_id="FR2", sentence="forward recompiled on self.scale")
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]))


def _attr(text, receipt=None):
    return _find(text, receipt or _attr_receipt())


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_module_attribute_becomes_a_buffer_set_in_place_and_the_patch_applies(tmp_path):
    text = MODULE.format(init="0.5", expr="self.lin(x) * self.scale + 1")
    (e,) = _attr(text)
    assert e.name == "tensor-attr-scale" and e.origin == "FR2" and e.cost_ns == 7 and "review" in e.change
    assert e.after == text.replace("self.scale = 0.5", 'self.register_buffer("scale", torch.tensor(0.5), '
                                   "persistent=False)").replace("model.scale = v", "model.scale.fill_(v)")
    (tmp_path / "s.py").write_text(text)
    (tmp_path / "p.patch").write_text(draft(e).diff or "")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path, check=True)
    assert (tmp_path / "s.py").read_text() == e.after


@pytest.mark.parametrize("init,expr,made", [
    ("scale", "x * self.scale", "torch.tensor(float(scale))"),  # a name: its value made a float
    ("0.5", "(x + 1) * self.scale / 2", "torch.tensor(0.5)"),
    ("0.5", "torch.relu(x) - self.scale", "torch.tensor(0.5)"),
])
def test_each_arithmetic_read_takes_the_buffer(init, expr, made):
    text = MODULE.format(init=init, expr=expr)
    text = text.replace("def __init__(self, lin):", "def __init__(self, lin, scale=0.5):")
    (e,) = _attr(text)
    assert f'self.register_buffer("scale", {made}, persistent=False)' in e.after


def test_a_class_that_is_no_module_gets_a_tensor_attribute():
    text = MODULE.format(init="0.5", expr="x * self.scale").replace("class Scaled(nn.Module):", "class Scaled:")
    (e,) = _attr(text)
    assert "        self.scale = torch.tensor(0.5)\n" in e.after and "model.scale.fill_(v)" in e.after


@pytest.mark.parametrize("expr,extra", [
    ("x * self.scale if self.scale > 0 else x", ""),  # a test: a tensor there breaks the graph
    ("x.view(self.scale, -1)", ""),  # a size
    ("x * int(self.scale)", ""),
    ("x * self.scale", "print(model.scale)\n"),  # read outside the class as a number
    ("x * self.scale", "model.scale, y = 0.7, 1\n"),  # unpacked into: not rewritten
    ("x * self.scale", "class Other:\n    def __init__(self):\n        self.scale = 2.0\n"),  # another's own
])
def test_no_candidate_where_a_use_is_not_arithmetic(expr, extra):
    assert _attr(MODULE.format(init="0.5", expr=expr) + extra) == []


@pytest.mark.parametrize("receipt", [
    _attr_receipt(["self.scale == 2"]),  # an int: a size or a count, as likely as a factor
    _attr_receipt(["self.other == 0.5"]),
    _attr_receipt(frame="other"),
    _attr_receipt(line=3),  # a forward of another class
])
def test_no_candidate_for_another_guard_or_frame(receipt):
    assert _attr(MODULE.format(init="0.5", expr="x * self.scale"), receipt) == []


def test_in_place_arithmetic_outside_the_class_is_kept_and_a_call_in_init_is_not_edited():
    text = MODULE.format(init="0.5", expr="x * self.scale") + "model.scale *= 0.9\n"
    (e,) = _attr(text)
    assert e.after.endswith("model.scale *= 0.9\n")
    assert _attr(MODULE.format(init="make()", expr="x * self.scale")) == []  # may be a tensor already
