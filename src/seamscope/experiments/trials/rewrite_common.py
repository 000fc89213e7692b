"""What the code-change rewrites share (torch-free): whether a break site is the script's, an
``if``'s condition kept a tensor, a branch that is one assignment, and the shim a function
compiled by the decorator ``@torch.compile`` gets (the ``always-pass`` and ``tensor-scalar``
rewrites' decorator form)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from typing import Any

from ...model.normalize import project_root
from ..remedy_spec import RemedySpec
from ..unified_diff import make
from .catalogue import Draft
from .patches import Source, rel_path


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


#: The widest line a shim is written in where its names allow (a user's formatter may want less).
SHIM_WIDTH = 100


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the script binds or reads anywhere (assigned, defined, imported, a parameter):
    a name a rewrite adds must be none of them, or it would shadow or be shadowed."""
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
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)  # ``self._step_compiled``: not proof of a clash, but a name to avoid
    return out


def compiled_name(fn_name: str, taken: set[str]) -> str:
    """The name the compiled callable moves to: ``_step_compiled`` for ``torch.compile(step)``,
    with ``_2``, ``_3``... where the script already uses the name."""
    base = f"_{fn_name.lstrip('_')}_compiled"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def fit(indent: str, head: str, items: list[str], tail: str = "") -> list[str]:
    """``head(item, item)tail`` on one line where it fits in :data:`SHIM_WIDTH` columns, else one
    item a line below ``head(`` (a trailing comma, ``)tail`` back at ``indent``)."""
    one = f"{indent}{head}({', '.join(items)}){tail}"
    if len(one) <= SHIM_WIDTH or not items:
        return [one]
    return [f"{indent}{head}(", *(f"{indent}    {i}," for i in items), f"{indent}){tail}"]


def fit_value(indent: str, target: str, expr: str) -> list[str]:
    """``target = expr``, a call split one argument a line (:func:`fit`) where it is too wide."""
    node = ast.parse(expr, mode="eval").body
    if len(f"{indent}{target} = {expr}") <= SHIM_WIDTH or not isinstance(node, ast.Call):
        return [f"{indent}{target} = {expr}"]
    items = [ast.unparse(a) for a in node.args]
    items += [f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}" for k in node.keywords]
    return fit(indent, f"{target} = {ast.unparse(node.func)}", items)


def _params(a: ast.arguments) -> list[str]:
    """Each parameter of a plain signature (positional-or-keyword only) as written in a ``def``."""
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    out = []
    for p, d in zip(a.args, defaults, strict=True):
        text = ast.unparse(p)
        out.append(text if d is None else f"{text}{' = ' if p.annotation else '='}{ast.unparse(d)}")
    return out


def shim(indent: str, alias: str, a: ast.arguments, comment: str, prepare: list[tuple[str, str, str | None]],
         inner: str, docstring: str | None = None) -> str:
    """The plain function ``alias`` with the signature ``a`` (and ``docstring``, its source text)
    that sets each ``(name, value, only_if)`` of ``prepare`` (``if only_if:`` around it where
    given) and calls ``inner`` with its arguments. Lines at ``indent``, none wider than
    :data:`SHIM_WIDTH` where the names allow."""
    body = indent + "    "
    lines = fit(indent, f"def {alias}", _params(a), ":")
    if docstring:
        lines.append(body + docstring)
    lines.append(f"{body}# {comment}")
    for name, value, only_if in prepare:
        if only_if:
            lines.append(f"{body}if {only_if}:")
            lines += fit_value(body + "    ", name, value)
        else:
            lines += fit_value(body, name, value)
    lines += fit(body, f"return {inner}", [p.arg for p in a.args])
    return "".join(ln + "\n" for ln in lines)


def decorated_shim(text: str, fn: ast.FunctionDef, comment: str,
                   prepare: list[tuple[str, str, str | None]]) -> str | None:
    """The script's text with the ``@torch.compile`` function ``fn`` renamed ``_NAME_compiled``
    (:func:`compiled_name`), its decorator, defaults and body kept, and after it a plain ``def NAME``
    with ``fn``'s signature and docstring, made by :func:`shim` from ``comment`` and ``prepare``:
    every caller of ``NAME`` is unchanged and the compiled function sees what the shim passes.
    None where the edit cannot be made safely (something else on the ``def`` line or the
    decorator's before them)."""
    src = Source(text)
    deco = fn.decorator_list[0]
    line = src.lines[fn.lineno - 1]
    start = src.col(fn.lineno, fn.col_offset)
    pad = line[:start]
    m = re.compile(r"def\s+" + re.escape(fn.name) + r"\b").match(line, start)
    at = src.lines[deco.lineno - 1][: src.col(deco.lineno, deco.col_offset)].rstrip()
    if m is None or pad.strip() or not at.endswith("@") or at[:-1].strip():
        return None
    inner = compiled_name(fn.name, bound_names(src.tree))
    src.edits.append((fn.lineno, m.start(), fn.lineno, m.end(), f"def {inner}"))
    doc = fn.body[0] if ast.get_docstring(fn, clean=False) is not None else None
    docstring = ast.get_source_segment(text, doc) if isinstance(doc, ast.Expr) else None
    text_of = shim(pad, fn.name, fn.args, comment, prepare, inner, docstring)
    end = fn.end_lineno or fn.lineno
    gap = "\n" if pad else "\n\n"
    follows = end < len(src.lines) and src.lines[end].strip()
    src.insert_lines(end + 1, gap + text_of + (gap if follows and not pad else ""))
    return src.result()


def churn_draft(name: str, cause: Any, targets: str, script: str, text: str, new: str, change: str,
                review: str) -> Draft:
    """The draft of a shim rewrite (``always-pass``, ``tensor-scalar``) for the recompile ``cause``
    (a churn finding, or None: ``targets`` then says what it targets), its cost the cause's."""
    return Draft(name=name[:48], spec=RemedySpec(), origin=cause.finding_id if cause else "code change",
                 targets=cause.sentence if cause else targets,
                 cost_ns=(cause.churn.compile_ns if cause and cause.churn else 0) or 0,
                 diff=make(text, new, rel_path(script)), change=change, review=review)
