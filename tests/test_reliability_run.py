"""A real ``seamscope run`` ended by real signals, killed after a checkpoint, ended by ``os._exit``,
refused a folder it cannot write or another run holds, and a disk that fills while it writes.

Each run is a process of its own (its pid, the signals sent to it, its exit code), forked from the
test run's one server (``fresh_server``: torch imported once), one module fixture for them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from fakes import Forked, seamscope_forked, seamscope_here

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))
LONG = os.path.join(HERE, "workloads", "long_run.py")
BREAKS = os.path.join(HERE, "workloads", "breaks.py")


class Child:
    """``seamscope run --quiet ARGS`` in a process of its own, forked from the test run's server
    (``fakes.Forked``: its own pid, its signals, its exit code), from folder ``cwd/name``."""

    def __init__(self, server, cwd, name: str, args: list[str]) -> None:
        self.dir = cwd / name
        self.dir.mkdir(exist_ok=True)
        self.out = self.dir / "o"
        self.proc = Forked(server, ["run", "--quiet", *args], self.dir, stdout=self.dir / "stdout",
                           stderr=self.dir / "stderr")
        self.rc: int | None = None

    def lines(self) -> int:
        try:
            return (self.dir / "stdout").read_text().count("\n")
        except FileNotFoundError:  # not started yet
            return 0

    def wait_for(self, ready, what: str, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while not ready():
            if not self.proc.running():
                raise AssertionError(f"ended before {what}: {self.stderr()}")
            if time.monotonic() > end:
                self.proc.send_signal(signal.SIGKILL)
                raise AssertionError(f"no {what} in {timeout} s: {self.stderr()}")
            time.sleep(0.01)

    def finish(self, timeout: float = 120.0) -> int | None:
        self.rc = self.proc.wait(timeout)
        return self.rc

    def stderr(self) -> str:
        try:
            return (self.dir / "stderr").read_text()
        except FileNotFoundError:
            return ""

    def receipt(self) -> dict:
        with open(self.out / "receipt.json") as f:
            return json.load(f)

    def leftovers(self) -> list[str]:
        return [p for p in os.listdir(self.out) if p.startswith(".tmp-") or p == ".seamscope.lock"]


def _checkpointed(child: Child) -> bool:
    try:
        r = child.receipt()
    except (OSError, ValueError):
        return False
    return r["ledger"]["run"]["status"]["state"] == "incomplete" and r["summary"]["call_count"] >= 1


OLDER_REPORT = '<!doctype html>\n<meta name="generator" content="seamscope 0.1">\nan older run\'s report\n'
"""An older seamscope run's report (a run replaces only what seamscope wrote)."""


def _older_set(folder) -> None:
    """An older seamscope run's output set, each file recognisably seamscope's and saying so."""
    import shutil

    shutil.copy(os.path.join(HERE, "golden", "fake-breaks.receipt.json"), folder / "receipt.json")
    (folder / "calls.csv").write_text("index,phase,outcome,an older run's calls\n")
    (folder / "index.html").write_text(OLDER_REPORT)


def _plant_older_run(out) -> None:
    """A folder as a run killed earlier leaves it: a complete older receipt and a dead run's lock."""
    import shutil
    import socket

    out.mkdir()
    shutil.copy(os.path.join(HERE, "golden", "fake-breaks.receipt.json"), out / "receipt.json")
    (out / "index.html").write_text(OLDER_REPORT)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (out / ".seamscope.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(),
                                                     "started": "earlier", "command": "seamscope run old.py"}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, fresh_server):
    """The runs, one after another (each is done in about a second): each signal is sent once the
    run is where the test needs it (its calls printed, a checkpoint written)."""
    base = tmp_path_factory.mktemp("runs")
    loop = ["--checkpoint-every", "0", "--out", "o", LONG]
    kids = {}
    for name, sig in (("term", signal.SIGTERM), ("hup", signal.SIGHUP), ("int2", signal.SIGINT)):
        k = kids[name] = Child(fresh_server, base, name, loop)
        k.wait_for(lambda k=k: k.lines() >= 3, "calls")
        k.proc.send_signal(sig)
        if name == "int2":  # a second Ctrl-C right after the first
            k.proc.send_signal(sig)
        k.finish()
    k = kids["kill"] = Child(fresh_server, base, "kill", ["--checkpoint-every", "0.2", "--out", "o", LONG])
    k.wait_for(lambda: _checkpointed(k), "checkpoint")
    k.proc.send_signal(signal.SIGKILL)
    k.finish()
    (base / "osexit").mkdir()
    _plant_older_run(base / "osexit" / "o")
    kids["osexit"] = Child(fresh_server, base, "osexit", ["--checkpoint-every", "0.2", "--out", "o", LONG, "--",
                                                          "--calls", "20", "--os-exit"])
    kids["osexit"].finish()
    small = base / "small"  # a disk that fills while the output is written: a 200 KB tmpfs
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(small)], capture_output=True).returncode == 0:
        _older_set(small)
        kids["full"] = Child(fresh_server, base, "full", ["--out", str(small), BREAKS])
        kids["full"].out = small
        kids["full"].finish()
    yield kids
    if "full" in kids:
        subprocess.run(["umount", str(small)], check=False)


@pytest.mark.parametrize(("name", "code", "state", "detail"), [
    ("term", 143, "terminated", "SIGTERM"),
    ("hup", 129, "terminated", "SIGHUP"),
])
def test_sigterm_and_sighup_write_the_receipt_marked_and_exit_128_plus_the_signal(runs, name, code, state, detail):
    c = runs[name]
    assert c.rc == code, c.stderr()
    r = c.receipt()
    assert r["ledger"]["run"]["status"] == {"state": state, "detail": detail, "exit_code": code}
    assert r["summary"]["call_count"] >= 3
    assert (c.out / "calls.csv").exists() and (c.out / "index.html").exists()
    assert f"terminated ({detail}); the calls measured so far were written" in c.stderr()
    assert c.leftovers() == []


def test_two_ctrl_c_stop_at_once_and_leave_no_half_written_file(runs):
    c = runs["int2"]
    assert c.rc == 130, c.stderr()
    r = c.receipt()  # whole JSON: the marker, a checkpoint or the final receipt, never half of one
    assert r["ledger"]["run"]["status"]["state"] in ("interrupted", "incomplete")
    assert c.leftovers() == []


def test_sigkill_after_a_checkpoint_leaves_the_calls_up_to_it_marked_incomplete(runs):
    c = runs["kill"]
    assert c.rc == -signal.SIGKILL
    r = c.receipt()
    assert r["ledger"]["run"]["status"]["state"] == "incomplete"
    assert r["ledger"]["run"]["status"]["detail"].startswith("checkpoint at ")
    assert r["summary"]["call_count"] >= 1
    s = seamscope_here(["summary", str(c.out)], c.dir)
    assert s.returncode == 0 and "run incomplete (checkpoint at" in " ".join(s.stdout.split())
    v = seamscope_here(["verify", str(c.out)], c.dir)
    assert v.returncode == 0 and "note: run incomplete" in v.stdout
    k = seamscope_here(["check", str(c.out), "--max-breaks", "9"], c.dir)
    assert k.returncode == 1 and "did not complete" in k.stdout


def test_os_exit_into_a_killed_runs_folder_leaves_its_own_incomplete_receipt(runs):
    c = runs["osexit"]
    assert c.rc == 0, c.stderr()  # os._exit(0): the exit code cannot tell, the receipt does
    assert "in use" not in c.stderr()  # the dead run's lock was taken over
    r = c.receipt()
    assert r["ledger"]["run"]["status"]["state"] == "incomplete"
    assert r["ledger"]["run"]["command"][-1] == "--os-exit"  # this run's, not the older one's
    assert r["summary"]["call_count"] >= 1
    assert sorted(os.listdir(c.out)) == [".seamscope.lock", "receipt.json"]  # the older report is gone


def _refused(server, tmp_path, out: str) -> subprocess.CompletedProcess:
    p = seamscope_forked(server, ["run", "--quiet", "--out", out, LONG], tmp_path)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "started").exists()  # refused before the script started
    return p


def test_an_unwritable_out_is_refused_before_the_script_starts(tmp_path, fresh_server):
    (tmp_path / "afile").write_text("x")
    p = _refused(fresh_server, tmp_path, "afile/sub")
    assert "afile/sub: cannot write" in p.stderr


def test_a_folder_another_live_run_holds_is_refused(tmp_path, fresh_server):
    import socket

    holder = subprocess.Popen(["sleep", "120"])
    try:
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / ".seamscope.lock").write_text(json.dumps(
            {"pid": holder.pid, "host": socket.gethostname(), "started": "now", "command": "seamscope run x.py"}))
        p = _refused(fresh_server, tmp_path, "o")
        assert f"in use by another seamscope run (pid {holder.pid}" in p.stderr
    finally:
        holder.kill()
        holder.wait()


def test_a_disk_that_fills_while_writing_keeps_the_receipt_and_mixes_no_older_file(runs):
    if "full" not in runs:
        pytest.skip("cannot mount a tmpfs here; test_reliability.py fault-injects a full disk instead")
    c = runs["full"]
    assert c.rc == 2, c.stderr()
    err = c.stderr()
    assert "could not write" in err and "No space left on device" in err and "Traceback" not in err
    names = sorted(n for n in os.listdir(c.out) if not n.startswith(".seamscope"))
    assert c.receipt()["summary"]["call_count"] == 12  # this run's receipt is whole
    with open(os.path.join(HERE, "golden", "fake-breaks.receipt.json")) as f:
        old_sha = json.load(f)["receipt_sha256"]
    for name in names:  # whatever is there is this run's: nothing of the older run beside it
        text = (c.out / name).read_text()
        assert "an older run" not in text and old_sha not in text, name
    assert not [n for n in names if n.startswith(".tmp-")]


def test_a_users_exception_in_a_session_propagates_unchanged_when_writing_fails(tmp_path, monkeypatch, dynamo_reset):
    import errno

    import torch

    import seamscope
    from seamscope.render import files

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    g = torch.compile(lambda x: x.sin() + 1, backend="eager")
    with pytest.raises(ValueError, match="the user's own error") as e:
        with seamscope.session(out=tmp_path / "o"):
            g(torch.ones(3))
            monkeypatch.setattr(files, "_stage", full)  # the disk fills before the receipt is written
            raise ValueError("the user's own error")
    assert type(e.value) is ValueError
    assert any("could not be written" in n and "No space left" in n for n in getattr(e.value, "__notes__", []))
    assert not (tmp_path / "o" / ".seamscope.lock").exists()


def test_a_session_checkpoints_while_it_runs_then_writes_its_status(tmp_path, dynamo_reset):
    import torch

    import seamscope

    g = torch.compile(lambda x: x.cos() * 2, backend="eager")
    out = tmp_path / "o"
    seen = []
    with seamscope.session(out=out, checkpoint_every=0.05) as s:
        for _ in range(200):
            g(torch.ones(3))
            time.sleep(0.002)
            with open(out / "receipt.json") as f:
                r = json.load(f)
            seen.append((r["ledger"]["run"]["status"]["state"], r["summary"]["call_count"]))
            if seen[-1][1] >= 2:
                break
        assert s.output is not None and s.output.checkpoints >= 1
    assert seen[0] == ("incomplete", 0) or seen[0][0] == "incomplete"
    assert seen[-1][0] == "incomplete" and seen[-1][1] >= 1  # a checkpoint of the calls so far
    with open(out / "receipt.json") as f:
        final = json.load(f)
    assert final["ledger"]["run"]["status"] == {"state": "completed", "detail": "", "exit_code": 0}
    assert not (out / ".seamscope.lock").exists()


def test_run_target_puts_every_signal_handler_back_and_records_completed(tmp_path, monkeypatch, dynamo_reset):
    from seamscope.capture.runner import run_target

    monkeypatch.chdir(tmp_path)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    result = run_target(LONG, ["--calls", "3"], out=str(tmp_path / "o"), checkpoint_every=0)
    assert {s: signal.getsignal(s) for s in before} == before
    assert result.exit_code == 0 and result.session.ledger.run.status.state == "completed"
    assert not (tmp_path / "o" / ".seamscope.lock").exists()
