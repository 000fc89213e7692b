"""``list-append-NAME`` (torch-free): a list the compiled code appends to, a module-level one
(``losses.append(v)``) or a module's own (``self.history.append(v)``), appended to instead by a
helper under ``torch.compiler.disable``.

Dynamo replays the append after the graph as a side effect, and guards the list it read: ``not
G['losses']`` (``not self.history``) while it is empty, ``len(G['losses']) == 3`` after. The next
call finds the list one item longer, fails the guard, and recompiles: every call, until the
recompile limit sends the frame to eager (a loss logged every step, ``losses.append(loss.item())``,
is the common case). A helper Dynamo does not trace,

    @torch.compiler.disable
    def _losses_append(*args):
        losses.append(*args)

leaves the list to Python: no guard on it, one graph break at the call. The helper reaches the list
itself: through the global it names, or through the owner passed to it
(``_history_append(self, v)``); the list passed as an argument is read by Dynamo to be passed and
guarded on its length as before (seen on torch 2.13). An appended ``T.item()`` is read in the
helper (``_losses_append_item(loss)``): the break at ``.item()`` goes with it, and no float read in
compiled code reaches the frame Dynamo resumes in (it would guard that frame on the value and
recompile it once). The list holds what it held, in the same order.

Made where a churn finding's guard holds the list to its length or emptiness and the script makes
it a list: a module-level ``NAME = []`` (or ``list()``) the appending functions do not rebind, or a
class whose methods assign ``self.NAME = []`` and append through their first parameter. The calls
edited are those on the lines the guards name (their ``# FILE:LINE in FUNC`` comment), else those
in the functions the baseline compiled; none in a script that compiles with ``fullgraph=True``
(the break at the call is an error there). "Review before applying": the call leaves the graph."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from ....model.receipt import Receipt
from ...source_file import rel_path
from .base import Edit
from .syntax import Source, bound_names, fresh_name, insertion_line

_NAME = r"[A-Za-z_]\w*"
_GUARD = re.compile(r"^(?:len\((.+)\) == \d+|not (.+))$")
_SUBJECT = re.compile(rf"G\['({_NAME})'\]|(?:L\['({_NAME})'\]|({_NAME}))\.({_NAME})")
_WHERE = re.compile(r"#\s*(\S+?\.py):(\d+) in [\w<>]+\s*$")
METHODS = ("append", "extend")


@dataclass(frozen=True)
class _List:
    """A list a guard holds: a module-level ``name`` (``owner`` None), or attribute ``name`` of the
    object a method's first parameter ``owner`` is."""

    name: str
    owner: str | None = None

    @property
    def shown(self) -> str:
        return self.name if self.owner is None else f"{self.owner}.{self.name}"


def _is_list(value: ast.expr | None) -> bool:
    return isinstance(value, ast.List) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "list"
        and not value.args and not value.keywords)


def _module_lists(tree: ast.Module) -> set[str]:
    """The names the script's top level assigns a list (``NAME = []``)."""
    out: set[str] = set()
    for s in tree.body:
        if isinstance(s, ast.Assign) and _is_list(s.value):
            out.update(t.id for t in s.targets if isinstance(t, ast.Name))
        elif isinstance(s, ast.AnnAssign) and _is_list(s.value) and isinstance(s.target, ast.Name):
            out.add(s.target.id)
    return out


def _first_param(fn: ast.AST) -> str | None:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = fn.args.posonlyargs + fn.args.args
    return params[0].arg if params else None


def _attribute_lists(cls: ast.ClassDef) -> set[str]:
    """The attributes the class's methods assign a list through their first parameter
    (``self.history = []``)."""
    out: set[str] = set()
    for fn in cls.body:
        me = _first_param(fn)
        for n in ast.walk(fn) if me else ():
            if isinstance(n, ast.Assign) and _is_list(n.value):
                out.update(t.attr for t in n.targets if isinstance(t, ast.Attribute)
                           and isinstance(t.value, ast.Name) and t.value.id == me)
    return out


def _binds(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Whether ``fn`` has ``name`` of its own (a parameter, an assignment, a ``global``): the calls in
    it may be on another list, or on one it replaces."""
    a = fn.args
    params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [v for v in (a.vararg, a.kwarg) if v]}
    return name in params or any(
        (isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
        or (isinstance(n, ast.Global) and name in n.names) for n in ast.walk(fn))


def _evidence(receipt: Receipt, script: str) -> dict[_List, tuple[list[Any], set[int]]]:
    """Each list a churn finding's guard holds to its length or emptiness: the findings, and the
    lines of the script the guards name."""
    out: dict[_List, tuple[list[Any], set[int]]] = {}
    for f in receipt.findings.findings if receipt.findings else []:
        for g in f.churn.guards if f.churn is not None else []:
            m = _GUARD.match(g.split("#", 1)[0].strip())
            subject = _SUBJECT.fullmatch(m.group(1) or m.group(2)) if m else None
            if subject is None:
                continue
            glob, owner_key, owner, attr = subject.groups()
            causes, lines = out.setdefault(_List(glob) if glob else _List(attr, owner_key or owner), ([], set()))
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


def _functions(tree: ast.Module, target: _List) -> list[tuple[ast.stmt, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """The functions whose appends may be on ``target``, each with the top-level statement holding
    it: for a module-level list of the script, those that do not bind its name; for an attribute,
    the methods of a class that makes it a list, whose first parameter is the guard's owner."""
    out: list[tuple[ast.stmt, Any]] = []
    if target.owner is None and target.name not in _module_lists(tree):
        return out
    for top in tree.body:
        if target.owner is None:
            out += [(top, fn) for fn in ast.walk(top) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not _binds(fn, target.name)]
            continue
        for cls in ast.walk(top):
            if isinstance(cls, ast.ClassDef) and target.name in _attribute_lists(cls):
                out += [(top, fn) for fn in cls.body if _first_param(fn) == target.owner]
    return out


def _is_append(call: ast.AST, target: _List) -> TypeGuard[ast.Call]:
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in METHODS):
        return False
    on = call.func.value
    if target.owner is None:
        return isinstance(on, ast.Name) and on.id == target.name
    return (isinstance(on, ast.Attribute) and on.attr == target.name and isinstance(on.value, ast.Name)
            and on.value.id == target.owner)


def _calls(tree: ast.Module, target: _List, lines: set[int], compiled: set[int]) -> list[tuple[ast.stmt, ast.Call]]:
    """The appends on ``target``: on ``lines`` where the guards name any, else in a function whose
    span holds a compiled frame's first line."""
    out = []
    for top, fn in _functions(tree, target):
        first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
        if not lines and not any(first <= n <= (fn.end_lineno or fn.lineno) for n in compiled):
            continue
        out += [(top, c) for c in ast.walk(fn) if _is_append(c, target) and (not lines or c.lineno in lines)]
    return list({id(c): (t, c) for t, c in out}.values())  # a nested function's calls are walked twice


def _item_of(call: ast.Call) -> ast.expr | None:
    """``T`` of ``NAME.append(T.item())``: the helper then reads the number itself, and no float
    read in compiled code is passed on (Dynamo would guard the frame after it on the value)."""
    if (call.func.attr == "append" and len(call.args) == 1 and not call.keywords  # type: ignore[attr-defined]
            and isinstance(call.args[0], ast.Call) and isinstance(call.args[0].func, ast.Attribute)
            and call.args[0].func.attr == "item" and not call.args[0].args and not call.args[0].keywords):
        return call.args[0].func.value
    return None


def _helper(target: _List, kind: str, name: str) -> str:
    """The helper's definition: ``kind`` is ``append``, ``extend`` or ``append_item``."""
    owner = "" if target.owner is None else "owner, "
    lst = target.name if target.owner is None else f"owner.{target.name}"
    head = "@torch.compiler.disable  # the list is left to Python: appending in compiled code guards its length\n"
    if kind == "append_item":
        return f"{head}def {name}({owner}value):\n    {lst}.append(value.item())\n\n\n"
    return f"{head}def {name}({owner}*args):\n    {lst}.{kind}(*args)\n\n\n"


class ListAppend:
    name = "list-append"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        if any(isinstance(k, ast.keyword) and k.arg == "fullgraph" and not (
                isinstance(k.value, ast.Constant) and k.value.value is False) for k in ast.walk(source.tree)):
            return []  # a graph break is an error there
        out = []
        for target, (causes, lines) in _evidence(receipt, script).items():
            calls = _calls(source.tree, target, lines, set() if lines else _compiled_lines(receipt, script))
            edit = self._edit(target, causes, calls, script, source) if calls else None
            if edit is not None:
                out.append(edit)
        return out

    def _edit(self, target: _List, causes: list[Any], calls: list[tuple[ast.stmt, ast.Call]], script: str,
              source: Source) -> Edit | None:
        src = Source(source.text)
        taken = bound_names(src.tree)
        helpers: dict[str, str] = {}  # each kind of call (append, extend, append_item): its helper's name
        stem = f"_{target.name.lstrip('_')}_"
        lead = "" if target.owner is None else f"{target.owner}, "
        for _, call in calls:
            item = _item_of(call)
            kind = "append_item" if item is not None else call.func.attr  # type: ignore[attr-defined]
            args = [item] if item is not None else call.args
            texts = [ast.get_source_segment(src.text, a) for a in args]
            if any(t is None for t in texts) or call.keywords:
                return None
            helper = helpers.setdefault(kind, fresh_name(stem + kind, taken))
            src.replace(call, f"{helper}({lead}{', '.join(t for t in texts if t is not None)})")
        top = min((t for t, _ in calls), key=lambda t: t.lineno)
        at = min([top.lineno, *(d.lineno for d in getattr(top, "decorator_list", []))])
        settings_at, torch_seen = insertion_line(src)
        if not torch_seen and at < settings_at:
            return None  # the helper would be defined before `import torch`
        src.insert_lines(at, "".join(_helper(target, kind, name) for kind, name in sorted(helpers.items())))
        src.ensure_import()
        after = src.result()
        try:
            ast.parse(after)
        except SyntaxError:
            return None
        where = ", ".join(sorted({f"{os.path.basename(script)}:{c.lineno}" for _, c in calls}))
        methods = " and ".join(sorted({f"{target.shown}.{k.removesuffix('_item')}" for k in helpers}))
        guarded = f"G['{target.name}']" if target.owner is None else target.shown
        cause = next((f for f in causes if any(guarded in s for s in f.churn.subjects)), causes[0])
        return Edit(
            name=f"{self.name}-{target.name}", path=rel_path(script), before=source.text, after=after,
            origin=cause.finding_id, targets=f"recompiles on the length of the list {target.shown} ({guarded})",
            change=(f"call a helper under torch.compiler.disable ({', '.join(sorted(helpers.values()))}) for "
                    f"{methods} at {where}, so the compiled code no longer guards the list's length (review "
                    "before applying: a graph break at the call)"),
            review=f"the calls on {target.shown} leave the compiled graph (a graph break at each); the list holds "
                   "the same items",
            cost_ns=sum((f.churn.compile_ns or 0) for f in causes))
