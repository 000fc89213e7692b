"""Reusable click options: the decision record's user fields (``run``, ``probe``, ``diff``) and the
remedy flags (``run``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..experiments.remedy_spec import FLAGS
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


def remedy_options(f: F) -> F:
    """The remedy flags as click options (``run``; ``try --candidate`` parses the same words with
    ``remedy_spec.spec_from_words``), from their one description, ``remedy_spec.FLAGS``."""
    for flag in reversed(FLAGS):
        if flag.kind == "flag":
            f = click.option(flag.opt, flag.dest, is_flag=True, help=flag.help, hidden=flag.hidden)(f)
        else:
            f = click.option(flag.opt, flag.dest, multiple=flag.multiple, type=int if flag.kind == "int" else None,
                             default=() if flag.multiple else None, metavar=flag.metavar, help=flag.help,
                             hidden=flag.hidden)(f)
    return f
