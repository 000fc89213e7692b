"""The ``tensor-scalar-NAME`` rewrite on source text, torch-free: a candidate only where every use of
the guarded number is arithmetic with a tensor; its patch applies with ``git apply`` and parses."""

from __future__ import annotations

import ast
import builtins
import keyword
import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seamscope.experiments.trials.rewrites import rewrites
from seamscope.experiments.trials.rewrites.tensor_scalar import arithmetic_operand
from seamscope.experiments.unified_diff import apply, parse

GIT = shutil.which("git")
# the form of PyTorch's value guards, as a run's churn finding keeps them
FLOAT_GUARD = "scale == 0.5                                             # return x * scale  # s.py:5 in step"


def _receipt(guards, file="s.py", frame="step"):
    churn = SimpleNamespace(file=file, frame_name=frame, guards=guards, compile_ns=7, subjects=["scale"])
    finding = SimpleNamespace(churn=churn, finding_id="FR1", sentence="step recompiled on scale", site_id=None,
                              cost_ns=0)
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]), ledger=SimpleNamespace(break_sites=[]))


def _script(body, sig="x, scale", compile_line='f = torch.compile(step, backend="eager")'):
    lines = "".join(f"    {ln}\n" for ln in body)
    return f"import torch\n\n\ndef step({sig}):\n{lines}\n\n{compile_line}\nf(torch.ones(3), 0.5)\n"


def _drafts(d, text, guards=(FLOAT_GUARD,), script="s.py", **kw):
    (d / script).parent.mkdir(parents=True, exist_ok=True)
    (d / script).write_text(text, encoding="utf-8")
    here = os.getcwd()
    os.chdir(d)
    try:
        return [x for x in rewrites(_receipt(list(guards), **kw), script)  # type: ignore[arg-type]
                if x.name.startswith("tensor-scalar")]
    finally:
        os.chdir(here)


TYPED = "torch.as_tensor(scale, dtype=torch.result_type(x, scale), device=x.device)"
ARITHMETIC = [
    (["return torch.tanh(x * scale + 1).sum(0)"], TYPED),
    (["y = x / scale", "y += scale", "return -(y ** 2) - scale * x.sum()"], TYPED),
    (["return (x - scale).sum(), torch.exp(x * scale)"], TYPED),
    # no argument meets it: the number's own dtype (float32 for a float), not a guess at y's
    (["y = x.clone()", "y *= scale", "return y"], "torch.as_tensor(scale)"),
]
NOT_ARITHMETIC = [
    ["for _ in range(scale):", "    x = x + 1", "return x"],
    ["if scale > 1:", "    x = x * 2", "return x * scale"],
    ["return x.view(scale, -1) * scale"],
    ["return x * int(scale)"],
    ["return x[scale] * scale"],
    ["return torch.clamp(x, max=scale)"],  # passed on as a number: the callee's to say
    ["scale = scale * 2", "return x * scale"],  # reassigned
    ["s = scale * 2", "return x * s"],  # arithmetic of numbers only
    ["return x * scale if scale else x"],
    ["return torch.zeros(x.shape[0] * scale) + x"],
    ["print(f'{scale}')", "return x * scale"],
    ["return x * math.sqrt(scale)"],
]


@pytest.mark.parametrize("body,value", ARITHMETIC, ids=["call", "augmented", "tuple", "no-operand"])
def test_a_guarded_float_used_in_arithmetic_is_passed_as_a_0d_tensor_of_the_operations_dtype(tmp_path, body, value):
    text = _script(body)
    (dr,) = _drafts(tmp_path, text)
    assert dr.name == "tensor-scalar-scale" and dr.origin == "FR1" and dr.cost_ns == 7 and dr.review
    assert "Python float" in (dr.change or "") and "review before applying" in (dr.change or "")
    patched = apply(text, parse(dr.diff or "")[0])
    ast.parse(patched)
    assert "_step_compiled = torch.compile(step, backend=\"eager\")\n" in patched
    assert f"def f(x, scale):\n    # scale as a 0-d tensor: one graph serves every value\n    scale = {value}\n" \
        "    return _step_compiled(x, scale)\n" in patched
    if GIT is not None:
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        (tmp_path / "p.patch").write_text(dr.diff or "", encoding="utf-8")
        subprocess.run(["git", "apply", "--check", "p.patch"], cwd=tmp_path, check=True)


@pytest.mark.parametrize("body", NOT_ARITHMETIC, ids=lambda b: b[0][:30])
def test_no_candidate_where_the_number_is_not_only_arithmetic_with_a_tensor(tmp_path, body):
    assert _drafts(tmp_path, _script(body)) == []


def test_an_int_guard_of_either_form_names_the_number_and_the_operand_follows_it(tmp_path):
    text = _script(["return x * n + bias"], sig="n, x, bias=0.5")
    (dr,) = _drafts(tmp_path, text, guards=["L['n'] == 3", "n == -2  # comment"])
    assert dr.name == "tensor-scalar-n" and "Python int" in (dr.change or "")
    patched = apply(text, parse(dr.diff or "")[0])
    assert "def f(n, x, bias=0.5):\n" in patched
    assert "    n = torch.as_tensor(n, dtype=torch.result_type(x, n), device=x.device)\n" in patched
    assert "    return _step_compiled(n, x, bias)\n" in patched
    # a parameter with a number for default is no tensor: without another operand, no dtype to follow
    (dr,) = _drafts(tmp_path, _script(["return x + n * bias"], sig="n, x, bias=0.5"), guards=["n == 1"])
    assert "torch.result_type(x, n)" in (dr.diff or "")
    assert _drafts(tmp_path, _script(["return n * bias"], sig="n, bias=0.5"), guards=["n == 1"]) == []


def test_other_guards_files_frames_and_compile_forms_get_no_candidate(tmp_path):
    body = ["return x * scale"]
    assert _drafts(tmp_path, _script(body), guards=["scale is None", "___check_obj_id(scale, 1)"]) == []
    assert _drafts(tmp_path, _script(body), file="other.py") == []
    assert _drafts(tmp_path, _script(body), frame="forward") == []
    text = "import torch\n\n\n@torch.no_grad()\n@torch.compile\ndef step(x, scale):\n    return x * scale\n"
    assert _drafts(tmp_path, text) == []  # another decorator beside the compile: which wraps which is the user's
    assert _drafts(tmp_path, _script(body, sig="x, *rest, scale")) == []


_IDENT = st.from_regex(r"[a-z][a-z_]{0,23}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and not hasattr(builtins, n) and n not in ("torch", "f", "step"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(_IDENT, min_size=3, max_size=6, unique=True), taken=st.booleans())
def test_the_plain_function_fits_in_100_columns_and_uses_no_name_of_the_script(tmp_path, names, taken):
    """However long the names, the lines the patch adds are at most 100 columns, and the compiled
    callable moves to a name after the compiled function's that the script does not use."""
    x, scale, *rest = names
    sig = ", ".join([x, scale, *rest])
    text = _script([f"return {x} * {scale} + 1"], sig=sig)
    if taken:
        text = text.replace("import torch\n", "import torch\n_step_compiled = None\n", 1)
    (dr,) = _drafts(tmp_path, text, guards=[f"{scale} == 0.5  # return {x} * {scale} + 1  # s.py:5 in step"])
    added = [ln[1:] for ln in (dr.diff or "").splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert added and max(map(len, added)) <= 100, added
    inner = "_step_compiled_2" if taken else "_step_compiled"
    patched = apply(text, parse(dr.diff or "")[0])
    assert re.search(rf"\b{inner}\b", text) is None and f"{inner} = torch.compile(step" in patched
    (plain,) = [n for n in ast.walk(ast.parse(patched)) if isinstance(n, ast.FunctionDef) and n.name == "f"]
    (call,) = [n for n in ast.walk(plain) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == inner]
    assert [ast.unparse(a) for a in call.args] == [x, scale, *rest]
    assert f"torch.result_type({x}, {scale})" in ast.unparse(plain)


def test_a_script_below_the_project_root_is_found_by_the_receipts_path(tmp_path):
    """A run's receipt names files relative to the project root (a ``.git`` above the script)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "sub").mkdir()
    here = os.getcwd()
    os.chdir(tmp_path / "sub")
    try:
        (dr,) = _drafts(tmp_path / "sub", _script(["return x * scale"]), file="sub/s.py")
    finally:
        os.chdir(here)
    assert "+++ b/sub/s.py" in (dr.diff or "")


def test_arithmetic_operand_reads_the_tensor_the_number_meets():
    def fn(src):
        return ast.parse(src).body[0]

    assert arithmetic_operand(fn("def f(x, s):\n    return x * s"), "s") == "x"
    assert arithmetic_operand(fn("def f(x, s):\n    y = x.sum()\n    return y * s"), "s") == ""
    assert arithmetic_operand(fn("def f(x, s, t):\n    return s * t"), "s", frozenset({"t"})) is None
    assert arithmetic_operand(fn("def f(x, s):\n    def g(s):\n        return s\n    return x * s"), "s") is None
    assert arithmetic_operand(fn("def f(x, s):\n    return x"), "s") is None  # unused: nothing to gain


GOOD = [["y = y * scale + 1"], ["y = torch.tanh(x / scale) + y"], ["y *= scale"], ["y = y - scale * x.sum()"],
        ["z = (x ** scale, y)", "y = z[1]"]]
BAD = [["y = x.view(scale, -1)"], ["if scale > 0:", "    y = y + 1"], ["for _ in range(scale):", "    y = y + 1"],
       ["y = y * int(scale)"], ["y = torch.clamp(y, max=scale)"], ["s = scale * 2", "y = y * s"], ["y = y[scale]"]]


@pytest.mark.skipif(GIT is None, reason="git is not installed")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.lists(st.sampled_from([(s, True) for s in GOOD] + [(s, False) for s in BAD]), min_size=1, max_size=4),
       spaced=st.booleans())
def test_a_candidate_iff_every_use_is_arithmetic_and_its_patch_round_trips(tmp_path_factory, picks, spaced):
    body = ["y = x"] + [ln for stmt, _ in picks for ln in stmt] + ["return y"]
    compile_line = "f = torch.compile(\n    step,\n    backend='eager',\n)" if spaced else "f = torch.compile(step)"
    text = _script(body, compile_line=compile_line)
    d = tmp_path_factory.mktemp("rs")
    drafts = _drafts(d, text)
    assert bool(drafts) == all(ok for _, ok in picks)
    for dr in drafts:
        patched = apply(text, parse(dr.diff or "")[0])
        ast.parse(patched)
        assert patched.count("def f(x, scale):") == 1 and "_step_compiled = torch.compile(" in patched
        subprocess.run(["git", "init", "-q"], cwd=d, check=True)
        (d / "p.patch").write_text(dr.diff or "", encoding="utf-8")
        subprocess.run(["git", "apply", "--check", "p.patch"], cwd=d, check=True)
        subprocess.run(["git", "apply", "p.patch"], cwd=d, check=True)
        assert (d / "s.py").read_text(encoding="utf-8") == patched
