"""Code-change candidates: edits no flag makes, read from the baseline's evidence in the user's own
script (torch-free). Each is a draft with its diff (:mod:`.patches`), tried and output-checked like
every other candidate, its runs applying the diff (``--patch``).

- ``guard-logging``: a ``print``, ``logging`` or ``warnings`` call that broke the graph, inside the
  compiled function, guarded by ``if not torch.compiler.is_compiling():``. Dynamo reads the
  condition as false while tracing, so the call leaves the graph and the break with it; it no
  longer runs in compiled calls (it still runs where the code runs eagerly), which is why the
  patch is marked "review before applying".
- ``always-pass-NAME``: an optional argument passed as ``None`` on some calls and a tensor on others
  (a recompile on ``NAME is None``) always passed: the compiled callable
  ``f = torch.compile(fn, ...)`` (at module level or inside a block such as ``def main():``)
  becomes ``_fn_compiled`` (after the compiled function, a name the script does not use) behind a
  plain function ``f`` beside it with ``fn``'s signature that passes a neutral tensor for ``None``:
  zeros for a value added or subtracted, ones for one multiplied or divided, all-false for a
  ``masked_fill`` mask, shaped like ``fn``'s first argument; for one passed on as
  ``attention_mask=`` (the ``transformers`` convention, where ``None`` means "attend to every
  position"), long ones of the (batch, sequence) of the model call's input. One graph then
  serves every call. The neutral value's shape is a guess the output check tests, so this patch
  too is marked "review before applying".
  A function compiled by the decorator (``@torch.compile`` or ``@torch.compile(...)`` on ``def fn``,
  its only one) keeps its decorator and body as ``_fn_compiled`` (a name the script does not use),
  and a plain ``def fn`` with the same signature and docstring after it passes the neutral tensor
  (:func:`.rewrite_common.decorated_shim`, which ``tensor-scalar`` shares): every caller of ``fn``
  is unchanged. Beside other decorators there is no candidate (which wraps which is the user's).
- ``tensor-where``: a Python ``if`` on a tensor's value (``.item()``, ``bool(t)``, or a tensor
  condition) that broke the graph, whose two branches each assign one name, becomes
  ``name = torch.where(condition, then, else)`` with the condition kept a tensor. Both branches
  are then computed and picked element by element: "review before applying" (a branch with side
  effects, or an expensive one, is not for ``torch.where``).
- ``tensor-cond``: such an ``if``/``else`` whose branches are more than one assignment each, with
  no side effects, both binding the same names, as two nested functions and
  ``names = torch.cond(condition, _then_N, _else_N, operands)`` (:mod:`.rewrite_cond`): "review
  before applying" (both branches are traced and must return the same shapes and dtypes).
- ``tensor-scalar-NAME``: a Python number argument whose value the baseline recompiled on, used
  only in arithmetic with tensors, passed to the compiled function as a 0-d tensor
  (:mod:`.rewrite_scalar`; ``f = torch.compile(fn, ...)`` or the decorator, as above): "review
  before applying" (a tensor instead of a number).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator

from ...model.receipt import Receipt
from ..remedy_spec import RemedySpec
from ..source_file import read_source
from ..unified_diff import make
from .catalogue import Draft
from .patches import Source, insertion_line, rel_path
from .rewrite_common import (
    _one_assign,
    _own,
    _Untensor,
    bound_names,
    churn_draft,
    compiled_defs,
    compiled_name,
    decorated_shim,
    plain_params,
    shim,
)
from .rewrite_cond import tensor_cond
from .rewrite_scalar import scalar_drafts

LOGGING_CALLS = {"print", "warn"}
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


def _multiline_string(stmt: ast.stmt) -> bool:
    """Indenting its lines would change a string's text."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and (n.end_lineno or n.lineno) > n.lineno
               for n in ast.walk(stmt))


def guard_logging(receipt: Receipt, script: str, text: str) -> tuple[str, list[int]] | None:
    """The script's text with each logging call that broke guarded, and their lines."""
    src = Source(text)
    lines = {s.line for s in receipt.ledger.break_sites if _own(s.file, script)}
    stmts = [n for n in ast.walk(src.tree) if isinstance(n, ast.stmt) and n.lineno in lines and _is_logging_call(n)
             and not _multiline_string(n)]
    if not stmts:
        return None
    for st in stmts:
        first, last = st.lineno, st.end_lineno or st.lineno
        indent = src.lines[first - 1][: src.col(first, st.col_offset)]
        after = src.lines[last - 1][src.col(last, st.end_col_offset or 0):].strip()
        if indent.strip() or (after and not after.startswith("#")):
            continue  # another statement shares the line
        body = "".join("    " + ln if ln.strip() else ln for ln in src.lines[first - 1:last])
        src.edits.append((first, 0, last + 1, 0, f"{indent}if not torch.compiler.is_compiling():\n{body}"))
    if not src.edits:
        return None
    where, torch_seen = insertion_line(src)
    if not torch_seen:
        src.insert_lines(where, "import torch\n")
    return src.result(), sorted(s.lineno for s in stmts)


def rewrites(receipt: Receipt, script: str) -> list[Draft]:
    """The code-change drafts the baseline's evidence supports in the script."""
    if ".py:" in script:
        return []
    try:
        text = read_source(script).text  # normal form: decoded, no BOM, "\n" line endings
        ast.parse(text)
    except (SyntaxError, ValueError):  # SourceUnusable too
        return []
    out = []
    cost = {f.site_id: (f.cost_ns or 0) for f in (receipt.findings.findings if receipt.findings else []) if f.site_id}
    for name, found, targets, change, review in (
        ("guard-logging", guard_logging(receipt, script, text), "print/logging break(s) in compiled code",
         "guard the print/logging call(s) at {where} with `if not torch.compiler.is_compiling():` (review before "
         "applying: they no longer run in compiled calls)",
         "the guarded calls no longer run in compiled calls (only where the code runs eagerly)"),
        ("tensor-where", tensor_where(receipt, script, text), "Python branch(es) on a tensor's value in compiled code",
         "turn the if on a tensor's value at {where} into torch.where (review before applying: both branches are "
         "computed)",
         "both branches are computed and picked element by element: check they have no side effects"),
        ("tensor-cond", tensor_cond(receipt, script, text), "Python branch(es) on a tensor's value in compiled code",
         "turn the if on a tensor's value at {where} into torch.cond (review before applying: both branches are "
         "traced)",
         "both branches are traced and must return the same shapes and dtypes: check each branch's results"),
    ):
        if found is None:
            continue
        new, at = found
        where = ", ".join(f"{os.path.basename(script)}:{n}" for n in at)
        sites = [s.site_id for s in receipt.ledger.break_sites if _own(s.file, script) and s.line in at]
        out.append(Draft(name=name, spec=RemedySpec(), origin="code change", targets=f"{len(at)} {targets} ({where})",
                         cost_ns=sum(cost.get(i, 0) for i in sites), diff=make(text, new, rel_path(script)),
                         change=change.format(where=where), review=review))
    for name, alias, new in always_pass(receipt, script, text):
        cause = next((f for f in (receipt.findings.findings if receipt.findings else []) if f.churn is not None
                      and any(name in g for g in f.churn.guards)), None)
        out.append(churn_draft(
            f"always-pass-{name}", cause, f"recompiles on {name} being None", script, text, new,
            change=f"always pass {name} to {alias} (a neutral tensor where it was None), so one graph serves "
                   "every call (review before applying: the neutral value's shape is a guess)",
            review=f"the neutral {name} passed for None is shaped like the first argument: check it is what "
                   "the code means"))
    out += scalar_drafts(receipt, script, text)
    return out


# ``mask is None`` (None before, a tensor now), ``mask is not None``, or a tensor before and None now
_NONE_GUARD = re.compile(r"^(?:L\['([A-Za-z_]\w*)'\]|([A-Za-z_]\w*)) is (?:not )?None\b"
                         r"|^expected type of '([A-Za-z_]\w*)' to be a tensor type, '? ?but found <class 'NoneType'>")


def _neutral(fn: ast.FunctionDef, name: str, like: str) -> str | None:
    """A tensor that leaves ``fn``'s result as ``None`` does, from how ``fn`` uses ``name``."""
    for n in ast.walk(fn):
        if isinstance(n, ast.BinOp) and any(isinstance(o, ast.Name) and o.id == name for o in (n.left, n.right)):
            if isinstance(n.op, (ast.Add, ast.Sub)):
                return f"torch.zeros_like({like})"
            right = isinstance(n.right, ast.Name) and n.right.id == name
            if isinstance(n.op, ast.Mult) or isinstance(n.op, ast.Div) and right:
                return f"torch.ones_like({like})"
        if isinstance(n, ast.AugAssign) and isinstance(n.value, ast.Name) and n.value.id == name:
            if isinstance(n.op, (ast.Add, ast.Sub)):
                return f"torch.zeros_like({like})"
            if isinstance(n.op, (ast.Mult, ast.Div)):
                return f"torch.ones_like({like})"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "masked_fill" \
                and n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == name:
            return f"torch.zeros_like({like}, dtype=torch.bool)"
        if isinstance(n, ast.Call) and any(k.arg == "attention_mask" and isinstance(k.value, ast.Name)
                                           and k.value.id == name for k in n.keywords):
            ids = _model_input(n, fn, name) or like
            return f"torch.ones({ids}.shape[:2], dtype=torch.long, device={ids}.device)"
    return None


def _model_input(call: ast.Call, fn: ast.FunctionDef, name: str) -> str | None:
    """The argument of ``fn`` a model call takes as its input (``input_ids=``, ``inputs_embeds=``, or
    its first positional argument), whose (batch, sequence) an attention mask has."""
    params = {x.arg for x in fn.args.args} - {name}
    given = [k.value for k in call.keywords if k.arg in ("input_ids", "inputs_embeds")] + call.args[:1]
    return next((v.id for v in given if isinstance(v, ast.Name) and v.id in params), None)


def always_pass(receipt: Receipt, script: str, text: str) -> list[tuple[str, str, str]]:
    """(argument, the compiled callable's name, the patched text) for each optional argument a
    frame of the script recompiled on being ``None``."""
    src = Source(text)
    defs = {n.name: n for n in src.tree.body if isinstance(n, ast.FunctionDef)}
    taken = bound_names(src.tree)
    out = []
    for f in receipt.findings.findings if receipt.findings else []:
        ch = f.churn
        if ch is None or not _own(ch.file, script):
            continue
        names = {m.group(1) or m.group(2) or m.group(3) for g in ch.guards if (m := _NONE_GUARD.match(g.strip()))}
        for stmt in _statements(src.tree.body):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Call) and _is_compile(stmt.value.func) and stmt.value.args
                    and isinstance(stmt.value.args[0], ast.Name)):
                continue
            fn = defs.get(stmt.value.args[0].id)
            a = fn.args if fn is not None else None
            if fn is None or a is None or fn.name != ch.frame_name.rsplit(".", 1)[-1] or a.vararg or a.kwarg \
                    or a.posonlyargs or a.kwonlyargs or not a.args:
                continue
            params = [x.arg for x in a.args]
            for name in sorted(names & set(params[1:])):
                neutral = _neutral(fn, name, params[0])
                if neutral is None:
                    continue
                alias = stmt.targets[0].id
                pad = src.lines[stmt.lineno - 1][: src.col(stmt.lineno, stmt.col_offset)]
                if pad.strip():
                    continue  # another statement shares the line
                inner = compiled_name(fn.name, taken)
                new = Source(text)
                new.replace(stmt.targets[0], inner)
                # inside a function or a block (``def main():``, ``if __name__ == "__main__":``): indented there
                gap = "\n" if pad else "\n\n"
                plain = shim(pad, alias, a, f"always pass {name}: one graph serves the calls with and without it",
                             [(name, neutral, f"{name} is None")], inner)
                end = stmt.end_lineno or stmt.lineno
                new.insert_lines(end + 1, gap + plain + ("" if end >= len(new.lines) else gap))
                out.append((name, alias, new.result()))
        for fn in compiled_defs(src.tree.body):  # ``@torch.compile`` on ``def NAME``: the shim takes NAME
            args = plain_params(fn)
            if args is None or fn.name != ch.frame_name.rsplit(".", 1)[-1]:
                continue
            for name in sorted(names & set(args[1:])):
                neutral = _neutral(fn, name, args[0])
                patched = None if neutral is None else decorated_shim(
                    text, fn, f"always pass {name}: one graph serves the calls with and without it",
                    [(name, neutral, f"{name} is None")])
                if patched is not None:
                    out.append((name, fn.name, patched))
    return out


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a block and of the blocks inside it (a ``main()``, an ``if __name__ ==
    "__main__":``), a class body's left out (a function put there would be a method)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, field, []) or [])
        for h in getattr(stmt, "handlers", []) or []:
            yield from _statements(h.body)


def _is_compile(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def tensor_where(receipt: Receipt, script: str, text: str) -> tuple[str, list[int]] | None:
    """The script's text with each plain ``if``/``else`` on a tensor's value that broke the graph as
    ``torch.where``, and their lines."""
    src = Source(text)
    lines = {s.line for s in receipt.ledger.break_sites if _own(s.file, script)}
    done = []
    for n in ast.walk(src.tree):
        if not isinstance(n, ast.If) or n.lineno not in lines:
            continue
        a, b = _one_assign(n.body), _one_assign(n.orelse)
        if a is None or b is None or a.targets[0].id != b.targets[0].id:  # type: ignore[attr-defined]
            continue
        cond = _Untensor()
        test = cond.visit(ast.parse(ast.unparse(n.test), mode="eval").body)
        first, last = n.lineno, n.end_lineno or n.lineno
        indent = src.lines[first - 1][: src.col(first, n.col_offset)]
        after = src.lines[last - 1][src.col(last, n.end_col_offset or 0):].strip()
        if indent.strip() or (after and not after.startswith("#")) or _multiline_string(n):
            continue
        name = a.targets[0].id  # type: ignore[attr-defined]
        line = (f"{indent}{name} = torch.where({ast.unparse(test)}, {ast.unparse(a.value)}, "
                f"{ast.unparse(b.value)})\n")
        src.edits.append((first, 0, last + 1, 0, line))
        done.append(first)
    if not done:
        return None
    where, torch_seen = insertion_line(src)
    if not torch_seen:
        src.insert_lines(where, "import torch\n")
    return src.result(), sorted(done)
