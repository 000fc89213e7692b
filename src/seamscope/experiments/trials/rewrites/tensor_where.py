"""``tensor-where`` (torch-free): a Python ``if`` on a tensor's value (``.item()``, ``bool(t)``, or
a tensor condition) that broke the graph, whose two branches each assign one name, becomes
``name = torch.where(condition, then, else)`` with the condition kept a tensor.

Both branches are then computed and picked element by element: "review before applying" (a
branch with side effects, or an expensive one, is not for ``torch.where``)."""

from __future__ import annotations

import ast

from ....model.receipt import Receipt
from .base import Edit, break_lines, site_edit
from .syntax import Source, multiline_string, one_assign, tensor_test


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
            if a is None or b is None or a.targets[0].id != b.targets[0].id:  # type: ignore[attr-defined]
                continue
            if not src.alone(n) or multiline_string(n):
                continue
            name = a.targets[0].id  # type: ignore[attr-defined]
            line = (f"{src.indent(n)}{name} = torch.where({tensor_test(n.test)}, {ast.unparse(a.value)}, "
                    f"{ast.unparse(b.value)})\n")
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
