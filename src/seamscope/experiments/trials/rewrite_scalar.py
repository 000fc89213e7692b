"""The code-change candidate ``tensor-scalar-NAME`` (torch-free): a Python number that changes
from call to call, passed to the compiled function as a 0-d tensor.

Dynamo guards a Python ``int`` or ``float`` argument on its value (``scale == 0.5``): a new value
recompiles. torch 2.13 makes the number symbolic after one such recompile (automatic dynamic;
``specialize_float`` is off), unless the script compiles with ``dynamic=False``: then every new
value is a new graph, up to the recompile limit. A 0-d tensor is guarded on its dtype, device and
shape only, so one graph serves every value from the first call on.

The rewrite is made only where the baseline recompiled a frame of the script on such a value
guard and the script compiles that function as ``f = torch.compile(fn, ...)`` (``f`` becomes
``_fn_compiled`` behind a plain ``f`` with ``fn``'s signature) or with the decorator
``@torch.compile`` alone on ``def fn`` (``fn`` keeps its body and decorator as ``_fn_compiled``, a
plain ``def fn`` after it, as ``always-pass`` does); the plain function sets ``NAME`` to
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

from ...model.receipt import Receipt
from .catalogue import Draft
from .patches import Source
from .rewrite_common import (
    _own,
    bound_names,
    churn_draft,
    compiled_defs,
    compiled_name,
    decorated_shim,
    plain_params,
    shim,
)

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


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


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


def _tensorish(leaf: ast.AST, name: str, numbers: set[str]) -> str | None:
    """Whether an operand can be a tensor: not a constant, not ``name``, not a parameter with a
    number for default, not a size or a builtin's number. The operand's parameter name where it
    is one (``x``), ``""`` for another such operand, None for a number."""
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


def _context_ok(top: ast.AST, parents: dict[int, ast.AST]) -> bool:
    """Whether an arithmetic expression's value flows only where a tensor means what a number did:
    a call's argument (not ``range()``, ``int()``, ``math.*`` or a size), a tuple, a method on it,
    a returned or assigned value; not a test, a comparison, an index or a format."""
    child, node = top, parents.get(id(top))
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
        child, node = node, parents.get(id(node))
    if isinstance(node, (ast.Return, ast.Expr)):
        return True
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return child is node.value
    return False


def arithmetic_operand(fn: ast.FunctionDef, name: str, others: frozenset[str] = frozenset()) -> str | None:
    """The parameter of ``fn`` that ``name`` meets in arithmetic (``x`` in ``x * scale + 1``),
    ``""`` when that operand is no parameter; None when some use of ``name`` is not arithmetic with
    a tensor (``range(n)``, ``if scale > 0``, ``x.view(n, -1)``, ``int(scale)``, ``scale * 2``
    alone, passed on to a call) or ``name`` is assigned in ``fn``: no candidate then. ``others``:
    parameters known to be numbers too (other guarded values)."""
    a = fn.args
    params = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    defaults = list(zip(reversed(a.args), reversed(a.defaults), strict=False)) + [
        (p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is not None]
    numbers = {p.arg for p, d in defaults if isinstance(d, ast.Constant) and type(d.value) in (int, float)}
    numbers = (numbers | others) - {name}
    parents = _parents(fn)
    found: list[str] = []
    uses = 0
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            args = n.args
            if name in {p.arg for p in (*args.posonlyargs, *args.args, *args.kwonlyargs)}:
                return None  # shadowed in a nested function: too subtle to follow
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return None
        if not (isinstance(n, ast.Name) and n.id == name):
            continue
        if not isinstance(n.ctx, ast.Load):
            return None  # reassigned: the number is not only the argument
        uses += 1
        top: ast.AST = n
        while _arith(parents.get(id(top))):
            top = parents[id(top)]
        parent = parents.get(id(top))
        if top is n and isinstance(parent, ast.AugAssign) and isinstance(parent.op, _ARITH) \
                and parent.value is n and isinstance(parent.target, ast.Name) and parent.target.id != name:
            operands: list[str | None] = [_tensorish(parent.target, name, numbers)]  # y *= scale
        elif top is n:
            return None  # used alone: passed on, compared, indexed...
        else:
            operands = [_tensorish(leaf, name, numbers) for leaf in _leaves(top)]
            if not _context_ok(top, parents):
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


def _is_compile(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def scalar_as_tensor(receipt: Receipt, script: str, text: str) -> list[tuple[str, str, str, str, str]]:
    """(argument, its kind of number, the compiled callable's name, the operand, the patched text)
    for each number a frame of the script recompiled on the value of."""
    src = Source(text)
    defs = {n.name: n for n in src.tree.body if isinstance(n, ast.FunctionDef)}
    taken = bound_names(src.tree)
    out = []
    done: set[tuple[str, str]] = set()
    for f in receipt.findings.findings if receipt.findings else []:
        ch = f.churn
        if ch is None or not _own(ch.file, script):
            continue
        kinds = _value_guards(list(ch.guards))
        for stmt in src.tree.body:
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                    and isinstance(stmt.value, ast.Call) and _is_compile(stmt.value.func)
                    and len(stmt.value.args) == 1 and isinstance(stmt.value.args[0], ast.Name)):
                continue
            fn = defs.get(stmt.value.args[0].id)
            a = fn.args if fn is not None else None
            if fn is None or a is None or fn.name != ch.frame_name.rsplit(".", 1)[-1] or a.vararg or a.kwarg \
                    or a.posonlyargs or a.kwonlyargs or fn.decorator_list:
                continue
            params = [x.arg for x in a.args]
            alias = stmt.targets[0].id
            for name in sorted(set(kinds) & set(params)):
                like = arithmetic_operand(fn, name, frozenset(kinds))
                if like is None or (alias, name) in done:
                    continue
                done.add((alias, name))
                value = _as_tensor(name, like)
                inner = compiled_name(fn.name, taken)
                new = Source(text)
                new.replace(stmt.targets[0], inner)
                plain = shim("", alias, a, f"{name} as a 0-d tensor: one graph serves every value",
                             [(name, value, None)], inner)
                end = stmt.end_lineno or stmt.lineno
                new.insert_lines(end + 1, "\n\n" + plain + ("" if end >= len(new.lines) else "\n\n"))
                out.append((name, kinds[name], alias, like, new.result()))
        for fn in compiled_defs(src.tree.body):  # ``@torch.compile`` on ``def NAME``: the shim takes NAME
            args = plain_params(fn)
            if args is None or fn.name != ch.frame_name.rsplit(".", 1)[-1]:
                continue
            for name in sorted(set(kinds) & set(args)):
                like = arithmetic_operand(fn, name, frozenset(kinds))
                if like is None or (fn.name, name) in done:
                    continue
                value = _as_tensor(name, like)
                patched = decorated_shim(text, fn, f"{name} as a 0-d tensor: one graph serves every value",
                                         [(name, value, None)])
                if patched is not None:
                    done.add((fn.name, name))
                    out.append((name, kinds[name], fn.name, like, patched))
    return out


def _as_tensor(name: str, like: str) -> str:
    """``name`` as a 0-d tensor of the dtype ``like op name`` has, on ``like``'s device."""
    if like:
        return f"torch.as_tensor({name}, dtype=torch.result_type({like}, {name}), device={like}.device)"
    return f"torch.as_tensor({name})"


def scalar_drafts(receipt: Receipt, script: str, text: str) -> list[Draft]:
    """The ``tensor-scalar-NAME`` drafts of the script (see the module's docstring)."""
    out = []
    for name, kind, alias, _, new in scalar_as_tensor(receipt, script, text):
        cause = next((f for f in (receipt.findings.findings if receipt.findings else []) if f.churn is not None
                      and name in _value_guards(list(f.churn.guards))), None)
        out.append(churn_draft(
            f"tensor-scalar-{name}", cause, f"recompiles on the value of {name}", script, text, new,
            change=f"pass {name} to {alias} as a 0-d tensor (a Python {kind} the guards held to each value), so "
                   "one graph serves every value (review before applying: a tensor instead of a number)",
            review=f"{name} becomes a 0-d tensor: code that branches on it, uses it as a size or an index, or "
                   "converts it to a Python number behaves differently (the rewrite found only arithmetic); in "
                   "a half-precision operation its value is rounded to that precision"))
    return out

