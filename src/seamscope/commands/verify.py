"""``seamscope verify RECEIPT``: recompute a receipt from its raw events; exit 1 on any failure."""

from __future__ import annotations

import json

import click

from ..analyze.display import json_safe
from ..analyze.verify import CODES, load_raw, verify
from ._common import say


@click.command()
@click.argument("receipt", type=click.Path(), required=False)
@click.option("--against", "baseline", type=click.Path(), default=None,
              help="The baseline receipt RECEIPT's comparison was made from.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--codes", is_flag=True, help="List the failure codes and exit.")
def command(receipt: str | None, baseline: str | None, as_json: bool, codes: bool) -> int:
    """Recompute every total, phase figure, count and hash of RECEIPT from its raw calls.

    Exit 0 when everything agrees, 1 on any disagreement (each named by a code), 2 when RECEIPT
    is not a readable receipt."""
    if codes:
        for code, meaning in CODES.items():
            click.echo(f"{code:30} {meaning}")
        return 0
    if receipt is None:
        raise click.UsageError("missing RECEIPT")
    raw = load_raw(receipt)
    base = load_raw(baseline) if baseline is not None else None
    v = verify(raw, base)
    if as_json:
        click.echo(json_safe(json.dumps(v.to_json(), indent=1, ensure_ascii=False)))
    else:
        for line in v.lines():
            say(line)
        for n in v.notes:
            say(f"note: {n}")
        status = _status_line(raw)
        if status:
            say(f"note: run {status}")
        if v.ok:
            say(f"ok: {v.checks} checks agree ({receipt})")
        else:
            say(f"FAILED: {len(v.failures)} codes over {v.checks} checks ({receipt})")
    return 0 if v.ok else 1


def _status_line(raw: object) -> str:
    """How the run ended, as the receipt records it ("" when it records none, or unreadably)."""
    import msgspec

    from ..model.ledger import RunStatus, status_note, status_text

    run = raw.get("ledger", {}).get("run", {}) if isinstance(raw, dict) else {}
    st = run.get("status") if isinstance(run, dict) else None
    if st is None:
        return ""
    try:
        status = msgspec.convert(st, RunStatus)
    except (msgspec.ValidationError, TypeError):
        return ""
    note = status_note(status)
    return f"{status_text(status)}" + (f": {note}" if note else "")
