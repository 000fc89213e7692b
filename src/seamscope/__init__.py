"""seamscope: what torch.compile really did to your program, and what it cost.

The core (model, receipts, import, analyses, reports) works without torch; capture imports torch
only when used.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__", "observe", "session", "load_receipt"]


def load_ipython_extension(shell: Any) -> None:
    """``%load_ext seamscope``: the ``%%seamscope`` cell magic (see ``seamscope.magics``)."""
    from .magics import load_ipython_extension as load

    load(shell)


def __getattr__(name: str) -> Any:
    # Lazy: ``import seamscope`` must not import torch.
    if name in ("observe", "session"):
        from .capture import session as _s

        return getattr(_s, name)
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
