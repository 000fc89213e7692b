"""The probe, shapes and trials tables, the ``%%seamscope`` summary, ``--json`` and the report's size.

GIVEN hostile strings (rich markup, ``ESC[2J``, an OSC 0 title, an OSC 8 hyperlink, C1 and bidi
controls) in a probe's, a shape study's or a trial's names and reasons, WHEN their terminal table
is printed, THEN only visible text comes out and rich never raises. GIVEN such strings in a
receipt, WHEN ``diff --json`` or ``verify --json`` prints it, THEN C1 and bidi controls are
``\\uXXXX`` escapes and the JSON reads back to the same values. GIVEN hundreds of recompiles, each
naming every earlier cache entry's failed guard, THEN ``index.html`` stays small.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import msgspec
import pytest
from fakes import fake_ledger, fake_probe, plant, shape_policy, shape_study
from hostile import HOSTILE, RAW_CONTROLS, assert_inert, churn_ledger, cli, hostile_receipt, hostile_trials, printed

from seamscope.analyze.receipt import make_receipt
from seamscope.model.probe import (
    DiffReport,
    EvidenceRow,
    Ladder,
    LayerResult,
    LeafDiff,
    PhasePair,
    Samples,
)
from seamscope.model.shapes import ShapeCompile
from seamscope.render.html import write_html_report


def hostile_probe():  # type: ignore[no-untyped-def]
    h = HOSTILE
    leaf = LeafDiff(path="out" + h, klass="above_tolerance", reason="r" + h, max_abs=1.0)
    samples = Samples(configuration="c" + h, phase="warm", samples_ns=[1, 2], min_ns=1, median_ns=2, p90_ns=2)
    return msgspec.structs.replace(
        fake_probe(),
        answer="a" + h,
        evidence=[EvidenceRow(configuration="e" + h, first_call_ns=5, steady_median_ns=3, recompiles=0,
                              compiles=0, peak_mib=None, peak_source="none")],
        pairs=[PhasePair(phase="warm", baseline=samples, candidate=samples, median_ratio=1.0)],
        differential=[DiffReport(configuration="c" + h, family="fam" + h, index=0, signature="sig" + h,
                                 klass="above_tolerance", leaves=[leaf], worst=leaf)],
        ladder=Ladder(layers=[LayerResult(backend="pkg.mod:fn" + h, verdict="suspect", compiled=True, ran=True,
                                               matches=False, exception_type="E" + h, message="m" + h)],
                           first_failing=None, answer="ladder" + h),
        warnings=["w" + h],
    )


def test_the_probe_table_prints_hostile_strings_as_text() -> None:
    from seamscope.render.probe_table import ProbeTableRenderer

    out = printed(lambda c: ProbeTableRenderer(c).print(hostile_probe()))
    assert_inert(out)
    assert "[/][bold]x[/bold]" in out and "\\x1b[2J" in out and "\\u202eevil" in out, out


def hostile_study():  # type: ignore[no-untyped-def]
    h = HOSTILE
    comp = ShapeCompile(compile_id="0/1", frame_name="f" + h, status="failed", call_index=1, length=3,
                        duration_ns=1, failed_guards=["g" + h], fail_reason="fb" + h)
    pol = msgspec.structs.replace(shape_policy("auto" + h, "auto"), error="err" + h, compilations=[comp])
    study = shape_study(pol, text="rec" + h)
    rec = msgspec.structs.replace(study.recommendation, excluded=["ex" + h])
    return msgspec.structs.replace(study, recommendation=rec, error="study" + h)


def test_the_shapes_table_prints_hostile_strings_as_text() -> None:
    from seamscope.commands.shapes import print_study

    out = printed(lambda c: print_study(hostile_study(), c))
    assert_inert(out)
    for want in ("auto[/][bold]x[/bold]", "err[/]", "g[/]", "fb[/]", "rec[/]", "ex[/]", "study[/]"):
        assert want in out, (want, out)


def test_the_trials_table_prints_hostile_strings_as_text() -> None:
    from seamscope.render.trials_table import TrialsTerminalRenderer

    out = printed(lambda c: TrialsTerminalRenderer(c).print(hostile_trials()))
    assert_inert(out)
    for want in ("cso[/][bold]x[/bold]", "change[/]", "cmd[/]", "broke[/]", "use[/]", "if[/]", "fold[/]", "s[/]"):
        assert want in out, (want, out)
    from seamscope.render.trials_table import TrialsMarkdownRenderer

    md = TrialsMarkdownRenderer().render(hostile_trials())
    assert_inert(md)
    assert "\\x1b[2J" in md


def test_a_long_decision_is_printed_whole() -> None:
    """The decision's last sentences (the choice for a long process, what one repetition means)
    come after 1,200 characters of evidence on a real model: the terminal keeps them."""
    from seamscope.render.trials_table import TrialsTerminalRenderer

    t = hostile_trials()
    long = "evidence " * 200 + "one repetition is a sketch: confirm with --repeat 3 before applying"
    out = printed(lambda c: TrialsTerminalRenderer(c).print(msgspec.structs.replace(t, decision=long)))
    assert "confirm with --repeat 3 before applying" in out and "chars)" not in out.split("decision:")[1]


def test_the_cell_magic_summary_prints_hostile_strings_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("IPython")
    from seamscope import magics

    led = plant(fake_ledger(), HOSTILE, "m" + HOSTILE + ".py")
    led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, warnings=["warn" + HOSTILE]))
    shown: list[dict] = []
    display = types.ModuleType("IPython.display")
    display.display = lambda data, raw: shown.append(data)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    session = types.SimpleNamespace(last_receipt=make_receipt(led), cwd="/nonexistent")
    magics.show(session, [f"wrote out{HOSTILE}/receipt.json"])
    text = shown[0]["text/plain"]
    assert_inert(text)
    assert "warn[/][bold]x[/bold]" in text and "wrote out[/]" in text and "\\x1b[2J" in text, text


# --- --json: C1 and bidi controls as \uXXXX -------------------------------------------------------------


def test_json_safe_escapes_c1_and_bidi_and_reads_back_the_same() -> None:
    from seamscope.analyze.display import json_safe

    value = {"k\u202e": HOSTILE + "\x7f\x85"}
    text = json_safe(json.dumps(value, ensure_ascii=False))
    for ch in (*RAW_CONTROLS, "\x7f", "\x85"):
        assert ch not in text
    assert "\\u009b" in text and "\\u202e" in text and "é" in json_safe("é")
    assert json.loads(text) == value


def test_json_output_escapes_controls(tmp_path: Path) -> None:
    path = hostile_receipt(tmp_path)
    named = tmp_path / "r\u202e\x9b.json"  # verify names the file it read
    named.write_text(Path(path).read_text())
    for args in (["verify", str(named), "--json"], ["diff", path, path, "--json"]):
        code, out = cli(*args)
        assert code == 0, (args, out)
        assert_inert(out)
        json.loads(out)
    assert "\\u202e" in out and "\\u009b" in cli("diff", path, path, "--json")[1]


# --- the report's size with hundreds of recompiles --------------------------------------------------


def test_the_report_of_hundreds_of_recompiles_stays_small(tmp_path: Path) -> None:
    sizes = {}
    for n in (100, 250, 400):
        path = write_html_report(make_receipt(churn_ledger(n)), str(tmp_path / str(n)))
        sizes[n] = os.path.getsize(path)
    # each recompile names every earlier entry's guard: shown whole, the page grew as n² (7.4 MB at 300)
    assert sizes[400] < 1_000_000, sizes
    assert sizes[400] - sizes[250] < sizes[250] - sizes[100], sizes  # sublinear
    html = Path(tmp_path / "400" / "index.html").read_text()
    assert "more failed guards" in html and "more recompiles not listed" in html
