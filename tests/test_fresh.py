"""The one service that runs a job in a fresh process (``experiments/fresh.py``), in both of its
ways: forked from a server that imported things once, and a new interpreter per job."""

from __future__ import annotations

import json
import os
import time

import pytest

from seamscope.experiments.fresh import FreshProcesses, Job, shared

MODES = [pytest.param("fork", marks=pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")), "process"]


pytestmark = pytest.mark.usefixtures("outside_the_shared_server")  # each test starts the servers it checks


@pytest.fixture(params=MODES)
def fresh(request, tmp_path):
    warmed = tmp_path / "warmed.txt"
    with FreshProcesses(preload=["json"], warm=("fresh_jobs:warm", str(warmed)), mode=request.param) as fp:
        fp.warmed = warmed  # type: ignore[attr-defined]
        yield fp


def _read(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _gone(pid: int, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of ours still answers kill(0); reap it
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_a_job_gets_its_environment_folder_and_log_and_each_is_fresh(fresh, tmp_path):
    # GIVEN two jobs with their own environment, folder and log
    env = {"FRESH_X": "1"}
    os.environ["FRESH_GONE"] = "here"
    try:
        ends = [fresh.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / f"{i}.json"), "code": 3},
                              log=str(tmp_path / f"{i}.log"), env=env, unset=["FRESH_GONE"], cwd=str(tmp_path)))
                for i in range(2)]
    finally:
        del os.environ["FRESH_GONE"]
    # THEN each ran in a process of its own, with what it was given, and its exit code is the result
    assert [e.exit_code for e in ends] == [3, 3] and not any(e.timed_out or e.signal for e in ends)
    seen = [_read(tmp_path / f"{i}.json") for i in range(2)]
    assert [s["counter"] for s in seen] == [1, 1]  # nothing carried over from the first job
    assert seen[0]["pid"] != seen[1]["pid"] != os.getpid()
    assert all(s["x"] == "1" and not s["gone"] and s["cwd"] == str(tmp_path) for s in seen)
    log = (tmp_path / "0.log").read_text()
    assert "to stdout" in log and "to stderr" in log
    if fresh.mode == "fork":  # the server warmed up once; the children inherit it
        assert fresh.alive() and all(s["warmed"] == [str(fresh.warmed)] for s in seen)
        assert len(fresh.warmed.read_text().splitlines()) == 1
    else:
        assert not fresh.alive() and all(s["warmed"] == [] for s in seen)


def test_stdout_can_be_discarded_and_an_exception_is_exit_1_with_its_traceback(fresh, tmp_path):
    e = fresh.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "r.json")}, log=str(tmp_path / "a.log"),
                      stdout=False))
    assert e.ok and "to stdout" not in (tmp_path / "a.log").read_text()
    e = fresh.run(Job(entry="fresh_jobs:fail", log=str(tmp_path / "b.log")))
    assert e.exit_code == 1 and "ValueError: planted failure" in (tmp_path / "b.log").read_text()
    assert [fresh.run(Job(entry="sys:exit", arg=a)).exit_code for a in (4, None, "a message")] == [4, 0, 1]


def test_a_crash_is_a_result_and_the_next_job_still_runs(fresh, tmp_path):
    e = fresh.run(Job(entry="fresh_jobs:crash"))
    assert e.signal == "SIGSEGV" and e.exit_code == -11 and not e.ok and e.text() == "signal SIGSEGV"
    assert fresh.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "r.json")})).ok


def test_a_hung_job_is_killed_with_what_it_started_after_the_timeout(fresh, tmp_path):
    pids = tmp_path / "pids.json"
    # the job writes the pids in about 0.3 s on a loaded machine, forked or a new interpreter;
    # where it was killed before that, once more with a longer timeout
    for timeout in (1.5, 10.0):
        e = fresh.run(Job(entry="fresh_jobs:sleep_with_a_child", arg=str(pids)), timeout=timeout)
        if pids.exists():
            break
    assert e.timed_out and e.exit_code is None and e.text() == "killed after the timeout"
    child, grandchild = _read(pids)
    assert _gone(child) and _gone(grandchild)
    assert fresh.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "r.json")})).ok  # still in step


def test_ctrl_c_kills_the_running_job_and_propagates(fresh, tmp_path):
    # GIVEN a job that runs until it is stopped, and progress told every 0.2 s
    pids = tmp_path / "pids.json"
    said: list[str] = []

    def progress(msg: str) -> None:
        said.append(msg)
        if pids.exists() and len(said) >= 2:
            raise KeyboardInterrupt  # stands for Ctrl-C arriving while the caller waits

    # WHEN Ctrl-C arrives  THEN it propagates, and the job and what it started are gone
    with pytest.raises(KeyboardInterrupt):
        fresh.run(Job(entry="fresh_jobs:sleep_with_a_child", arg=str(pids)), progress=progress, label="sleeper",
                  heartbeat_s=0.2)
    assert said[0].startswith("sleeper: still running after")
    child, grandchild = _read(pids)
    assert _gone(child) and _gone(grandchild)
    # AND a fork server stays in step for the next job (a shared one serves other callers)
    assert fresh.alive() == (fresh.mode == "fork")
    assert fresh.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "next.json")})).ok


def test_when_the_server_died_jobs_run_in_new_interpreters(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    with FreshProcesses(mode="fork") as fp:
        assert fp.alive()
        fp._server.kill()  # type: ignore[union-attr]
        fp._server.wait()  # type: ignore[union-attr]
        e = fp.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "r.json")}))
        assert e.ok and not fp.alive()


def test_the_server_exits_without_the_interpreters_teardown(tmp_path):
    """Closing the server is not a wait for torch's teardown (seconds, at the end of every ``try``,
    probe or shape study): it exits at the end of its stdin, ``atexit`` handlers not run, having
    answered every job first."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    mark = tmp_path / "torn-down.txt"
    fp = FreshProcesses(warm=("fresh_jobs:exit_mark", str(mark)), mode="fork")
    assert fp.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "r.json")})).ok
    server = fp._server
    fp.close()
    assert server is not None and server.returncode == 0
    assert not mark.exists() and (tmp_path / "r.json").exists()


def test_a_forked_child_leaves_what_the_server_imported_to_the_server(tmp_path):
    """The server's heap is frozen before it forks: a child's garbage collections skip it (and so
    do not copy its pages); a new interpreter has nothing frozen."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    counts = []
    for mode in ("fork", "process"):
        with FreshProcesses(preload=["json"], mode=mode) as fp:
            assert fp.run(Job(entry="fresh_jobs:frozen", arg=str(tmp_path / mode))).ok
        counts.append(int((tmp_path / mode).read_text()))
    assert counts[0] > 1000 and counts[1] == 0


def test_two_replies_in_one_read_are_both_seen():
    """A quick job's two replies (its pid, then its exit) can reach the pipe together: the second
    is answered from what was already read, not waited for on the pipe (which would hang)."""
    r, w = os.pipe()
    fp = FreshProcesses(mode="process")
    fp._open_replies(r)  # as a started server's reply pipe
    os.write(w, b'{"pid": 7}\n{"exit": 0}\n')
    try:
        assert fp._reply(None) == {"pid": 7}
        assert fp._reply(0.5) == {"exit": 0}
        assert fp._reply(0.1) is None
        os.close(w)
        w = -1
        with pytest.raises(OSError):
            fp._reply(0.5)
    finally:
        fp._replies.close()
        if w >= 0:
            os.close(w)


def test_inside_shared_a_fork_service_borrows_the_running_server(tmp_path):
    """One server for many callers: a fork service made inside ``shared`` starts no server; its
    jobs are the shared server's children, each fresh; closing it leaves the server running. A
    service with a warm step of its own, or one made outside, starts its own server."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    os.environ["FRESH_GONE"] = "when the server started"
    try:
        server = FreshProcesses(preload=["json"], mode="fork")
    finally:
        del os.environ["FRESH_GONE"]
    with server, shared(server):
        server_pid = server._server.pid  # type: ignore[union-attr]
        # the caller's environment and folder of now, as its own server would have had them
        os.environ["FRESH_X"] = "now"
        os.environ.pop("FRESH_GONE", None)
        old = os.getcwd()
        os.chdir(tmp_path)
        try:
            with FreshProcesses(preload=["fresh_jobs"], mode="fork") as borrower:
                assert borrower._server is None and borrower.alive()
                ends = [borrower.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / f"{i}.json"),
                                                                         "code": 2}))
                        for i in range(2)]
        finally:
            os.chdir(old)
            del os.environ["FRESH_X"]
        assert [e.exit_code for e in ends] == [2, 2] and all(e.wall_ns > 0 for e in ends)
        seen = [_read(tmp_path / f"{i}.json") for i in range(2)]
        assert [s["ppid"] for s in seen] == [server_pid] * 2 and [s["counter"] for s in seen] == [1, 1]
        assert all(s["x"] == "now" and not s["gone"] and s["cwd"] == str(tmp_path) for s in seen)
        assert server.alive() and not borrower.alive()  # closed: it let go, the server runs on
        with FreshProcesses(preload=["json"], warm=("fresh_jobs:warm", str(tmp_path / "w.txt")), mode="fork") as own:
            assert own._server is not None and own._server.pid != server_pid
        assert FreshProcesses(mode="process")._server is None
        # skip_warm: a service with a warm step borrows too, the step not run in the shared server
        warmed = tmp_path / "w2.txt"
        with shared(server, skip_warm=True), \
                FreshProcesses(preload=["json"], warm=("fresh_jobs:warm", str(warmed)), mode="fork") as skipping:
            assert skipping._server is None
            assert skipping.run(Job(entry="fresh_jobs:report", arg={"path": str(tmp_path / "w.json")})).ok
        assert _read(tmp_path / "w.json")["ppid"] == server_pid and not warmed.exists()
    with FreshProcesses(mode="fork") as outside:
        assert outside._server is not None and outside._server.pid != server_pid


@pytest.mark.torch
def test_a_forked_job_logs_as_its_environment_says_though_the_server_imported_torch(fresh_server, tmp_path):
    """``import torch`` reads TORCH_TRACE and TORCH_LOGS once: a job forked after the server
    imported it sets its logs up again from its own environment, as a new interpreter would."""
    # GIVEN the test run's server, which imported torch without these settings
    trace, out = tmp_path / "trace", tmp_path / "torch_logs.txt"
    env = {"TORCH_TRACE": "trace", "TORCH_LOGS": "graph_breaks", "TORCH_LOGS_OUT": "torch_logs.txt"}
    # WHEN a job that compiles a graph break sets them (paths relative to its folder)
    log = tmp_path / "a.log"
    e = fresh_server.run(Job(entry="fresh_jobs:compile_a_break", arg={}, env=env, log=str(log), stdout=False,
                             cwd=str(tmp_path)), 300)
    assert e.ok, log.read_text()
    # THEN PyTorch writes its trace file there, and its graph-break log to stderr and to the file
    (first,) = trace.iterdir()
    records = first.read_text()
    assert first.name.startswith("dedicated_log_torch_trace_") and '"dynamo_start"' in records
    assert '"name": "dynamo_graph_break_reason"' in records
    assert "[__graph_breaks] Graph break in user code at" in log.read_text()
    assert "[__graph_breaks] Graph break in user code at" in out.read_text()
    # AND a next job without them (each child a fork of the unchanged server) logs none of it
    log2 = tmp_path / "b.log"
    e = fresh_server.run(Job(entry="fresh_jobs:compile_a_break", arg={}, unset=list(env), log=str(log2),
                             stdout=False, cwd=str(tmp_path)), 300)
    assert e.ok, log2.read_text()
    assert list(trace.iterdir()) == [first] and first.read_text() == records
    assert "__graph_breaks" not in log2.read_text() and out.read_text().count("Graph break in user code") == 1
