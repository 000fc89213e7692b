"""The ``tensor-cond`` rewrite on source text, torch-free: where an ``if`` on a tensor's value that
broke becomes ``torch.cond``, where it does not (side effects, names bound on one path, a pair of
single assignments left to ``tensor-where``), and that the patched function, run with a
``torch.cond`` that picks a branch as Python does, computes what the original did."""

from __future__ import annotations

import ast
import textwrap
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials.rewrites import rewrites
from seamscope.experiments.unified_diff import apply, parse


def _receipt(*lines):
    return SimpleNamespace(findings=None, ledger=SimpleNamespace(break_sites=[
        SimpleNamespace(file="s.py", line=n, site_id=f"B{n}") for n in lines]))


def _drafts(tmp_path, monkeypatch, body, line=None):
    """The drafts for a script whose ``step`` holds ``body``, with a break at the ``if`` (or ``line``)."""
    text = "import torch\n\n\ndef step(x, k):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + \
        "\n\n\nf = torch.compile(step, backend='eager')\n"
    at = line or next(i for i, ln in enumerate(text.splitlines(), 1) if ln.strip().startswith("if "))
    (tmp_path / "s.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    return text, {d.name: d for d in rewrites(_receipt(at), "s.py")}  # type: ignore[arg-type]


def _cond(tmp_path, monkeypatch, body):
    text, by = _drafts(tmp_path, monkeypatch, body)
    d = by.get("tensor-cond")
    if d is None:
        return text, None
    assert d.diff and d.review and "torch.cond" in (d.change or "")
    return text, apply(text, parse(d.diff)[0])


def _run(text, *args):
    """``step(*args)`` of a script, with a ``torch`` whose ``cond`` picks as an ``if`` does."""
    def cond(pred, then, other, operands):
        assert isinstance(operands, tuple)
        return then(*operands) if pred else other(*operands)

    fake = SimpleNamespace(cond=cond, compile=lambda fn, **_: fn, relu=lambda v: max(v, 0.0))
    ns: dict = {}
    exec(compile(text.replace("import torch\n", "", 1), "s.py", "exec"), {"torch": fake}, ns)
    return ns["step"](*args)


class _Scalar(float):
    def item(self):
        return float(self)


TWO_STATEMENTS = """
    y = x * 3
    if x > 0:
        t = y * 2
        z = torch.relu(t) + k
    else:
        t = y - 1
        z = t * t
    return z + t
"""


def test_an_if_with_two_statements_a_branch_becomes_torch_cond_and_computes_the_same(tmp_path, monkeypatch):
    text, new = _cond(tmp_path, monkeypatch, TWO_STATEMENTS)
    assert new is not None
    ast.parse(new)
    assert "    def _then_6():\n        t = y * 2\n        z = torch.relu(t) + k\n        return t, z\n" in new
    assert "    def _else_6():\n        t = y - 1\n        z = t * t\n        return t, z\n" in new
    assert "    t, z = torch.cond(x > 0, _then_6, _else_6, ())\n" in new
    assert "if x > 0" not in new
    for x in (2.0, -3.0, 0.0):
        assert _run(new, x, 5.0) == _run(text, x, 5.0)


def test_a_name_read_and_rebound_is_an_operand_and_item_and_bool_keep_the_condition_a_tensor(tmp_path, monkeypatch):
    text, new = _cond(tmp_path, monkeypatch, """
        y = x + 1
        if bool(k.item() > 2):
            y = y * 2
            y = y + k
        else:
            y = y - k
            y = y * y
        return y
    """)
    assert new is not None
    assert "    def _then_6(y):\n" in new and "    def _else_6(y):\n" in new
    assert "    y = torch.cond(k > 2, _then_6, _else_6, (y,))\n" in new
    for k in (4.0, -1.0):
        assert _run(new, 2.0, _Scalar(k)) == _run(text, 2.0, _Scalar(k))


def test_a_temporary_of_one_branch_stays_inside_and_a_constant_loop_and_an_op_named_log_are_taken(
        tmp_path, monkeypatch):
    text, new = _cond(tmp_path, monkeypatch, """
        if x > 0:
            u = x * k
            z = u + 1
        else:
            z = x
            for _ in range(3):
                z = z * 2
            z = torch.log(z) if False else z
        return z
    """)
    assert new is not None
    assert "return z\n" in new and "z = torch.cond(" in new and "(z,)" not in new  # u, _ stay inside
    for x in (1.5, -2.0):
        assert _run(new, x, 2.0) == _run(text, x, 2.0)


GOOD_ELSE = ["z = x - 1", "z = z * 2"]


@pytest.mark.parametrize("then,other,fixed", [
    (["print('then', x)", "z = x * 2"], GOOD_ELSE, ["w = x", "z = x * 2"]),  # a side effect
    (["log.info('then')", "z = x * 2"], GOOD_ELSE, ["w = torch.log(x)", "z = x * 2"]),
    (["k.scale = 2", "z = x * 2"], GOOD_ELSE, ["scale = 2", "z = x * 2"]),  # an attribute of something else
    (["k[0] = 2", "z = x * 2"], GOOD_ELSE, ["k0 = 2", "z = x * 2"]),  # a subscript
    (["x.add_(1)", "z = x * 2"], GOOD_ELSE, ["w = x.add(1)", "z = x * 2"]),  # an input changed in place
    (["w = x.mul_(2)", "z = w"], GOOD_ELSE, ["w = x * 1", "w.mul_(2)", "z = w"]),  # ... not one it made
    (["w = x.view(-1)", "w.mul_(2)", "z = w"], GOOD_ELSE, ["w = x.view(-1)", "z = w * 2"]),  # ... through a view
    (["w = x", "w += 1", "z = w"], GOOD_ELSE, ["w = x", "w = w + 1", "z = w"]),  # ... through a name
    (["w = x * 2", "w, v = x.chunk(2)", "w.mul_(2)", "z = w"], GOOD_ELSE,  # ... made, then a view again
     ["w = x * 2", "w.mul_(2)", "u, v = x.chunk(2)", "z = w"]),
    (["z = x * 2", "x += 1"], GOOD_ELSE, ["z = x * 2", "z += 1"]),  # += on an input
    (["z = x * 2", "return z"], GOOD_ELSE, ["z = x * 2", "pass"]),
    (["z = x * 2", "n = z.sum().item()"], GOOD_ELSE, ["z = x * 2", "n = z.sum()"]),  # a value read back to Python
    (["z = x", "for i in range(int(k)):", "    z = z * 2"], GOOD_ELSE,  # a loop of any length
     ["z = x", "for i in range(3):", "    z = z * 2"]),
    (["z = x * 2", "if k > 1:", "    z = z + 1"], GOOD_ELSE, ["z = x * 2", "z = z + 1 if k > 1 else z"]),  # nested if
    (["a = x * 2", "a = a + 1"], GOOD_ELSE, ["z = x * 2", "z = z + 1"]),  # the names differ
    (["z = x * 2", "t = z + 1"], GOOD_ELSE, ["z = x * 2", "u = z + 1"]),  # t bound on one path, read after
    (["z = x * 2"], ["z = x - 1"], ["z = x * 2", "z = z + 0"]),  # one assignment each: tensor-where's
])
def test_no_cond_where_torch_cond_cannot_take_the_branches(tmp_path, monkeypatch, then, other, fixed):
    """Each refused pair, beside the same pair with the one thing torch.cond cannot take changed."""
    found = []
    for branch in (then, fixed):
        body = ("if x > 0:\n" + "".join(f"    {s}\n" for s in branch) + "else:\n"
                + "".join(f"    {s}\n" for s in other) + ("return z + t\n" if "t = z + 1" in then else "return z\n"))
        if "t = z + 1" in then:
            body = "t = x\n" + body
        _, by = _drafts(tmp_path, monkeypatch, body)
        found.append("tensor-cond" in by)
        if len(branch) == 1:
            assert "tensor-where" in by  # the simple pair stays torch.where's
    assert found == [False, True]


def test_no_cond_without_an_else_a_break_elsewhere_or_outside_a_function(tmp_path, monkeypatch):
    _, by = _drafts(tmp_path, monkeypatch, "z = x\nif x > 0:\n    z = x * 2\n    z = z + 1\nelse:\n    z = x - 1\n"
                    "    z = z * 2\nreturn z\n")
    assert "tensor-cond" in by  # with its else
    _, by = _drafts(tmp_path, monkeypatch, "z = x\nif x > 0:\n    z = x * 2\n    z = z + 1\nreturn z\n")
    assert "tensor-cond" not in by
    _, by = _drafts(tmp_path, monkeypatch, TWO_STATEMENTS, line=5)
    assert "tensor-cond" not in by
    (tmp_path / "s.py").write_text("import torch\nx = torch.ones(2)\nif x.sum() > 0:\n    a = 1\n    b = 2\n"
                                   "else:\n    a = 2\n    b = 1\n")
    assert not rewrites(_receipt(3), "s.py")  # type: ignore[arg-type]


def test_the_import_is_added_once_and_the_diff_names_the_lines(tmp_path, monkeypatch):
    text = ("def step(x):\n    if x > 0:\n        a = x + 1\n        b = a * 2\n    else:\n        a = x - 1\n"
            "        b = a / 2\n    return a + b\n")
    (tmp_path / "s.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    (d,) = rewrites(_receipt(2), "s.py")  # type: ignore[arg-type]
    new = apply(text, parse(d.diff or "")[0])
    assert d.name == "tensor-cond" and "(s.py:2)" in d.targets and new.startswith("import torch\n")
    assert new.count("import torch") == 1 and _run(new, 3.0) == _run(text, 3.0)


def test_an_if_without_an_else_becomes_torch_where_with_the_name_itself_where_it_is_bound_before(tmp_path,
                                                                                               monkeypatch):
    text, by = _drafts(tmp_path, monkeypatch, "h = x * k\nif h.sum() > 1:\n    h = h / 2\nreturn h\n")
    new = apply(text, parse(by["tensor-where"].diff or "")[0])
    assert "    h = torch.where(h.sum() > 1, h / 2, h)\n    return h\n" in new and "if " not in new
    _, by = _drafts(tmp_path, monkeypatch, "if x.sum() > 1:\n    x = x / 2\nreturn x\n")  # a parameter
    assert "tensor-where" in by
    _, by = _drafts(tmp_path, monkeypatch, "if x.sum() > 1:\n    h = x / 2\nreturn h\n")  # unbound without the if
    assert "tensor-where" not in by
    _, by = _drafts(tmp_path, monkeypatch, "if x.sum() > 1:\n    h = x / 2\nh = x\nreturn h\n")  # bound after it
    assert "tensor-where" not in by


def test_a_rewrite_at_one_break_comes_from_that_breaks_finding(tmp_path, monkeypatch):
    """So the trial checks its runs for that break (``did not remove its target``), and the break's
    ``none:`` line says the code change is tried for it."""
    _, by = _drafts(tmp_path, monkeypatch, "h = x * k\nif h.sum() > 1:\n    h = h / 2\nreturn h\n")
    assert by["tensor-where"].origin == "code change"  # no finding to name
    receipt = _receipt(6)  # the if's line, its site B6
    receipt.findings = SimpleNamespace(findings=[SimpleNamespace(finding_id="B6", site_id="B6", cost_ns=3, churn=None)])
    (d,) = [d for d in rewrites(receipt, "s.py") if d.name == "tensor-where"]  # type: ignore[arg-type]
    assert d.origin == "B6" and d.cost_ns == 3
