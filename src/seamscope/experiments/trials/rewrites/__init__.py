"""Code-change candidates: edits no flag makes, read from the baseline's evidence in the user's own
script (torch-free). Each is a draft with its diff, tried and output-checked like every other
candidate, its runs applying the diff (``--patch``), and marked "review before applying": each
changes more than compilation.

Every rewrite is a :class:`.base.Rewrite` (a ``name``; ``find(receipt, script, source)`` returns
its :class:`.base.Edit` records) in a module of its own, listed in :data:`REWRITES`; every edit
becomes a candidate the same way (:func:`.base.draft`). The syntax helpers they share are in
:mod:`.syntax`, the finder and shim ``always-pass`` and ``tensor-scalar`` share in :mod:`.shims`.
Adding a rewrite is one module and one line here (a test fails for a module not listed).

- :mod:`.guard_logging`: a logging call that broke the graph, guarded by
  ``if not torch.compiler.is_compiling():``;
- :mod:`.tensor_where`: an ``if`` on a tensor's value whose branches assign one name, as
  ``torch.where``;
- :mod:`.tensor_cond`: such an ``if``/``else`` with longer branches, as ``torch.cond``;
- :mod:`.always_pass`: an optional argument a frame recompiled on being ``None``, always passed;
- :mod:`.tensor_scalar`: a Python number a frame recompiled on the value of, passed as a 0-d tensor;
- :mod:`.tensor_attr`: an optimizer's ``lr`` the step recompiled on (an LR scheduler's), made a
  0-d tensor where the optimizer is made; a module's float attribute ``forward`` recompiled on,
  made a 0-d tensor buffer written in place;
- :mod:`.skipped_frame`: a frame Dynamo traced and gave up on (a break in a loop), no longer traced
  (``torch.compiler.disable(recursive=False)``: what it calls still compiles);
- :mod:`.static_cache`: a ``transformers`` model's ``generate`` that recompiled as its KV cache
  grew, given ``cache_implementation="static"`` (transformers' recipe for ``torch.compile``);
- :mod:`.list_append`: a list the compiled code appends to (a loss logged every call; a module's
  own history), guarded on its length, appended to by a helper under ``torch.compiler.disable``.
"""

from __future__ import annotations

from ....model.receipt import Receipt
from ...source_file import read_source
from ..draft import Draft
from .always_pass import AlwaysPass
from .base import Edit, Rewrite, draft
from .guard_logging import GuardLogging
from .list_append import ListAppend
from .skipped_frame import SkippedFrame
from .static_cache import StaticCache
from .syntax import Source
from .tensor_attr import TensorAttr
from .tensor_cond import TensorCond
from .tensor_scalar import TensorScalar
from .tensor_where import TensorWhere

REWRITES: tuple[Rewrite, ...] = (
    GuardLogging(), TensorWhere(), TensorCond(), AlwaysPass(), TensorScalar(), TensorAttr(),
    SkippedFrame(), StaticCache(), ListAppend(),
)
"""Every rewrite, in the order their candidates are listed."""

__all__ = ["REWRITES", "Edit", "Rewrite", "draft", "rewrites"]


def rewrites(receipt: Receipt, script: str) -> list[Draft]:
    """The code-change drafts the baseline's evidence supports in the script (none for a
    workload's ``FILE.py:FUNC``, nor for a script that cannot be read or parsed)."""
    if ".py:" in script:
        return []
    try:
        source = Source(read_source(script).text)  # normal form: decoded, no BOM, "\n" line endings
    except (SyntaxError, ValueError):  # SourceUnusable too
        return []
    return [draft(e) for r in REWRITES for e in r.find(receipt, script, source)]
