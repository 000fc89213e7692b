"""``tensor-cond`` (torch-free): a Python ``if``/``else`` on a tensor's value that broke
the graph, whose branches are more than one assignment each (``tensor-where`` keeps those), as
``torch.cond``::

    def _then_N(z):          # nested, at the if's indentation; N is the if's line
        <then body>
        return z, t
    def _else_N(z):
        <else body>
        return z, t
    z, t = torch.cond(<condition kept a tensor>, _then_N, _else_N, (z,))

What torch 2.13's ``torch.cond`` takes decides the shape of the edit:

- operands must be tensors (eager ``torch.cond``, also reached when a frame falls back to eager,
  rejects an ``int`` leaf), so only the names a branch reads *and* rebinds are operands (a nested
  function that assigns a name cannot read the enclosing one); every other name read is closed
  over, which Dynamo lifts into the branch graphs and eager Python reads as it did;
- the outputs are the names both branches bind; a name only one branch binds is a temporary, used
  nowhere else in the function (else no candidate: after the ``if`` it would be bound on one path);
- a branch must have no side effects and nothing Dynamo cannot trace whole: no ``print``, logging,
  ``return``, ``yield``, ``global``/``nonlocal``, ``del``, ``raise``, ``try``, ``with``,
  ``while``, no nested ``if``, no assignment to an attribute or a subscript, no in-place method
  (``add_``) or container mutation (``append``) on a value it did not make, no ``.item()``,
  ``.tolist()``, ``bool(...)``; a ``for`` only over ``range`` of integer literals.

Both branches are traced and must return the same shapes and dtypes: the patch is marked "review
before applying", and the output check tests it.
"""

from __future__ import annotations

import ast

from ....model.receipt import Receipt
from .base import Edit, break_lines, site_edit
from .syntax import Source, one_assign, parents, tensor_test

_FORBIDDEN_CALLS = {"print", "bool", "setattr", "delattr", "exec", "eval", "input", "open", "breakpoint"}
_DATA_METHODS = {"item", "tolist", "numpy", "backward"}
_MUTATING_METHODS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "discard",
                     "register_buffer", "register_parameter", "copy_"}
_VIEWS = {"view", "view_as", "reshape", "reshape_as", "expand", "expand_as", "t", "transpose", "permute", "squeeze",
          "unsqueeze", "flatten", "unflatten", "narrow", "select", "as_strided", "detach", "contiguous", "to",
          "type_as", "real", "imag", "unfold", "split", "chunk", "unbind", "movedim", "swapaxes", "diagonal"}
"""Methods whose result can share the input's storage: an in-place op on it would change the input."""
_LOGGERS = {"debug", "info", "warning", "error", "exception", "critical"}
_LOGGER_OR_OP = {"log", "warn"}
"""A logger's or ``warnings``' when called on something named so (``torch.log(x)`` is an op)."""


def _const_range(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and not node.keywords and 1 <= len(node.args) <= 3
            and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args))


class _Branch:
    """One branch's statements read in order: the names it reads before binding them (free), the
    names it binds, and whether torch.cond can take it."""

    def __init__(self, body: list[ast.stmt]) -> None:
        self.free: list[str] = []
        self.bound: list[str] = []
        self.made: set[str] = set()
        """Names bound to a value this branch computed (an in-place op on one changes no input)."""
        self.ok = all(self._stmt(s) for s in body)

    def _read(self, node: ast.AST) -> bool:
        local = {n.id for c in ast.walk(node) if isinstance(c, ast.comprehension)
                 for n in ast.walk(c.target) if isinstance(n, ast.Name)}
        for n in ast.walk(node):
            if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr, ast.Lambda)):
                return False
            if isinstance(n, ast.Call) and not self._call(n):
                return False
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local \
                    and n.id not in self.bound and n.id not in self.free:
                self.free.append(n.id)
        return True

    def _call(self, call: ast.Call) -> bool:
        fn = call.func
        if isinstance(fn, ast.Name):  # zero-argument super() needs the method's own frame
            return fn.id not in _FORBIDDEN_CALLS and not (fn.id == "super" and not call.args)
        if not isinstance(fn, ast.Attribute):
            return True
        receiver = fn.value.attr if isinstance(fn.value, ast.Attribute) else getattr(fn.value, "id", "")
        if fn.attr in _DATA_METHODS or fn.attr in _LOGGERS \
                or fn.attr in _LOGGER_OR_OP and ("log" in receiver.lower() or "warn" in receiver.lower()):
            return False
        if fn.attr in _MUTATING_METHODS or fn.attr.endswith("_") and not fn.attr.endswith("__"):
            # in place: allowed only on a value this branch made (an input or a global must not change)
            return isinstance(fn.value, ast.Name) and fn.value.id in self.made
        return True

    @staticmethod
    def _fresh(value: ast.expr) -> bool:
        if isinstance(value, (ast.BinOp, ast.UnaryOp)):
            return True
        return isinstance(value, ast.Call) and not (isinstance(value.func, ast.Attribute)
                                                    and value.func.attr in _VIEWS)

    def _unmake(self, targets: list[ast.expr]) -> None:
        """Names rebound to what may be an input's storage (a view, one of several results)."""
        self.made -= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}

    def _bind(self, target: ast.expr) -> bool:
        if isinstance(target, ast.Starred):
            return self._bind(target.value)
        if isinstance(target, (ast.Tuple, ast.List)):
            return all(self._bind(t) for t in target.elts)
        if not isinstance(target, ast.Name):
            return False  # an attribute or a subscript: a side effect on something else
        if target.id not in self.bound:
            self.bound.append(target.id)
        return True

    def _stmt(self, s: ast.stmt) -> bool:
        if isinstance(s, ast.Pass) or isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            return True
        if isinstance(s, ast.Expr):  # only an in-place op on a value this branch made (``w.mul_(2)``)
            v = s.value
            return (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr.endswith("_")
                    and not v.func.attr.endswith("__") and isinstance(v.func.value, ast.Name)
                    and v.func.value.id in self.made and self._read(v))
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            targets: list[ast.expr] = s.targets if isinstance(s, ast.Assign) else [s.target]
            if s.value is None or not self._read(s.value) or not all(self._bind(t) for t in targets):
                return False
            fresh = len(targets) == 1 and isinstance(targets[0], ast.Name) and self._fresh(s.value)
            self._unmake(targets)
            if fresh:
                self.made.add(targets[0].id)  # type: ignore[attr-defined]
            return True
        if isinstance(s, ast.AugAssign):
            # ``x += 1`` works in place on a tensor: only on a value this branch made
            return isinstance(s.target, ast.Name) and s.target.id in self.made and self._read(s.value)
        if isinstance(s, ast.For):
            if s.orelse or not _const_range(s.iter) or not self._bind(s.target):
                return False
            self._unmake([s.target])
            return all(self._stmt(b) for b in s.body)
        return False  # print/logging (an expression statement), return, if, while, del, raise, try, ...


def _own_lines(src: Source, body: list[ast.stmt], after_line: int) -> tuple[int, int] | None:
    """The lines a branch's statements fill, where they are on lines of their own."""
    first, last = body[0].lineno, body[-1].end_lineno or body[-1].lineno
    if first <= after_line or src.lines[first - 1][: src.col(first, body[0].col_offset)].strip():
        return None
    return first, last


def _cond(src: Source, n: ast.If, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The ``torch.cond`` lines that replace ``n``, or None where torch.cond cannot take it."""
    a, b = one_assign(n.body), one_assign(n.orelse)
    if a is not None and b is not None and a.targets[0].id == b.targets[0].id:  # type: ignore[attr-defined]
        return None  # tensor-where's
    if not n.orelse or isinstance(n.test, (ast.BoolOp, ast.NamedExpr)) \
            or isinstance(n.test, ast.UnaryOp) and isinstance(n.test.op, ast.Not):
        return None  # an elif chain reads as an orelse holding an if: refused below
    then, other = _Branch(n.body), _Branch(n.orelse)
    if not (then.ok and other.ok):
        return None
    outs = [x for x in then.bound if x in other.bound]
    temps = set(then.bound) ^ set(other.bound)
    inside = {id(x) for x in ast.walk(n)}
    used = {x.id for x in ast.walk(fn) if isinstance(x, ast.Name) and id(x) not in inside}
    params = {x.arg for x in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs, fn.args.vararg,
                              fn.args.kwarg) if x is not None}
    if not outs or temps & (used | params):
        return None  # nothing comes out, or a name bound on one path only is read elsewhere
    bound = set(then.bound) | set(other.bound)
    operands = [x for x in dict.fromkeys([*then.free, *other.free]) if x in bound]
    if any(x not in params and x not in used for x in operands):
        return None  # read before any binding the function makes outside the if
    first = n.lineno
    indent = src.indent(n)
    if not src.alone(n) or (n.test.end_lineno or first) != first:
        return None
    body_at = _own_lines(src, n.body, first)
    else_at = _own_lines(src, n.orelse, body_at[1] if body_at else first)
    if body_at is None or else_at is None:
        return None
    args = ", ".join(operands)
    ret = ", ".join(outs)
    text = ""
    for kind, (lo, hi), body in (("then", body_at, n.body), ("else", else_at, n.orelse)):
        pad = src.lines[lo - 1][: src.col(lo, body[0].col_offset)]
        text += f"{indent}def _{kind}_{first}({args}):\n{''.join(src.lines[lo - 1:hi])}{pad}return {ret}\n"
    pack = "()" if not operands else f"({args},)" if len(operands) == 1 else f"({args})"
    return text + f"{indent}{ret} = torch.cond({tensor_test(n.test)}, _then_{first}, _else_{first}, {pack})\n"


class TensorCond:
    name = "tensor-cond"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        src = Source(source.text)
        lines = break_lines(receipt, script)
        up = parents(src.tree)
        done = []
        for n in ast.walk(src.tree):
            if not isinstance(n, ast.If) or n.lineno not in lines:
                continue
            fn = up.get(id(n))
            while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fn = up.get(id(fn))
            if fn is None:
                continue  # module level: no compiled frame
            new = _cond(src, n, fn)
            if new is None:
                continue
            src.edits.append((n.lineno, 0, (n.end_lineno or n.lineno) + 1, 0, new))
            done.append(n.lineno)
        if not done:
            return []
        src.ensure_import()
        out = src.result()
        try:
            ast.parse(out)
        except SyntaxError:
            return []
        return [site_edit(
            self.name, receipt, script, source, out, sorted(done),
            "Python branch(es) on a tensor's value in compiled code",
            "turn the if on a tensor's value at {where} into torch.cond (review before applying: both branches "
            "are traced)",
            "both branches are traced and must return the same shapes and dtypes: check each branch's results")]
