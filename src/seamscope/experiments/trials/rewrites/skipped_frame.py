"""``skipped-frame-FUNC`` (torch-free): a frame Dynamo traced and then gave up on (a break it could
not resume after: inside a loop, a ``with``, a ``try``; "Failed to handle graph break gracefully.
Skipping the function and falling back to eager") runs eagerly all the same, and its tracing is
paid on every process start for nothing. ``@torch.compiler.disable(recursive=False)`` above the
frame's definition in the script stops Dynamo from tracing it, while the functions it calls (a
model's blocks) are still compiled as frames of their own, as they were in the baseline: PyTorch's
``torch.compiler.disable`` with ``recursive=False`` "skips frames associated with the function
code, but still process[es] recursively invoked frames".

The frame's other remedy, compiling the blocks it calls instead of the model (regional
compilation), is the catalogue's ``regional CLASS`` candidate; :func:`called_classes` names its
classes, the script's classes whose method Dynamo compiled as a frame of its own in the baseline,
and the regional patch finds them by that name. Both are tried and measured; the ranking picks.

Made only for a frame the script defines (a function or a method of a class at its top level)
that the baseline's break record marks skipped (``frame_skipped``); not where it is decorated with
``torch.compiler.disable`` already. "Review before applying": the frame stays eager for good, a
later change that makes it traceable gains nothing until the decorator goes.
"""

from __future__ import annotations

import ast
import os

from ....analyze.units import fmt_ns
from ....model.receipt import Receipt
from ...source_file import read_source, rel_path
from .base import Edit, is_script_file
from .syntax import Source, dotted

DISABLE = "@torch.compiler.disable(recursive=False)"


def skipped_frames(receipt: Receipt, script: str) -> list[tuple[str, int, list[str]]]:
    """The script's frames Dynamo gave up on, as ``(QUALNAME, line of the break, compile ids)``,
    one per frame, in the order of the break records."""
    out: dict[str, tuple[str, int, list[str]]] = {}
    for s in receipt.ledger.break_sites:
        if not getattr(s, "frame_skipped", False):  # the only break records that are frames given up on
            continue
        scope = s.scope or s.function
        if scope and "<" not in scope and is_script_file(s.file, script):
            prev = out.get(scope)
            ids = sorted({*(prev[2] if prev else []), *s.compile_ids})
            out[scope] = (scope, prev[1] if prev else s.line, ids)
    return list(out.values())


def wasted_ns(receipt: Receipt, compile_ids: list[str]) -> int:
    """What tracing the given compilations cost the baseline (the frames given up on)."""
    return sum(c.duration_ns or 0 for c in receipt.ledger.compilations if c.compile_id in compile_ids)


def called_classes(receipt: Receipt, script: str, tree: ast.Module) -> list[str]:
    """Where the baseline gave up on a frame of the script: the script's top-level classes whose
    method Dynamo compiled as a frame of its own (the blocks the frame calls, compiled on their own
    while it ran eagerly), in the order they were first compiled; none otherwise."""
    skipped = skipped_frames(receipt, script)
    if not skipped:
        return []
    own = {q.split(".")[0] for q, _, _ in skipped}
    at: dict[int, str] = {}  # a method's first line (its first decorator's under one) -> its class
    for k in tree.body:
        if isinstance(k, ast.ClassDef) and k.name not in own:
            for f in k.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    for line in (f.lineno, *(d.lineno for d in f.decorator_list)):
                        at[line] = k.name
    out: list[str] = []
    comps = sorted(receipt.ledger.compilations, key=lambda c: c.start_ns or 0)
    for c in comps:
        cls = at.get(c.line)
        if c.status == "ok" and cls is not None and cls not in out and is_script_file(c.file, script):
            out.append(cls)
    return out


def _definition(tree: ast.Module, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The script's ``def`` of ``qual`` (``fn`` or ``Class.method``), at the top level."""
    head, _, tail = qual.rpartition(".")
    body: list[ast.stmt] = tree.body
    if head:
        cls = next((s for s in body if isinstance(s, ast.ClassDef) and s.name == head), None)
        if cls is None:
            return None
        body = cls.body
    return next((s for s in reversed(body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and s.name == tail), None)


def _disabled(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any((dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("disable") for d in fn.decorator_list)


class SkippedFrame:
    name = "skipped-frame"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        out = []
        for qual, line, ids in skipped_frames(receipt, script):
            fn = _definition(source.tree, qual)
            if fn is None or _disabled(fn):
                continue
            src = Source(source.text)
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            indent = src.lines[first - 1][: src.col(first, fn.col_offset)]
            src.insert_lines(first, f"{indent}{DISABLE}\n")
            src.ensure_import()
            cost = wasted_ns(receipt, ids)
            where = f"{os.path.basename(script)}:{line}"
            out.append(Edit(
                name=f"{self.name}-{qual.replace('.', '-').lower()}", path=rel_path(script), before=source.text,
                after=src.result(), origin="code change", cost_ns=cost,
                targets=f"1 frame Dynamo traced and gave up on ({qual}, at {where}; "
                        f"{fmt_ns(cost)} of tracing in the baseline)",
                change=f"stop tracing {qual}, which Dynamo gives up on at {where} and runs eagerly: "
                       f"{DISABLE} above it; what it calls still goes to Dynamo, which compiles it where it can "
                       "(review before applying)",
                review=f"{qual} stays eager for good: a later change that makes it traceable gains nothing "
                       "until the decorator goes"))
        return out


def regional_classes(receipt: Receipt, script: str | None) -> list[str]:
    """:func:`called_classes` of the script read from its file: the classes the catalogue's
    ``regional CLASS`` candidates compile instead of the model, and the regional patch may name
    (none for a workload's ``FILE.py:FUNC``, nor where the script cannot be read or parsed)."""
    if script is None or ".py:" in script or not skipped_frames(receipt, script):
        return []
    try:
        tree = ast.parse(read_source(script).text)
    except (SyntaxError, ValueError):  # SourceUnusable too
        return []
    return called_classes(receipt, script, tree)
