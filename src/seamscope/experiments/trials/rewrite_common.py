"""What the code-change rewrites share (torch-free): whether a break site is the script's, an
``if``'s condition kept a tensor, a branch that is one assignment, and the shim a function
compiled by the decorator ``@torch.compile`` gets (the ``always-pass`` and ``tensor-scalar``
rewrites' decorator form)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

from ...model.normalize import project_root
from .patches import Source


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


def _is_torch_compile(node: ast.AST) -> bool:
    """``torch.compile`` or ``torch.compile(...)`` given no function (a decorator's two spellings)."""
    if isinstance(node, ast.Call):
        if node.args:
            return False
        node = node.func
    return (isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def compiled_defs(body: list[ast.stmt]) -> Iterator[ast.FunctionDef]:
    """The functions of a block and of the blocks inside it (a ``main()``, an ``if __name__ ==
    "__main__":``) whose one decorator is ``@torch.compile`` or ``@torch.compile(...)``. A function
    with other decorators too is left out: which of them wraps the compiled function and which the
    function compiled is theirs to say, and a shim would change it. A class body is left out too
    (a function put there would be a method)."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            continue
        if isinstance(stmt, ast.FunctionDef) and len(stmt.decorator_list) == 1 \
                and _is_torch_compile(stmt.decorator_list[0]):
            yield stmt
        for field in ("body", "orelse", "finalbody"):
            yield from compiled_defs(getattr(stmt, field, []) or [])
        for h in getattr(stmt, "handlers", []) or []:
            yield from compiled_defs(h.body)


def plain_params(fn: ast.FunctionDef) -> list[str] | None:
    """``fn``'s parameters where they are plain positional-or-keyword ones (a shim passes them on
    by position), at least one; None otherwise."""
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs or not a.args:
        return None
    return [x.arg for x in a.args]


def _bound(tree: ast.AST) -> set[str]:
    """Every name the script binds or reads (a new name must be none of them)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)  # ``self._step_compiled``: not proof of a clash, but a name to avoid
    return out


def decorated_shim(text: str, fn: ast.FunctionDef, comment: str, call: str) -> str | None:
    """The script's text with the ``@torch.compile`` function ``fn`` renamed ``_NAME_compiled`` (a
    name the script does not use), its decorator, defaults and body kept, and a plain ``def NAME``
    after it with ``fn``'s signature (and docstring) whose body is ``# comment`` and ``return
    _NAME_compiled(call)``: every caller of ``NAME`` is unchanged and the compiled function sees
    what ``call`` (the arguments' text) passes. None where the edit cannot be made safely
    (something else on the ``def`` line or the decorator's before them)."""
    src = Source(text)
    deco = fn.decorator_list[0]
    line = src.lines[fn.lineno - 1]
    start = src.col(fn.lineno, fn.col_offset)
    pad = line[:start]
    m = re.compile(r"def\s+" + re.escape(fn.name) + r"\b").match(line, start)
    at = src.lines[deco.lineno - 1][: src.col(deco.lineno, deco.col_offset)].rstrip()
    if m is None or pad.strip() or not at.endswith("@") or at[:-1].strip():
        return None
    taken = _bound(src.tree)
    inner = next(n for i in range(len(taken) + 1) if (n := f"_{fn.name}_compiled" + (f"_{i}" if i else ""))
                 not in taken)
    src.edits.append((fn.lineno, m.start(), fn.lineno, m.end(), f"def {inner}"))
    doc = fn.body[0] if ast.get_docstring(fn, clean=False) is not None else None
    docstring = ast.get_source_segment(text, doc) if isinstance(doc, ast.Expr) else None
    body = ([docstring] if docstring else []) + [f"# {comment}", f"return {inner}({call})"]
    shim = "".join(f"{pad}{ln}\n" for ln in [f"def {fn.name}({ast.unparse(fn.args)}):"] + ["    " + b for b in body])
    end = fn.end_lineno or fn.lineno
    gap = "\n" if pad else "\n\n"
    follows = end < len(src.lines) and src.lines[end].strip()
    src.insert_lines(end + 1, gap + shim + (gap if follows and not pad else ""))
    return src.result()
