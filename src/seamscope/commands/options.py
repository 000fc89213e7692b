"""The decision record's user fields, as reusable click options (``run``, ``probe``, ``diff``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..model.ledger import Ledger
from ..model.receipt import Decision

F = TypeVar("F", bound=Callable[..., Any])


def decision_options(f: F) -> F:
    """Adds ``--note``, ``--intervention`` and ``--rollback-trigger`` (all optional)."""
    f = click.option(
        "--rollback-trigger",
        "rollback_trigger",
        default=None,
        metavar="TEXT",
        help="When to undo the change (e.g. 'steady p90 regresses > 5% or any recompile in steady').",
    )(f)
    f = click.option(
        "--intervention",
        default=None,
        metavar="TEXT",
        help="The change this receipt records (e.g. 'torch._check on seq_len; dynamic=True').",
    )(f)
    f = click.option("--note", default=None, metavar="TEXT", help="A free note kept in the receipt.")(f)
    return f


def decision_from_options(
    note: str | None = None,
    intervention: str | None = None,
    rollback_trigger: str | None = None,
    *,
    ledger: Ledger | None = None,
    tolerance: str | None = None,
) -> Decision:
    """A :class:`Decision`; with a ledger whose detail was all kept, its calls per family too."""
    families: dict[str, int] = {}
    if ledger is not None and ledger.retention.dropped == 0:
        counts = Counter(c.family for c in ledger.calls if c.family is not None)
        families = dict(sorted(counts.items()))
    return Decision(
        note=note or None,
        intervention=intervention or None,
        rollback_trigger=rollback_trigger or None,
        call_families=families,
        tolerance=tolerance,
    )
