"""``tensor-scalar-NAME`` (torch-free): a Python number that changes from call to call, passed to
the compiled function as a 0-d tensor.

Dynamo guards a Python ``int`` or ``float`` argument on its value (``scale == 0.5``): a new value
recompiles. torch 2.13 makes the number symbolic after one such recompile (automatic dynamic;
``specialize_float`` is off), unless the script compiles with ``dynamic=False``: then every new
value is a new graph, up to the recompile limit. A 0-d tensor is guarded on its dtype, device and
shape only, so one graph serves every value from the first call on.

The rewrite is made only where the baseline recompiled a frame of the script on such a value
guard and the script compiles that function (either spelling, :mod:`.shims`, as ``always-pass``
does); the plain function in front of it sets ``NAME`` to
``torch.as_tensor(NAME, dtype=torch.result_type(x, NAME), device=x.device)``, ``x`` being the
argument ``NAME`` meets in arithmetic: the dtype ``x op NAME`` gives, so the result's dtype is as
before and, for a float32 or float64 ``x``, its values too (a float16 or bfloat16 ``x`` rounds the
number to its own precision, where PyTorch computes with a Python number in float32).

It is made only when every use of ``NAME`` in ``fn`` is arithmetic with such an operand
(``x * scale + 1``), read from ``fn``'s syntax tree: a number that reaches ``range()``, an ``if``,
a comparison, a size, an index or ``int()`` would change meaning as a tensor (a branch on it breaks
the graph), so there is no candidate then. What the tree cannot show (a name that holds a number,
not a tensor) the output check and the "review before applying" mark are for.
"""

from __future__ import annotations

import ast
import builtins
import re

from ....model.receipt import Receipt
from .base import Edit, churn_edit
from .shims import shimmed, targets
from .syntax import Source, parents

_VALUE_GUARD = re.compile(r"^(?:L\['([A-Za-z_]\w*)'\]|([A-Za-z_]\w*)) == (-?(?:inf|\d[\d.]*(?:e[-+]?\d+)?))(?=\s|$)")
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_NUMBER_MODULES = {"math", "np", "numpy", "random", "operator", "cmath", "statistics"}
_SIZE_METHODS = {
    "view", "reshape", "expand", "repeat", "repeat_interleave", "tile", "narrow", "split", "chunk", "unsqueeze",
    "squeeze", "permute", "transpose", "flatten", "unflatten", "movedim", "select", "index_select", "topk",
    "kthvalue", "roll", "diagonal", "tril", "triu", "size", "item", "tolist", "zeros", "ones", "empty", "full",
    "arange", "range", "randn", "rand", "randint", "linspace", "logspace", "eye", "new_zeros", "new_ones",
    "new_empty", "new_full", "interpolate", "pad", "unfold", "stride", "to", "cuda", "type",
}
"""Calls whose numbers are sizes, dimensions, indices or types: a tensor there changes meaning or fails."""
_NUMBER_ATTRS = {"shape", "ndim", "dtype", "device", "real", "imag"}


def _arith(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH)
            or isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)))


def _leaves(node: ast.AST) -> list[ast.AST]:
    """The operands of an arithmetic expression (below its ``+ - * / // % **`` and signs)."""
    if isinstance(node, ast.BinOp) and _arith(node):
        return _leaves(node.left) + _leaves(node.right)
    if isinstance(node, ast.UnaryOp) and _arith(node):
        return _leaves(node.operand)
    return [node]


def _is_use(node: ast.AST, name: str, owner: str | None) -> bool:
    """Whether ``node`` is ``name`` (``owner`` None) or the attribute ``owner.name`` (``self.scale``)."""
    if owner is None:
        return isinstance(node, ast.Name) and node.id == name
    return isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.value, ast.Name) \
        and node.value.id == owner


def _tensorish(leaf: ast.AST, name: str, numbers: set[str], owner: str | None = None) -> str | None:
    """Whether an operand can be a tensor: not a constant, not ``name`` (``owner.name``), not a
    parameter with a number for default, not a size or a builtin's number. The operand's parameter
    name where it is one (``x``), ``""`` for another such operand, None for a number."""
    if owner is not None and _is_use(leaf, name, owner):
        return None
    if isinstance(leaf, ast.Name):
        if leaf.id == name or leaf.id in numbers or hasattr(builtins, leaf.id):
            return None
        return leaf.id
    if isinstance(leaf, ast.Attribute):
        return None if leaf.attr in _NUMBER_ATTRS else ""
    if isinstance(leaf, ast.Subscript):
        return None if isinstance(leaf.value, ast.Attribute) and leaf.value.attr in _NUMBER_ATTRS else ""
    if isinstance(leaf, ast.Call):
        fn = leaf.func
        if isinstance(fn, ast.Name) and hasattr(builtins, fn.id):
            return None
        if isinstance(fn, ast.Attribute) and (fn.attr in _SIZE_METHODS or fn.attr in ("numel", "dim", "__len__")
                                              or isinstance(fn.value, ast.Name) and fn.value.id in _NUMBER_MODULES):
            return None
        return ""
    return None


def _context_ok(top: ast.AST, up: dict[int, ast.AST]) -> bool:
    """Whether an arithmetic expression's value flows only where a tensor means what a number did:
    a call's argument (not ``range()``, ``int()``, ``math.*`` or a size), a tuple, a method on it,
    a returned or assigned value; not a test, a comparison, an index or a format."""
    child, node = top, up.get(id(top))
    while node is not None and not isinstance(node, ast.stmt):
        if isinstance(node, ast.Call):
            fn = node.func
            if child is fn:
                pass  # a method of the value (a tensor's already)
            elif isinstance(fn, ast.Name) and hasattr(builtins, fn.id):
                return False
            elif isinstance(fn, ast.Attribute) and (fn.attr in _SIZE_METHODS or isinstance(fn.value, ast.Name)
                                                  and fn.value.id in _NUMBER_MODULES):
                return False
        elif isinstance(node, ast.IfExp):
            if child is node.test:
                return False
        elif isinstance(node, ast.Subscript):
            if child is not node.value:
                return False
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return False
        elif not isinstance(node, (ast.keyword, ast.Tuple, ast.List, ast.Starred, ast.BinOp, ast.Attribute)):
            return False  # a comparison, a boolean, a format, a comprehension, a lambda...
        child, node = node, up.get(id(node))
    if isinstance(node, (ast.Return, ast.Expr)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return child is node.value
    return False


def arithmetic_operand(fn: ast.FunctionDef, name: str, others: frozenset[str] = frozenset(),
                       owner: str | None = None) -> str | None:
    """The parameter of ``fn`` that ``name`` meets in arithmetic (``x`` in ``x * scale + 1``),
    ``""`` when that operand is no parameter; None when some use of ``name`` is not arithmetic with
    a tensor (``range(n)``, ``if scale > 0``, ``x.view(n, -1)``, ``int(scale)``, ``scale * 2``
    alone, passed on to a call) or ``name`` is assigned in ``fn``: no candidate then. ``others``:
    parameters known to be numbers too (other guarded values). With ``owner`` the uses are the
    attribute ``owner.name`` (``self.scale`` in a method), by the same rules."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    defaults = list(zip(reversed(a.args), reversed(a.defaults), strict=False)) + [
        (p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    numbers = {p.arg for p, d in defaults if isinstance(d, ast.Constant) and type(d.value) in (int, float)}
    numbers = (numbers | others) - {name}
    up = parents(fn)
    found: list[str] = []
    uses = 0
    bound = owner or name
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            args = n.args
            if bound in {p.arg for p in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
                return None  # shadowed in a nested function: too subtle to follow
        if isinstance(n, (ast.Global, ast.Nonlocal)) and bound in n.names:
            return None
        if not _is_use(n, name, owner):
            continue
        if not isinstance(n.ctx, ast.Load):  # type: ignore[attr-defined]
            return None  # reassigned: the number is not only the argument
        uses += 1
        top: ast.AST = n
        while _arith(up.get(id(top))):
            top = up[id(top)]
        parent = up.get(id(top))
        if top is n and isinstance(parent, ast.AugAssign) and isinstance(parent.op, _ARITH) \
                and parent.value is n and isinstance(parent.target, ast.Name) and parent.target.id != name:
            operands: list[str | None] = [_tensorish(parent.target, name, numbers, owner)]  # y *= scale
        elif top is n:
            return None  # used alone: passed on, compared, indexed...
        else:
            operands = [_tensorish(leaf, name, numbers, owner) for leaf in _leaves(top)]
            if not _context_ok(top, up):
                return None
        if all(o is None for o in operands):
            return None  # arithmetic of numbers only (``scale * 2``): its result is a number
        found += [o for o in operands if o]
    if not uses:
        return None
    return next((p for p in params if p in found and p != name), "")


def _value_guards(guards: list[str]) -> dict[str, str]:
    """Each name a value guard holds to a number, and the kind of number (``int``/``float``)."""
    out: dict[str, str] = {}
    for g in guards:
        m = _VALUE_GUARD.match(g.strip())
        if m is None:
            continue
        name = m.group(1) or m.group(2)
        kind = "int" if re.fullmatch(r"-?\d+", m.group(3)) else "float"
        out[name] = "float" if out.get(name) == "float" else kind
    return out


def _as_tensor(name: str, like: str) -> str:
    """``name`` as a 0-d tensor of the dtype ``like op name`` has, on ``like``'s device."""
    if like:
        return f"torch.as_tensor({name}, dtype=torch.result_type({like}, {name}), device={like}.device)"
    return f"torch.as_tensor({name})"


class TensorScalar:
    name = "tensor-scalar"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        out = []
        for t in targets(receipt, script, source, lambda guards: set(_value_guards(guards))):
            kinds = _value_guards(list(t.cause.churn.guards))
            like = arithmetic_operand(t.compiled.fn, t.name, frozenset(kinds))
            new = None if like is None else shimmed(
                source, t.compiled, f"{t.name} as a 0-d tensor: one graph serves every value",
                [(t.name, _as_tensor(t.name, like), None)])
            if new is None:
                continue
            out.append(churn_edit(
                f"{self.name}-{t.name}", t.cause, f"recompiles on the value of {t.name}", script, source, new,
                change=f"pass {t.name} to {t.compiled.alias} as a 0-d tensor (a Python {kinds[t.name]} the guards "
                       "held to each value), so one graph serves every value (review before applying: a tensor "
                       "instead of a number)",
                review=f"{t.name} becomes a 0-d tensor: code that branches on it, uses it as a size or an index, or "
                       "converts it to a Python number behaves differently (the rewrite found only arithmetic); in "
                       "a half-precision operation its value is rounded to that precision"))
        return out
