"""What ``always-pass`` and ``tensor-scalar`` share (torch-free): the one finder of the compiled
callable a recompile names, and the shim put in front of it.

Both answer a recompile of a frame of the script on an argument (``mask is None``, ``scale ==
0.5``), both by a plain function that prepares that argument before the compiled callable sees
it, with the compiled function's signature so every caller is unchanged:

- ``f = torch.compile(fn, ...)`` (at module level or in a block, ``def main():``): ``f`` becomes
  ``_fn_compiled`` (a name the script does not use) and a plain ``def f`` follows the assignment,
  indented as it is;
- ``@torch.compile`` on ``def fn``: ``fn`` keeps its decorator and body as ``_fn_compiled``, and a
  plain ``def fn`` with its signature and docstring follows it.

:func:`targets` finds them (:func:`.syntax.compiled_callables`, the same argument rules for both
rewrites); :func:`shimmed` writes the shim in either form."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ....model.receipt import Receipt
from .base import is_script_file
from .syntax import Compiled, Source, bound_names, compiled_callables, compiled_name, plain_params

#: The widest line a shim is written in where its names allow (a user's formatter may want less).
SHIM_WIDTH = 100


@dataclass(frozen=True)
class Target:
    """An argument a recompile of ``compiled``'s function named, one of its plain parameters."""

    cause: Any
    """The churn finding whose guards named it."""
    compiled: Compiled
    params: list[str]
    name: str


def targets(receipt: Receipt, script: str, source: Source,
            names: Callable[[list[str]], set[str]]) -> Iterator[Target]:
    """For each churn finding on a frame of the script, each callable the script compiles from that
    function (either spelling) with plain parameters, each of them that ``names`` reads from the
    finding's guards; each (callable, argument) once, from the first finding that names it."""
    seen: set[tuple[str, str]] = set()
    compiled = list(compiled_callables(source.tree))
    for f in receipt.findings.findings if receipt.findings else []:
        ch = f.churn
        if ch is None or not is_script_file(ch.file, script):
            continue
        named = names(list(ch.guards))
        for c in compiled:
            params = plain_params(c.fn)
            if params is None or c.fn.name != ch.frame_name.rsplit(".", 1)[-1]:
                continue
            for name in sorted(named & set(params)):
                if (c.alias, name) not in seen:
                    seen.add((c.alias, name))
                    yield Target(f, c, params, name)


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


Prepare = list[tuple[str, str, str | None]]
"""Each ``(name, value, only_if)`` a shim sets before the call (``if only_if:`` around it where given)."""


def shim(indent: str, alias: str, a: ast.arguments, comment: str, prepare: Prepare, inner: str,
         docstring: str | None = None) -> str:
    """The plain function ``alias`` with the signature ``a`` (and ``docstring``, its source text)
    that sets what ``prepare`` says and calls ``inner`` with its arguments. Lines at ``indent``,
    none wider than :data:`SHIM_WIDTH` where the names allow."""
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


def shimmed(source: Source, c: Compiled, comment: str, prepare: Prepare) -> str | None:
    """The script's text with the plain function in front of ``c`` (see the module's docstring);
    None where the edit cannot be made safely (another statement on the line)."""
    return _assigned_shim(source, c, comment, prepare) if c.assign is not None \
        else _decorated_shim(source, c.fn, comment, prepare)


def _assigned_shim(source: Source, c: Compiled, comment: str, prepare: Prepare) -> str | None:
    stmt = c.assign
    assert stmt is not None
    pad = source.indent(stmt)
    if pad.strip():
        return None  # another statement shares the line
    inner = compiled_name(c.fn.name, bound_names(source.tree))
    new = Source(source.text)
    new.replace(stmt.targets[0], inner)
    gap = "\n" if pad else "\n\n"  # inside a block (``def main():``): indented there
    plain = shim(pad, c.alias, c.fn.args, comment, prepare, inner)
    end = stmt.end_lineno or stmt.lineno
    new.insert_lines(end + 1, gap + plain + ("" if end >= len(new.lines) else gap))
    return new.result()


def _decorated_shim(source: Source, fn: ast.FunctionDef, comment: str, prepare: Prepare) -> str | None:
    """``fn`` renamed ``_NAME_compiled`` (:func:`.syntax.compiled_name`), its decorator, defaults and
    body kept, and after it a plain ``def NAME`` with ``fn``'s signature and docstring. None where
    something else is on the ``def`` line or the decorator's before them."""
    text = source.text
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
