"""``global-list-NAME`` (torch-free): a module-level list the compiled code appends to, appended to
instead by a helper under ``torch.compiler.disable``.

Dynamo replays ``NAME.append(v)`` after the graph as a side effect, and guards the list it read:
``not G['NAME']`` while it is empty, ``len(G['NAME']) == 3`` after. The next call finds the list one
item longer, fails the guard, and recompiles: every call, until the recompile limit sends the frame
to eager (a loss logged every step, ``losses.append(loss.item())``, is the common case). A helper
Dynamo does not trace,

    @torch.compiler.disable
    def _losses_append(*args):
        losses.append(*args)

leaves the list to Python: no guard on it, one graph break at the call. An appended ``T.item()``
is read in the helper (``_losses_append_item(loss)``): the break at ``.item()`` goes with it, and no
float read in compiled code reaches the frame Dynamo resumes in (it would guard that frame on the
value and recompile it once). The list holds what it held, in the same order. The helper names the
list itself: a list passed to it as an argument is read by Dynamo to be passed, and guarded on its
length as before (seen on torch 2.13).

Made where a churn finding's guard holds a list of the script to its length or emptiness, the
script assigns that name a list at module level (``NAME = []``, ``NAME = list()``), and functions of
the script call ``NAME.append`` or ``NAME.extend`` without binding the name themselves: the calls
on the lines the guards name (their ``# FILE:LINE in FUNC`` comment), else those in the functions
the baseline compiled; none in a script that compiles with ``fullgraph=True`` (the break the call
makes is an error there). "Review before applying": the call leaves the graph."""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from ....model.receipt import Receipt
from ...source_file import rel_path
from .base import Edit
from .syntax import Source, bound_names, fresh_name, insertion_line

_GUARD = re.compile(r"^(?:len\(G\['([A-Za-z_]\w*)'\]\) == \d+|not G\['([A-Za-z_]\w*)'\])$")
_WHERE = re.compile(r"#\s*(\S+?\.py):(\d+) in [\w<>]+\s*$")
METHODS = ("append", "extend")


def _module_lists(tree: ast.Module) -> set[str]:
    """The names the script's top level assigns an empty or literal list (``NAME = []``)."""
    out: set[str] = set()
    for s in tree.body:
        value = s.value if isinstance(s, (ast.Assign, ast.AnnAssign)) else None
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(s, ast.AnnAssign) else []
        is_list = isinstance(value, ast.List) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "list"
            and not value.args and not value.keywords)
        if is_list:
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def _binds(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``fn`` has ``name`` of its own (a parameter, an assignment, a ``global``): the calls in
    it may be on another list, or on one it replaces."""
    a = fn.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]}
    return name in params or any(
        (isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
        or (isinstance(n, ast.Global) and name in n.names) for n in ast.walk(fn))


def _evidence(receipt: Receipt, script: str, lists: set[str]) -> dict[str, tuple[list[Any], set[int]]]:
    """Each list of the script a churn finding's guard holds: the findings, and the lines of the
    script the guards name."""
    out: dict[str, tuple[list[Any], set[int]]] = {}
    for f in receipt.findings.findings if receipt.findings else []:
        for g in f.churn.guards if f.churn is not None else []:
            m = _GUARD.match(g.split("#", 1)[0].strip())
            name = m and (m.group(1) or m.group(2))
            if not name or name not in lists:
                continue
            causes, lines = out.setdefault(name, ([], set()))
            if f not in causes:
                causes.append(f)
            w = _WHERE.search(g)
            if w and os.path.basename(w.group(1)) == os.path.basename(script):
                lines.add(int(w.group(2)))
    return out


def _compiled_lines(receipt: Receipt, script: str) -> set[int]:
    """The first lines of the script's frames the baseline compiled."""
    mine = os.path.basename(script)
    return {c.line for c in receipt.ledger.compilations if c.file and os.path.basename(c.file) == mine and c.line}


def _calls(tree: ast.Module, name: str, lines: set[int], compiled: set[int]) -> list[tuple[ast.stmt, ast.Call]]:
    """``NAME.append(...)``/``NAME.extend(...)`` in the script's functions that do not bind the name,
    each with the top-level statement holding it: on ``lines`` where the guards name any, else in a
    function whose span holds a compiled frame's first line."""
    out = []
    for top in tree.body:
        for fn in ast.walk(top):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or _binds(fn, name):
                continue
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            if not lines and not any(first <= n <= (fn.end_lineno or fn.lineno) for n in compiled):
                continue
            for call in ast.walk(fn):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in METHODS
                        and isinstance(call.func.value, ast.Name) and call.func.value.id == name
                        and (not lines or call.lineno in lines)):
                    out.append((top, call))
    return list({id(c): (t, c) for t, c in out}.values())  # a nested function's calls are walked twice


def _item_of(call: ast.Call) -> ast.expr | None:
    """``T`` of ``NAME.append(T.item())``: the helper then reads the number itself, and no float
    read in compiled code is passed on (Dynamo would guard the frame after it on the value)."""
    if (call.func.attr == "append" and len(call.args) == 1 and not call.keywords  # type: ignore[attr-defined]
            and isinstance(call.args[0], ast.Call) and isinstance(call.args[0].func, ast.Attribute)
            and call.args[0].func.attr == "item" and not call.args[0].args and not call.args[0].keywords):
        return call.args[0].func.value
    return None


class GlobalList:
    name = "global-list"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        if any(isinstance(k, ast.keyword) and k.arg == "fullgraph" and not (
                isinstance(k.value, ast.Constant) and k.value.value is False) for k in ast.walk(source.tree)):
            return []  # a graph break is an error there
        out = []
        for name, (causes, lines) in _evidence(receipt, script, _module_lists(source.tree)).items():
            calls = _calls(source.tree, name, lines, set() if lines else _compiled_lines(receipt, script))
            if calls:
                edit = self._edit(name, causes, calls, script, source)
                if edit is not None:
                    out.append(edit)
        return out

    def _edit(self, name: str, causes: list[Any], calls: list[tuple[ast.stmt, ast.Call]], script: str,
              source: Source) -> Edit | None:
        src = Source(source.text)
        taken = bound_names(src.tree)
        helpers: dict[str, str] = {}  # each kind of call (append, extend, append_item): its helper's name
        stem = f"_{name.lstrip('_')}_"
        for _, call in calls:
            item = _item_of(call)
            inner = ast.get_source_segment(src.text, item) if item is not None else None
            if inner is not None:  # the tensor passed, read in the helper: no float enters a frame
                helper = helpers.setdefault("append_item", fresh_name(stem + "append_item", taken))
                src.replace(call, f"{helper}({inner})")
                continue
            method = call.func.attr  # type: ignore[attr-defined]
            src.replace(call.func, helpers.setdefault(method, fresh_name(stem + method, taken)))
        top = min((t for t, _ in calls), key=lambda t: t.lineno)
        at = min([top.lineno, *(d.lineno for d in getattr(top, "decorator_list", []))])
        settings_at, torch_seen = insertion_line(src)
        if not torch_seen and at < settings_at:
            return None  # the helper would be defined before `import torch`
        src.insert_lines(at, "".join(
            "@torch.compiler.disable  # the list is left to Python: appending in compiled code guards its length\n"
            + (f"def {helper}(value):\n    {name}.append(value.item())\n\n\n" if kind == "append_item" else
               f"def {helper}(*args):\n    {name}.{kind}(*args)\n\n\n") for kind, helper in sorted(helpers.items())))
        src.ensure_import()
        after = src.result()
        try:
            ast.parse(after)
        except SyntaxError:
            return None
        where = ", ".join(sorted({f"{os.path.basename(script)}:{c.lineno}" for _, c in calls}))
        methods = " and ".join(sorted({f"{name}.{k.removesuffix('_item')}" for k in helpers}))
        cause = next((f for f in causes if any(f"G['{name}']" in s for s in f.churn.subjects)), causes[0])
        return Edit(
            name=f"{self.name}-{name}", path=rel_path(script), before=source.text, after=after,
            origin=cause.finding_id, targets=f"recompiles on the length of the list {name} (G['{name}'])",
            change=(f"call a helper under torch.compiler.disable ({', '.join(sorted(helpers.values()))}) for "
                    f"{methods} at {where}, so the compiled code no longer guards the list's length (review "
                    "before applying: a graph break at the call)"),
            review=f"the calls on {name} leave the compiled graph (a graph break at each); the list holds the same "
                   "items",
            cost_ns=sum((f.churn.compile_ns or 0) for f in causes))
