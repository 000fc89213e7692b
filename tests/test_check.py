"""``seamscope check`` on receipts built without torch (fake clock: timings exact)."""

from __future__ import annotations

import json
import os

import msgspec
import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.errors import UnusableInput
from seamscope.gates.check import Limits, check
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import Compilation, RunInfo
from seamscope.model.receipt import Receipt
from seamscope.render.receipt_json import write_receipt_files

TRACE = "ab" * 32


def _receipt(
    *, breaks: dict[str, str] | None = None, recompile: bool = False, fallback: bool = False,
    steady_ns: int = 100, steady_calls: int = 4, trace: str | None = TRACE,
) -> Receipt:
    warm = [FakeStep("compile", 1000, "0/0"), FakeStep("region", 50, "0/0"),
            FakeStep("island", 10), FakeStep("compile", 1000, "1/0"), FakeStep("region", 40, "1/0")]
    hit = [FakeStep("region", steady_ns, "0/0"), FakeStep("island", 10), FakeStep("region", 40, "1/0")]
    calls = [FakeCall(warm)] + [FakeCall(hit) for _ in range(steady_calls)]
    if recompile:
        calls.append(FakeCall([FakeStep("compile", 900, "0/1"), FakeStep("region", 50, "0/1"),
                               FakeStep("island", 10), FakeStep("region", 40, "1/0")]))
    if fallback:
        calls.append(FakeCall([FakeStep("fallback", 5, "0/2"), FakeStep("island", 10)]))
    b = play(FakeProgram(breaks=breaks or {}, calls=calls))
    if fallback:  # the recompile limit: a compilation that ended in eager execution
        b.set_compilation(Compilation(compile_id="0/2", frame_name="forward", file="model.py", line=1,
                                      status="fallback", fail_reason="recompile limit"))
    led = b.build()
    led = msgspec.structs.replace(led, run=RunInfo(source="fake", input_trace_sha256=trace))
    return make_receipt(led)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(["check", *args])
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out + out.err


def _write(r: Receipt, d: str) -> str:
    return write_receipt_files(r, d)


def test_unchanged_receipt_passes_against_its_baseline() -> None:
    r = _receipt(breaks={"0/0": "print"})
    rep = check(r, Limits(max_steady_regression=0), r)
    assert rep.ok, rep.problems
    assert any("±0.0%" in ln for ln in rep.lines)


def test_a_new_site_fails_and_is_named() -> None:
    base = _receipt(breaks={"0/0": "print"})
    cand = _receipt(breaks={"0/0": "print", "1/0": "item"})
    (new,) = {s.site_id for s in cand.summary.break_sites} - {s.site_id for s in base.summary.break_sites}
    rep = check(cand, Limits(), base)
    assert rep.problems == ["1 new break site(s), not in the baseline"]
    assert any(ln.startswith(f"  + {new}  model.py:") for ln in rep.lines)


def test_a_removed_site_is_reported_not_failed() -> None:
    base = _receipt(breaks={"0/0": "print"})
    rep = check(_receipt(), Limits(), base)
    assert rep.ok
    assert "break sites gone since the baseline:" in rep.lines


def test_more_recompiles_or_fallbacks_than_the_baseline_fail() -> None:
    base = _receipt()
    rep = check(_receipt(recompile=True, fallback=True), Limits(), base)
    # the attempt that hit the recompile limit is a recompile too (y > 0), as TORCH_LOGS counts it
    assert "more recompiles than the baseline: 0 -> 2" in rep.problems
    assert "more fallbacks than the baseline: 0 -> 1" in rep.problems
    assert check(base, Limits(), _receipt(recompile=True)).ok  # fewer is fine


def test_steady_regression_over_the_threshold_fails_and_under_passes() -> None:
    base, slower = _receipt(steady_ns=100), _receipt(steady_ns=200)
    # steady wall: 100 + 10 + 40 = 150 ns before, 250 ns after: +66.7%
    assert not check(slower, Limits(max_steady_regression=50), base).ok
    assert check(slower, Limits(max_steady_regression=70), base).ok
    assert check(base, Limits(max_steady_regression=0), slower).ok  # faster is fine


def test_steady_regression_needs_equal_samples() -> None:
    base, cand = _receipt(steady_calls=4), _receipt(steady_calls=5)
    with pytest.raises(UnusableInput, match="unequal sample counts"):
        check(cand, Limits(max_steady_regression=10), base)
    assert check(cand, Limits(), base).ok  # structural checks need no equal samples


def test_a_baseline_of_another_workload_is_unusable() -> None:
    with pytest.raises(UnusableInput, match="another workload"):
        check(_receipt(trace="cd" * 32), Limits(), _receipt())


def test_absolute_limits_list_the_offenders() -> None:
    r = _receipt(breaks={"0/0": "print"}, recompile=True)
    rep = check(r, Limits(max_breaks=0, max_recompiles=0, max_fallbacks=0))
    assert rep.problems == [
        "1 break site(s), over --max-breaks 0",
        "1 recompile(s), over --max-recompiles 0",
    ]
    assert any(r.summary.break_sites[0].site_id in ln for ln in rep.lines)
    assert check(r, Limits(max_breaks=1, max_recompiles=1)).ok


def test_cli_exit_codes(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _write(_receipt(), str(tmp_path / "base"))
    worse = _write(_receipt(breaks={"0/0": "print"}), str(tmp_path / "worse"))
    other = _write(_receipt(trace="cd" * 32), str(tmp_path / "other"))
    assert _cli(capsys, base, "--baseline", base)[0] == 0
    code, out = _cli(capsys, worse, "--baseline", base)
    assert code == 1 and "new break site" in out and "model.py" in out
    code, out = _cli(capsys, other, "--baseline", base)
    assert code == 2 and "another workload" in out
    code, out = _cli(capsys, base)
    assert code == 2 and "nothing to check" in out
    code, out = _cli(capsys, base, "--max-steady-regression", "5")
    assert code == 2 and "needs --baseline" in out
    code, out = _cli(capsys, base, "--max-breaks", "-1")
    assert code == 2
    assert _cli(capsys, worse, "--max-breaks", "1")[0] == 0
    assert _cli(capsys, worse, "--max-breaks", "0")[0] == 1


def test_cli_refuses_a_baseline_of_another_schema_version(tmp_path, capsys) -> None:
    base = _write(_receipt(), str(tmp_path / "base"))
    raw = json.loads(open(base).read())
    raw["schema_version"] = 999
    os.makedirs(tmp_path / "old")
    old = str(tmp_path / "old" / "receipt.json")
    with open(old, "w") as f:
        json.dump(raw, f)
    code, out = _cli(capsys, base, "--baseline", old)
    assert code == 2 and "baseline:" in out and "schema version 999" in out
