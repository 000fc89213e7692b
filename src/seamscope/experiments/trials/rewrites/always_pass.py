"""``always-pass-NAME`` (torch-free): an optional argument passed as ``None`` on some calls and a
tensor on others (a recompile on ``NAME is None``) always passed.

The compiled callable gets a plain function in front of it (:mod:`.shims`, either spelling) with
its signature that passes a neutral tensor for ``None``: zeros for a value added or subtracted,
ones for one multiplied or divided, all-false for a ``masked_fill`` mask, shaped like the
function's first argument; for one passed on as ``attention_mask=`` (the ``transformers``
convention, where ``None`` means "attend to every position"), long ones of the (batch, sequence) of
the model call's input. One graph then serves every call. The neutral value's shape is a guess the
output check tests, so the patch is marked "review before applying"."""

from __future__ import annotations

import ast
import re

from ....model.receipt import Receipt
from .base import Edit, churn_edit
from .shims import shimmed, targets
from .syntax import Source

# ``mask is None`` (None before, a tensor now), ``mask is not None``, or a tensor before and None now
_NONE_GUARD = re.compile(r"^(?:L\['([A-Za-z_]\w*)'\]|([A-Za-z_]\w*)) is (?:not )?None\b"
                         r"|^expected type of '([A-Za-z_]\w*)' to be a tensor type, '? ?but found <class 'NoneType'>")


def none_guards(guards: list[str]) -> set[str]:
    """The names the guards held to ``None`` or to a tensor that met ``None``."""
    return {m.group(1) or m.group(2) or m.group(3) for g in guards if (m := _NONE_GUARD.match(g.strip()))}


def neutral(fn: ast.FunctionDef, name: str, like: str) -> str | None:
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


class AlwaysPass:
    name = "always-pass"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        out = []
        for t in targets(receipt, script, source, none_guards):
            value = neutral(t.compiled.fn, t.name, t.params[0]) if t.name != t.params[0] else None
            new = None if value is None else shimmed(
                source, t.compiled, f"always pass {t.name}: one graph serves the calls with and without it",
                [(t.name, value, f"{t.name} is None")])
            if new is None:
                continue
            out.append(churn_edit(
                f"{self.name}-{t.name}", t.cause, f"recompiles on {t.name} being None", script, source, new,
                change=f"always pass {t.name} to {t.compiled.alias} (a neutral tensor where it was None), so one "
                       "graph serves every call (review before applying: the neutral value's shape is a guess)",
                review=f"the neutral {t.name} passed for None is shaped like the first argument: check it is what "
                       "the code means"))
        return out
