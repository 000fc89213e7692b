"""The ``tensor-attr-lr`` rewrite on source text, torch-free: an optimizer's ``lr`` that the step
recompiled on (an LR scheduler's new value each step, guarded in the optimizer's own frame) becomes
a 0-d tensor where the script makes the optimizer, in each way a script names ``torch.optim``;
nothing where PyTorch refuses a tensor ``lr`` or the value may be a tensor already."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

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
