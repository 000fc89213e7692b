"""Fresh processes: run one job on a fresh Dynamo, isolated, and say how it ended.

The probe's isolated ladder, the shape study, ``try`` and ``run --warm`` each measure something that
must not see another measurement's compiled code, caches or crashes. They all go through this one
service:

- a :class:`Job` names a function (``"package.module:function"``) and its one JSON argument; the
  function runs in a process of its own and returns its exit code (or raises ``SystemExit``); what
  it measured it writes to a file the caller named in the argument (a receipt, a result), atomically;
- **fresh**: with ``mode="fork"`` a server process imports ``preload`` (torch, the caller's modules,
  a workload through ``warm``) once, compiles nothing, and forks one child per job: as fresh as a
  new interpreter as far as Dynamo and the inductor cache are concerned, without its seconds of
  imports. What a preloaded torch read from the environment at import, the child reads again from
  the job's: torch's logs (``TORCH_LOGS``, ``TORCH_LOGS_OUT``, ``TORCH_TRACE``...) and Inductor's
  ``compile_threads`` are as the job's ``env`` and ``unset`` make them; other settings a module read at
  import keep the server's values. ``mode="process"`` starts a new interpreter per job (where
  ``fork`` is missing, or when asked); if the server has died, a job runs that way too, and so
  does every job where what the server imported made forking unsafe (:func:`fork_unsafe`: a thread
  started, CUDA initialized);
- **a timeout**: a job still running after ``timeout`` seconds is killed with its process group,
  and :attr:`Ended.timed_out` says so;
- **Ctrl-C**: the children are in sessions of their own (the terminal's Ctrl-C reaches only the
  caller); a ``KeyboardInterrupt`` in the caller while a job runs kills the job, then propagates;
- **crash isolation**: a job that segfaults, aborts or is killed is an :class:`Ended` with its
  signal, never an exception in the caller;
- **progress**: ``run(progress=...)`` is told, every ``heartbeat_s``, that the job still runs;
- **one server for many callers**: inside ``with shared(server):`` a service asked to fork, with no
  ``warm`` step of its own (or any, with ``skip_warm``), forks its jobs from that running server
  instead of starting one (a test suite's one server for the whole run).

The child's stdout and stderr go to the job's ``log`` (appended), or nowhere.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import msgspec


class Job(msgspec.Struct, frozen=True, kw_only=True):
    """One job: ``entry`` called with ``arg`` in a fresh process."""

    entry: str
    """``package.module:function``; the function takes ``arg`` and returns an exit code (None: 0)."""
    arg: Any = None
    log: str = ""
    """The child's stderr is appended here (and its stdout, with ``stdout``); empty: discarded."""
    stdout: bool = True
    env: dict[str, str] = {}
    """Set in the child's environment before the function runs (``TORCHINDUCTOR_CACHE_DIR``,
    ``TORCH_TRACE``, ...); in a forked child, torch's logs are set up again from it."""
    unset: list[str] = []
    cwd: str = ""


@dataclass(frozen=True)
class Ended:
    """How a job's process ended."""

    exit_code: int | None
    """The function's exit code; negative: killed by that signal; None: killed after the timeout."""
    signal: str | None = None
    """The signal that ended the process (``SIGSEGV``), when one did."""
    wall_ns: int = 0
    lost: str | None = None
    """Why nothing is known of the job (the fork server died under it), or None."""

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None and self.lost is None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def text(self) -> str:
        """``exit code 1``, ``signal SIGSEGV``, ``killed after the timeout``."""
        if self.lost is not None:
            return self.lost
        if self.signal is not None:
            return f"signal {self.signal}"
        if self.exit_code is None:
            return "killed after the timeout"
        return f"exit code {self.exit_code}"


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _env() -> dict[str, str]:
    """The caller's environment, with its ``sys.path`` (a checkout's ``src`` found as here)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _kill_group(pid: int) -> None:
    """SIGKILL the job and what it started (its process group), or the job alone before it has one."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            continue


def default_mode(override: str | None = None) -> str:
    """``fork`` where the platform has it, unless ``override`` (a caller's setting) says ``process``."""
    if override == "process" or not hasattr(os, "fork"):
        return "process"
    return "fork"


class FreshProcesses:
    """The service. ``with FreshProcesses(preload=[...]) as fp: ended = fp.run(job, timeout=60)``.

    ``preload``: modules the fork server imports once; ``warm``: ``(entry, arg)`` the server calls
    once after them (the shape study imports the user's workload there; what it raises goes to
    ``log``, the server's own output); ``mode``: ``fork`` or ``process`` (None: :func:`default_mode`).
    Inside :func:`shared`, a fork service without ``warm`` (or any, with ``skip_warm``) borrows the
    shared server (``preload`` is then the shared server's; each job imports the rest itself).
    """

    def __init__(self, *, preload: Sequence[str] = (), warm: tuple[str, Any] | None = None,
                 mode: str | None = None, log: str = "", python: str = sys.executable) -> None:
        self.mode = mode or default_mode()
        self.python = python
        self._server: subprocess.Popen[bytes] | None = None
        self._replies: Any = None
        self._pending = b""
        self._lender: FreshProcesses | None = None
        self._started_env: dict[str, str] = {}
        self._refused: str | None = None
        if self.mode == "fork" and _SHARED and (warm is None or _SHARED[-1][1]) and _SHARED[-1][0].alive() \
                and _SHARED[-1][0].python == python:
            self._lender = _SHARED[-1][0]
        elif self.mode == "fork":
            try:
                self._start(list(preload), warm, log)
            except OSError:
                self._server = None

    def _start(self, preload: list[str], warm: tuple[str, Any] | None, log: str) -> None:
        r, w = os.pipe()
        cmd = [self.python, "-m", "seamscope.experiments.fresh", "--serve", "--reply-fd", str(w)]
        for m in preload:
            cmd += ["--preload", m]
        if warm is not None:
            cmd += ["--warm", warm[0], "--warm-arg", json.dumps(warm[1])]
        out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
        self._started_env = _env()
        try:
            self._server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=out, env=self._started_env,
                                            pass_fds=(w,), start_new_session=True)
        finally:
            os.close(w)
            if not isinstance(out, int):
                out.close()
        self._open_replies(r)

    def _as_if_own(self, job: Job) -> Job:
        """A job for the shared server as this service's own server would have run it: in the
        caller's environment and folder of now, not those the shared server started with."""
        assert self._lender is not None
        env = {**_env(), **job.env}
        unset = [k for k in self._lender._started_env if k not in env and k not in job.unset]
        return msgspec.structs.replace(job, env=env, unset=[*job.unset, *unset], cwd=job.cwd or os.getcwd())

    def _open_replies(self, fd: int) -> None:
        # read unbuffered, lines split here: a buffered reader can take two replies in one read
        # (a quick job's pid and exit), and select() on the pipe would then wait for the second
        self._replies = os.fdopen(fd, "rb", buffering=0)
        self._pending = b""

    @property
    def refused(self) -> str | None:
        """Why the server would not fork (:func:`fork_unsafe`'s words), once it refused a job: from
        then on each job starts a new interpreter, and a caller with a progress line says why."""
        return self._lender.refused if self._lender is not None else self._refused

    def alive(self) -> bool:
        """Whether jobs are forked from a live server (else each runs in a new interpreter)."""
        if self._lender is not None:
            return self._lender.alive()
        return self._server is not None and self._server.poll() is None

    def run(self, job: Job, timeout: float | None = None, *, progress: Callable[[str], None] | None = None,
            label: str = "job", heartbeat_s: float = 30.0) -> Ended:
        """Run ``job`` in a fresh process and wait for it (at most ``timeout`` seconds)."""
        if self._lender is not None and self._lender.alive():
            return self._lender.run(self._as_if_own(job), timeout, progress=progress, label=label,
                                    heartbeat_s=heartbeat_s)
        t0 = time.perf_counter_ns()
        if self.alive():
            ended = self._run_forked(job, timeout, progress, label, heartbeat_s)
        else:
            ended = self._run_spawned(job, timeout, progress, label, heartbeat_s)
        return Ended(exit_code=ended.exit_code, signal=ended.signal, lost=ended.lost,
                     wall_ns=time.perf_counter_ns() - t0)

    # --- the two ways --------------------------------------------------------------------------

    def _wait(self, done: Callable[[float], bool], timeout: float | None, progress: Callable[[str], None] | None,
              label: str, heartbeat_s: float) -> bool:
        """Poll ``done(seconds)`` until it says the job ended (True) or the timeout passed (False)."""
        start = time.monotonic()
        next_beat = start + heartbeat_s
        while True:
            now = time.monotonic()
            left = None if timeout is None else timeout - (now - start)
            if left is not None and left <= 0:
                return False
            step = heartbeat_s if progress is not None else None
            wait = min(x for x in (left, step, 3600.0) if x is not None)
            if done(max(0.0, wait)):
                return True
            if progress is not None and time.monotonic() >= next_beat:
                progress(f"{label}: still running after {time.monotonic() - start:.0f} s")
                next_beat += heartbeat_s

    def _run_forked(self, job: Job, timeout: float | None, progress: Callable[[str], None] | None,
                    label: str, heartbeat_s: float) -> Ended:
        assert self._server is not None and self._server.stdin is not None
        try:
            self._server.stdin.write(msgspec.json.encode(job) + b"\n")
            self._server.stdin.flush()
            started = self._reply(None)
        except OSError:  # BrokenPipeError included
            started = None
        except KeyboardInterrupt:  # the job is being forked: its pid comes at once, kill what it names
            self._kill_starting()
            raise
        if started is None:
            return Ended(exit_code=None, lost="the fork server died")
        if "refused" in started:  # forking it is unsafe (fork_unsafe): this job and the next start anew
            self._refused = str(started["refused"])
            self.close()
            return self._run_spawned(job, timeout, progress, label, heartbeat_s)
        pid = int(started["pid"])
        reply: list[dict[str, Any]] = []

        def done(seconds: float) -> bool:
            r = self._reply(seconds)
            if r is not None:
                reply.append(r)
            return r is not None

        try:
            finished = self._wait(done, timeout, progress, label, heartbeat_s)
        except OSError:
            return Ended(exit_code=None, lost="the fork server died")
        except KeyboardInterrupt:
            _kill_group(pid)
            self._after_kill(2.0)  # a shared server stays usable for its other callers
            raise
        if not finished:
            _kill_group(pid)
            self._after_kill(30.0)
            return Ended(exit_code=None)
        code = int(reply[0]["exit"])
        return Ended(exit_code=code, signal=_signal_name(code))

    def _kill_starting(self) -> None:
        """Ctrl-C or SIGTERM before the server said the job's pid: read it, then kill the job, so
        that no job outlives its caller (the server would wait on it, the job run on)."""
        try:
            started = self._reply(5.0)
        except (OSError, KeyboardInterrupt, ValueError):
            started = None
        if started is None or "pid" not in started:
            self.close()
            return
        _kill_group(int(started["pid"]))
        self._after_kill(2.0)

    def _after_kill(self, seconds: float) -> None:
        """After killing a job: the server's word that the child ended keeps the pipe in step;
        without it within ``seconds``, the server is closed (later jobs start new interpreters)."""
        try:
            in_step = self._reply(seconds) is not None
        except (OSError, KeyboardInterrupt):
            in_step = False
        if not in_step:
            self.close()

    def _reply(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next reply line, or None when none came within ``timeout`` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            if end is not None:
                ready, _, _ = select.select([self._replies], [], [], max(0.0, end - time.monotonic()))
                if not ready:
                    return None
            chunk = self._replies.read(65536)
            if not chunk:
                raise OSError("the fork server died")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return dict(json.loads(line))

    def _run_spawned(self, job: Job, timeout: float | None, progress: Callable[[str], None] | None,
                     label: str, heartbeat_s: float) -> Ended:
        fd, path = tempfile.mkstemp(prefix="seamscope-job-", suffix=".json")
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.encode(job))
        env = _env()
        env.update(job.env)
        for k in job.unset:
            env.pop(k, None)
        log = open(job.log, "ab") if job.log else None  # noqa: SIM115 - closed below
        try:
            err: Any = log if log is not None else subprocess.DEVNULL
            proc = subprocess.Popen([self.python, "-m", "seamscope.experiments.fresh", "--job", path],
                                    stdin=subprocess.DEVNULL, stdout=err if job.stdout else subprocess.DEVNULL,
                                    stderr=err, env=env, cwd=job.cwd or None, start_new_session=True)
            try:
                finished = self._wait(lambda s: _exited(proc, s), timeout, progress, label, heartbeat_s)
            except KeyboardInterrupt:
                _kill_group(proc.pid)
                proc.wait()
                raise
            if not finished:
                _kill_group(proc.pid)
                proc.wait()
                return Ended(exit_code=None)
            return Ended(exit_code=proc.returncode, signal=_signal_name(proc.returncode))
        finally:
            if log is not None:
                log.close()
            os.unlink(path)

    def close(self) -> None:
        """End the server (:func:`close_server`); jobs from now on run in new interpreters. A
        borrowed server is left running for its owner."""
        self._lender = None
        proc, replies, self._server, self._replies = self._server, self._replies, None, None
        if proc is not None:
            close_server(proc, replies)

    def __enter__(self) -> FreshProcesses:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_SHARED: list[tuple[FreshProcesses, bool]] = []


@contextlib.contextmanager
def shared(server: FreshProcesses, *, skip_warm: bool = False) -> Iterator[FreshProcesses]:
    """While inside, every :class:`FreshProcesses` made to fork without a ``warm`` step forks its
    jobs from ``server`` (running, owned and closed by the caller) instead of starting a server of
    its own; with ``skip_warm``, one with a ``warm`` step too, the step not run (its jobs import
    what it would have imported themselves). A job is as fresh either way: the server itself never
    runs a job. Should the server die or fall out of step, the services made after that start
    their own again."""
    entry = (server, skip_warm)
    _SHARED.append(entry)
    try:
        yield server
    finally:
        _SHARED.remove(entry)


def close_server(proc: subprocess.Popen[Any], replies: Any) -> None:
    """End a fork server: close its stdin (it exits when it reads EOF), wait up to 30 s, kill it
    (and its process group) if it does not exit, then close the reply pipe."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)
    except Exception:
        _kill_group(proc.pid)
        proc.wait()
    if replies is not None:
        replies.close()


def _exited(proc: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


# --- the child's side ------------------------------------------------------------------------------


def call(entry: str, arg: Any) -> int:
    """Call ``package.module:function`` with ``arg``; its return value or ``SystemExit`` is the code."""
    import importlib

    mod, _, name = entry.partition(":")
    try:
        rv = getattr(importlib.import_module(mod), name)(arg)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return rv if isinstance(rv, int) else 0


def _redirect(job: Job) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    err = os.open(job.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if job.log else null
    os.dup2(err if job.stdout else null, 1)
    os.dup2(err, 2)
    for fd in {null, err}:
        os.close(fd)


def _child(job: Job) -> int:
    """In a fork of the server: a session of its own, the job's output and environment, the call."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.stdout.flush()
    sys.stderr.flush()
    _redirect(job)
    from ..capture import adapter

    logs_read = adapter.torch_log_environment()  # as the preloaded torch read them at import
    os.environ.update(job.env)
    for k in job.unset:
        os.environ.pop(k, None)
    # settings a preloaded module read from the environment at import, before this fork: the job's
    # own values must win (Inductor's compile_threads; torch's TORCH_LOGS, TORCH_TRACE...)
    adapter.reread_compile_threads()
    if job.cwd:
        os.chdir(job.cwd)
    if logs_read != adapter.torch_log_environment():  # in the job's folder: TORCH_LOGS_OUT=log.txt
        try:
            adapter.reread_torch_logs()
        except adapter.AdapterProblem as e:
            print(f"fresh: {e}", file=sys.stderr)
    return call(job.entry, job.arg)


def fork_unsafe() -> str | None:
    """Why a fork of this process would not be a working fresh process, or None: a thread besides
    this one (a fork copies only the caller's, and the locks the others held stay held), or CUDA
    initialized (it cannot be used again in a forked child). What a server imported may do either."""
    import threading

    if threading.active_count() > 1:
        names = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
        return f"a module it imported started a thread ({', '.join(names)})"
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            return "a module it imported initialized CUDA"
    except Exception:  # noqa: BLE001 - a torch without this query: nothing to tell
        pass
    return None


def serve(reply_fd: int, preload: Sequence[str], warm: tuple[str, Any] | None) -> NoReturn:
    """The fork server: import once, fork per job (one JSON job a line on stdin), never compile
    anything itself. Replies on ``reply_fd``: ``{"pid": N}`` when the child started, then
    ``{"exit": CODE}`` when it ended (negative: killed by that signal); ``{"refused": WHY}`` to
    every job where forking is unsafe (:func:`fork_unsafe`). At the end of stdin the
    process exits at once, without the interpreter's teardown (``atexit`` handlers not run)."""
    import importlib

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the caller's to handle
    for name in preload:
        importlib.import_module(name)
    if warm is not None:
        try:
            call(*warm)
        except Exception as e:  # the child meets it again and reports it properly
            print(f"fresh: warming up with {warm[0]}: {type(e).__name__}: {e}", file=sys.stderr)
    replies = os.fdopen(reply_fd, "w")
    unsafe = fork_unsafe()
    if unsafe is not None:
        print(f"fresh: {unsafe}: each job starts a new interpreter", file=sys.stderr)
    # what the server imported is every child's for life: frozen, a child's collections neither
    # scan it nor write to its pages (which copy-on-write would then copy, page by page)
    gc.collect()
    gc.freeze()
    for line in sys.stdin:
        if not line.strip():
            continue
        if unsafe is not None:  # the caller runs it in a new interpreter
            replies.write(json.dumps({"refused": unsafe}) + "\n")
            replies.flush()
            continue
        job = msgspec.json.decode(line.encode(), type=Job)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(job)
            except BaseException:  # noqa: BLE001 - the caller reads the exit code and the log
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, st = os.waitpid(pid, 0)
        replies.write(json.dumps({"exit": os.waitstatus_to_exitcode(st)}) + "\n")
        replies.flush()
    # no interpreter teardown: the server ran nothing of its own, and tearing down torch (and what
    # else it preloaded) takes seconds its caller would wait for at the end of every command
    replies.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="seamscope-fresh")
    ap.add_argument("--job", help="a Job JSON file: run it in this interpreter")
    ap.add_argument("--serve", action="store_true", help="be the fork server (jobs on stdin)")
    ap.add_argument("--reply-fd", type=int, default=1)
    ap.add_argument("--preload", action="append", default=[])
    ap.add_argument("--warm", default=None)
    ap.add_argument("--warm-arg", default="null")
    a = ap.parse_args(argv)
    if a.serve:
        return serve(a.reply_fd, a.preload, (a.warm, json.loads(a.warm_arg)) if a.warm else None)
    if not a.job:
        ap.error("--job or --serve")
    with open(a.job, "rb") as f:
        job = msgspec.json.decode(f.read(), type=Job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return call(job.entry, job.arg)
    except BaseException:  # noqa: BLE001 - as a forked child: the traceback in the log, exit 1
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
