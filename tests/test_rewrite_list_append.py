"""The ``list-append`` rewrite on source text, torch-free: a module-level list the compiled code
appends to, which Dynamo guards on its length (every call recompiles), appended to by a helper
under ``torch.compiler.disable``; the calls it edits are those the guards name, else those in the
functions the baseline compiled; nothing where the name is not the script's module-level list."""

from __future__ import annotations

import ast
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials.rewrites.base import draft
from seamscope.experiments.trials.rewrites.list_append import ListAppend
from seamscope.experiments.trials.rewrites.syntax import Source

SCRIPT = '''import torch

losses = []


def step(x):
    y = x.sin()
    losses.append(y.sum().item())  # the loss of every call
    return y * 2


f = torch.compile(step, backend="eager")
for _ in range(4):
    f(torch.randn(4))
'''

# the guards of a real run (torch 2.13), as the churn finding keeps them: the source line in the comment
GUARDS = ["not G['losses']                                               # losses.append(y.sum().item())  # the "
          "loss of every call  # work/s.py:8 in step",
          "len(G['losses']) == 1                                         # losses.append(y.sum().item())  # the "
          "loss of every call  # work/s.py:8 in step",
          "len(G['losses']) == 1"]


def _receipt(guards=GUARDS, subjects=("not G['losses']",), compiled=(("s.py", 6),)):
    churn = SimpleNamespace(guards=list(guards), subjects=list(subjects), compile_ns=9)
    other = SimpleNamespace(churn=SimpleNamespace(guards=["tensor 'x' size mismatch at index 0. expected 4, actual 5",
                                                          *guards[1:]], subjects=["x[0]"], compile_ns=5),
                            finding_id="FR0")
    finding = SimpleNamespace(churn=churn, finding_id="FR1")
    ledger = SimpleNamespace(compilations=[SimpleNamespace(file=f, line=n) for f, n in compiled])
    return SimpleNamespace(findings=SimpleNamespace(findings=[other, finding]), ledger=ledger)


def _find(text, receipt=None):
    return ListAppend().find(receipt or _receipt(), "s.py", Source(text))  # type: ignore[arg-type]


HELPER = ("@torch.compiler.disable  # the list is left to Python: appending in compiled code guards its length\n"
          "def _losses_append_item(value):\n    losses.append(value.item())\n\n\n")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_append_the_guards_name_goes_through_a_disabled_helper_and_the_patch_applies(tmp_path):
    (e,) = _find(SCRIPT)
    assert e.name == "list-append-losses" and e.origin == "FR1" and e.cost_ns == 14  # both findings guard it
    assert "review before applying" in e.change and "s.py:8" in e.change and "losses.append at" in e.change
    # the tensor is passed and read in the helper: no float read in compiled code reaches a frame
    assert e.after == SCRIPT.replace("    losses.append(y.sum().item())", "    _losses_append_item(y.sum())").replace(
        "def step", HELPER + "def step")
    ast.parse(e.after)
    (tmp_path / "s.py").write_text(SCRIPT)
    (tmp_path / "p.patch").write_text(draft(e).diff or "")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "p.patch"], cwd=tmp_path, check=True)
    assert (tmp_path / "s.py").read_text() == e.after


def test_without_a_line_in_the_guards_the_compiled_functions_calls_are_edited_and_no_others():
    text = SCRIPT.replace("for _ in range(4):\n    f(torch.randn(4))\n",
                          "def main():\n    for _ in range(4):\n        losses.append(f(torch.randn(4)).sum())\n")
    (e,) = _find(text, _receipt(guards=["len(G['losses']) == 2"], subjects=["len(G['losses']) == 2"]))
    assert e.after.count("_losses_append_item(") == 2  # the helper's def and the compiled function's call
    assert "        losses.append(f(torch.randn(4)).sum())\n" in e.after  # the eager loop's call kept
    # no compiled frame of the script's: no call to edit
    assert _find(text, _receipt(guards=["len(G['losses']) == 2"], compiled=[("other.py", 6)])) == []


def test_where_the_guards_name_lines_only_the_calls_on_them_are_edited():
    text = SCRIPT + "\n\ndef mark():\n    losses.append(None)\n"
    (e,) = _find(text)
    assert "    _losses_append_item(y.sum())" in e.after and e.after.endswith("def mark():\n    losses.append(None)\n")


def test_append_and_extend_get_a_helper_each_a_method_gets_it_before_its_class_and_names_do_not_clash():
    text = ("import torch\nfrom torch import nn\n\nlog = []\n_log_append = None\n\n\nclass M(nn.Module):\n"
            "    def forward(self, x):\n        log.append(x.sum())\n        log.extend([x.max()])\n"
            "        log.append(x.min().item(1))\n        return x\n")
    guards = ["len(G['log']) == 1  # log.append(x.sum())  # a/s.py:10 in forward",
              "len(G['log']) == 2  # log.extend([x.max()])  # a/s.py:11 in forward",
              "len(G['log']) == 3  # log.append(x.min().item(1))  # a/s.py:12 in forward"]
    (e,) = _find(text, _receipt(guards=guards, subjects=["len(G['log']) == 1"]))
    assert "def _log_append_2(*args):\n    log.append(*args)\n" in e.after
    assert "def _log_extend(*args):\n    log.extend(*args)\n" in e.after
    assert e.after.index("def _log_extend") < e.after.index("class M")
    # a tensor appended as it is; .item() with an argument is not the plain read: appended as written
    assert "        _log_append_2(x.sum())\n        _log_extend([x.max()])\n        _log_append_2(x.min().item(1))\n" \
        in e.after
    assert "log.append and log.extend" in e.change


def test_import_torch_is_added_where_the_script_has_none():
    text = SCRIPT.replace("import torch\n", "from torch import compile as tc, randn\n").replace(
        "torch.compile(", "tc(").replace("torch.randn(", "randn(")
    (e,) = _find(text)
    assert e.after.count("import torch\n") == 1 and e.after.index("import torch\n") < e.after.index("@torch.compiler")


@pytest.mark.parametrize("text", [
    SCRIPT.replace("losses = []\n", "losses = {}\n"),  # a dict: not this rewrite's
    SCRIPT.replace("losses = []\n", "").replace("def step(x):\n", "def step(x):\n    losses = []\n"),  # a local
    SCRIPT.replace("def step(x):", "def step(x, losses=losses):"),  # a parameter of that name
    SCRIPT.replace("    y = x.sin()\n", "    global losses\n    y = x.sin()\n"),
    SCRIPT.replace("losses = []\n", "from helpers import losses\n"),  # not the script's own list
    SCRIPT.replace('backend="eager"', 'backend="eager", fullgraph=True'),  # the helper's break is an error there
])
def test_no_candidate_where_the_name_is_not_the_scripts_module_level_list(text):
    assert _find(text) == []


def test_no_candidate_for_other_guards():
    assert _find(SCRIPT, _receipt(guards=["tensor 'x' size mismatch at index 0. expected 4, actual 5",
                                          "len(L['losses']) == 1", "G['losses'][0] == 1.0"])) == []


MODULE = '''import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.history = []

    def forward(self, x):
        y = self.lin(x)
        self.history.append(y.sum().item())
        self.history.append(y)
        return y


model = torch.compile(Net(), backend="eager")
'''

OTHER = MODULE.replace("def forward(self, x):", "def forward(self, x, other):").replace(
    "self.history.append(y)", "other.history.append(y)")

ATTR_GUARDS = ["not self.history  # self.history.append(y.sum().item())  # a/s.py:13 in forward",
               "len(L['self'].history) == 2  # self.history.append(y)  # a/s.py:14 in forward"]


def test_a_modules_own_list_gets_a_helper_that_takes_the_module_before_its_class():
    (e,) = _find(MODULE, _receipt(guards=ATTR_GUARDS, subjects=["not self.history"]))
    assert e.name == "list-append-history" and e.origin == "FR1"
    assert "self.history.append at s.py:13, s.py:14" in e.change
    helpers = ("@torch.compiler.disable  # the list is left to Python: appending in compiled code guards its length\n"
               "def _history_append(owner, *args):\n    owner.history.append(*args)\n\n\n"
               "@torch.compiler.disable  # the list is left to Python: appending in compiled code guards its length\n"
               "def _history_append_item(owner, value):\n    owner.history.append(value.item())\n\n\n")
    assert e.after == MODULE.replace("class Net", helpers + "class Net").replace(
        "self.history.append(y.sum().item())", "_history_append_item(self, y.sum())").replace(
        "self.history.append(y)", "_history_append(self, y)")


@pytest.mark.parametrize("text,guards", [
    (MODULE.replace("self.history = []", "self.history = collections.deque()"), ATTR_GUARDS),  # not a list
    (MODULE, ["not self.training  # if self.training:  # a/s.py:12 in forward"]),  # a flag, not a list
    (MODULE, ["not other.history  # other.history.append(y)  # a/s.py:13 in forward"]),  # not the method's own
    (OTHER, ["not other.history  # other.history.append(y)  # a/s.py:14 in forward"]),  # another object's list
    (OTHER, ["len(self.history) == 1  # other.history.append(y)  # a/s.py:14 in forward"]),
])
def test_no_candidate_for_an_attribute_the_class_does_not_make_a_list_of_its_own(text, guards):
    assert _find(text, _receipt(guards=guards)) == []
