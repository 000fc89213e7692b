"""seamscope: what torch.compile really did to your program, and what it cost.

The core (model, receipts, import, analyses, reports) works without torch; capture imports torch
only when used.
"""

from __future__ import annotations

import sys
from typing import Any

from ._version import __version__

__all__ = ["__version__", "observe", "session", "watch", "load_receipt"]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext seamscope``: the ``%%seamscope`` cell magic (see ``seamscope.magics``)."""
    from .magics import load_ipython_extension as load

    load(shell)
    _show_in_notebooks(shell)


def _show_in_notebooks(shell: Any = None) -> None:
    """In a running IPython shell, receipts and ledgers display as the report's overview
    (``render.notebook``); outside one, nothing is imported."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    from .render.notebook import register

    register(shell)


def __getattr__(name: str) -> Any:
    # Lazy: ``import seamscope`` must not import torch.
    if name in ("observe", "session"):
        from .capture import session as _s

        return getattr(_s, name)
    if name == "watch":
        from .capture.watch import watch

        return watch
    if name == "Workload":
        from .experiments.workload import Workload

        return Workload
    if name == "budget":
        from .gates.budget import budget

        return budget
    if name == "load_receipt":
        from .ingest.receipt import load_receipt

        return load_receipt
    raise AttributeError(f"module 'seamscope' has no attribute {name!r}")


_show_in_notebooks()
