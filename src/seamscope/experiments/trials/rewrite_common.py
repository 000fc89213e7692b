"""What the code-change rewrites share (torch-free): whether a break site is the script's, an
``if``'s condition kept a tensor, a branch that is one assignment."""

from __future__ import annotations

import ast
import os

from ...model.normalize import project_root


def _own(file: str, script: str) -> bool:
    """Whether a receipt's file is the script (named relative to the project root or the
    script's folder, or in full): a script in a subfolder of a repository is still found."""
    mine = os.path.abspath(script)
    if os.path.isabs(file):
        return os.path.abspath(file) == mine
    here = os.path.dirname(mine)
    return mine in (os.path.abspath(os.path.join(project_root(here), file)), os.path.abspath(os.path.join(here, file)))


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
