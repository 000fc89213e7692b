"""One live run's lifecycle, in one order for ``seamscope.session()``, ``seamscope run`` and the
``%%seamscope`` magic (``docs/reliability.md``):

1. ``prepare``: the output folder checked and locked before the user's code runs (exit 2 otherwise);
2. ``start``: the session starts (pausing a session open around it), then the ``incomplete``
   marker and the checkpoint timer (``persist.RunOutput.begin``);
3. the user's code runs; the caller sets ``session.status`` (else it is taken from how the body
   ended);
4. ``end``: the session stops, its receipt is written into the folder resolved at step 1 (never by
   a forked child, never by a session that did not start), and the lock is released whatever
   happens.

A start that fails is undone by ``abort`` (stop, unlock; nothing written) where the run has no
receipt to give (``session()``, the magic); ``run`` instead records why in the receipt it
writes (``end``), and wraps ``end`` in its signal handling.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..errors import UnusableInput
from ..model.ledger import RunStatus
from .calls import error_text
from .persist import DEFAULT_CHECKPOINT_EVERY, RunOutput, as_given, status_of_signal


class ObservedRun:
    """``session`` observed into ``out`` (None: nothing on disk). As a context manager: prepare
    (unless done), start (undone if it fails), the body, end."""

    def __init__(self, session: Any, out: str | os.PathLike[str] | None,
                 checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY) -> None:
        self.session = session
        self.output = RunOutput(session, os.fspath(out), checkpoint_every) if out is not None else None
        self.pid = os.getpid()
        """The process that started the run: a forked child (a data loader's worker) that ends
        it writes nothing over the parent's output."""
        self._prepared = False

    def prepare(self) -> None:
        """The folder writable, not another run's, and locked (``UnusableInput`` otherwise)."""
        if self.output is not None and not self._prepared:
            self.output.prepare()
        self._prepared = True

    def start(self) -> None:
        """Start the session, then mark the folder; a failure leaves the undoing to the caller
        (``abort``, or ``end`` where the failure goes into the receipt)."""
        self.prepare()
        self.session.start()
        if self.output is not None:
            self.output.begin()  # unlocks the folder itself if the marker cannot be written
            self.session.output = self.output

    def abort(self) -> None:
        """Undo a start that failed: the session stopped, the folder unlocked, nothing written."""
        try:
            self.session.stop()
        finally:
            self._close()

    def end(self, exc: BaseException | None = None) -> str | None:
        """Stop, write the receipt, unlock; returns the receipt's path (None: nothing written).

        ``exc``: the exception the body ended with, which stays the one raised: a receipt that
        cannot be written is then a note on it. Without one, the write failure is raised, naming
        the folder as the user gave it."""
        s = self.session
        if s.status is None:
            s.status = status_of_exception(exc)
        path = None
        try:
            s.stop()
            out = self.output
            if out is not None and os.getpid() == self.pid and s.builder is not None:
                try:
                    path = s.write(out.folder)  # resolved before the code ran (it may change directory)
                except Exception as e:
                    failure = as_given(e, out.folder, out.shown)
                    if exc is None:
                        if isinstance(failure, UnusableInput):  # disk full: one line, exit 2
                            raise failure from None
                        raise
                    note = f"seamscope: the receipt could not be written: {failure}"
                    if hasattr(exc, "add_note"):  # Python 3.11+
                        exc.add_note(note)
                    sys.stderr.write(note + "\n")
        finally:
            self._close()
        return path

    def _close(self) -> None:
        if self.output is not None:
            self.output.close()
        if getattr(self.session, "output", None) is self.output:
            self.session.output = None

    def __enter__(self) -> ObservedRun:
        self.prepare()
        try:
            self.start()
        except BaseException:
            self.abort()
            raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.end(exc)


def status_of_exception(exc: BaseException | None) -> RunStatus:
    """How a run whose body ended with ``exc`` (None: it returned) ended."""
    if exc is None:
        return RunStatus(state="completed", exit_code=0)
    if isinstance(exc, KeyboardInterrupt):
        return RunStatus(state="interrupted", detail="SIGINT", exit_code=130)
    if isinstance(exc, SystemExit):
        code = exc.code
        if code in (None, 0):
            return RunStatus(state="completed", exit_code=0)
        return RunStatus(state="exited", exit_code=code if isinstance(code, int) else 1,
                         detail="" if isinstance(code, int) else str(code).splitlines()[0][:200] if str(code) else "")
    signum = getattr(exc, "signum", None)
    if isinstance(signum, int):
        return status_of_signal(signum)
    return RunStatus(state="raised", detail=error_text(exc), exit_code=1)
