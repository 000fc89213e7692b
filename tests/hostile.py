"""Hostile strings and the helpers that check they stay text: rich markup, ``ESC[2J``, an OSC 0
title, an OSC 8 hyperlink, C1 and bidi controls (``test_safety.py``, ``test_safety_tables.py``,
``test_patches.py``)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import msgspec
from fakes import fake_ledger, fake_trials, plant
from rich.console import Console

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.trials import CallGroup, Paired
from seamscope.render.receipt_json import write_receipt_files

OSC8 = "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\"
HOSTILE = f"[/][bold]x[/bold]\x1b[2J\x1b]0;TITLE\x07{OSC8}\x9b31m\u202eevil"
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e")


def cli(*args: str) -> tuple[int, str]:
    """``seamscope ARGS`` in this process: (exit code, stdout and stderr). Any exception other
    than the exit itself propagates: a traceback fails the test."""
    out = io.StringIO()
    code: int | str | None = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code
    assert isinstance(code, int), code
    return code, out.getvalue()


def assert_inert(text: str) -> None:
    for ch in RAW_CONTROLS:
        assert ch not in text, f"raw {ch!r} reached the terminal"


def hostile_receipt(tmp: Path, name: str = "r") -> str:
    led = plant(fake_ledger(), HOSTILE + "\nsecond line", "m" + HOSTILE + ".py")
    comps = [msgspec.structs.replace(c, frame_name="f" + HOSTILE) for c in led.compilations]
    sites = [msgspec.structs.replace(s, function="g" + HOSTILE) for s in led.break_sites]
    led = msgspec.structs.replace(led, compilations=comps, break_sites=sites)
    return write_receipt_files(make_receipt(led), tmp / name)


def churn_ledger(n: int):
    """One frame recompiled ``n`` times on a Python scalar; compile ``0/k`` lists all ``k`` failed
    guards before it, as Dynamo does."""
    S = FakeStep
    calls = [FakeCall([S("compile", 1_000, f"0/{k}"), S("region", 100, f"0/{k}")]) for k in range(n + 1)]
    led = play(FakeProgram(calls=calls)).build()
    guard = "0/{j}: n == {j}   # return x * n + 1  # script.py:6 in f\nUser stack trace:\n  File \"script.py\", line 6"
    comps = [msgspec.structs.replace(c, failed_guards=[guard.format(j=j) for j in range(k - 1, -1, -1)])
             for k, c in enumerate(led.compilations)]
    return msgspec.structs.replace(led, compilations=comps)


def printed(draw) -> str:  # type: ignore[no-untyped-def]
    """What ``draw`` prints on a console that keeps every character (no colour, no emoji)."""
    buf = io.StringIO()
    draw(Console(file=buf, width=400, color_system=None, highlight=False, emoji=False))
    return buf.getvalue()


def hostile_trials():  # type: ignore[no-untyped-def]
    h = HOSTILE
    t = fake_trials()
    cand = msgspec.structs.replace(
        t.candidates[0], name="cso" + h, code_change="change" + h, command="cmd" + h, broke=["broke" + h],
        adds=["adds" + h], reached=["reached" + h], paired=Paired(calls=1, ratio_median=0.5, candidate_ns=1.0,
                                         unpaired=[CallGroup(first=1, last=2, baseline_phase="w" + h, phase="p" + h)]))
    return msgspec.structs.replace(t, script="s" + h + ".py", candidates=[cand], chosen=cand.name,
                                   decision="use" + h, rollback_trigger="if" + h, folded=["fold" + h])
