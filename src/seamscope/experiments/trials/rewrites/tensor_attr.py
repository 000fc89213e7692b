"""``tensor-attr-KEY`` (torch-free): a Python number an optimizer keeps in its ``param_groups``,
which an LR scheduler changes every step, made a 0-d tensor where the script makes it:
``torch.optim.AdamW(params, lr=1e-3)`` becomes ``torch.optim.AdamW(params, lr=torch.tensor(1e-3))``.

Dynamo guards a number read from an object the compiled code reaches on its value (in the
optimizer's own ``step`` frame: ``self.param_groups[0]['lr'] == 0.001``), so the scheduler's next
value recompiles the step (torch 2.13 then makes the float symbolic, after that one recompile,
unless the script compiles with ``dynamic=False``: then every value is a new graph). A tensor
``lr`` is guarded on its dtype, device and shape only, and PyTorch's LR schedulers write a new
value into it in place (``fill_``), so one graph serves every value from the first step on: the
recipe of PyTorch's tutorial on running the compiled optimizer with an LR scheduler, and the
remedy the churn finding names ("pass it as a 0-d tensor").

Made only where a churn finding's guard holds ``param_groups[N]['lr']`` to a number and the script
constructs an optimizer (``torch.optim.NAME(...)``, ``optim.NAME(...)``, or a name imported from
``torch.optim``) with ``lr=`` written as a number or a name (not a call: it may be a tensor
already); not beside ``foreach=True`` without ``capturable=True``, which PyTorch refuses with a
tensor ``lr``. Only ``lr``: the one value every ``torch.optim`` optimizer takes as a tensor and
every LR scheduler updates. "Review before applying": code that reads ``group['lr']`` as a Python
number (a log line, a scheduler of the user's that assigns a float) now sees a tensor.
"""

from __future__ import annotations

import ast
import re

from ....model.receipt import Receipt
from .base import Edit, churn_edit
from .syntax import Source, dotted

_GROUP_GUARD = re.compile(r"param_groups\[\d+\]\['(\w+)'\] == -?(?:inf|\d[\d.]*(?:e[-+]?\d+)?)(?=\s|$)")
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
