"""``seamscope run`` as a user runs it: an unmodified script in a process of its own (forked from
the test run's one server, ``fresh_server``; Ctrl-C goes to that process, as from a terminal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from fakes import Forked, seamscope_forked

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "workloads", "breaks.py")


@pytest.fixture
def run(fresh_server):
    """``run(args, cwd)``: ``seamscope ARGS`` in a fresh process: exit code, stderr."""
    return lambda args, cwd: seamscope_forked(fresh_server, args, cwd)


def run_here(args, cwd, monkeypatch, capsys):
    """``seamscope ARGS`` in this process (for what is not about the process itself): exit code,
    stdout, stderr."""
    from seamscope.cli import main

    monkeypatch.chdir(cwd)
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, e.value.code, out.out, out.err)


def receipt(path):
    with open(os.path.join(path, "receipt.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, fresh_server):
    """Two runs of the same script, the first also writing its trace (``--trace-out``)."""
    base = tmp_path_factory.mktemp("two_runs")
    a = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "a", "--trace-out", "a/trace.jsonl",
                                        "--trace-events", "64", SCRIPT], base)
    b = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "b", SCRIPT], base)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    return base


def test_two_runs_have_equal_structure_hash(two_runs):
    ra, rb = receipt(two_runs / "a"), receipt(two_runs / "b")
    assert ra["summary"]["call_count"] == 12
    assert ra["structure_sha256"] == rb["structure_sha256"]
    assert ra["receipt_sha256"] != rb["receipt_sha256"]  # timings differ
    assert (two_runs / "a" / "calls.csv").exists() and (two_runs / "a" / "index.html").exists()
    assert ra["ledger"]["run"]["input_trace_sha256"] == rb["ledger"]["run"]["input_trace_sha256"]


def test_script_not_found_exit_2(tmp_path, monkeypatch, capsys):
    p = run_here(["run", "nope.py"], tmp_path, monkeypatch, capsys)
    assert p.returncode == 2 and "nope.py: no such script" in p.stderr and "Traceback" not in p.stderr


def test_script_that_raises_shows_its_traceback_exit_1_and_keeps_the_ledger(tmp_path, run):
    p = run(["run", "--quiet", "--out", "o", SCRIPT, "--", "--raise"], tmp_path)
    assert p.returncode == 1
    assert "ValueError: the user's own error" in p.stderr
    assert 'breaks.py", line' in p.stderr  # the user's frame is shown
    assert "runner.py" not in p.stderr  # not seamscope's
    r = receipt(tmp_path / "o")
    assert r["summary"]["call_count"] == 1


def test_ctrl_c_writes_what_was_measured_and_exits_130(tmp_path, fresh_server):
    proc = Forked(fresh_server, ["run", "--quiet", "--out", "o", SCRIPT, "--", "--sleep"], tmp_path,
                  stdout=tmp_path / "stdout", stderr=tmp_path / "stderr")
    # wait until calls are running (each call prints a line), then press Ctrl-C
    out = tmp_path / "o"
    end = time.monotonic() + 120
    while proc.running() and time.monotonic() < end and _lines(tmp_path / "stdout") < 3:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(120)
    err = (tmp_path / "stderr").read_text()
    assert out.exists(), err
    assert code == 130, err
    assert "interrupted" in err
    r = receipt(tmp_path / "o")
    assert r["summary"]["call_count"] >= 1


def _lines(path):
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0


def test_module_mode_runs_the_demo(tmp_path, run):
    p = run(["run", "--quiet", "--out", "o", "-m", "seamscope.examples.decoder"], tmp_path)
    assert p.returncode == 0, p.stderr
    r = receipt(tmp_path / "o")
    assert r["summary"]["call_count"] == 8 and r["summary"]["recompile_count"] > 0


def test_trace_out_then_import_gives_the_same_receipt(two_runs, run):
    q = run(["import", "a/trace.jsonl", "--out", "imported"], two_runs)
    assert q.returncode == 0, q.stderr
    assert (two_runs / "a" / "receipt.json").read_bytes() == (two_runs / "imported" / "receipt.json").read_bytes()


ECHO_ARGS = "import sys\nprint('ARGS', sys.argv[1:])\n"


def test_run_options_after_the_script_go_to_it_with_a_warning(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(ECHO_ARGS)
    p = run_here(["run", "--quiet", "--out", "o", "train.py", "--out", "runs/a", "--epochs", "1", "--quiet"],
                 tmp_path, monkeypatch, capsys)
    assert p.returncode == 0, p.stderr
    assert "ARGS ['--out', 'runs/a', '--epochs', '1', '--quiet']" in p.stdout  # the script got them
    warnings = [ln for ln in p.stderr.splitlines() if "went to train.py" in ln]
    assert warnings == [
        "seamscope: warning: --out runs/a --quiet went to train.py, not to seamscope (what follows the "
        "script is the script's); for seamscope write `seamscope run --out runs/a --quiet train.py`, for the "
        "script `seamscope run train.py -- --out runs/a --epochs 1 --quiet`"
    ]
    assert not (tmp_path / "runs").exists() and (tmp_path / "o" / "receipt.json").exists()


def test_no_warning_after_a_double_dash_or_for_the_scripts_own_options(tmp_path, monkeypatch, capsys):
    (tmp_path / "train.py").write_text(ECHO_ARGS)
    p = run_here(["run", "--quiet", "--out", "o", "train.py", "--", "--out", "runs/a"], tmp_path, monkeypatch, capsys)
    q = run_here(["run", "--quiet", "--out", "o", "train.py", "--epochs", "1", "--output=x"], tmp_path, monkeypatch,
                 capsys)
    assert p.returncode == 0 and q.returncode == 0, p.stderr + q.stderr
    assert "ARGS ['--out', 'runs/a']" in p.stdout and "ARGS ['--epochs', '1', '--output=x']" in q.stdout
    assert "went to" not in p.stderr + q.stderr
