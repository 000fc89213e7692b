"""Real ``seamscope run`` processes against what real jobs do: a script that changes directory, one
that forks, one that opens its own session, one that raises seamscope's own error; a run that
ends with exit 2 from inside; the same program from two checkouts; a second signal while the
receipt is written; SIGINT ignored by the shell; a lock that is a folder; a user's own file where
the output goes.

Each run is a process of its own forked from the test run's one server (``fresh_server``: torch
imported once); ``test_lifecycle.py`` has the torch-free side."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time

import pytest
from fakes import Forked, job_forked, script_forked, seamscope_forked, seamscope_here

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))
LONG = os.path.join(HERE, "workloads", "long_run.py")


def _script(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def _receipt(folder) -> dict:
    with open(os.path.join(folder, "receipt.json")) as f:
        return json.load(f)


def _one_line(err: str) -> None:
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_script_that_changes_directory_keeps_every_output_in_the_out_it_was_given(tmp_path, fresh_server):
    _script(tmp_path / "chdir.py", """
        import os, time, torch
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        f(torch.ones(3))
        os.makedirs("elsewhere", exist_ok=True)
        os.chdir("elsewhere")  # as Hydra does
        for _ in range(30):
            f(torch.ones(3))
            time.sleep(0.01)
    """)
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--checkpoint-every", "0.05", "--out", "o", "chdir.py"],
                         tmp_path)
    assert p.returncode == 0, p.stderr
    assert "seamscope: wrote o/receipt.json, o/index.html" in p.stderr
    r = _receipt(tmp_path / "o")
    assert r["ledger"]["run"]["status"]["state"] == "completed" and r["summary"]["call_count"] == 31
    assert sorted(os.listdir(tmp_path / "o")) == ["calls.csv", "index.html", "receipt.json"]  # lock released
    assert os.listdir(tmp_path / "elsewhere") == []  # no checkpoint, output or lock there
    assert seamscope_here(["check", "o", "--max-breaks", "5"], tmp_path).returncode == 0


def test_a_workload_that_does_not_load_writes_a_receipt_with_a_run_status_that_check_fails(tmp_path, fresh_server):
    (tmp_path / "wl.py").write_text("x = 1\n")
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "o2", "wl.py:nonexistent"], tmp_path)
    assert p.returncode == 2, p.stderr
    _one_line(p.stderr)
    status = _receipt(tmp_path / "o2")["ledger"]["run"]["status"]
    assert status["state"] == "exited" and status["exit_code"] == 2 and "nonexistent" in status["detail"]
    assert not (tmp_path / "o2" / ".seamscope.lock").exists()
    k = seamscope_here(["check", "o2", "--max-breaks", "0"], tmp_path)
    assert k.returncode == 1 and "did not complete (exited 2" in k.stdout, k.stdout


def test_the_scripts_own_seamscope_error_is_the_script_failing(tmp_path, fresh_server):
    _script(tmp_path / "own.py", """
        import torch
        import seamscope
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        f(torch.ones(3))
        seamscope.load_receipt("no-such-receipt.json")  # raises seamscope.errors.UnusableInput
    """)
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "o", "own.py"], tmp_path)
    assert p.returncode == 1, p.stderr
    assert "Traceback" in p.stderr and "own.py" in p.stderr and "UnusableInput" in p.stderr
    assert "own.py raised UnusableInput" in p.stderr
    status = _receipt(tmp_path / "o")["ledger"]["run"]["status"]
    assert status["state"] == "raised" and status["detail"].startswith("UnusableInput: ")
    assert _receipt(tmp_path / "o")["summary"]["call_count"] == 1


def test_a_marker_that_cannot_be_written_still_ends_in_a_receipt_with_a_run_status(tmp_path, monkeypatch, dynamo_reset):
    import errno

    from seamscope.capture.runner import run_target
    from seamscope.errors import UnusableInput
    from seamscope.render import files

    real, failed = files._stage, []

    def stage(path, data):  # the disk is full when the run starts, and has room again at its end
        if os.path.basename(path) == "receipt.json" and not failed:
            failed.append(path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data)

    monkeypatch.setattr(files, "_stage", stage)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnusableInput, match=r"^o: could not write receipt.json \(No space left on device\)"):
        run_target(LONG, ["--calls", "3"], out="o", checkpoint_every=0)
    assert not (tmp_path / "started").exists()  # the script never started
    status = _receipt(tmp_path / "o")["ledger"]["run"]["status"]
    assert status["state"] == "exited" and status["exit_code"] == 2
    assert not (tmp_path / "o" / ".seamscope.lock").exists()


BRK = """
import torch

@torch.compile(backend="eager")
def f(x):
    y = x * 2
    print("break", flush=True)
    return y + 1

for _ in range(3):
    f(torch.randn(8))
"""


def test_break_site_ids_are_the_same_from_another_checkout_and_another_spelling(tmp_path, fresh_server):
    for checkout in ("c1", "c2"):
        (tmp_path / checkout).mkdir()
        (tmp_path / checkout / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        _script(tmp_path / checkout / "sub" / "brk.py", BRK)
    a = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "a", "sub/brk.py"], tmp_path / "c1")
    b = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "../b", "brk.py"], tmp_path / "c2" / "sub")
    assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
    sites = [_receipt(d)["summary"]["break_sites"] for d in (tmp_path / "c1" / "a", tmp_path / "c2" / "b")]
    assert [s["file"] for s in sites[0]] == ["sub/brk.py"] == [s["file"] for s in sites[1]]
    k = seamscope_here(["check", str(tmp_path / "c2" / "b"), "--baseline", str(tmp_path / "c1" / "a")], tmp_path)
    assert k.returncode == 0 and "new break site" not in k.stdout, k.stdout


def test_a_scripts_own_session_works_under_run_and_one_into_the_runs_folder_joins_the_run(tmp_path, fresh_server):
    _script(tmp_path / "nest.py", """
        import json, os, torch
        import seamscope
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        for _ in range(3):
            f(torch.ones(3))
        seen = {}
        with seamscope.session(out="outer") as j:  # the folder `seamscope run` holds: joins the run
            for _ in range(2):
                f(torch.ones(3))
        seen["joined calls"] = j.ledger.totals.calls
        seen["lock kept"] = os.path.exists(os.path.join("outer", ".seamscope.lock"))
        with seamscope.session(out="inner") as s:  # as the README shows
            for _ in range(4):
                f(torch.ones(3))
        seen["inner calls"] = s.ledger.totals.calls
        for _ in range(2):
            f(torch.ones(3))
        with open("seen.json", "w") as fh:
            json.dump(seen, fh)
    """)
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "outer", "nest.py"], tmp_path)
    assert p.returncode == 0, p.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["joined calls"] == 5  # the run's so far: 3 before the block, 2 inside it
    assert seen["lock kept"] is True and seen["inner calls"] == 4
    inner, outer = _receipt(tmp_path / "inner"), _receipt(tmp_path / "outer")
    assert inner["summary"]["call_count"] == 4 and inner["ledger"]["run"]["status"]["state"] == "completed"
    assert outer["summary"]["call_count"] == 7 and outer["ledger"]["run"]["status"]["state"] == "completed"
    assert any("session(out=outer) opened during this run asked for this run's own folder, and joined" in w
               for w in outer["ledger"]["run"]["warnings"])
    assert any("seamscope.session() (out=inner)" in w for w in outer["ledger"]["run"]["warnings"])
    assert (
        not (tmp_path / "inner" / ".seamscope.lock").exists() and not (tmp_path / "outer" / ".seamscope.lock").exists()
    )


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie nobody reaped yet
    except FileNotFoundError:
        return True


def test_a_forked_child_that_reaches_the_scripts_end_never_writes_over_the_parents_output(tmp_path, fresh_server):
    _script(tmp_path / "forks.py", """
        import json, os, time, torch
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        for _ in range(5):
            f(torch.ones(3))
        if os.fork() == 0:  # the child: 2 calls, then it returns once the parent's output is written
            for _ in range(2):
                f(torch.ones(3))
            with open("child.pid", "w") as fh:
                fh.write(str(os.getpid()))
            end = time.time() + 60
            while time.time() < end:
                try:
                    with open("o/receipt.json") as fh:
                        if json.load(fh)["ledger"]["run"]["status"]["state"] == "completed":
                            break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.02)
        else:
            for _ in range(20):
                f(torch.ones(3))
    """)
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "o", "forks.py"], tmp_path)
    assert p.returncode == 0, p.stderr
    child = int((tmp_path / "child.pid").read_text())
    end = time.monotonic() + 60
    while not _gone(child) and time.monotonic() < end:
        time.sleep(0.05)
    assert _gone(child)
    r = _receipt(tmp_path / "o")
    assert r["summary"]["call_count"] == 25 and r["ledger"]["run"]["status"]["state"] == "completed"
    assert not (tmp_path / "o" / ".seamscope.lock").exists()


def test_a_session_keeps_its_out_across_a_chdir_and_its_forked_child_writes_nothing(tmp_path, fresh_server):
    script = _script(tmp_path / "sess.py", """
        import json, os, time, torch
        import seamscope
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        with seamscope.session(out="o", checkpoint_every=0):
            for _ in range(3):
                f(torch.ones(3))
            os.makedirs("elsewhere", exist_ok=True)
            os.chdir("elsewhere")
            if os.fork() == 0:  # the child leaves `with` once the parent's receipt is written
                f(torch.ones(3))
                with open("../child.pid", "w") as fh:
                    fh.write(str(os.getpid()))
                end = time.time() + 60
                while time.time() < end:
                    try:
                        with open("../o/receipt.json") as fh:
                            if json.load(fh)["ledger"]["run"]["status"]["state"] == "completed":
                                break
                    except (OSError, ValueError, KeyError):
                        pass
                    time.sleep(0.02)
            else:
                for _ in range(4):
                    f(torch.ones(3))
    """)
    p = script_forked(fresh_server, [script], tmp_path)
    assert p.returncode == 0, p.stderr
    child = int((tmp_path / "child.pid").read_text())
    end = time.monotonic() + 60
    while not _gone(child) and time.monotonic() < end:
        time.sleep(0.05)
    assert _gone(child)
    r = _receipt(tmp_path / "o")
    assert r["summary"]["call_count"] == 7 and r["ledger"]["run"]["status"]["state"] == "completed"
    assert os.listdir(tmp_path / "elsewhere") == [] and not (tmp_path / "o" / ".seamscope.lock").exists()


def test_a_second_signal_while_the_receipt_is_written_keeps_the_first_signals_code(tmp_path, fresh_server):
    script = _script(tmp_path / "hup.py", """
        import os, signal, time
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(30)
    """)
    p = job_forked(fresh_server, "fresh_jobs:second_signal_while_writing",
                   [script, str(tmp_path / "o"), "SIGTERM"], tmp_path)
    assert p.returncode == 129, p.stderr  # SIGHUP's, not SIGTERM's 143
    assert "SIGTERM while writing: stopped at once" in p.stderr
    assert not [n for n in os.listdir(tmp_path / "o") if n.startswith(".tmp-") or n == ".seamscope.lock"]


def test_a_second_signal_while_the_report_is_written_keeps_the_code_the_receipt_records(tmp_path, fresh_server):
    _script(tmp_path / "hup.py", """
        import os, signal, time
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(30)
    """)
    proc = Forked(fresh_server, ["run", "--quiet", "--checkpoint-every", "0", "--out", "o", "hup.py"], tmp_path,
                  stdout=tmp_path / "stdout", stderr=tmp_path / "stderr",
                  entry="fresh_jobs:seamscope_signalled_while_reporting")
    rc = proc.wait()
    assert _receipt(tmp_path / "o")["ledger"]["run"]["status"]["exit_code"] == 129
    assert rc == 129, (tmp_path / "stderr").read_text()  # SIGHUP's, as the receipt says; not 143


def test_a_run_started_with_sigint_ignored_keeps_ignoring_it(tmp_path, fresh_server):
    proc = Forked(
        fresh_server,
        ["run", "--quiet", "--checkpoint-every", "0", "--out", "o", LONG, "--", "--calls", "40"],
        tmp_path,
        stdout=tmp_path / "stdout",
        stderr=tmp_path / "stderr",
        entry="fresh_jobs:seamscope_ignoring_sigint",
    )
    end = time.monotonic() + 120
    while (not (tmp_path / "stdout").exists() or (tmp_path / "stdout").read_text().count("\n") < 3):
        assert proc.running() and time.monotonic() < end, (tmp_path / "stderr").read_text()
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    assert proc.wait() == 0, (tmp_path / "stderr").read_text()
    r = _receipt(tmp_path / "o")
    assert r["ledger"]["run"]["status"]["state"] == "completed" and r["summary"]["call_count"] == 40


def test_a_lock_that_is_a_folder_is_refused_in_one_line(tmp_path, fresh_server):
    (tmp_path / "o8" / ".seamscope.lock").mkdir(parents=True)
    os.utime(tmp_path / "o8" / ".seamscope.lock", (1_000_000_000, 1_000_000_000))
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "o8", LONG], tmp_path)
    assert p.returncode == 2, p.stderr
    _one_line(p.stderr)
    assert "o8/.seamscope.lock is a folder" in p.stderr and not (tmp_path / "started").exists()


def test_a_users_own_calls_csv_in_out_is_kept_and_the_run_refused(tmp_path, fresh_server):
    (tmp_path / "calls.csv").write_text("user,data\n1,2\n")
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", ".", LONG], tmp_path)
    assert p.returncode == 2, p.stderr
    _one_line(p.stderr)
    assert "calls.csv there is not seamscope's" in p.stderr
    assert (tmp_path / "calls.csv").read_text() == "user,data\n1,2\n"
    assert not (tmp_path / "started").exists() and not (tmp_path / "receipt.json").exists()
