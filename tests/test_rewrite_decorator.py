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
#: what the plain function does before calling the compiled one with its own arguments
EXPECT = {"always-pass-mask": "if mask is None:\n    mask = torch.zeros_like(x)",
          "tensor-scalar-scale": "scale = torch.as_tensor(scale, dtype=torch.result_type(x, scale), device=x.device)"}


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
    """A copy of ``text`` with the diff applied by ``git apply`` (``--check`` first), as it is then."""
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
        (prepare, ret) = outer.body[1:]
        assert ast.unparse(prepare) == EXPECT[name]
        assert isinstance(ret, ast.Return) and isinstance(ret.value, ast.Call)
        assert ast.unparse(ret.value) == "_step_compiled(x, scale, mask)"
        # every caller of step is unchanged; the compiled function sees the neutral value / the tensor
        step = _exec(patched)["step"]
        assert step.__doc__ == "Softmax of tanh(x x^T) times scale,\n    mask added."
        x = SimpleNamespace(device="cpu")
        if name == "always-pass-mask":
            assert step(x, 2.0) == (x, 2.0, ("zeros like", x)) and step(x, 2.0, "M") == (x, 2.0, "M")
        else:
            assert step(x, 2.0) == (x, ("tensor", 2.0), None) and step(x, scale=3, mask="M") == (x, ("tensor", 3), "M")


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_inside_a_block_the_shim_is_indented_with_it_and_a_name_the_script_uses_is_not_taken(tmp_path):
    text = ("import torch\n\n_step_compiled = None\n\n\ndef main():\n    @torch.compile\n    def step(x, mask=None):\n"
            "        if mask is not None:\n            x = x + mask\n        return x\n"
            "    return step(1)")  # no newline at the end
    (dr,) = _drafts(tmp_path, text, guards=[NONE_GUARD], frame="main.<locals>.step").values()
    patched = apply(text, parse(dr.diff or "")[0])
    assert _git_apply(tmp_path, text, dr.diff or "") == patched
    main = _fn(ast.parse(patched), "main")
    inner, outer, call = main.body
    assert isinstance(inner, ast.FunctionDef) and inner.name == "_step_compiled_2" and inner.decorator_list
    assert isinstance(outer, ast.FunctionDef) and outer.name == "step" and not outer.decorator_list
    assert ast.unparse(outer.body[-2]) == "if mask is None:\n    mask = torch.zeros_like(x)"
    assert ast.unparse(outer.body[-1]) == "return _step_compiled_2(x, mask)"
    assert ast.unparse(call) == "return step(1)"


def test_beside_other_decorators_in_a_class_or_without_plain_parameters_there_is_no_candidate(tmp_path):
    plain = _script()
    assert set(_drafts(tmp_path, plain)) == set(EXPECT)  # the control: the same script, decorated alone
    for text in (
        plain.replace("@torch.compile", "@functools.cache\n@torch.compile"),  # which wraps which is the user's
        plain.replace("\ndef step", "\n@torch.no_grad()\ndef step"),
        plain.replace("def step", "async def step"),
        plain.replace("@torch.compile(", "@torch.compile(other, "),  # not a decorator that compiles step
        plain.replace("@torch.compile", "@torch.jit.script"),
        _script(sig="x, scale, *rest, mask=None"),
        _script(sig="x, scale, *, mask=None"),
        _script(sig="x, /, scale, mask=None"),
        "import torch\n\n\nclass M:\n" + "".join(f"    {ln}\n" if ln else "\n" for ln in _script().split("\n")[3:-3]),
    ):
        ast.parse(text)
        assert _drafts(tmp_path, text) == {}, text
    assert _drafts(tmp_path, plain, file="other.py") == {}
    assert _drafts(tmp_path, plain, frame="forward") == {}
    assert _drafts(tmp_path, plain, guards=["___check_obj_id(mask, 1)", "scale > 0.5"]) == {}


def test_beside_the_assignment_form_each_form_gets_its_own_shim_and_the_assignments_is_as_it_was(tmp_path):
    assign = ("import torch\n\n\ndef step(x, scale, mask=None):\n" + BODY + "\n\nf = torch.compile(step)\n"
              "f(torch.ones(3, 3), 0.5)\n")
    deco = "\n\n@torch.compile\ndef step2(x, scale, mask=None):\n" + BODY
    alone = _drafts(tmp_path, assign)
    for name, dr in _drafts(tmp_path, assign + deco).items():  # the assignment's frame: its patch as it was
        assert apply(assign + deco, parse(dr.diff or "")[0]) == apply(assign, parse(alone[name].diff or "")[0]) + deco
    drafts = _drafts(tmp_path, assign + deco, frame="step2")
    assert set(drafts) == set(EXPECT)
    for name, dr in drafts.items():
        patched = apply(assign + deco, parse(dr.diff or "")[0])
        assert patched.startswith(assign) and "def _step2_compiled(x, scale, mask=None):" in patched
        assert dr.change == alone[name].change.replace(" f ", " step2 ")  # type: ignore[union-attr]


DECORATED = '''"""A decorated step: an optional mask on odd calls, a scale that changes every other call."""
import os

import torch


@torch.compile(backend="eager", dynamic=False)
def step(x, scale, mask=None):
    y = torch.tanh(x @ x.T)
    if mask is not None:
        y = y + mask
    return torch.softmax(y, dim=-1).sum(0) * scale


torch.manual_seed(0)
x = torch.randn(16, 16)
m = torch.randn(16, 16)
torch.save([step(x, 0.5 + i // 2, m if i % 2 else None) for i in range(6)],
           os.path.join(os.path.dirname(os.path.abspath(__file__)), "outputs.pt"))
'''


def _run_in_process(script, out):
    """(recompiles, compilations) of ``seamscope run`` on the script, and PyTorch's own count of
    unique graphs, in this process; and the outputs the script saved."""
    import torch

    from seamscope.capture import adapter
    from seamscope.capture.runner import run_target

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    try:
        result = run_target(str(script), [], out=str(out))
        graphs = adapter.dynamo_counters()["stats"]["unique_graphs"]
    finally:  # no cache or counters left for the next test
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
    assert result.exit_code == 0, result.message
    with open(os.path.join(out, "receipt.json")) as f:
        s = json.load(f)["summary"]
    outputs = torch.load(os.path.join(os.path.dirname(script), "outputs.pt"))
    return (s["recompile_count"], s["compile_count"], graphs), outputs


@pytest.mark.torch
def test_a_decorated_functions_real_recompiles_are_matched_and_each_patched_copy_recompiles_less(
        tmp_path, monkeypatch):
    """The receipt of a real run of a decorated function (its frame ``step``, its guards
    ``mask is None`` and ``scale == 0.5``) gives both drafts; each patched copy, run the same way,
    has fewer recompiles by the receipt and fewer graphs by PyTorch's counters, outputs the same."""
    torch = pytest.importorskip("torch")  # here, not in a fixture: the torch-free lane skips it
    from seamscope.ingest.receipt import load_receipt

    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "deco.py").write_text(DECORATED)
    monkeypatch.chdir(tmp_path / "base")
    (base, graphs, _), outputs = _run_in_process(tmp_path / "base" / "deco.py", tmp_path / "base" / "o")
    assert base == 5 and graphs == 6  # (scale, mask is None) takes six values; dynamic=False
    drafts = {d.name: d for d in rewrites(load_receipt(str(tmp_path / "base" / "o" / "receipt.json")), "deco.py")}
    assert set(EXPECT) <= set(drafts)
    for name, (recompiles, unique) in {"always-pass-mask": (2, 3), "tensor-scalar-scale": (1, 2)}.items():
        copy = tmp_path / name
        copy.mkdir()
        (copy / "deco.py").write_text(apply(DECORATED, parse(drafts[name].diff or "")[0]))
        (got, _, graphs), patched = _run_in_process(copy / "deco.py", copy / "o")
        assert (got, graphs) == (recompiles, unique), name
        torch.testing.assert_close(patched, outputs)
