"""The ``always-pass-NAME`` and ``tensor-scalar-NAME`` rewrites on a function compiled by the
decorator (``@torch.compile``, bare or called): the decorated function keeps its body and decorator
under a new private name, a plain ``def NAME`` with the same signature after it passes the neutral
value or the 0-d tensor, so every caller of ``NAME`` is unchanged. Torch-free on source text (the
shim run against a fake ``torch``), and once with real torch: the patched copy recompiles less by
PyTorch's own counters, with the same outputs."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials.rewrites import rewrites
from seamscope.experiments.unified_diff import apply, parse

GIT = shutil.which("git")
# the guards of a real run of a decorated ``step`` (torch 2.13), as its churn finding keeps them
NONE_GUARD = "mask is None                                             # if mask is not None:  # s.py:8 in step"
VALUE_GUARD = "scale == 0.5                                             # return (y + x) * scale  # s.py:10 in step"
DECORATORS = {
    "bare": "@torch.compile",
    "called": '@torch.compile(backend="eager")',
    "multiline": '@torch.compile(\n    backend="eager",\n    dynamic=False,\n)',
}
BODY = ('    """Softmax of tanh(x x^T) times scale,\n    mask added."""\n    y = torch.tanh(x @ x.T)\n'
        '    if mask is not None:\n        y = y + mask\n    return (y + x) * scale\n')
EXPECT = {"always-pass-mask": "torch.zeros_like(x) if mask is None else mask",
          "tensor-scalar-scale": "torch.as_tensor(scale, dtype=torch.result_type(x, scale), device=x.device)"}


def _receipt(guards, file="s.py", frame="step"):
    churn = SimpleNamespace(file=file, frame_name=frame, guards=list(guards), compile_ns=7, subjects=["mask"])
    finding = SimpleNamespace(churn=churn, finding_id="FR1", sentence="step recompiled", site_id=None, cost_ns=0)
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]), ledger=SimpleNamespace(break_sites=[]))


def _script(deco=DECORATORS["called"], sig="x, scale, mask=None", body=BODY, tail="step(torch.ones(3, 3), 0.5)\n"):
    return f"import torch\n\n\n{deco}\ndef step({sig}):\n{body}\n\n{tail}"


def _drafts(d, text, guards=(NONE_GUARD, VALUE_GUARD), **kw):
    (d / "s.py").write_text(text, encoding="utf-8")
    here = os.getcwd()
    os.chdir(d)
    try:
        return {x.name: x for x in rewrites(_receipt(guards, **kw), "s.py")  # type: ignore[arg-type]
                if x.name in EXPECT}
    finally:
        os.chdir(here)


def _fn(tree, name):
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return fn


def _git_apply(d, text, diff):
    """The diff applies to a copy of the script with ``git apply`` and gives ``text``."""
    copy = d / "copy"
    copy.mkdir(parents=True)
    (copy / "s.py").write_text(text, encoding="utf-8")
    (copy / "d.patch").write_text(diff, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    subprocess.run(["git", "apply", "--check", "d.patch"], cwd=copy, check=True)
    subprocess.run(["git", "apply", "d.patch"], cwd=copy, check=True)
    return (copy / "s.py").read_text(encoding="utf-8")


class _FakeTorch:
    """What the shim needs of torch; its compiled function returns what it was passed."""

    def compile(self, fn=None, **_):
        return self.compile if fn is None else (lambda *args: args)

    zeros_like = staticmethod(lambda x, **_: ("zeros like", x))
    as_tensor = staticmethod(lambda v, **_: ("tensor", v))
    result_type = staticmethod(lambda *a: "float32")


def _exec(patched):
    """The patched script's functions, run against :class:`_FakeTorch` (its last line, the call, left out)."""
    ns: dict = {"torch": _FakeTorch()}
    exec(compile(patched.replace("import torch\n", "", 1).rsplit("\n", 2)[0], "s.py", "exec"), ns)
    return ns


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@pytest.mark.parametrize("deco", DECORATORS.values(), ids=DECORATORS.keys())
def test_both_rewrites_keep_the_decorated_function_and_put_a_plain_one_of_its_name_after_it(tmp_path, deco):
    text = _script(deco)
    drafts = _drafts(tmp_path, text)
    assert set(drafts) == set(EXPECT)
    before = _fn(ast.parse(text), "step")
    for name, dr in drafts.items():
        assert " step " in (dr.change or "") and dr.review and dr.origin == "FR1"
        patched = apply(text, parse(dr.diff or "")[0])
        assert _git_apply(tmp_path / name, text, dr.diff or "") == patched
        tree = ast.parse(patched)
        inner, outer = _fn(tree, "_step_compiled"), _fn(tree, "step")
        # the compiled function is the user's, decorator, defaults and body as they were
        assert [ast.dump(d) for d in inner.decorator_list] == [ast.dump(d) for d in before.decorator_list]
        assert ast.dump(inner.args) == ast.dump(before.args) and ast.dump(ast.Module(inner.body, [])) == \
            ast.dump(ast.Module(before.body, []))
        # the public one: same signature and docstring, no decorator, calling the compiled one
        assert outer.decorator_list == [] and ast.unparse(outer.args) == "x, scale, mask=None"
        assert ast.get_docstring(outer, clean=False) == ast.get_docstring(before, clean=False)
        assert outer.lineno > inner.end_lineno  # type: ignore[operator]
        (ret,) = outer.body[1:]
        assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call)
        assert ast.unparse(ret.value.func) == "_step_compiled"
        assert [ast.unparse(a) for a in ret.value.args] == [
            EXPECT[name] if p == name.rsplit("-", 1)[1] else p for p in ("x", "scale", "mask")]
        # every caller of step is unchanged; the compiled function sees the neutral value / the tensor
        step = _exec(patched)["step"]
        assert step.__doc__ == "Softmax of tanh(x x^T) times scale,\n    mask added."
        x = SimpleNamespace(device="cpu")
        if name == "always-pass-mask":
            assert step(x, 2.0) == (x, 2.0, ("zeros like", x)) and step(x, 2.0, "M") == (x, 2.0, "M")
        else:
            assert step(x, 2.0) == (x, ("tensor", 2.0), None) and step(x, scale=3, mask="M") == (x, ("tensor", 3), "M")
