"""A run's output folder against what real jobs meet, torch-free: a disk that fills between the
files of one set, two sessions of one process on one folder, odd locks (a folder, a pid no system
hands out), a user's own files where the output set goes, and `check` on receipts that do not say
how their run ended (the real processes are in ``test_lifecycle_run.py``)."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import types

import msgspec
import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.capture.persist import LOCK_NAME, OutLock, RunOutput, _signals
from seamscope.cli import main
from seamscope.errors import UnusableInput
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import RunStatus
from seamscope.render import files
from seamscope.render.receipt_json import CallsCsvRenderer, write_receipt_files, write_receipt_only


def _receipt(status: RunStatus | None, calls: int = 3, source: str = "live"):
    steps = [FakeStep("compile", 1000, "0/0"), FakeStep("region", 50, "0/0"), FakeStep("island", 10)]
    hit = [FakeStep("region", 50, "0/0"), FakeStep("island", 10)]
    led = play(FakeProgram(breaks={}, calls=[FakeCall(steps)] + [FakeCall(hit) for _ in range(calls - 1)])).build()
    run = msgspec.structs.replace(led.run, source=source)
    if status is not None:
        run = msgspec.structs.replace(run, status=status)
    return make_receipt(msgspec.structs.replace(led, run=run))


def _cli(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out + out.err


def _full_disk_at(monkeypatch, name):
    real = files._stage

    def stage(path, data):
        if os.path.basename(path) == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data)

    monkeypatch.setattr(files, "_stage", stage)


# --- an output set committed whole, or not at all ------------------------------------------------


def test_a_final_receipt_that_cannot_be_written_leaves_no_newer_calls_csv_beside_the_checkpoint(tmp_path, monkeypatch):
    marker = _receipt(RunStatus(state="incomplete", detail="the run started; no checkpoint yet"), calls=1)
    write_receipt_only(marker, tmp_path, fresh=True)
    _full_disk_at(monkeypatch, "receipt.json")  # calls.csv fits, the receipt does not
    final = _receipt(RunStatus(state="completed", exit_code=0), calls=6)
    with pytest.raises(files.WriteFailed, match="could not write receipt.json") as e:
        write_receipt_files(final, tmp_path)
    assert "written: nothing new" in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["receipt.json"]  # no calls.csv of 6 calls beside a 1-call receipt
    kept = json.loads((tmp_path / "receipt.json").read_text())
    assert kept["receipt_sha256"] == marker.receipt_sha256


def test_the_receipt_is_renamed_into_place_before_the_files_made_from_it(tmp_path, monkeypatch):
    """A process killed between two renames leaves a receipt alone, never a calls.csv newer than it."""
    order = []
    real = files._commit

    def commit(tmp, path):
        order.append(os.path.basename(path))
        return real(tmp, path)

    monkeypatch.setattr(files, "_commit", commit)
    write_receipt_only(_receipt(RunStatus(state="incomplete", detail="checkpoint at 1 s")), tmp_path, fresh=True)
    write_receipt_files(_receipt(RunStatus(state="completed", exit_code=0)), tmp_path)
    assert order == ["receipt.json", "receipt.json", "calls.csv"]


# --- the lock: one per folder, whatever the process -----------------------------------------------


def test_a_second_session_of_the_same_process_is_refused_and_leaves_the_first_ones_lock(tmp_path):
    first = OutLock(str(tmp_path), "seamscope run train.py")
    first.acquire()
    try:
        second = OutLock(str(tmp_path), "seamscope.session()")
        with pytest.raises(UnusableInput, match="in use by another seamscope session of this process"):
            second.acquire()
        second.release()
        assert json.loads((tmp_path / LOCK_NAME).read_text())["token"] == first.info["token"]
    finally:
        first.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_lock_of_this_pid_that_no_session_here_holds_is_taken_over(tmp_path):
    """A container's PID 1 killed and restarted: the lock names this very pid, and is stale."""
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                                  "started": "earlier", "command": "seamscope run old.py"}))
    lock = OutLock(str(tmp_path), "seamscope run new.py")
    lock.acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["command"] == "seamscope run new.py"
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_lock_that_is_a_folder_is_one_line(tmp_path):
    (tmp_path / LOCK_NAME).mkdir()
    old = 1_000_000_000
    os.utime(tmp_path / LOCK_NAME, (old, old))  # not one being written now
    with pytest.raises(UnusableInput, match=r"\.seamscope\.lock is a folder, not seamscope's lock") as e:
        OutLock(str(tmp_path), "seamscope run x.py").acquire()
    assert "\n" not in str(e.value)
    assert (tmp_path / LOCK_NAME).is_dir()


@pytest.mark.parametrize("pid", [10**30, -1, 0])
def test_a_lock_naming_a_pid_no_process_can_have_is_stale(tmp_path, pid):
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": pid, "host": socket.gethostname(),
                                                  "started": "earlier", "command": "x"}))
    lock = OutLock(str(tmp_path), "seamscope run x.py")
    lock.acquire()
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    lock.release()


# --- only seamscope's own files are replaced -----------------------------------------------------


def _output(folder):
    return RunOutput(types.SimpleNamespace(command=["train.py"]), str(folder), 0)


@pytest.mark.parametrize("name", ["calls.csv", "index.html", "receipt.json"])
def test_a_users_own_file_of_an_output_sets_name_is_refused_and_kept(tmp_path, name):
    (tmp_path / name).write_text("the user's own data\n")
    with pytest.raises(UnusableInput, match=f"{name} there is not seamscope's") as e:
        _output(tmp_path).prepare()
    assert "\n" not in str(e.value)
    assert (tmp_path / name).read_text() == "the user's own data\n"
    assert not (tmp_path / LOCK_NAME).exists()  # refused: the folder is not held


def test_a_fifo_of_an_output_sets_name_is_refused_without_opening_it(tmp_path):
    os.mkfifo(tmp_path / "receipt.json")
    with pytest.raises(UnusableInput, match="receipt.json there is not seamscope's"):
        _output(tmp_path).prepare()


def test_an_older_runs_own_set_is_accepted_and_replaced(tmp_path):
    from seamscope.render.html import write_html_report

    old = _receipt(RunStatus(state="completed", exit_code=0))
    write_receipt_files(old, tmp_path)
    write_html_report(old, tmp_path)
    assert (tmp_path / "calls.csv").read_text() == CallsCsvRenderer().render(old)
    out = _output(tmp_path)
    out.prepare()
    try:
        out.session = types.SimpleNamespace(command=["train.py"], decision=None, on_call_end=[],
                                            build=lambda status: msgspec.structs.replace(
                                                old.ledger, run=msgspec.structs.replace(old.ledger.run, status=status)))
        out.begin()
    finally:
        out.close()
    assert sorted(os.listdir(tmp_path)) == ["receipt.json"]
    assert json.loads((tmp_path / "receipt.json").read_text())["ledger"]["run"]["status"]["state"] == "incomplete"


# --- check: a receipt that does not say how its run ended -----------------------------------------


def test_check_refuses_a_live_receipt_without_a_run_status(tmp_path, capsys):
    write_receipt_files(_receipt(None), tmp_path)
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "0")
    assert code == 2 and "records no run status" in out and "within budget" not in out
    assert len(out.strip().splitlines()) == 1 and "Traceback" not in out
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "0", "--allow-incomplete")
    assert code == 0 and "how it ended is not recorded" in out


def test_check_reads_an_imported_receipt_without_a_status_as_before(tmp_path, capsys):
    write_receipt_files(_receipt(None, source="torch_trace"), tmp_path)
    code, out = _cli(capsys, "check", str(tmp_path), "--max-breaks", "5")
    assert code == 0 and "run:" not in out


@pytest.mark.parametrize("status", [RunStatus(state="incomplete", detail="checkpoint at 60 s"),
                                    RunStatus(state="terminated", detail="SIGTERM", exit_code=143), None])
def test_check_refuses_a_baseline_whose_run_did_not_complete(tmp_path, capsys, status):
    write_receipt_files(_receipt(RunStatus(state="completed", exit_code=0)), tmp_path / "now")
    write_receipt_files(_receipt(status, calls=2), tmp_path / "base")
    code, out = _cli(capsys, "check", str(tmp_path / "now"), "--baseline", str(tmp_path / "base"))
    assert code == 2 and "baseline" in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) == 1
    code, out = _cli(capsys, "check", str(tmp_path / "now"), "--baseline", str(tmp_path / "base"),
                     "--allow-incomplete")
    assert code == 0 and "warning: the baseline" in out, out


# --- signals a shell set to be ignored -------------------------------------------------------------


def test_an_ignored_sigint_stays_ignored():
    """A background job of a non-interactive shell (`cmd &`) starts with SIGINT ignored."""
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert signal.SIGINT not in _signals() and signal.SIGTERM in _signals()
    finally:
        signal.signal(signal.SIGINT, old)
    assert signal.SIGINT in _signals()
