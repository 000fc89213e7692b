"""``seamscope try`` ended by real signals and by its budget, with a run that hangs.

GIVEN a real ``try`` process (forked from the test run's server: its own pid, signals and exit
code) whose script compiles, then hangs from a chosen run on, WHEN it gets SIGTERM or SIGHUP,
THEN it ends as ``run`` does: what the finished runs measured is written, the hung run and the
trial's fork server are gone, the run's cache folder is removed, exit 143 / 129. WHEN its
``--budget`` ends during the hung run, THEN the run is killed there and the trial ends, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from fakes import Forked

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_server")]

HERE = os.path.dirname(os.path.abspath(__file__))
HANG = os.path.join(HERE, "workloads", "trials", "hang_after_first.py")


def _state(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a live process; None once it is gone (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] in ("Z", "X") else (fields[0], int(fields[1]))


def _gone(pid: int, within: float = 60.0) -> bool:
    end = time.monotonic() + within
    while _state(pid) is not None and time.monotonic() < end:
        time.sleep(0.1)
    return _state(pid) is None


def _cache_of(pid: int) -> str:
    """The run's own temporary folder: its stderr goes to ``stderr.txt`` there."""
    return os.path.dirname(os.readlink(f"/proc/{pid}/fd/2"))


def _start(server, tmp_path, args: list[str], hang_from: int) -> Forked:
    return Forked(server, ["try", "--quiet", "--repeat", "1", "--out", "o", *args, HANG], tmp_path,
                  stdout=tmp_path / "stdout", stderr=tmp_path / "stderr", env={"HANG_FROM": str(hang_from)})


def _hung_run(proc: Forked, tmp_path, nth: int) -> int:
    """The pid of the ``nth`` run, once it has started (each run writes its pid to runs.txt)."""
    runs = tmp_path / "runs.txt"
    end = time.monotonic() + 300
    while not runs.exists() or len(runs.read_text().split()) < nth:
        assert proc.running(), (tmp_path / "stderr").read_text()
        assert time.monotonic() < end, "the run never started"
        time.sleep(0.1)
    return int(runs.read_text().split()[nth - 1])


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("sig", "code", "hang_from"), [(signal.SIGTERM, 143, 2), (signal.SIGHUP, 129, 1)],
                         ids=["sigterm-after-a-finished-run", "sighup-in-the-first-run"])
def test_a_signal_ends_a_try_like_a_run(fresh_server, tmp_path, sig, code, hang_from):
    proc = _start(fresh_server, tmp_path, ["--timeout", "600"], hang_from)
    pid = _hung_run(proc, tmp_path, hang_from)
    time.sleep(0.5)  # inside the run: it has its environment and is compiling or asleep
    cache, (_, server) = _cache_of(pid), _state(pid)  # type: ignore[misc]
    assert os.path.isdir(cache) and os.path.basename(cache).startswith("seamscope-try-cache-")
    proc.send_signal(sig)
    rc = proc.wait(180)
    err = (tmp_path / "stderr").read_text()
    assert rc == code, err
    assert "Traceback" not in err, err
    assert _gone(pid), "the run in progress outlived the trial"
    assert _gone(server), "the trial's fork server outlived the trial"
    assert not os.path.exists(cache), "the run's cache folder was left behind"
    trials = tmp_path / "o" / "trials.json"
    if hang_from == 1:  # nothing finished: nothing to write
        assert not trials.exists() and signal.Signals(sig).name in err
    else:
        t = json.loads(trials.read_text())
        assert t["interrupted"] is True
        assert [r["label"] for r in t["baseline"]["runs"]] == ["rep-1"]  # the run that finished
        assert (tmp_path / "o" / "trials.md").exists() and (tmp_path / "o" / "receipt.json").exists()


@pytest.mark.timeout(600)
def test_the_budget_bounds_a_run_that_hangs(fresh_server, tmp_path):
    # the budget is all this test waits for: short, but long enough for the run to start and write its pid
    proc = _start(fresh_server, tmp_path, ["--budget", "5s"], 1)
    pid = _hung_run(proc, tmp_path, 1)
    rc = proc.wait(300)  # the run hangs for good: only the budget ends it
    err = (tmp_path / "stderr").read_text()
    assert rc == 1, err  # the baseline could not be measured, as for a baseline that hangs past --timeout
    assert "the budget ended during trials/baseline/rep-1" in err and "--budget 5s" in err, err
    assert _gone(pid)
