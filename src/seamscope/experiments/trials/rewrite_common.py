"""What the code-change rewrites share (torch-free): whether a break site is the script's, an
``if``'s condition kept a tensor, a branch that is one assignment."""

from __future__ import annotations

import ast
import os


def _own(file: str, script: str) -> bool:
    """Whether a break site's file is the script (sites name files relative to its folder, or in full)."""
    path = file if os.path.isabs(file) else os.path.join(os.path.dirname(os.path.abspath(script)), file)
    return os.path.abspath(path) == os.path.abspath(script)


class _Untensor(ast.NodeTransformer):
    """``t.item()`` → ``t``, ``bool(t)`` → ``t``: the condition kept a tensor."""

    def __init__(self) -> None:
        self.changed = False

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args and not node.keywords:
            self.changed = True
            return node.func.value
        if isinstance(node.func, ast.Name) and node.func.id == "bool" and len(node.args) == 1 and not node.keywords:
            self.changed = True
            return node.args[0]
        return node


def _one_assign(body: list[ast.stmt]) -> ast.Assign | None:
    if len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1 \
            and isinstance(body[0].targets[0], ast.Name):
        return body[0]
    return None
