"""The rewrites package, torch-free: every rewrite module is registered in the one tuple, and the
finder ``always-pass`` and ``tensor-scalar`` share finds the compiled callable in both spellings
(``f = torch.compile(fn)`` and ``@torch.compile``), at module level and inside a block, with the
same argument rules for both rewrites."""

from __future__ import annotations

import ast
import os
import pkgutil
import shutil
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials import rewrites as package
from seamscope.experiments.trials.rewrites import REWRITES
from seamscope.experiments.trials.rewrites.always_pass import AlwaysPass, none_guards
from seamscope.experiments.trials.rewrites.shims import targets
from seamscope.experiments.trials.rewrites.syntax import Source, compiled_callables
from seamscope.experiments.trials.rewrites.tensor_scalar import TensorScalar

HELPERS = {"base", "syntax", "shims"}
"""The package's modules that hold no rewrite: what the rewrites share."""


def unregistered(folder: str) -> list[str]:
    """The modules of ``folder`` (the package's, or a copy of it) that are neither a helper nor the
    module of a rewrite in :data:`REWRITES`."""
    registered = {type(r).__module__.rsplit(".", 1)[-1] for r in REWRITES}
    return sorted(m.name for m in pkgutil.iter_modules([folder]) if m.name not in HELPERS | registered)


def test_every_rewrite_module_is_in_the_tuple_and_an_unlisted_one_is_found(tmp_path):
    folder = os.path.dirname(package.__file__)
    assert unregistered(folder) == []
    copy = tmp_path / "rewrites"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "tensor_planted.py").write_text('class TensorPlanted:\n    name = "tensor-planted"\n')
    assert unregistered(str(copy)) == ["tensor_planted"]  # planted: a rewrite module nobody listed


def test_each_rewrite_is_named_after_its_module_and_once():
    names = [r.name for r in REWRITES]
    assert len(set(names)) == len(names)
    for r in REWRITES:
        assert type(r).__module__.rsplit(".", 1)[-1].replace("_", "-") == r.name
        assert callable(r.find)


BODY = "    if mask is not None:\n        x = x + mask\n    return x * scale\n"
SIG = "def step(x, scale, mask=None):\n"
FORMS = {
    "call, top level": f"import torch\n\n\n{SIG}{BODY}\n\nf = torch.compile(step, backend=\"eager\")\nf(1, 2)\n",
    "decorator, top level": f"import torch\n\n\n@torch.compile(backend=\"eager\")\n{SIG}{BODY}\n\nstep(1, 2)\n",
    "call, nested": (f"import torch\n\n\n{SIG}{BODY}\n\ndef main():\n    f = torch.compile(step)\n    f(1, 2)\n\n\n"
                     "if __name__ == \"__main__\":\n    main()\n"),
    "decorator, nested": ("import torch\n\n\ndef main():\n    @torch.compile\n    "
                          + SIG + "".join("    " + ln + "\n" for ln in BODY.splitlines())
                          + "\n    step(1, 2)\n\n\nmain()\n"),
}
GUARDS = ["L['mask'] is None", "L['scale'] == 0.5"]


def _receipt(guards=GUARDS, frame="step"):
    churn = SimpleNamespace(file="s.py", frame_name=frame, guards=guards, compile_ns=5)
    finding = SimpleNamespace(churn=churn, finding_id="RC1", sentence="step recompiled")
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]))


@pytest.mark.parametrize("form", FORMS)
def test_the_shared_finder_finds_both_spellings_at_top_level_and_nested(form):
    src = Source(FORMS[form])
    (c,) = compiled_callables(src.tree)
    assert c.fn.name == "step" and c.alias == ("f" if "call" in form else "step")
    assert (c.assign is not None) == ("call" in form)
    found = list(targets(_receipt(), "s.py", src, none_guards))
    assert [(t.name, t.params, t.cause.finding_id) for t in found] == [("mask", ["x", "scale", "mask"], "RC1")]
    assert not list(targets(_receipt(frame="other"), "s.py", src, none_guards))  # another frame recompiled


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("rewrite,prepared", [
    (AlwaysPass(), "if mask is None:"),
    (TensorScalar(), "scale = torch.as_tensor(scale, dtype=torch.result_type(x, scale), device=x.device)"),
])
def test_both_rewrites_shim_every_form_the_finder_finds(form, rewrite, prepared):
    """Each rewrite puts its plain function where the compiled callable is, indented as it is,
    and the compiled function's callers are unchanged."""
    text = FORMS[form]
    (e,) = rewrite.find(_receipt(), "s.py", Source(text))  # type: ignore[arg-type]
    assert e.name.startswith(rewrite.name + "-") and e.origin == "RC1" and e.cost_ns == 5 and e.before == text
    tree = ast.parse(e.after)
    alias = "f" if "call" in form else "step"
    (plain,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == alias]
    assert prepared in ast.unparse(plain)
    assert ast.unparse(plain.body[-1]) == "return _step_compiled(x, scale, mask)"
    assert plain.col_offset == (4 if "nested" in form else 0)
    assert "f(1, 2)" in e.after or "step(1, 2)" in e.after  # the callers as they were


@pytest.mark.parametrize("text", [
    "import torch\n\n\n" + SIG + BODY + "\n\nf = torch.compile(step, step)\n",  # a second positional argument
    "import torch\n\n\n@other\n" + SIG + BODY + "\n\nf = torch.compile(step)\n",  # decorated: its signature may change
    "import torch\n\n\n@other\n@torch.compile\n" + SIG + BODY,  # which decorator wraps which is the user's
    "import torch\n\n\n" + SIG + BODY + "\n\nclass R:\n    f = torch.compile(step)\n",  # a method, not a function
    "import torch\n\n\ndef step(x, *rest, scale=1, mask=None):\n    return x\n\n\nf = torch.compile(step)\n",
])
def test_both_rewrites_refuse_the_same_forms(text):
    for rewrite in (AlwaysPass(), TensorScalar()):
        assert rewrite.find(_receipt(), "s.py", Source(text)) == []  # type: ignore[arg-type]
