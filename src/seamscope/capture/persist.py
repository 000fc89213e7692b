"""What a live run keeps on disk while it runs (``docs/reliability.md``).

- the output folder is checked for writability and locked before the script starts (a second run
  into the same folder is refused; a lock whose process is gone is taken over);
- a receipt marked ``incomplete`` is written as the run starts, so that an older run's receipt
  there is never read as this run's, then replaced by a checkpoint every ``checkpoint_every``
  seconds, each written at a call boundary (never by a thread touching the ledger mid-call), at
  most a small share of the run's time;
- a second signal while the receipt is being written stops the process at once, leaving no
  half-written file (``hard_exit_on_signal``).

Only the timer runs on a thread: when a checkpoint is due it appends one callback to the session's
``on_call_end`` list, so that the call path pays nothing between checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..errors import RunSignalled, UnusableInput
from ..model.ledger import RunStatus

LOCK_NAME = ".seamscope.lock"
DEFAULT_CHECKPOINT_EVERY = 60.0
MAX_SHARE = 0.05
"""Checkpoints take at most this share of the run's time (the first one excepted, whose cost is
not known before): the next is due once the time spent on checkpoints so far, plus one more of
the last one's cost, is at most this share of the time since the run started."""

SIGNALS = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}
"""The signals that end a run the same way, and the exit code each gives (128 + its number)."""


# --- the lock --------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    if pid <= 0:  # no process has it (0 and -N would name process groups)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    except (OSError, OverflowError):  # beyond any pid the system hands out
        return False
    return True


_HELD: set[str] = set()
"""The tokens of the locks this process's sessions hold now: a lock naming this pid is another
session's of this process when its token is here, else a dead process's that had this pid (a
container's PID 1 restarted)."""


def _holder_line(info: dict[str, Any]) -> str:
    cmd = info.get("command") or ""
    return (f"pid {info.get('pid')} on {info.get('host')}, since {info.get('started')}"
            + (f", `{cmd}`" if cmd else ""))


class OutLock:
    """``FOLDER/.seamscope.lock``, naming the run that holds the folder (pid, host, start, command)."""

    def __init__(self, folder: str, command: str, shown: str | None = None) -> None:
        self.path = os.path.join(folder, LOCK_NAME)
        self.shown = shown if shown is not None else folder
        """The folder as the user wrote it, for messages."""
        self.token = os.urandom(8).hex()
        self.info: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(),
                     "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "command": command,
                     "token": self.token}
        self.held = False

    def acquire(self) -> None:
        folder = self.shown
        shown_path = os.path.join(folder, LOCK_NAME)
        data = (json.dumps(self.info) + "\n").encode()
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                if os.path.isdir(self.path) and not os.path.islink(self.path):
                    raise UnusableInput(
                        f"{folder}: {shown_path} is a folder, not seamscope's lock: remove it, or choose "
                        "another --out") from None
                holder = self._read()
                if holder is not None and not self._stale(holder):
                    ours = holder.get("pid") == os.getpid() and holder.get("host") == self.info["host"]
                    raise UnusableInput(
                        (f"{folder}: in use by another seamscope session of this process ({_holder_line(holder)}); "
                         "give each session its own out folder") if ours else
                        (f"{folder}: in use by another seamscope run ({_holder_line(holder)}); wait for "
                         f"it, choose another --out, or remove {shown_path} if that run is gone")
                    ) from None
                try:
                    os.unlink(self.path)  # a stale lock: its process is gone
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise UnusableInput(f"{folder}: cannot remove the stale lock {shown_path}: {e.strerror}") from None
                continue
            except OSError as e:
                raise UnusableInput(f"{folder}: cannot write: {e.strerror}") from None
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            self.held = True
            _HELD.add(self.token)
            return
        raise UnusableInput(f"{folder}: another seamscope run keeps taking {shown_path}")

    def _read(self) -> dict[str, Any] | None:
        """The holder, or None for a lock that cannot be read (being written: held, unless old)."""
        try:
            with open(self.path, "rb") as f:
                info = json.loads(f.read(4096) or b"null")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            info = None
        if isinstance(info, dict):
            return info
        try:
            young = time.time() - os.path.getmtime(self.path) < 10
        except OSError:
            return {}
        return {"pid": "?", "host": "?", "started": "just now"} if young else {}

    def _stale(self, holder: dict[str, Any]) -> bool:
        if not holder:
            return True  # gone meanwhile, or unreadable and old
        pid = holder.get("pid")
        if holder.get("host") != self.info["host"] or not isinstance(pid, int) or isinstance(pid, bool):
            return False  # another machine's (a shared folder): cannot tell, so held
        if pid == os.getpid():  # another session of this process, or a dead process's of this pid
            return holder.get("token") not in _HELD
        return not _alive(pid)

    def release(self) -> None:
        """Remove the lock if it is still this session's (never another session's, nor, in a
        forked child, the parent's)."""
        if not self.held:
            return
        self.held = False
        _HELD.discard(self.token)
        holder = self._read()
        if holder and holder.get("pid") == os.getpid() and holder.get("token") == self.token:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def other_holder(folder: str) -> str | None:
    """Who holds ``folder`` (one line: pid, host, start, command) when that is a live run other than
    this process's own sessions; None when the folder is free, its lock stale, or held here."""
    lock = OutLock(os.path.abspath(folder), "")
    holder = lock._read()
    if not holder or lock._stale(holder):
        return None
    if holder.get("pid") == os.getpid() and holder.get("host") == lock.info["host"] and holder.get("token") in _HELD:
        return None
    return _holder_line(holder)


@contextlib.contextmanager
def held_folder(folder: str, command: str) -> Iterator[OutLock]:
    """``folder`` (as the user gave it) checked writable and locked for a command that writes it as a
    whole (``try``: its runs write below it, then the table and the top receipt into it), as
    ``RunOutput.prepare`` does for a run; released at the end. ``UnusableInput`` (one line, naming
    the holder of the lock) otherwise."""
    from ..render.files import check_writable

    check_writable(folder)
    lock = OutLock(os.path.abspath(folder), command, folder)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


# --- the output folder of one run ------------------------------------------------------------


def as_given(e: BaseException, folder: str, shown: str) -> BaseException:
    """``e`` (a write failure naming the resolved ``folder``) naming the folder as the user gave it."""
    if isinstance(e, UnusableInput) and e.args and isinstance(e.args[0], str) and folder != shown:
        e.args = (e.args[0].replace(folder, shown, 1), *e.args[1:])
    return e


class RunOutput:
    """The output folder of one live run: checked and locked (``prepare``), marked and then
    checkpointed while the session runs (``begin``), unlocked at the end (``close``)."""

    def __init__(self, session: Any, folder: str, checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY) -> None:
        if not checkpoint_every >= 0:  # also NaN
            raise UnusableInput("--checkpoint-every: seconds, 0 or more (0: no checkpoints)")
        self.session = session
        self.shown = os.fspath(folder)
        """The folder as given, for messages."""
        self.folder = os.path.abspath(self.shown)
        """Resolved once, before the script runs: a script that changes directory (Hydra does)
        still has its checkpoints, final output and lock release go here."""
        self.every = float(checkpoint_every)
        self.lock = OutLock(self.folder, " ".join(session.command) or "seamscope.session()", self.shown)
        self.checkpoints = 0
        self.spent = 0.0
        """Seconds spent writing checkpoints."""
        self.last_cost = 0.0
        self._t0 = time.monotonic()
        self._due = 0.0
        self._armed = False
        self._stopped = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._failed = False

    def prepare(self) -> None:
        """Before the script starts: the folder is writable and this run holds it (exit 2 otherwise)."""
        from ..render.files import check_writable
        from ..render.receipt_json import foreign_files

        check_writable(self.shown)
        self.lock.acquire()
        try:
            foreign = foreign_files(self.folder)
        except BaseException:
            self.lock.release()
            raise
        if foreign:
            self.lock.release()
            raise UnusableInput(
                f"{self.shown}: {', '.join(foreign)} there {'is' if len(foreign) == 1 else 'are'} not seamscope's "
                "(seamscope replaces only the receipt.json, calls.csv and index.html it wrote): move "
                f"{'it' if len(foreign) == 1 else 'them'}, or choose another --out")

    def begin(self) -> None:
        """Once the session has started: the ``incomplete`` marker, then the checkpoint timer."""
        from ..render.receipt_json import write_receipt_only

        self._t0 = time.monotonic()
        try:
            write_receipt_only(self._receipt("the run started; no checkpoint yet"), self.folder, fresh=True)
        except BaseException as e:
            self.close()
            raise as_given(e, self.folder, self.shown) from None
        if 0 < self.every < float("inf"):
            self._due = self._t0 + self.every
            self._thread = threading.Thread(target=self._loop, name="seamscope-checkpoint", daemon=True)
            self._thread.start()

    def _receipt(self, detail: str) -> Any:
        from ..analyze.receipt import make_receipt

        ledger = self.session.build(status=RunStatus(state="incomplete", detail=detail))
        return make_receipt(ledger, self.session.decision)

    def checkpoint(self) -> None:
        """Write a checkpoint now (at a call boundary: no call is open)."""
        from ..render.receipt_json import write_receipt_only

        t0 = time.monotonic()
        at = t0 - self._t0
        write_receipt_only(self._receipt(f"checkpoint at {at:.0f} s"), self.folder)
        self.last_cost = time.monotonic() - t0
        self.spent += self.last_cost
        self.checkpoints += 1

    def _at_boundary(self, session: Any) -> None:
        """The callback the timer arms: one checkpoint at the end of the next call, then disarm."""
        with contextlib.suppress(ValueError):
            session.on_call_end.remove(self._at_boundary)
        if os.getpid() != self._pid or self._stopped:
            return  # a forked child (a data loader's worker) writes nothing
        b = session.builder
        if session.active and b is not None and not b.in_call:
            try:
                self.checkpoint()
            except Exception as e:  # a checkpoint that fails must not fail the user's call
                if not self._failed:
                    self._failed = True
                    session.warnings.append(f"a checkpoint could not be written: {e}")
                    sys.stderr.write(f"seamscope: warning: a checkpoint could not be written: {e}\n")
        # the next is due once the checkpoints so far and one more of the same cost are at most
        # MAX_SHARE of the run's time
        self._due = max(time.monotonic() + self.every, self._t0 + (self.spent + self.last_cost) / MAX_SHARE)
        self._armed = False
        self._wake.set()

    def _loop(self) -> None:
        while not self._stopped:
            delay = self._due - time.monotonic()
            if self._armed or delay > 0:
                self._wake.wait(None if self._armed else delay)
                self._wake.clear()
                continue
            self._armed = True
            self.session.on_call_end.append(self._at_boundary)

    def close(self) -> None:
        """Stop the timer and release the lock (the final receipt is the caller's to write)."""
        self._stopped = True
        self._wake.set()
        with contextlib.suppress(ValueError):
            self.session.on_call_end.remove(self._at_boundary)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        self.lock.release()


# --- signals -----------------------------------------------------------------------------------


def _signals() -> list[int]:
    """The signals to handle: those not ignored. ``nohup`` ignores SIGHUP, a non-interactive
    shell ignores SIGINT in a background job (``cmd &``): the run must then go on as the plain
    script would."""
    out = []
    for name in SIGNALS:
        s = getattr(signal, name, None)
        if s is not None and signal.getsignal(s) is not signal.SIG_IGN:
            out.append(s)
    return out


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_code_of(signum: int) -> int:
    return 128 + signum


@contextlib.contextmanager
def hard_exit_on_signal(lock: OutLock | None = None, note: str = "",
                        restore: dict[int, Any] | None = None, first: list[int] | None = None) -> Iterator[None]:
    """While the receipt is written: a signal (a second Ctrl-C, a SIGTERM) removes the temporary
    files of the writes in progress and the lock, and ends the process at once with 128 + its
    number, or 128 + that of ``first[0]`` (the signal that ended the run, which its receipt
    records); what was renamed into place before stays whole. At the end the handlers found are
    put back, or those of ``restore`` (the ones from before the run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop_now(signum: int, frame: Any) -> None:
        from ..render.files import discard_pending

        discard_pending()
        if lock is not None:
            lock.release()
        with contextlib.suppress(OSError):
            os.write(2, f"seamscope: {signal_name(signum)} while writing: stopped at once{note}\n".encode())
        os._exit(exit_code_of(first[0] if first else signum))

    old = {s: signal.signal(s, stop_now) for s in _signals()}
    try:
        yield
    finally:
        for s, h in {**old, **(restore or {})}.items():
            signal.signal(s, h)


def watch_signals(session: Any, received: list[int], lock: OutLock | None) -> dict[int, Any] | None:
    """SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP ``RunSignalled``; each marks the session
    (so that an interrupt swallowed by library code still stops the run at the next observed call)
    and records the signal in ``received``. A second signal before the receipt is written stops at
    once (``hard_exit_on_signal``'s handler). Returns the handlers to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def on_signal(signum: int, frame: Any) -> None:
        if received:
            from ..render.files import discard_pending

            discard_pending()
            if lock is not None:
                lock.release()
            with contextlib.suppress(OSError):
                os.write(2, f"seamscope: second signal ({signal_name(signum)}): stopped at once; the "
                            "last checkpoint stays\n".encode())
            os._exit(exit_code_of(received[0]))
        received.append(signum)
        session.interrupted = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise RunSignalled(signum, signal_name(signum))

    return {s: signal.signal(s, on_signal) for s in _signals()}


def status_of_signal(signum: int) -> RunStatus:
    name = signal_name(signum)
    return RunStatus(state="interrupted" if name == "SIGINT" else "terminated", detail=name,
                     exit_code=exit_code_of(signum))
