"""What a run leaves on disk when writing fails, when two runs share a folder, and how every reader
shows a run that did not complete (torch-free: fake ledgers; the real signals are in
``test_reliability_run.py``)."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import subprocess

import msgspec
import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.capture.persist import LOCK_NAME, OutLock
from seamscope.cli import main
from seamscope.errors import UnusableInput
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import RunStatus
from seamscope.render import files
from seamscope.render.html import write_html_report
from seamscope.render.receipt_json import write_receipt_files


def _receipt(status: RunStatus | None, calls: int = 3):
    steps = [FakeStep("compile", 1000, "0/0"), FakeStep("region", 50, "0/0"), FakeStep("island", 10)]
    hit = [FakeStep("region", 50, "0/0"), FakeStep("island", 10)]
    led = play(FakeProgram(breaks={}, calls=[FakeCall(steps)] + [FakeCall(hit) for _ in range(calls - 1)])).build()
    if status is not None:
        led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, source="live", status=status))
    return make_receipt(led)


def _cli(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out + out.err


# --- file modes, failures while writing ---------------------------------------------------------


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_output_files_get_the_umasks_mode(tmp_path, mask):
    old = os.umask(mask)
    try:
        r = _receipt(RunStatus(state="completed", exit_code=0))
        write_receipt_files(r, tmp_path)
        write_html_report(r, tmp_path)
    finally:
        os.umask(old)
    for name in ("receipt.json", "calls.csv", "index.html"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~mask, name


def _old_set(folder):
    for name in ("receipt.json", "calls.csv", "index.html"):
        (folder / name).write_text("an older run's " + name)


def _full_disk_at(monkeypatch, name):
    real = files._stage

    def stage(path, data):
        if os.path.basename(path) == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data)

    monkeypatch.setattr(files, "_stage", stage)


def test_a_full_disk_keeps_what_was_written_names_the_rest_and_leaves_no_older_file(tmp_path, monkeypatch):
    _old_set(tmp_path)
    _full_disk_at(monkeypatch, "calls.csv")
    r = _receipt(RunStatus(state="completed", exit_code=0))
    with pytest.raises(files.WriteFailed) as e:
        write_receipt_files(r, tmp_path)
    assert e.value.exit_code == 2
    assert "could not write calls.csv (No space left on device)" in str(e.value)
    assert "written: receipt.json" in str(e.value)
    assert json.loads((tmp_path / "receipt.json").read_text())["receipt_sha256"] == r.receipt_sha256
    assert not (tmp_path / "calls.csv").exists()  # the older run's is gone, not beside the new receipt
    assert not (tmp_path / "index.html").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_a_checkpoint_of_the_same_run_stays_when_the_final_receipt_cannot_be_written(tmp_path, monkeypatch):
    from seamscope.render.receipt_json import write_receipt_only

    _old_set(tmp_path)
    first = _receipt(RunStatus(state="incomplete", detail="checkpoint at 60 s"))
    write_receipt_only(first, tmp_path, fresh=True)
    assert sorted(os.listdir(tmp_path)) == ["receipt.json"]  # the older run's set is gone at once
    _full_disk_at(monkeypatch, "receipt.json")
    with pytest.raises(files.WriteFailed, match="could not write receipt.json"):
        write_receipt_files(_receipt(RunStatus(state="completed", exit_code=0), calls=5), tmp_path)
    kept = json.loads((tmp_path / "receipt.json").read_text())
    assert kept["ledger"]["run"]["status"]["state"] == "incomplete"  # this run's checkpoint, whole


def test_an_unwritable_out_is_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(UnusableInput, match="it is a file, not a folder"):
        files.check_writable(str(blocker))
    with pytest.raises(UnusableInput, match="cannot write"):
        files.check_writable(str(blocker / "sub"))


def test_a_second_signal_while_writing_leaves_no_temporary_file(tmp_path):
    files._stage(str(tmp_path / "receipt.json"), b"half")
    assert [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]
    files.discard_pending()
    assert os.listdir(tmp_path) == []


# --- the lock -------------------------------------------------------------------------------------


def _lock_of(folder, pid, host=None, command="seamscope run other.py"):
    (folder / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": host or socket.gethostname(),
                                                "started": "2026-01-01 10:00:00 UTC", "command": command}))


def test_a_held_folder_is_refused_naming_its_holder(tmp_path):
    holder = subprocess.Popen(["sleep", "60"])
    try:
        _lock_of(tmp_path, holder.pid)
        with pytest.raises(UnusableInput, match=rf"in use by another seamscope run \(pid {holder.pid} on .*other.py"):
            OutLock(str(tmp_path), "seamscope run b.py").acquire()
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_lock_is_taken_over_and_released(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    _lock_of(tmp_path, dead.pid, command="killed")
    c = OutLock(str(tmp_path), "seamscope run c.py")
    c.acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["command"] == "seamscope run c.py"
    c.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_another_hosts_lock_is_never_taken_over(tmp_path):
    _lock_of(tmp_path, 1, host="elsewhere")
    with pytest.raises(UnusableInput, match="pid 1 on elsewhere"):
        OutLock(str(tmp_path), "y").acquire()


# --- the status, as every reader shows it ---------------------------------------------------------

UNFINISHED = [
    (RunStatus(state="incomplete", detail="checkpoint at 60 s"), "run incomplete (checkpoint at 60 s)"),
    (RunStatus(state="terminated", detail="SIGTERM", exit_code=143), "run terminated (SIGTERM)"),
    (RunStatus(state="interrupted", detail="SIGINT", exit_code=130), "run interrupted (SIGINT)"),
    (RunStatus(state="raised", detail="ValueError: bad", exit_code=1), "run raised ValueError: bad"),
    (RunStatus(state="exited", exit_code=3), "run exited 3"),
]


@pytest.mark.parametrize(("status", "text"), UNFINISHED)
def test_summary_report_check_and_verify_show_a_run_that_did_not_complete(tmp_path, capsys, status, text):
    write_receipt_files(_receipt(status), tmp_path)
    code, out = _cli(capsys, "summary", str(tmp_path))
    assert code == 0 and text in " ".join(out.split())
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "5")
    assert code == 1 and "the run did not complete" in out and "--allow-incomplete" in out
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "5", "--allow-incomplete")
    assert code == 0 and "within budget" in out
    code, out = _cli(capsys, "verify", str(tmp_path))
    assert code == 0 and f"note: {text}" in out
    code, out = _cli(capsys, "report", str(tmp_path), "--out", str(tmp_path / "rep"))
    html = (tmp_path / "rep" / "index.html").read_text()
    assert code == 0 and 'id="run-status" class="warn"' in html
    from seamscope.render.markdown import MarkdownRenderer

    assert f"> **{text.replace('_', chr(92) + '_')}**" in MarkdownRenderer().render(_receipt(status))


def test_a_completed_run_passes_check_and_says_so(tmp_path, capsys):
    write_receipt_files(_receipt(RunStatus(state="completed", exit_code=0)), tmp_path)
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "5")
    assert code == 0 and "run: completed" in out
    code, out = _cli(capsys, "summary", str(tmp_path))
    assert "run completed" in out


def test_a_receipt_without_a_status_reads_as_before(tmp_path, capsys):
    write_receipt_files(_receipt(None), tmp_path)
    raw = json.loads((tmp_path / "receipt.json").read_text())
    assert "status" not in raw["ledger"]["run"]  # older and imported receipts: byte for byte as before
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "5")
    assert code == 0 and "run:" not in out


def test_an_ignored_sighup_stays_ignored(monkeypatch):
    """Under ``nohup`` a hangup must not end the run."""
    import signal

    from seamscope.capture.persist import _signals

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        assert signal.SIGHUP not in _signals() and signal.SIGTERM in _signals()
    finally:
        signal.signal(signal.SIGHUP, old)
    old = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        assert signal.SIGHUP in _signals()
    finally:
        signal.signal(signal.SIGHUP, old)


CHILD_WRITING = r"""
import os, sys, time
from seamscope.capture.persist import hard_exit_on_signal
from seamscope.render import files
folder = sys.argv[1]
with hard_exit_on_signal():
    files._stage(os.path.join(folder, "receipt.json"), b"{half a new rec")  # a write in progress
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_while_writing_stops_at_once_and_leaves_the_last_whole_file(tmp_path, sig):
    import signal
    import sys

    (tmp_path / "receipt.json").write_text('{"the": "last whole receipt"}')
    p = subprocess.Popen([sys.executable, "-c", CHILD_WRITING, str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: [signal.signal(s, signal.SIG_DFL) for s in (signal.SIGINT, signal.SIGHUP)])
    assert p.stdout is not None and p.stdout.readline() == "writing\n"
    signum = getattr(signal, sig)
    p.send_signal(signum)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signum, err
    assert f"{sig} while writing: stopped at once" in err
    assert os.listdir(tmp_path) == ["receipt.json"]  # no temporary file left
    assert json.loads((tmp_path / "receipt.json").read_text()) == {"the": "last whole receipt"}
