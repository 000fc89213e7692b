"""``seamscope diff``: deltas with sample counts, sites/recompiles matched by stable id, verdicts,
refusals of unequal work, terminal and JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from seamscope.analyze.diff import attach_comparison, break_even, compare, recompile_key
from seamscope.analyze.inputs import (
    InputTrace,
    family_key,
    inputs_sha256,
    log_sha256,
    script_sha256,
)
from seamscope.cli import cli
from seamscope.errors import UnusableInput
from seamscope.model.receipt import Receipt
from seamscope.render.receipt_json import write_receipt_files

sys.path.insert(0, str(Path(__file__).parent))
from test_verify import TRACE, baseline_program, build, candidate_program  # noqa: E402


def _with_trace(r: Receipt, trace: str | None) -> Receipt:
    led = r.ledger
    led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, input_trace_sha256=trace))
    return msgspec.structs.replace(r, ledger=led)


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
    assert n is not None and (n - 1) * cmp.steady_saving_ns < cmp.cold_extra_ns <= n * cmp.steady_saving_ns
    assert cmp.verdict[0].startswith("steady −")
    assert f"worth it for workers that live longer than {n} calls" in cmp.verdict[0]
    assert [(s.change, s.site_id) for s in cmp.sites] == [("removed", before.ledger.break_sites[0].site_id)]
    assert [(r.count_before, r.count_after) for r in cmp.recompiles] == [(2, 0)]
    assert not cmp.forced


def test_break_even_cases() -> None:
    assert break_even(100, 10) == 10
    assert break_even(101, 10) == 11
    assert break_even(-100, -30) == 4  # cheaper cold, slower steady: advantage lasts 4 calls
    assert break_even(100, -10) is None and break_even(-100, 10) is None
    assert break_even(0, 10) is None and break_even(100, 0) is None


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
    assert "17 → 19" in res.output and "worth it for workers" in res.output
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
    raw["schema_version"] = 2
    old = tmp_path / "v2.json"
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
    assert family_key((_T((2, 8)),)) == family_key((_T((2, 8)),))
    assert family_key((_T((2, 8)),)) != family_key((_T((2, 9)),))
    assert family_key((_T((2, 8)),)) != family_key((_T((2, 8), "bfloat16"),))
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
    assert log_sha256(b"abc") != log_sha256(b"abd")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "rank0.log").write_bytes(b"abc")
    assert log_sha256(tmp_path / "logs") == log_sha256(tmp_path / "logs")


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
    assert family_key((a,)) == family_key((a + 1,))
    b16 = a.to(torch.bfloat16)
    assert inputs_sha256((b16,)) != inputs_sha256((b16 + 1,))
