"""``guard-logging`` (torch-free): a ``print``, ``logging`` or ``warnings`` call that broke the
graph, inside the compiled function, guarded by ``if not torch.compiler.is_compiling():``.

Dynamo reads the condition as false while tracing, so the call leaves the graph and the break with
it; it no longer runs in compiled calls (it still runs where the code runs eagerly), which is why
the patch is marked "review before applying"."""

from __future__ import annotations

import ast

from ....model.receipt import Receipt
from .base import Edit, break_lines, site_edit
from .syntax import Source, multiline_string

LOGGERS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _is_logging_call(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    fn = stmt.value.func
    if isinstance(fn, ast.Name):
        return fn.id == "print"
    if isinstance(fn, ast.Attribute):
        return fn.attr in LOGGERS or (
            fn.attr == "warn" and isinstance(fn.value, ast.Name) and fn.value.id == "warnings"
        )
    return False


class GuardLogging:
    name = "guard-logging"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        src = Source(source.text)
        lines = break_lines(receipt, script)
        stmts = [n for n in ast.walk(src.tree) if isinstance(n, ast.stmt) and n.lineno in lines
                 and _is_logging_call(n) and not multiline_string(n)]
        for st in stmts:
            if not src.alone(st):
                continue  # another statement shares the line
            first, last = st.lineno, st.end_lineno or st.lineno
            body = "".join("    " + ln if ln.strip() else ln for ln in src.lines[first - 1:last])
            src.edits.append((first, 0, last + 1, 0, f"{src.indent(st)}if not torch.compiler.is_compiling():\n{body}"))
        if not src.edits:
            return []
        src.ensure_import()
        return [site_edit(
            self.name, receipt, script, source, src.result(), sorted(s.lineno for s in stmts),
            "print/logging break(s) in compiled code",
            "guard the print/logging call(s) at {where} with `if not torch.compiler.is_compiling():` (review "
            "before applying: they no longer run in compiled calls)",
            "the guarded calls no longer run in compiled calls (only where the code runs eagerly)")]
