"""``tensor-where`` (torch-free): a Python ``if`` on a tensor's value (``.item()``, ``bool(t)``, or
a tensor condition) that broke the graph, whose two branches each assign one name, becomes
``name = torch.where(condition, then, else)`` with the condition kept a tensor. Without an
``else``, where the name is bound before the ``if`` in the same function (a parameter, or an
assignment on an earlier line: ``if h.norm() > 1: h = h / h.norm()``), the name itself is the
``else``: ``h = torch.where(h.norm() > 1, h / h.norm(), h)``.

Both branches are then computed and picked element by element: "review before applying" (a
branch with side effects, or an expensive one, is not for ``torch.where``)."""

from __future__ import annotations

import ast

from ....model.receipt import Receipt
from .base import Edit, break_lines, site_edit
from .syntax import Source, multiline_string, one_assign, parents, tensor_test


def _bound_before(tree: ast.Module, stmt: ast.If, name: str) -> bool:
    """Whether ``name`` is a parameter of the function holding ``stmt``, or assigned in it (a plain
    ``name = ...``) on a line before it; at module level, assigned before it."""
    up = parents(tree)
    scope: ast.AST | None = up.get(id(stmt))
    while scope is not None and not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        scope = up.get(id(scope))
    if scope is None:
        return False
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = scope.args
        if name in {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
            return True
    return any(isinstance(s, ast.Assign) and s.lineno < stmt.lineno and any(
        isinstance(t, ast.Name) and t.id == name for t in s.targets) for s in ast.walk(scope))


class TensorWhere:
    name = "tensor-where"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        src = Source(source.text)
        lines = break_lines(receipt, script)
        done = []
        for n in ast.walk(src.tree):
            if not isinstance(n, ast.If) or n.lineno not in lines:
                continue
            a, b = one_assign(n.body), one_assign(n.orelse)
            if a is None or not src.alone(n) or multiline_string(n):
                continue
            name = a.targets[0].id  # type: ignore[attr-defined]
            if b is not None and b.targets[0].id == name:  # type: ignore[attr-defined]
                other = ast.unparse(b.value)
            elif not n.orelse and _bound_before(src.tree, n, name):
                other = name
            else:
                continue
            line = f"{src.indent(n)}{name} = torch.where({tensor_test(n.test)}, {ast.unparse(a.value)}, {other})\n"
            src.edits.append((n.lineno, 0, (n.end_lineno or n.lineno) + 1, 0, line))
            done.append(n.lineno)
        if not done:
            return []
        src.ensure_import()
        return [site_edit(
            self.name, receipt, script, source, src.result(), sorted(done),
            "Python branch(es) on a tensor's value in compiled code",
            "turn the if on a tensor's value at {where} into torch.where (review before applying: both branches "
            "are computed)",
            "both branches are computed and picked element by element: check they have no side effects")]
