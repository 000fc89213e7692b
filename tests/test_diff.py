"""``seamscope diff``: deltas with sample counts, sites/recompiles matched by stable id, verdicts,
refusals of unequal work, terminal and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from fakes import TRACE, baseline_program, build, candidate_program

from seamscope.analyze.diff import attach_comparison, break_even, compare, recompile_key
from seamscope.analyze.inputs import InputTrace, inputs_sha256, script_sha256
from seamscope.analyze.receipt import rehash
from seamscope.cli import cli
from seamscope.errors import UnusableInput
from seamscope.model.diff import TimingVerdict
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep
from seamscope.model.receipt import Receipt
from seamscope.render.receipt_json import write_receipt_files


def _with_trace(r: Receipt, trace: str | None) -> Receipt:
    led = r.ledger
    led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, input_trace_sha256=trace))
    return rehash(msgspec.structs.replace(r, ledger=led))


def test_phase_deltas_and_verdict() -> None:
    before, after = build(baseline_program()), build(candidate_program())
    cmp = compare(before, after)
    rows = {r.phase: r for r in cmp.phases}
    assert (rows["cold"].before.calls, rows["cold"].after.calls) == (3, 1)
    assert (rows["steady"].before.calls, rows["steady"].after.calls) == (17, 19)
    sb, sa = rows["steady"].before, rows["steady"].after
    assert rows["steady"].median_pct == pytest.approx((sa.median_ns - sb.median_ns) * 100 / sb.median_ns)
    assert cmp.total_before_ns == sum(c.wall_ns for c in before.ledger.calls)
    assert cmp.cold_extra_ns == rows["cold"].after.wall_ns - rows["cold"].before.wall_ns > 0
    assert cmp.steady_saving_ns == sb.median_ns - sa.median_ns > 0
    n = cmp.break_even_calls
    # One run a side: the figures, no verdict and no break-even drawn from them.
    assert cmp.verdict[0].startswith("steady −") and "one run each: not a verdict" in cmp.verdict[0]
    assert n is None and (cmp.runs_before, cmp.runs_after) == (1, 1)
    assert [t.verdict for t in cmp.timing] == ["one run each: not a verdict"] * 3
    assert [(s.change, s.site_id) for s in cmp.sites] == [("removed", before.ledger.break_sites[0].site_id)]
    assert [(r.count_before, r.count_after) for r in cmp.recompiles] == [(2, 0)]
    assert not cmp.forced


def test_break_even_cases() -> None:
    assert break_even(100, 10) == 10
    assert break_even(101, 10) == 11
    assert break_even(-100, -30) == 4  # cheaper cold, slower steady: advantage lasts 4 calls
    assert break_even(100, -10) is None and break_even(-100, 10) is None
    assert break_even(0, 10) is None and break_even(100, 0) is None
    # Any extra cold cost at all takes at least one call to repay; a 1 ns saving still repays.
    assert break_even(1, 10) == 1 and break_even(5, 1) == 5 and break_even(-1, -10) == 1
    # Unknown on either side: no number.
    assert break_even(None, 10) is None and break_even(10, None) is None and break_even(None, None) is None


def test_sites_and_recompiles_match_by_stable_id_across_line_shifts() -> None:
    before = build(baseline_program())
    shifted = msgspec.structs.replace(
        before.ledger,
        break_sites=[msgspec.structs.replace(s, line=s.line + 40) for s in before.ledger.break_sites],
    )
    after = msgspec.structs.replace(before, ledger=shifted)
    cmp = compare(before, after)
    assert [s.change for s in cmp.sites] == ["kept"]
    assert recompile_key("f", ["L['x'].size()[0] == 8"]) == recompile_key("f", ["L['x'].size()[0]  == 16"])
    assert recompile_key("f", ["a == 1"]) != recompile_key("g", ["a == 1"])


def test_refuses_unequal_samples_and_different_inputs_unless_forced() -> None:
    before = build(baseline_program(20))
    with pytest.raises(UnusableInput, match="unequal sample counts: 20 calls before, 30 after"):
        compare(before, build(candidate_program(30)))
    with pytest.raises(UnusableInput, match="different input traces"):
        compare(before, _with_trace(build(candidate_program(20)), "cd" * 32))
    forced = compare(before, build(candidate_program(30)), force=True)
    assert forced.forced and "unequal sample counts" in forced.forced_over[0]
    # No trace on one side: compared, with a note.
    cmp = compare(before, _with_trace(build(candidate_program(20)), None))
    assert any("input trace" in n for n in cmp.notes)


def test_refuses_unequal_calls_per_family() -> None:
    before = build(baseline_program(20))
    prog = candidate_program(20)
    prog.calls[15].family = "warm"
    with pytest.raises(UnusableInput, match="per input family"):
        compare(before, build(prog))


def test_attached_comparison_is_hashed_and_points_at_both_receipts() -> None:
    before, after = build(baseline_program()), build(candidate_program())
    r = attach_comparison(before, after)
    assert r.comparison is not None
    assert r.comparison.before_receipt_sha256 == before.receipt_sha256
    assert r.comparison.after_receipt_sha256 == after.receipt_sha256
    assert r.receipt_sha256 != after.receipt_sha256
    # Comparing again from a receipt that already carries a comparison gives the same section.
    assert attach_comparison(before, r).comparison == r.comparison


# --- the command --------------------------------------------------------------------------------


def _files(tmp: Path, after_calls: int = 20, trace: str = TRACE) -> tuple[str, str]:
    b = write_receipt_files(build(baseline_program()), tmp / "before")
    a = write_receipt_files(_with_trace(build(candidate_program(after_calls)), trace), tmp / "after")
    return b, a


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("seamscope")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def test_cli_diff_terminal_json_and_out(tmp_path: Path) -> None:
    from click.testing import CliRunner

    b, a = _files(tmp_path)
    res = CliRunner().invoke(cli, ["diff", b, a], terminal_width=120)
    assert res.exit_code == 0, res.output
    assert "17 → 19" in res.output and "one run each: not a verdict" in res.output
    res = CliRunner().invoke(cli, ["diff", b, a, "--json"])
    data = json.loads(res.output)
    assert {r["phase"] for r in data["phases"]} == {"cold", "steady"}
    out = tmp_path / "kept"
    res = CliRunner().invoke(cli, ["diff", b, a, "--out", str(out)])
    assert res.exit_code == 0, res.output
    ver = _run("verify", str(out / "receipt.json"), "--against", b)
    assert ver.returncode == 0, ver.stdout + ver.stderr


def test_cli_diff_refusals_exit_2_with_one_line(tmp_path: Path) -> None:
    b, a = _files(tmp_path, after_calls=30)
    r = _run("diff", b, a)
    assert r.returncode == 2 and "unequal sample counts" in r.stderr and "--force" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert _run("diff", b, a, "--force").returncode == 0
    b2, a2 = _files(tmp_path / "t", trace="cd" * 32)
    r = _run("diff", b2, a2)
    assert r.returncode == 2 and "different input traces" in r.stderr
    raw = json.loads(Path(b).read_text())
    raw["schema_version"] = 99
    old = tmp_path / "v99.json"
    old.write_text(json.dumps(raw))
    r = _run("diff", str(old), a)
    assert r.returncode == 2 and "schema version" in r.stderr and "Traceback" not in r.stderr
    r = _run("diff", str(tmp_path / "nope.json"), a)
    assert r.returncode == 2 and "no such file" in r.stderr


# --- input trace hashes -------------------------------------------------------------------------


class _T:
    """A duck-typed tensor (no torch): shape and dtype only."""

    def __init__(self, shape: tuple[int, ...], dtype: str = "float32") -> None:
        self.shape, self.dtype = shape, dtype


def test_input_digests_without_torch(tmp_path: Path) -> None:
    assert inputs_sha256((_T((2, 8)),)) != inputs_sha256((_T((2, 9)),))
    assert inputs_sha256((_T((2, 8)),)) != inputs_sha256((_T((2, 8), "bfloat16"),))
    assert inputs_sha256({"k": 3, "x": [_T((1,))]}) != inputs_sha256({"k": 4, "x": [_T((1,))]})
    t1, t2 = InputTrace(), InputTrace()
    for t in (t1, t2):
        t.add((_T((2,)),), family="warm")
    assert t1.hexdigest() == t2.hexdigest()
    t2.add((_T((2,)),))
    assert t1.hexdigest() != t2.hexdigest()
    s = tmp_path / "s.py"
    s.write_text("print(1)\n")
    h = script_sha256(s, ["--n", "3"])
    assert h != script_sha256(s, ["--n", "4"])
    s.write_text("print(2)\n")
    assert h != script_sha256(s, ["--n", "3"])
    # ``run -m NAME`` hashes the module's name, even where a file of that name exists
    assert script_sha256(s, [], module=True) == script_sha256(str(s), [], module=True) != script_sha256(s, [])


def test_inputs_module_does_not_import_torch() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import seamscope.analyze.inputs as i, sys; "
         "i.inputs_sha256([1, 2.0, 'x']); print('torch' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out.strip() == "False"


@pytest.mark.torch
def test_tensor_values_are_hashed_when_torch_is_present() -> None:
    torch = pytest.importorskip("torch")
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert inputs_sha256((a,)) == inputs_sha256((a.clone(),))
    assert inputs_sha256((a,)) != inputs_sha256((a + 1,))
    b16 = a.to(torch.bfloat16)
    assert inputs_sha256((b16,)) != inputs_sha256((b16 + 1,))


# --- exact wording and arithmetic of every verdict and refusal ------------------------------------


def _row(phase: str, b_wall: int, a_wall: int, b_med: int | None, a_med: int | None, n: int = 2):
    from seamscope.analyze.units import percent_change as _pct
    from seamscope.model.diff import PhaseDelta, PhaseSide

    def side(w: int, m: int | None) -> PhaseSide:
        return PhaseSide(calls=n, sampled_calls=n, wall_ns=w, mean_ns=w // n if n else None, median_ns=m, p90_ns=m,
                         island_ns=0, compile_ns=0)

    return PhaseDelta(phase=phase, before=side(b_wall, b_med), after=side(a_wall, a_med),
                      median_pct=_pct(b_med, a_med), p90_pct=_pct(b_med, a_med), mean_pct=None)


@pytest.mark.parametrize(
    "cold, steady, extra, saving, n, line",
    [
        (
            (100, 195),
            (100, 88),
            95,
            12,
            8,
            "steady −12% (median), cold +95% (total): worth it for workers that live longer than 8 calls",
        ),
        ((100, 90), (100, 88), -10, 12, None,
         "steady −12% (median), cold −10% (total): better from the first call"),
        (
            (100, 50),
            (100, 103),
            -50,
            -3,
            17,
            "steady +3% (median), cold −50% (total): worth it only for workers that live fewer than 17 calls",
        ),
        (
            (100, 50),
            (100, 100),
            -50,
            0,
            None,
            "steady ±0% (median), cold −50% (total): cheaper warmup, same steady cost",
        ),
        ((100, 100), (100, 100), 0, 0, None, "steady ±0% (median), cold ±0% (total): no measured difference"),
        (
            (100, 150),
            (100, 103),
            50,
            -3,
            None,
            "steady +3% (median), cold +50% (total): not worth it (no cheaper in steady calls nor in warmup)",
        ),
        (
            (100, 100),
            (100, 103),
            0,
            -3,
            None,
            "steady +3% (median), cold ±0% (total): not worth it (no cheaper in steady calls nor in warmup)",
        ),
        # 1 ns margins: the smallest saving or extra cost still counts.
        ((100, 95), (100, 99), -5, 1, None, "steady −1% (median), cold −5% (total): better from the first call"),
        ((100, 100), (100, 88), 0, 12, None, "steady −12% (median), cold ±0% (total): better from the first call"),
        (
            (100, 101),
            (100, 88),
            1,
            12,
            1,
            "steady −12% (median), cold +1% (total): worth it for workers that live longer than 1 call",
        ),
        (
            (100, 105),
            (100, 99),
            5,
            1,
            5,
            "steady −1% (median), cold +5% (total): worth it for workers that live longer than 5 calls",
        ),
    ],
)
def test_verdict_wording(cold: tuple[int, int], steady: tuple[int, int], extra: int, saving: int,
                         n: int | None, line: str) -> None:
    from seamscope.analyze.diff import _verdict

    rows = {"cold": _row("cold", *cold, cold[0], cold[1]), "steady": _row("steady", 1, 1, *steady)}
    assert break_even(extra, saving) == n
    decided = [TimingVerdict(figure="steady median", verdict="faster" if saving >= 0 else "slower", ratio=0.9,
                             low=0.8, high=0.95, runs_before=3, runs_after=3)]
    assert _verdict(rows, extra, saving, n, decided, one_each=False)[-1] == line
    # the runs not deciding the steady calls: no worth-it sentence, no break-even
    noisy = [msgspec.structs.replace(decided[0], verdict="noisy")]
    assert _verdict(rows, extra, saving, n, noisy, one_each=False)[-1] == (
        line.split(":")[0] + ": the runs do not decide the steady calls, so no break-even")
    assert _verdict(rows, extra, saving, n, decided, one_each=True) == [
        line.split(":")[0] + ": one run each: not a verdict (give several runs a side: diff A1 A2 A3 -- B1 B2 B3)"]


def test_verdict_without_steady_calls_or_saving() -> None:
    from seamscope.analyze.diff import _verdict, worth_it

    msg = ["no steady calls on one side or both: the per-call cost cannot be compared"]
    assert _verdict({}, 0, None, None, [], one_each=False) == msg
    assert _verdict({"steady": _row("steady", 1, 1, 5, 5, n=0)}, 0, None, None, [], one_each=True) == msg
    # A known cold extra but no steady saving (a median missing): the head line only, no advice.
    assert worth_it("head", 100, None, None) == "head" and worth_it("head", None, 10, None) == "head"


def test_verdict_with_steady_calls_on_one_side_only_or_one_call_each() -> None:
    from seamscope.analyze.diff import _verdict

    steady = _row("steady", 1, 1, 100, 88)
    lonely_before = msgspec.structs.replace(steady, after=_row("steady", 0, 0, None, None, n=0).after)
    lonely_after = msgspec.structs.replace(steady, before=_row("steady", 0, 0, None, None, n=0).before)
    msg = ["no steady calls on one side or both: the per-call cost cannot be compared"]
    assert _verdict({"steady": lonely_before}, 0, None, None, [], one_each=True) == msg
    assert _verdict({"steady": lonely_after}, 0, None, None, [], one_each=True) == msg
    # One steady call on each side is enough to compare.
    rows = {"cold": _row("cold", 100, 195, 100, 195, n=1), "steady": _row("steady", 1, 1, 100, 88, n=1)}
    decided = [TimingVerdict(figure="steady median", verdict="faster", ratio=0.88, low=0.8, high=0.9,
                             runs_before=2, runs_after=2)]
    assert _verdict(rows, 95, 12, 8, decided, one_each=False)[-1] == (
        "steady −12% (median), cold +95% (total): worth it for workers that live longer than 8 calls")


def test_pct_and_mean_arithmetic() -> None:
    from seamscope.analyze.diff import _mean, _side
    from seamscope.analyze.units import fmt_change
    from seamscope.analyze.units import percent_change as _pct

    def _fmt_pct(x: float | None) -> str:
        return fmt_change(x, 0, "n/a")

    assert _pct(200, 150) == -25.0 and _pct(0, 5) is None and _pct(None, 5) is None and _pct(5, None) is None
    assert (_fmt_pct(12.4), _fmt_pct(-12.6), _fmt_pct(0.0), _fmt_pct(None)) == ("+12%", "−13%", "±0%", "n/a")
    assert (_fmt_pct(1.0), _fmt_pct(0.6), _fmt_pct(-1.0), _fmt_pct(-0.6)) == ("+1%", "+1%", "−1%", "−1%")
    assert (_mean(10, 4), _mean(9, 4), _mean(11, 4), _mean(5, 0)) == (3, 2, 3, None)
    empty = _side(None, 0)
    assert (empty.calls, empty.sampled_calls, empty.wall_ns, empty.mean_ns, empty.median_ns, empty.p90_ns,
            empty.island_ns, empty.compile_ns) == (0, 0, 0, None, None, None, 0, 0)


def test_side_copies_every_figure() -> None:
    from seamscope.analyze.diff import _side

    r = build(baseline_program())
    p = r.summary.phases[1]
    s = _side(p, p.calls)
    assert (s.calls, s.sampled_calls, s.wall_ns, s.median_ns, s.p90_ns, s.island_ns, s.compile_ns) == (
        p.calls, p.sampled_calls, p.wall_ns, p.median_ns, p.p90_ns, p.island_ns, p.compile_ns)
    assert s.mean_ns == (2 * p.wall_ns + p.calls) // (2 * p.calls)


def test_refusal_messages_exactly() -> None:
    from seamscope.analyze.diff import refusals

    before = build(baseline_program(20))
    assert refusals(before, build(candidate_program(20))) == []
    prog = candidate_program(30)
    assert refusals(before, build(prog)) == [
        "unequal sample counts: 20 calls before, 30 after",
        "unequal sample counts per input family (changed: 8 vs 18)",
    ]
    other = _with_trace(build(candidate_program(20)), "cd" * 32)
    assert refusals(before, other) == [
        f"different input traces ({TRACE[:12]} vs {'cd' * 6}): the two runs were not fed the same "
        "inputs (for `run`, the script or its arguments changed)"
    ]
    no_rt = msgspec.structs.replace(
        before, summary=msgspec.structs.replace(before.summary, has_runtime=False))
    assert refusals(no_rt, before) == [
        "one receipt has runtime data and the other does not (an imported log?)"]
    with pytest.raises(UnusableInput) as e:
        compare(before, build(prog))
    assert str(e.value) == (
        "will not compare: unequal sample counts: 20 calls before, 30 after; unequal sample counts "
        "per input family (changed: 8 vs 18) (--force compares anyway)")


def test_comparison_fields_in_full() -> None:
    before, after = build(baseline_program()), build(candidate_program())
    cmp = compare(before, after)
    assert (cmp.calls_before, cmp.calls_after) == (20, 20)
    assert cmp.families_before == cmp.families_after == {"changed": 8, "warm": 12}
    assert cmp.before_structure_sha256 == before.structure_sha256
    assert cmp.after_structure_sha256 == after.structure_sha256
    assert cmp.before_input_trace_sha256 == cmp.after_input_trace_sha256 == TRACE
    assert cmp.total_after_ns == sum(c.wall_ns for c in after.ledger.calls)
    assert [r.phase for r in cmp.phases] == ["cold", "steady"]
    for r in cmp.phases:
        assert r.mean_pct == pytest.approx((r.after.mean_ns - r.before.mean_ns) * 100 / r.before.mean_ns)
        assert r.p90_pct == pytest.approx((r.after.p90_ns - r.before.p90_ns) * 100 / r.before.p90_ns)
    s = cmp.sites[0]
    site = before.summary.break_sites[0]
    assert (s.file, s.line, s.function, s.gb_code, s.reason, s.crossings_before, s.crossings_after) == (
        site.file, site.line, site.function, site.gb_code, site.reason, site.crossings, None)
    rc = cmp.recompiles[0]
    assert (rc.change, rc.frame_name, rc.failed_guards, rc.key) == ("removed", "forward", [], "forward | ")
    assert cmp.verdict[1:3] == ["break sites: 1 removed, 0 added", "recompiles: 2 before, 0 after"]
    # the two recompiles (no guard recorded) are one cause, removed as one
    (cause,) = cmp.causes
    assert (cause.change, cause.recompiles_before, cause.recompiles_after) == ("removed", 2, 0)
    assert cmp.verdict[3:] == [
        f"recompile causes: 1 removed, 0 added; − {cause.cause_id} guards failed (not recorded)"]
    assert cmp.notes == [] and cmp.forced_over == [] and cmp.forced is False
    back = compare(after, before)  # the site comes back, the recompiles too
    assert [(x.change, x.crossings_before, x.crossings_after) for x in back.sites] == [
        ("added", None, site.crossings)]
    assert [(x.change, x.count_before, x.count_after) for x in back.recompiles] == [("added", 0, 2)]
    assert back.verdict[1:3] == ["break sites: 0 removed, 1 added", "recompiles: 0 before, 2 after"]
    assert [(x.change, x.cause_id) for x in back.causes] == [("added", cause.cause_id)]
    same = compare(before, before)
    assert [x.change for x in same.sites] == ["kept"] and [x.change for x in same.recompiles] == ["kept"]
    env = msgspec.structs.replace(after.ledger.environment, torch_version="2.99", backend="inductor")
    changed = compare(before, msgspec.structs.replace(after, ledger=msgspec.structs.replace(
        after.ledger, environment=env)))
    assert [(c.field, c.before, c.after) for c in changed.setting] == [
        ("torch", None, "2.99"), ("backend", None, "inductor")]
    assert changed.notes == []


def test_recompile_key_exact() -> None:
    assert recompile_key("fwd", ["  b  ==  12 ", "a < 3", "a < 4"]) == "fwd | a < N ; b == N"
    assert recompile_key("fwd", []) == "fwd | "


# --- phases present on one side only, missing phases, families, attached comparisons ----------------


def _with_fallback_from(prog: FakeProgram, index: int) -> FakeProgram:
    """The program with a fallback at call ``index``: that call and every later one run eager (no
    compiled region of the frame runs)."""
    prog.calls[index].steps.append(FakeStep("fallback", 0, "0/0"))
    for c in prog.calls[index + 1 :]:
        c.steps[:] = [FakeStep("island", s.ns) if s.kind == "region" else s for s in c.steps]
    return prog


def _warm_only(steady_ns: int, calls: int = 20) -> FakeProgram:
    """Already compiled before capture began: no cold call, only steady ones."""
    return FakeProgram(calls=[
        FakeCall([FakeStep("region", steady_ns + i % 7, "0/0"), FakeStep("overhead", 3)],
                 family="warm" if i < 12 else "changed")
        for i in range(calls)
    ])


def test_a_phase_with_calls_on_one_side_only_is_compared_against_zero() -> None:
    before = build(baseline_program())
    after = build(_with_fallback_from(candidate_program(), 10))
    cmp = compare(before, after)
    rows = {r.phase: r for r in cmp.phases}
    assert [r.phase for r in cmp.phases] == ["cold", "steady", "fallback"]
    fb = rows["fallback"]
    assert (fb.before.calls, fb.before.wall_ns, fb.before.mean_ns, fb.before.median_ns) == (0, 0, None, None)
    assert (fb.after.calls, fb.after.sampled_calls) == (10, 10)
    assert fb.after.wall_ns == sum(c.wall_ns for c in after.ledger.calls if c.phase == "fallback")
    assert fb.median_pct is None and fb.mean_pct is None and fb.p90_pct is None
    assert cmp.total_after_ns == sum(c.wall_ns for c in after.ledger.calls)
    assert (rows["steady"].before.calls, rows["steady"].after.calls) == (17, 9)
    back = compare(after, before)
    assert [(r.phase, r.before.calls, r.after.calls) for r in back.phases] == [
        ("cold", 1, 3), ("steady", 9, 17), ("fallback", 10, 0)]
    assert back.total_before_ns == sum(c.wall_ns for c in after.ledger.calls)


def test_no_steady_calls_on_one_side_gives_no_saving_and_says_so() -> None:
    before = build(baseline_program())
    after = build(_with_fallback_from(candidate_program(), 1))  # everything after the first call is eager
    for cmp, steady in ((compare(before, after), (17, 0)), (compare(after, before), (0, 17))):
        rows = {r.phase: r for r in cmp.phases}
        assert (rows["steady"].before.calls, rows["steady"].after.calls) == steady
        assert rows["steady"].median_pct is None
        assert cmp.steady_saving_ns is None and cmp.break_even_calls is None
        assert cmp.cold_extra_ns == rows["cold"].after.wall_ns - rows["cold"].before.wall_ns
        assert cmp.verdict[0] == "no steady calls on one side or both: the per-call cost cannot be compared"


def test_no_cold_calls_on_either_side() -> None:
    """Warm on both sides: no cold row, no cold extra, the steady rows still compared."""
    before, after = build(_warm_only(250)), build(_warm_only(150))
    cmp = compare(before, after)
    assert [r.phase for r in cmp.phases] == ["steady"]
    assert cmp.cold_extra_ns is None
    assert cmp.steady_saving_ns == 100 and cmp.break_even_calls is None
    assert cmp.verdict == ["steady −39% (median), cold n/a (total): one run each: not a verdict "
                           "(give several runs a side: diff A1 A2 A3 -- B1 B2 B3)"]
    assert cmp.total_before_ns == sum(c.wall_ns for c in before.ledger.calls)


def test_a_summary_that_omits_an_empty_phase_compares_as_if_it_had_zero_calls() -> None:
    """``verify`` accepts a summary without a phase that had no calls; compare treats it as zero."""
    before = build(baseline_program())
    after = build(_with_fallback_from(candidate_program(), 10))
    terse = msgspec.structs.replace(before, summary=msgspec.structs.replace(
        before.summary, phases=[p for p in before.summary.phases if p.calls]))
    assert [p.phase for p in terse.summary.phases] == ["cold", "steady"]
    full, short = compare(before, after), compare(terse, after)
    assert short.phases == full.phases and short.verdict == full.verdict
    full, short = compare(after, before), compare(after, terse)
    assert short.phases == full.phases and short.verdict == full.verdict


def _relabel(prog: FakeProgram, family: str | None, *indices: int) -> FakeProgram:
    for i in indices or range(len(prog.calls)):
        prog.calls[i].family = family
    return prog


def test_family_refusal_lists_every_family_that_differs() -> None:
    from seamscope.analyze.diff import refusals

    # A family seen once on one side only, and another seen once on the other side only.
    before = build(_relabel(baseline_program(), "odd", 3))
    after = build(_relabel(candidate_program(), "rare", 4))
    assert refusals(before, after) == ["unequal sample counts per input family (odd: 1 vs 0, rare: 0 vs 1)"]
    # Labelled on one side, unlabelled on the other.
    plain = build(_relabel(candidate_program(), None))
    assert refusals(build(baseline_program()), plain) == [
        "unequal sample counts per input family (changed: 8 vs 0, warm: 12 vs 0)"]
    assert refusals(plain, build(baseline_program())) == [
        "unequal sample counts per input family (changed: 0 vs 8, warm: 0 vs 12)"]
    assert refusals(build(_relabel(baseline_program(), None)), plain) == []


def test_sampled_detail_leaves_family_counts_unchecked_not_refused() -> None:
    """Family counts come from the calls kept in detail; when some were dropped the counts are
    unknown, which is not evidence of unequal work: no refusal, and a note says so."""
    from seamscope.analyze.diff import refusals

    full = build(baseline_program())
    sampled = build(baseline_program(), first_calls=2, call_cap=4)
    assert sampled.ledger.retention.dropped > 0
    assert refusals(full, sampled) == [] and refusals(sampled, full) == []
    cmp = compare(full, sampled)
    assert "calls per input family not checked: call detail was sampled (after)" in cmp.notes
    assert "calls per input family not checked: call detail was sampled (before)" in compare(sampled, full).notes
    assert compare(sampled, sampled).notes == [
        "calls per input family not checked: call detail was sampled (before and after)"]
    assert compare(_with_trace(full, None), full).notes == [
        "no input trace hash on one side: same inputs not confirmed"]
    assert cmp.families_after == {} and cmp.families_before == {"changed": 8, "warm": 12}


def test_attach_refuses_unequal_work_unless_forced() -> None:
    before, after = build(baseline_program(20)), build(candidate_program(30))
    with pytest.raises(UnusableInput, match="^will not compare: unequal sample counts: 20 calls before"):
        attach_comparison(before, after)
    r = attach_comparison(before, after, force=True)
    assert r.comparison is not None and r.comparison.forced is True
    assert r.comparison.forced_over == [
        "unequal sample counts: 20 calls before, 30 after",
        "unequal sample counts per input family (changed: 8 vs 18)",
    ]


def test_hash_without_comparison_is_the_bare_receipt_hash() -> None:
    from seamscope.analyze.diff import without_comparison_sha256

    before, after = build(baseline_program()), build(candidate_program())
    r = attach_comparison(before, after)
    assert without_comparison_sha256(after) == after.receipt_sha256
    assert without_comparison_sha256(r) == after.receipt_sha256 != r.receipt_sha256
    # A receipt that already carries a comparison is identified by its bare hash when compared.
    assert compare(before, r).after_receipt_sha256 == after.receipt_sha256
    assert compare(r, before).before_receipt_sha256 == after.receipt_sha256


# --- several runs a side, the setting and the totals ----------------------------------------------


def _scaled(prog: FakeProgram, k: float) -> FakeProgram:
    """The same program with every step's time scaled by ``k``: another run of it on a machine
    that was ``k`` times as slow."""
    import dataclasses

    for c in prog.calls:
        c.steps = [dataclasses.replace(s, ns=max(1, round(s.ns * k))) for s in c.steps]
    return prog


def _runs(program, factors) -> list[Receipt]:
    return [build(_scaled(program(), k)) for k in factors]


def test_several_runs_a_side_are_judged_by_the_stated_test() -> None:
    befores = _runs(baseline_program, (1.0, 1.03, 0.97))
    afters = _runs(candidate_program, (1.0, 0.98, 1.02))
    cmp = compare(befores[0], afters[0], runs=(befores, afters))
    assert (cmp.runs_before, cmp.runs_after) == (3, 3)
    steady = next(t for t in cmp.timing if t.figure == "steady median")
    assert steady.verdict == "faster" and steady.low < steady.ratio < steady.high < 1.0
    assert (steady.runs_before, steady.runs_after) == (3, 3)
    assert any(line.startswith("steady median: faster, ×0.") and "97.5% interval" in line for line in cmp.verdict)
    # the break-even from the medians over the runs, and only because the runs decide the steady calls
    n = cmp.break_even_calls
    assert n is not None and (n - 1) * cmp.steady_saving_ns < cmp.cold_extra_ns <= n * cmp.steady_saving_ns
    assert f"worth it for workers that live longer than {n} calls" in cmp.verdict[len(cmp.timing)]
    # one run a side: the same pair gives figures, no verdict
    single = compare(befores[0], afters[0])
    assert single.break_even_calls is None and "one run each: not a verdict" in single.verdict[0]


def test_runs_that_vary_too_much_give_no_break_even() -> None:
    befores = _runs(baseline_program, (1.0, 1.9, 0.6))
    afters = _runs(candidate_program, (1.0, 2.1, 0.5))
    cmp = compare(befores[0], afters[0], runs=(befores, afters))
    steady = next(t for t in cmp.timing if t.figure == "steady median")
    assert steady.verdict == "noisy"
    assert cmp.break_even_calls is None
    assert cmp.verdict[len(cmp.timing)].endswith("the runs do not decide the steady calls, so no break-even")


def _env(r: Receipt, **changes) -> Receipt:
    env = msgspec.structs.replace(r.ledger.environment, **changes)
    return rehash(msgspec.structs.replace(r, ledger=msgspec.structs.replace(r.ledger, environment=env)))


def test_the_setting_that_differs_and_the_totals_side_by_side() -> None:
    before = _env(build(baseline_program()), torch_version="2.13.0", python_version="3.11.7",
                  packages={"transformers": "5.24.0"},
                  dynamo_config={"nested_graph_breaks": "False", "recompile_limit": "8"})
    after = _env(build(candidate_program()), torch_version="2.14.1", python_version="3.11.7",
                 packages={"transformers": "5.25.0"},
                 dynamo_config={"nested_graph_breaks": "True", "cache_size_limit": "8"})
    cmp = compare(before, after)
    assert [(c.field, c.before, c.after) for c in cmp.setting] == [
        ("torch", "2.13.0", "2.14.1"), ("transformers", "5.24.0", "5.25.0"),
        ("dynamo.cache_size_limit", None, "8"), ("dynamo.nested_graph_breaks", "False", "True"),
        ("dynamo.recompile_limit", "8", None)]
    assert cmp.notes[:3] == [
        "Dynamo setting cache_size_limit does not exist before (renamed, new or removed in that torch)",
        "Dynamo setting nested_graph_breaks is False before, True after: a break inside a nested call keeps the "
        "callers' graphs (one resume per frame of the chain): break sites, graphs and compilations change with no "
        "change to the code",
        "Dynamo setting recompile_limit does not exist after (renamed, new or removed in that torch)"]
    rows = {t.name: (t.before, t.after) for t in cmp.totals}
    bs, as_ = before.summary, after.summary
    assert rows["calls"] == (20, 20)
    assert rows["compiles"] == (bs.compile_count, as_.compile_count) and rows["compiles"][0] != rows["compiles"][1]
    assert rows["recompiles"] == (2, 0) and rows["break sites"] == (1, 0)
    assert rows["graphs"] == (bs.graph_count, as_.graph_count)
    assert rows["fallbacks"] == (0, 0)
    assert rows["compile time"] == (bs.compile_ns, as_.compile_ns)
    steady = {p.phase: p for p in bs.phases}["steady"].median_ns
    assert rows["steady median"][0] == steady
    # frames whose compile time changed, largest change first
    assert cmp.frames and abs(cmp.frames[0].compile_ns_after - cmp.frames[0].compile_ns_before) == max(
        abs(f.compile_ns_after - f.compile_ns_before) for f in cmp.frames)


def test_cli_opens_with_the_setting_then_the_totals(tmp_path: Path) -> None:
    from click.testing import CliRunner

    before = _env(build(baseline_program()), torch_version="2.13.0")
    after = _env(build(candidate_program()), torch_version="2.14.1")
    b = write_receipt_files(before, tmp_path / "b")
    a = write_receipt_files(after, tmp_path / "a")
    res = CliRunner().invoke(cli, ["diff", b, a], terminal_width=120)
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.index("setting: what differs") < out.index("torch") < out.index("totals: before → after") \
        < out.index("phases: before → after")
    assert "2.13.0" in out and "2.14.1" in out


def test_cli_several_runs_by_double_dash_or_folders(tmp_path: Path) -> None:
    from click.testing import CliRunner

    def write(side: str, program, factors) -> list[str]:
        return [write_receipt_files(r, tmp_path / side / f"run{i}") for i, r in enumerate(_runs(program, factors))]

    bs = write("before", baseline_program, (1.0, 1.03, 0.97))
    as_ = write("after", candidate_program, (1.0, 0.98, 1.02))
    by_dash = CliRunner().invoke(cli, ["diff", *bs, "--", *as_, "--json"])
    assert by_dash.exit_code == 0, by_dash.output
    by_folder = CliRunner().invoke(cli, ["diff", str(tmp_path / "before"), str(tmp_path / "after"), "--json"])
    assert by_folder.exit_code == 0, by_folder.output
    assert json.loads(by_dash.output) == json.loads(by_folder.output)
    data = json.loads(by_dash.output)
    assert (data["runs_before"], data["runs_after"]) == (3, 3)
    res = CliRunner().invoke(cli, ["diff", *bs, "--", *as_], terminal_width=140)
    assert "3 runs before · 3 after" in res.output and "steady median: faster" in res.output
    # --out attaches a comparison verify can recompute: one run a side only
    r = _run("diff", *bs, "--", *as_, "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "one run a side" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _run("diff", *bs)
    assert r.returncode == 2 and "`--`" in r.stderr
    r = _run("diff", str(tmp_path), bs[0])
    assert r.returncode == 2 and "no receipt.json" in r.stderr


def test_guards_and_dispatch_totals_where_the_findings_have_them() -> None:
    from seamscope.model.dispatch import DispatchSection

    def with_dispatch(r: Receipt, guards: int | None, per_call: int = 0) -> Receipt:
        d = None if guards is None else DispatchSection(
            sentence="", measured=[], estimated=[], basis="", frames=[], calls=[], guard_count=guards,
                            guard_checks={}, steady_calls=1, basis_phase="steady", per_call_ns=per_call,
                            wall_per_call_ns=None, share=None, estimate_ns=0, capped_calls=0)
        assert r.findings is not None
        return msgspec.structs.replace(r, findings=msgspec.structs.replace(r.findings, dispatch=d))

    before, after = build(baseline_program()), build(candidate_program())
    assert "guards" not in {t.name for t in compare(with_dispatch(before, None), with_dispatch(after, None)).totals}
    rows = {t.name: (t.before, t.after) for t in compare(with_dispatch(before, 3017, 616_000),
                                                          with_dispatch(after, 887, 369_000)).totals}
    assert rows["guards"] == (3017, 887) and rows["dispatch per call (estimate)"] == (616_000, 369_000)


def test_every_run_of_a_side_must_measure_the_same_work() -> None:
    befores = _runs(baseline_program, (1.0, 1.03))
    afters = [build(candidate_program()), build(candidate_program(30))]
    with pytest.raises(UnusableInput, match="after run 2: unequal sample counts: 20 calls before, 30 after"):
        compare(befores[0], afters[0], runs=(befores, afters))
    forced = compare(befores[0], afters[0], runs=(befores, afters), force=True)
    assert forced.forced_over == ["after run 2: unequal sample counts: 20 calls before, 30 after",
                                  "after run 2: unequal sample counts per input family (changed: 8 vs 18)"]
