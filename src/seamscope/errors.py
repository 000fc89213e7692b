"""Errors a user can cause, each with its exit code (docs/conventions.md, "Exit codes"). The CLI prints one line."""

from __future__ import annotations


class SeamscopeError(Exception):
    """Base: ``str(err)`` is the one line shown to the user."""

    exit_code = 2


class UnusableInput(SeamscopeError):
    """Bad path, bad arguments, unreadable or unknown-version file (exit 2)."""

    exit_code = 2


class AnswerIsNo(SeamscopeError):
    """A check over budget, a verification failure, a divergence (exit 1)."""

    exit_code = 1


class UserCodeFailed(SeamscopeError):
    """The user's own script or model raised (exit 1); what was measured is still written."""

    exit_code = 1


class RecompileAfterWarmup(SeamscopeError):
    """Watch mode with ``fail_after_warmup="raise"``: a frame recompiled (or fell back to eager)
    after warm-up. Raised from the call that compiled, once it returned; ``event`` is the
    ``WatchEvent`` (frame, failed guard, cause, call index, compile time, request tags)."""

    exit_code = 1

    def __init__(self, event: object, message: str) -> None:
        super().__init__(message)
        self.event = event
        self.cause = getattr(event, "cause", None)
        self.failed_guard = getattr(event, "failed_guard", None)


class RunSignalled(BaseException):
    """SIGTERM or SIGHUP during a run: unwinds the script as Ctrl-C does (exit 128 + ``signum``)."""

    def __init__(self, signum: int, name: str = "") -> None:
        super().__init__(name or f"signal {signum}")
        self.signum = signum
