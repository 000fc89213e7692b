"""The decision record's user fields as click options, and call families from the ledger."""

from __future__ import annotations

import click
from click.testing import CliRunner

from seamscope.commands.options import decision_from_options, decision_options
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.receipt import DOES_NOT_ESTABLISH, Decision


def test_decision_options_become_a_decision() -> None:
    seen: list[Decision] = []

    @click.command()
    @decision_options
    def cmd(note: str | None, intervention: str | None, rollback_trigger: str | None) -> None:
        seen.append(decision_from_options(note, intervention, rollback_trigger))

    res = CliRunner().invoke(cmd, ["--note", "n", "--intervention", "torch._check(n > 0)",
                                   "--rollback-trigger", "steady p90 +5%"])
    assert res.exit_code == 0, res.output
    d = seen[0]
    assert (d.note, d.intervention, d.rollback_trigger) == ("n", "torch._check(n > 0)", "steady p90 +5%")
    assert d.does_not_establish == DOES_NOT_ESTABLISH
    CliRunner().invoke(cmd, [])
    assert seen[1] == Decision()


def test_call_families_counted_from_the_ledger() -> None:
    calls = [FakeCall([FakeStep("region", 5)], family=f) for f in ("warm", "warm", "changed", None)]
    calls[0].steps.insert(0, FakeStep("compile", 9))
    led = play(FakeProgram(calls=calls)).build()
    d = decision_from_options(ledger=led, tolerance="rtol=1e-5")
    assert d.call_families == {"changed": 1, "warm": 2}
    assert d.tolerance == "rtol=1e-5"
