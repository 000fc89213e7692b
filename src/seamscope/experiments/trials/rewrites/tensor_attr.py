"""``tensor-attr-NAME`` (torch-free): a Python number the compiled code reads through an object,
changed between calls, made a 0-d tensor where the script makes it. Two such objects:

- an optimizer's ``lr`` in its ``param_groups``, which an LR scheduler changes every step:
  ``torch.optim.AdamW(params, lr=1e-3)`` becomes ``torch.optim.AdamW(params, lr=torch.tensor(1e-3))``;
- a module's attribute (``self.scale = 0.5`` in ``__init__``, read as ``x * self.scale`` in
  ``forward``, set by the script between calls: ``model.scale = 0.7``): it becomes a buffer,
  ``self.register_buffer("scale", torch.tensor(0.5), persistent=False)`` (it moves with the
  module's ``.to()``, and the state dict is unchanged; a tensor attribute where the class is no
  ``nn.Module`` the script names), and every assignment of the script to an
  attribute of that name writes into it, ``model.scale.fill_(0.7)``. In place, not a new tensor:
  the compiled code then always reads the same tensor (one address, which a CUDA graph of
  ``mode="reduce-overhead"`` relies on for a module's buffers). Made only where a churn finding on
  the class's method guards ``self.NAME`` to a float, ``__init__`` assigns it a number written as
  numbers and names, every read of it in the class's methods is arithmetic with a tensor (the rule
  of ``tensor-scalar``, :func:`.tensor_scalar.arithmetic_operand`), and the script's other uses of
  an attribute of that name are plain assignments (``model.scale = v``) or in-place arithmetic.

Dynamo guards a number read from an object the compiled code reaches on its value (in the
optimizer's own ``step`` frame: ``self.param_groups[0]['lr'] == 0.001``), so the scheduler's next
value recompiles the step (torch 2.13 then makes the float symbolic, after that one recompile,
unless the script compiles with ``dynamic=False``: then every value is a new graph). A tensor
``lr`` is guarded on its dtype, device and shape only, and PyTorch's LR schedulers write a new
value into it in place (``fill_``), so one graph serves every value from the first step on: the
recipe of PyTorch's tutorial on running the compiled optimizer with an LR scheduler, and the
remedy the churn finding names ("pass it as a 0-d tensor").

The optimizer's ``lr`` is made only where a churn finding's guard holds ``param_groups[N]['lr']``
to a number and the script constructs an optimizer (``torch.optim.NAME(...)``, ``optim.NAME(...)``,
or a name imported from ``torch.optim``) with ``lr=`` written as a number or a name (not a call: it may be a tensor
already); not beside ``foreach=True`` without ``capturable=True``, which PyTorch refuses with a
tensor ``lr``. Only ``lr``: the one value every ``torch.optim`` optimizer takes as a tensor and
every LR scheduler updates. "Review before applying": code that reads ``group['lr']`` as a Python
number (a log line, a scheduler of the user's that assigns a float) now sees a tensor.
"""

from __future__ import annotations

import ast
import re

from ....model.receipt import Receipt
from .base import Edit, churn_edit, is_script_file
from .syntax import Source, dotted, parents
from .tensor_scalar import arithmetic_operand

_NUMBER = r"-?(?:inf|\d[\d.]*(?:e[-+]?\d+)?)(?=\s|$)"
_GROUP_GUARD = re.compile(r"param_groups\[\d+\]\['(\w+)'\] == " + _NUMBER)
_ATTR_GUARD = re.compile(r"^(?:L\['([A-Za-z_]\w*)'\]|([A-Za-z_]\w*))\.([A-Za-z_]\w*) == (" + _NUMBER + ")")
TENSOR_KEYS = {"lr"}
"""The param-group values made tensors (see the module's docstring)."""


def _optimizer_names(tree: ast.Module) -> set[str]:
    """The names the script binds to a ``torch.optim`` class (``from torch.optim import AdamW``)."""
    return {a.asname or a.name for s in tree.body if isinstance(s, ast.ImportFrom) and s.module == "torch.optim"
            for a in s.names}


def _is_optimizer(call: ast.Call, imported: set[str]) -> bool:
    name = dotted(call.func) or ""
    head, _, cls = name.rpartition(".")
    return (head in ("torch.optim", "optim") and cls[:1].isupper()) or (not head and name in imported)


def _keyword(call: ast.Call, key: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == key), None)


def _plain(node: ast.expr) -> bool:
    """A number written as numbers and names (``1e-3``, ``LR``, ``-cfg.lr``, ``base * 2``): no call,
    whose result may be a tensor already."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.UnaryOp):
        return _plain(node.operand)
    if isinstance(node, ast.BinOp):
        return _plain(node.left) and _plain(node.right)
    return dotted(node) is not None


def _constant_true(kw: ast.keyword | None) -> bool:
    return kw is not None and isinstance(kw.value, ast.Constant) and kw.value.value is True


class TensorAttr:
    name = "tensor-attr"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        return self._optimizer(receipt, script, source) + _module_attrs(receipt, script, source, self.name)

    def _optimizer(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        keys: dict[str, object] = {}  # each guarded key, and the first finding that guarded it
        for f in receipt.findings.findings if receipt.findings else []:
            for g in f.churn.guards if f.churn is not None else []:
                m = _GROUP_GUARD.search(g.split("#", 1)[0])
                if m is not None and m.group(1) in TENSOR_KEYS:
                    keys.setdefault(m.group(1), f)
        imported = _optimizer_names(source.tree)
        calls = [n for n in ast.walk(source.tree) if isinstance(n, ast.Call) and _is_optimizer(n, imported)
                 and not (_constant_true(_keyword(n, "foreach")) and not _constant_true(_keyword(n, "capturable")))]
        out = []
        for key, cause in keys.items():
            src = Source(source.text)
            made = []
            for call in calls:
                kw = _keyword(call, key)
                if kw is None or not _plain(kw.value):
                    continue
                text = ast.get_source_segment(source.text, kw.value)
                if text is None or "\n" in text:
                    continue
                src.replace(kw.value, f"torch.tensor({text})")
                made.append(f"{key}=torch.tensor({text})")
            if not made:
                continue
            src.ensure_import()
            out.append(churn_edit(
                f"{self.name}-{key}", cause, f"recompiles on the optimizer's {key}", script, source, src.result(),
                change=f"make the optimizer's {key} a 0-d tensor where it is made ({', '.join(made)}), so the LR "
                       "scheduler updates it in place and one graph of the step serves every value (review before "
                       f"applying: {key} is a tensor)",
                review=f"param_groups' {key} becomes a 0-d tensor: code that reads it as a Python number or assigns "
                       "it a float sees or undoes the change; PyTorch's schedulers update it in place"))
        return out


def _attr_guards(guards: list[str]) -> dict[tuple[str, str], str]:
    """Each ``(owner, attribute)`` a value guard holds to a float (``self.scale == 0.5``), the value."""
    out: dict[tuple[str, str], str] = {}
    for g in guards:
        m = _ATTR_GUARD.match(g.split("#", 1)[0].strip())
        if m is not None and not re.fullmatch(r"-?\d+", m.group(4)):
            out.setdefault((m.group(1) or m.group(2), m.group(3)), m.group(4))
    return out


def _first_param(fn: ast.FunctionDef) -> str | None:
    a = fn.args
    return (a.posonlyargs + a.args)[0].arg if a.posonlyargs + a.args else None


def _defining_assign(init: ast.FunctionDef, owner: str, attr: str) -> ast.Assign | None:
    """``owner.attr = NUMBER`` in ``__init__``, the one use of the attribute there (else None)."""
    uses = [n for n in ast.walk(init) if isinstance(n, ast.Attribute) and n.attr == attr]
    assign = [s for s in ast.walk(init) if isinstance(s, ast.Assign) and len(s.targets) == 1
              and s.targets[0] in uses and isinstance(s.targets[0].value, ast.Name)
              and s.targets[0].value.id == owner]
    if len(uses) != 1 or len(assign) != 1 or not _plain(assign[0].value):
        return None
    return assign[0]


def _reads_are_arithmetic(cls: ast.ClassDef, attr: str) -> bool:
    """Every method of ``cls`` but ``__init__`` that names the attribute reads it in arithmetic."""
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__":
            continue
        if not any(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(fn)):
            continue
        owner = _first_param(fn)
        if owner is None or fn.decorator_list or arithmetic_operand(fn, attr, owner=owner) is None:
            return False
    return True


def _outside_assignments(tree: ast.Module, cls: ast.ClassDef, attr: str) -> list[ast.Assign] | None:
    """The script's plain assignments to an attribute ``attr`` outside ``cls`` (``model.scale = v``);
    None where the script uses such an attribute otherwise (reads it, unpacks into it) or another
    class has one of that name (its own: not this one's to write into)."""
    inside = {id(n) for n in ast.walk(cls)}
    others = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c is not cls for n in ast.walk(c)}
    up = parents(tree)
    out = []
    for n in ast.walk(tree):
        if id(n) in inside or not (isinstance(n, ast.Attribute) and n.attr == attr):
            continue
        if id(n) in others:
            return None
        stmt = up.get(id(n))
        if isinstance(stmt, ast.AugAssign) and stmt.target is n:
            continue  # ``model.scale *= 0.9``: in place on the tensor
        if not (isinstance(stmt, ast.Assign) and stmt.targets == [n]):
            return None
        out.append(stmt)
    return out


def _module_attrs(receipt: Receipt, script: str, source: Source, prefix: str) -> list[Edit]:
    """The module-attribute edits (see the module's docstring), one per attribute."""
    out: list[Edit] = []
    done: set[str] = set()
    classes = [c for c in ast.walk(source.tree) if isinstance(c, ast.ClassDef)]
    for f in receipt.findings.findings if receipt.findings else []:
        ch = f.churn
        if ch is None or not is_script_file(ch.file, script):
            continue
        frame = ch.frame_name.rsplit(".", 1)[-1]
        for (owner, attr), value in _attr_guards(list(ch.guards)).items():
            for cls in classes:
                methods = {m.name: m for m in cls.body if isinstance(m, ast.FunctionDef)}
                fn, init = methods.get(frame), methods.get("__init__")
                if attr in done or fn is None or init is None or _first_param(fn) != owner \
                        or (ch.line and fn.lineno != ch.line):
                    continue
                edit = _attr_edit(f, cls, init, attr, value, script, source, prefix)
                if edit is not None:
                    done.add(attr)
                    out.append(edit)
    return out


def _attr_edit(cause: object, cls: ast.ClassDef, init: ast.FunctionDef, attr: str, value: str, script: str,
               source: Source, prefix: str) -> Edit | None:
    owner = _first_param(init)
    assign = _defining_assign(init, owner, attr) if owner else None
    later = _outside_assignments(source.tree, cls, attr)
    if assign is None or later is None or not _reads_are_arithmetic(cls, attr):
        return None
    src = Source(source.text)
    text = ast.get_source_segment(source.text, assign.value) or ""
    number = text if isinstance(assign.value, ast.Constant) and isinstance(assign.value.value, float) \
        else f"float({text})"
    if any((dotted(b) or "").endswith("Module") for b in cls.bases):  # nn.Module, torch.nn.Module
        src.replace(assign, f'{owner}.register_buffer("{attr}", torch.tensor({number}), persistent=False)')
    else:
        src.replace(assign.value, f"torch.tensor({number})")
    for stmt in later:
        target = ast.get_source_segment(source.text, stmt.targets[0])
        new = ast.get_source_segment(source.text, stmt.value)
        src.replace(stmt, f"{target}.fill_({new})")
    src.ensure_import()
    where = f"{cls.name}.__init__" + (f" and {len(later)} assignment{'s' * (len(later) != 1)}" if later else "")
    return churn_edit(
        f"{prefix}-{attr}", cause, f"recompiles on {cls.name}.{attr}", script, source, src.result(),
        change=f"make {cls.name}.{attr} a 0-d tensor (a Python float the guards held to {value}) in {where}, "
               f"written in place (.fill_), so one graph serves every value (review before applying: {attr} is "
               "a tensor)",
        review=f"{cls.name}.{attr} becomes a 0-d float32 tensor (a buffer of a module), set in place: code that "
               "reads it as a Python number, or assigns it in a way the rewrite did not see (setattr), sees or undoes "
               "the change; in a half-precision module its value is rounded to that precision")
