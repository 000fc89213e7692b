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
         inner: str) -> str:
    """The plain function ``alias`` with the signature ``a`` that sets each ``(name, value, only_if)``
    of ``prepare`` (``if only_if:`` around it where given) and calls ``inner`` with its arguments.
    Lines at ``indent``, none wider than :data:`SHIM_WIDTH` where the names allow."""
    body = indent + "    "
    lines = fit(indent, f"def {alias}", _params(a), ":")
    lines.append(f"{body}# {comment}")
    for name, value, only_if in prepare:
        if only_if:
            lines.append(f"{body}if {only_if}:")
            lines += fit_value(body + "    ", name, value)
        else:
            lines += fit_value(body, name, value)
    lines += fit(body, f"return {inner}", [p.arg for p in a.args])
    return "".join(ln + "\n" for ln in lines)
