"""``seamscope check RECEIPT [--baseline B] [--max-*]``: a compile budget gate for CI.

Exit 0 within budget, 1 over it, 2 when the question cannot be answered (bad file, another
schema version, a baseline of another workload, timings that cannot be compared).
"""

from __future__ import annotations

import click

from ..errors import AnswerIsNo, UnusableInput
from ..gates.check import Limits, check
from ..gates.trusted import load_trusted_receipt
from ..model.ledger import status_note, status_text
from ._common import say


def parse_cause_limits(items: tuple[str, ...]) -> dict[str, int]:
    """``("RC1a2b3c4d=0", ...)`` → ``{"RC1a2b3c4d": 0}``; one clear line for anything else."""
    out: dict[str, int] = {}
    for item in items:
        cid, sep, n = item.partition("=")
        if not sep or not n.strip().isdigit():
            raise UnusableInput(f"--max-cause-recompiles {item}: expected CAUSE=N (RC1a2b3c4d=0)")
        out[cid.strip()] = int(n)
    return out


def _has_status(r: object, path: str, allow_incomplete: bool, what: str = "") -> None:
    """A live run's receipt records how its run ended; one without (written by a run that ended
    before it could say, or edited) cannot be told from a complete one: refused (exit 2) unless
    ``--allow-incomplete``. Imported logs, probes and fakes record none, and need none."""
    run = r.ledger.run  # type: ignore[attr-defined]
    if run.source == "live" and status_text(run.status) is None and not allow_incomplete:
        raise UnusableInput(
            f"{what}{path}: the receipt of a live run records no run status (ledger.run.status), so "
            "whether its run completed is unknown; rerun it (--allow-incomplete accepts it)")


@click.command()
@click.argument("receipt", type=click.Path())
@click.option("--baseline", type=click.Path(), default=None,
              help="A committed receipt to compare with: fail on new break sites, more recompiles "
                   "or fallbacks.")
@click.option("--max-breaks", type=click.IntRange(min=0), default=None,
              help="At most N distinct break sites.")
@click.option("--max-recompiles", type=click.IntRange(min=0), default=None,
              help="At most N recompiles (compile ids x/y with y > 0).")
@click.option("--max-fallbacks", type=click.IntRange(min=0), default=None,
              help="At most N frame compilations that ended in eager execution.")
@click.option("--max-steady-regression", "max_steady", type=click.FloatRange(min=0), default=None,
              metavar="PCT",
              help="With --baseline: the steady median may be at most PCT percent slower (the two "
                   "receipts must have measured the same number of calls).")
@click.option("--max-compile-regression", "max_compile", type=click.FloatRange(min=0), default=None,
              metavar="PCT",
              help="With --baseline: the compile time may be at most PCT percent above the baseline's "
                   "(one run's compile time varies by tens of percent: give a wide limit).")
@click.option("--max-cause-recompiles", "cause_limits", multiple=True, metavar="CAUSE=N",
              help="At most N recompiles set off by one recompile cause (its RC… id in the findings); "
                   "repeatable. With --baseline, a cause the baseline lacks fails anyway.")
@click.option("--allow-incomplete", is_flag=True,
              help="Accept a receipt of a run that did not complete (raised, exited non-zero, "
                   "interrupted, terminated, or an incomplete checkpoint); by default it fails.")
def command(receipt: str, baseline: str | None, max_breaks: int | None, max_recompiles: int | None,
            max_fallbacks: int | None, max_steady: float | None, cause_limits: tuple[str, ...],
            allow_incomplete: bool = False, max_compile: float | None = None) -> int:
    """Check RECEIPT (a receipt.json or its folder) against limits and/or a baseline receipt."""
    limits = Limits(max_breaks=max_breaks, max_recompiles=max_recompiles,
                    max_fallbacks=max_fallbacks, max_steady_regression=max_steady,
                    max_compile_regression=max_compile,
                    cause_recompiles=parse_cause_limits(cause_limits))
    r = load_trusted_receipt(receipt)
    _has_status(r, receipt, allow_incomplete)
    b = None
    if baseline is not None:
        try:
            b = load_trusted_receipt(baseline)
        except UnusableInput as e:
            raise UnusableInput(f"baseline: {e}") from None
        _has_status(b, baseline, allow_incomplete, "baseline ")
        base_unfinished = status_note(b.ledger.run.status)
        if base_unfinished and not allow_incomplete:
            raise UnusableInput(
                f"baseline {baseline}: its run did not complete ({status_text(b.ledger.run.status)}): "
                f"{base_unfinished}; record the baseline from a completed run (--allow-incomplete compares "
                "with it anyway)")
    rep = check(r, limits, b)
    status = status_text(r.ledger.run.status)
    if status is not None:
        say(f"run: {status}")
    elif r.ledger.run.source == "live":
        say("run: how it ended is not recorded (accepted: --allow-incomplete)")
    if b is not None and status_note(b.ledger.run.status):
        say(f"warning: the baseline's run did not complete ({status_text(b.ledger.run.status)}): its figures "
            "cover part of its run only (accepted: --allow-incomplete)")
    elif b is not None and b.ledger.run.source == "live" and status_text(b.ledger.run.status) is None:
        say("warning: the baseline does not record how its run ended (accepted: --allow-incomplete)")
    unfinished = status_note(r.ledger.run.status)
    problems = list(rep.problems)
    if unfinished and not allow_incomplete:
        problems.insert(0, f"the run did not complete ({status}): {unfinished} (--allow-incomplete accepts it)")
    for line in rep.lines:
        say(line)
    if not problems:
        click.echo("within budget")
        return 0
    click.echo("over budget:" if rep.problems else "not accepted:")
    for p in problems:
        say(f"  - {p}")
    raise AnswerIsNo(f"{'over budget' if rep.problems else 'not accepted'}: {'; '.join(problems)}")
