"""The upgrade check: the same script under two torch releases (``run --python``), then ``diff``
opening with what differs in the setting and the totals, and ``check`` as the CI gate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakes import seamscope_forked, seamscope_here

STORED = Path(__file__).parent / "inputs" / "upgrade"
SCRIPT = Path(__file__).parent / "workloads" / "upgrade_check.py"


def test_diff_of_two_torch_releases_opens_with_the_setting_and_the_totals(tmp_path: Path) -> None:
    """Receipts the same script made under torch 2.13.0 and 2.14.1 (stored): the layout is pinned."""
    got = seamscope_here(["diff", str(STORED / "torch-2.13.0"), str(STORED / "torch-2.14.1")], tmp_path)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[0].startswith("seamscope diff · 6 calls before · 6 after")
    body = "\n".join(lines)
    order = ["setting: what differs", "torch ", "totals: before → after", "compiles", "recompiles", "fallbacks",
             "graphs", "break sites", "compile time", "compile time: dynamo", "steady median",
             "phases: before → after", "one run each: not a verdict"]
    at = [body.index(word) for word in order]
    assert at == sorted(at), order
    torch_row = next(line for line in lines if "torch " in line and "2.13.0" in line)
    assert "2.13.0+cpu" in torch_row and "2.14.1+cu130" in torch_row
    data = json.loads(seamscope_here(["diff", str(STORED / "torch-2.13.0"), str(STORED / "torch-2.14.1"), "--json"],
                                     tmp_path).stdout)
    assert data["setting"][0] == {"field": "torch", "before": "2.13.0+cpu", "after": "2.14.1+cu130"}
    assert {t["name"]: (t["before"], t["after"]) for t in data["totals"]}["compiles"] == (7, 7)
    assert data["break_even_calls"] is None and (data["runs_before"], data["runs_after"]) == (1, 1)


def test_python_that_cannot_run_seamscope_is_one_line_and_exit_2(tmp_path: Path) -> None:
    fake = tmp_path / "python-elsewhere"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'msgspec'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    got = seamscope_here(["run", "--python", str(fake), "x.py"], tmp_path)
    assert got.returncode == 2 and got.stderr.count("\n") == 1
    assert "No module named 'msgspec'" in got.stderr and "--python" in got.stderr
    got = seamscope_here(["run", "--python", str(tmp_path / "nope"), "x.py"], tmp_path)
    assert got.returncode == 2 and got.stderr.count("\n") == 1 and "cannot start it" in got.stderr


def test_only_run_s_own_python_option_is_dropped() -> None:
    from seamscope.commands.run import _without_option

    assert _without_option(["--python", "p", "--quiet", "s.py", "--python", "x"], "--python") == [
        "--quiet", "s.py", "--python", "x"]
    assert _without_option(["--python=p", "s.py"], "--python") == ["s.py"]


@pytest.mark.torch
def test_the_upgrade_recipe_end_to_end(tmp_path: Path, fresh_server) -> None:
    """docs/compatibility.md's recipe: a run under each environment (here the lanes' venvs, the
    same torch), then diff and check; a new break site would fail the check."""
    other = Path(sys.prefix).parent / ".venv-core" / "bin" / "python"
    python = str(other) if other.exists() else sys.executable
    (tmp_path / "script.py").write_text(SCRIPT.read_text())
    pinned = seamscope_forked(fresh_server, ["run", "--quiet", "--no-html", "--out", "pinned", "script.py"], tmp_path)
    assert pinned.returncode == 0, pinned.stderr
    # the candidate environment breaks once more (as a release that breaks where the other did not)
    cand = seamscope_forked(fresh_server, ["run", "--python", python, "--quiet", "--no-html", "--out", "candidate",
                                           "script.py"], tmp_path, env={"SEAMSCOPE_TEST_EXTRA_BREAK": "1"})
    assert cand.returncode == 0, cand.stderr
    assert f"running under {python}" in cand.stderr
    a, b = (json.loads((tmp_path / d / "receipt.json").read_text()) for d in ("pinned", "candidate"))
    assert (a["summary"]["break_site_count"], b["summary"]["break_site_count"]) == (1, 2)
    diff = seamscope_here(["diff", "pinned", "candidate", "--json"], tmp_path)
    assert diff.returncode == 0, diff.stderr
    totals = {t["name"]: (t["before"], t["after"]) for t in json.loads(diff.stdout)["totals"]}
    assert totals["break sites"] == (1, 2)
    check = seamscope_here(["check", "candidate", "--baseline", "pinned", "--max-compile-regression", "1000"],
                           tmp_path)
    assert check.returncode == 1 and "new break sites" in check.stdout, check.stdout + check.stderr
    same = seamscope_here(["check", "pinned", "--baseline", "pinned", "--max-compile-regression", "0"], tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr


def test_check_gates_compile_time_against_the_baseline(tmp_path: Path) -> None:
    old, new = (json.loads((STORED / d / "receipt.json").read_text())["summary"]["compile_ns"]
                for d in ("torch-2.13.0", "torch-2.14.1"))
    pct = (new - old) * 100.0 / old
    assert pct > 0  # the stored candidate compiled more slowly
    args = ["check", str(STORED / "torch-2.14.1"), "--baseline", str(STORED / "torch-2.13.0")]
    over = seamscope_here([*args, "--max-compile-regression", f"{pct / 2:.2f}"], tmp_path)
    within = seamscope_here([*args, "--max-compile-regression", f"{abs(pct) + 1:.1f}"], tmp_path)
    assert within.returncode == 0, within.stdout + within.stderr
    assert f"limit +{abs(pct) + 1:.1f}%" in within.stdout
    assert over.returncode == 1 and "over --max-compile-regression" in over.stdout
    alone = seamscope_here(["check", str(STORED / "torch-2.14.1"), "--max-compile-regression", "5"], tmp_path)
    assert alone.returncode == 2 and "needs --baseline" in alone.stderr
