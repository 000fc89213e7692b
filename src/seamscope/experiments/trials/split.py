"""Where the baseline fails: the first split, before any speed.

A script that raises under ``torch.compile`` may hold an error of its own (a bad configuration
raises from Dynamo's fake-tensor propagation too, reading like a compiler crash) or one only the
compiler makes (a backend that cannot lower an operation). Only an eager run tells them apart:

1. the same script runs with ``--stance force_eager``; when it fails too, the error is the
   program's own: said so, nothing tried (:class:`EagerFailsToo`);
2. otherwise the compiled run alone fails: the functions of the user's files around the failure
   are the candidates for ``torch.compiler.disable``, smallest first (the user-code frames
   Dynamo's error names, innermost first; the functions the failing frame calls; the failing frame
   itself), each checked by a run of its patch (the decorator line added above the function); the
   first whose run completes is the trial's candidate, measured like any other against the script
   run eagerly (the run that works today).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable
from typing import Any

from ...model.receipt import Receipt
from ..remedy_spec import spec_from_words
from .catalogue import Draft, module_of
from .patches import attach
from .runs import Outcome, Runner, TrialSpec, run_once

MAX_CHECKS = 4
"""Functions checked by a run at most (each run is the whole script)."""

EAGER = ["--stance", "force_eager"]

_USER_FRAME = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)', re.M)


class BaselineFailed(Exception):
    """The baseline's first run failed and no candidate could be run."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


class SplitFailed(BaselineFailed):
    """The baseline failed and the split said why (its message ends with what was tried)."""


class EagerFailsToo(SplitFailed):
    """The script fails run eagerly too: the error is the program's own, not the compiler's."""


def _defs(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, str | None]]:
    """Every function of a module as ``(qualname, node, its class)``: module-level functions and
    methods of module-level classes (the names ``--disable`` and its patch take)."""
    out: list[tuple[str, Any, str | None]] = []
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((n.name, n, None))
        elif isinstance(n, ast.ClassDef):
            out += [(f"{n.name}.{m.name}", m, n.name) for m in n.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def _parse(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as f:
            return ast.parse(f.read())
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _at(defs: list[tuple[str, Any, str | None]], line: int) -> tuple[str, Any, str | None] | None:
    """The innermost function holding ``line`` (its ``def`` line or its body)."""
    holding = [d for d in defs if min([d[1].lineno, *(x.lineno for x in d[1].decorator_list)]) <= line
               <= (d[1].end_lineno or d[1].lineno)]
    return max(holding, key=lambda d: d[1].lineno, default=None)


def _callees(fn: Any, cls: str | None, defs: list[tuple[str, Any, str | None]]) -> list[str]:
    """The functions of the same file ``fn`` calls by name (``helper(x)``, ``self.method(x)``), in
    source order."""
    names = {q for q, _, _ in defs}
    out: list[str] = []
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        q = f.id if isinstance(f, ast.Name) else (
            f"{cls}.{f.attr}" if cls and isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            and f.value.id == "self" else None)
        if q in names and q not in out:
            out.append(q)
    return sorted(out, key=lambda q: next(d[1].lineno for d in defs if d[0] == q))


def _path(file: str, script: str) -> str:
    if os.path.isabs(file):
        return file
    from ...model.normalize import project_root

    return os.path.join(project_root(os.path.dirname(os.path.abspath(script))), file)


def disable_targets(receipt: Receipt | None, stderr: str, script: str) -> list[str]:
    """``MODULE:QUALNAME`` of the user's functions to try under ``torch.compiler.disable``, smallest
    first: the user-code frames of Dynamo's error (innermost first), the functions the frame that
    failed to compile calls, then that frame itself; only functions of files a patch can edit."""
    frames: list[tuple[str, int]] = []  # (file, line): the frames that failed to compile
    for c in receipt.ledger.compilations if receipt is not None else []:
        if c.status != "ok" and c.line:
            frames.append((c.file, c.line))
    _, _, told = stderr.rpartition("from user code:")
    user = [(m.group(1), int(m.group(2))) for m in _USER_FRAME.finditer(told)][::-1] if told != stderr else []
    out: list[str] = []
    trees: dict[str, Any] = {}

    def add(target: str) -> None:
        if target not in out:
            out.append(target)

    def at(file: str, line: int) -> tuple[str, list[tuple[str, Any, str | None]], Any] | None:
        mod = module_of(file, script)
        if mod is None:
            return None
        path = _path(file, script)
        if path not in trees:
            trees[path] = _parse(path)
        tree = trees[path]
        if tree is None:
            return None
        defs = _defs(tree)
        hit = _at(defs, line)
        return (mod, defs, hit) if hit is not None else None

    failed = {(mod, hit[0]) for f in frames if (r := at(*f)) is not None for mod, _, hit in [r]}
    for file, line in user:  # innermost first; the frame that failed comes last
        r = at(file, line)
        if r is not None and (r[0], r[2][0]) not in failed:
            add(f"{r[0]}:{r[2][0]}")
    for file, line in frames:
        r = at(file, line)
        if r is not None:
            mod, defs, (qual, node, cls) = r
            for q in _callees(node, cls, defs):
                add(f"{mod}:{q}")
    for file, line in frames:
        r = at(file, line)
        if r is not None:
            add(f"{r[0]}:{r[2][0]}")
    return out[:MAX_CHECKS]


def _failed_receipt(spec: TrialSpec) -> Receipt | None:
    """The baseline's own receipt (``run`` writes one for a script that raised)."""
    path = os.path.join(spec.out, "trials", "baseline", "rep-1", "receipt.json")
    try:
        from ...ingest.receipt import load_receipt

        return load_receipt(path)
    except Exception:
        return None


def first_split(runner: Runner, progress: Callable[[str], None] | None, first: Outcome) -> Draft:
    """The eager run, then the smallest function whose eager run lets the rest compile (checked
    by a run of its patch). Raises :class:`EagerFailsToo`, or :class:`BaselineFailed` where no
    function was found."""
    spec = runner.spec
    error = first.figures.error or "the baseline failed"
    if progress:
        progress("the baseline failed: the same script run eagerly (is the error the program's own?)")
    eager = run_once(runner, EAGER, os.path.join("trials", "eager", "split"), "split")
    if not eager.figures.ok:
        raise EagerFailsToo(f"{error}; run eagerly (--stance force_eager) it fails too "
                            f"({eager.figures.error or 'no message'}): the program's own error, not the "
                            "compiler's; nothing tried", eager.stderr or first.stderr)
    tried: list[str] = []
    for i, target in enumerate(disable_targets(_failed_receipt(spec), first.stderr, spec.script), 1):
        qual = target.rpartition(":")[2]
        d = Draft(name=f"disable-{re.sub(r'[^A-Za-z0-9]+', '-', qual).strip('-').lower()}",
                  spec=spec_from_words(["--disable", target]), origin="baseline failed",
                  targets=f"compiled, the script fails ({error}) and runs eagerly; {qual} run eagerly lets the "
                  "rest compile")
        attach([d], spec.out, spec.script)
        if progress:
            progress(f"the baseline failed compiled only: checking {qual} under torch.compiler.disable")
        check = run_once(runner, d.run_flags(), os.path.join("trials", "split", str(i)), "split")
        if check.figures.ok:
            return d
        tried.append(f"{qual} ({check.figures.error or 'failed'})")
    why = f"tried under torch.compiler.disable: {'; '.join(tried)}" if tried else \
        "no function of the user's files was found at the failure"
    raise SplitFailed(f"{error}; it runs eagerly, so compilation alone fails, and no disabled function "
                         f"lets the rest compile ({why}); nothing else tried", first.stderr)


def split_decision(ranked: list[Any], chosen: Any, decision: str, trigger: str | None) -> tuple[Any, str, str | None]:
    """The trial's choice where the compiled script fails: the disabled function's candidate when
    it completed with the outputs of the eager run (a working compiled run comes before any speed;
    its figures against the eager baseline say whether compiling pays yet), else what the trial
    decided, said to be about a script that fails compiled."""
    cand = next((c for c in ranked if c.origin == "baseline failed"), None)
    head = "the script fails compiled and runs eagerly"
    if cand is None or not cand.runs or cand.status != "tried" or cand.outputs.status in ("changes outputs", "failed"):
        why = "" if cand is None else f" ({cand.name}: {cand.reason or cand.outputs.status})"
        return None, f"{head}; no disabled function gave a working compiled run{why}", None
    if chosen is not None and chosen.name == cand.name:
        return chosen, f"{head}: {decision}", trigger
    total = next((m for m in cand.metrics if m.name == "total"), None)
    ratio = f"{total.ratio_median:.3f}× ({total.verdict})" if total and total.ratio_median is not None else "n/a"
    patch = f" (the patch: {cand.patch})" if cand.patch else ""
    pays = {"slower": ": compiling does not pay off yet for this run", "faster": ": compiling pays off"}
    return cand, (f"{head}: {cand.name}: {cand.code_change}{patch} gives a working compiled run, outputs "
                  f"{cand.outputs.status} against the eager run; total {ratio} against the script run eagerly"
                  f"{pays.get(total.verdict if total else '', '')}"), None
