"""Running an unmodified script or module under a session (as ``cProfile`` and ``pyinstrument`` do).

Whatever happens in the user's code — an exception, ``sys.exit``, Ctrl-C — what was measured so far
is written before seamscope returns.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..analyze.inputs import script_sha256
from ..errors import UnusableInput
from ..model.normalize import project_root
from ..model.receipt import Decision
from .persist import DEFAULT_CHECKPOINT_EVERY


@dataclass
class RunResult:
    receipt_path: str | None
    exit_code: int
    """0 ok; 1 the user's script raised or exited non-zero; 130 interrupted."""
    session: Any
    message: str | None = None
    out_shown: str | None = None
    """The output folder as the user wrote it (``receipt_path`` is absolute: resolved before the
    script ran, which may change directory)."""
    signalled: int | None = None
    """The signal that ended the run (its exit code is kept if another one follows)."""
    forked: bool = False
    """True in a child the script forked that reached the script's end: it wrote nothing (the
    output set is the parent's) and its exit code is the script's."""

    def shown(self, path: str) -> str:
        """``path`` (under the output folder) as the user would write it."""
        folder = os.path.dirname(self.receipt_path) if self.receipt_path else None
        if self.out_shown is None or folder is None:
            return path
        if path == folder:
            return self.out_shown
        if not path.startswith(folder + os.sep):
            return path
        return os.path.join(self.out_shown, path[len(folder) + 1:])


def _is_launcher(filename: str) -> bool:
    f = filename.replace(os.sep, "/")
    return (f.endswith("/seamscope/capture/runner.py") or f.endswith("/seamscope/experiments/workload_run.py")
            or "runpy" in f)


def _run_transformed(target: str, transform: Any) -> None:
    """Run a script as ``runpy.run_path`` would, from a transformed syntax tree."""
    import ast
    import types

    with open(target, "rb") as f:  # bytes: its encoding (a BOM, a coding line) read as Python reads it
        tree = transform(ast.parse(f.read(), filename=target))
    code = compile(tree, target, "exec")
    mod = types.ModuleType("__main__")
    mod.__dict__.update(__file__=target, __cached__=None, __loader__=None, __package__=None, __spec__=None)
    old_main = sys.modules.get("__main__")
    sys.modules["__main__"] = mod
    try:
        exec(code, mod.__dict__)
    finally:
        if old_main is not None:
            sys.modules["__main__"] = old_main


def default_out_dir(out: str) -> str:
    """Under torchrun each rank writes its own ledger: ``OUT/rank-N``."""
    world = os.environ.get("WORLD_SIZE")
    rank = os.environ.get("RANK")
    if world and rank and world != "1":
        return os.path.join(out, f"rank-{rank}")
    return out


def as_text(word: str) -> str:
    """A command-line word as the receipt can hold it: bytes that are not UTF-8 (which Python
    hands over as lone surrogates) written as ``\\xe9``, the word otherwise unchanged."""
    return word.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def run_target(
    target: str,
    args: list[str],
    *,
    module: bool = False,
    out: str,
    decision: Decision | None = None,
    on_call_end: Callable[[Any], None] | None = None,
    first_calls: int | None = None,
    call_cap: int | None = None,
    setup: Any = None,
    checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY,
    launch: Callable[[list[str]], object] | None = None,
) -> RunResult:
    """``setup``: the remedies (``experiments.remedy_plan.Plan``) applied once the session has
    started: its ``setup(session)`` returns the undo, called before the session stops.
    ``launch``: runs a target that is neither a script nor a module, given ``[target, *args]``
    (a probe workload ``FILE.py:FUNC``: ``experiments.workload_run.launcher``), its arguments
    checked already.

    The output folder is checked and locked before anything runs, marked ``incomplete`` as the
    session starts and checkpointed every ``checkpoint_every`` seconds (``persist.RunOutput``).
    SIGINT, SIGTERM and SIGHUP unwind the script, then the receipt is written with the run's
    status, and ``exit_code`` is 128 + the signal's number."""
    from ..model.ledger import RunStatus
    from .lifecycle import ObservedRun, status_of_exception
    from .persist import hard_exit_on_signal, status_of_signal, watch_signals

    if not module and launch is None and not os.path.isfile(target):
        raise UnusableInput(f"{target}: no such script")
    out_shown = default_out_dir(out)
    session = _new_session(target, args, module, launch is not None, decision, first_calls, call_cap)
    run = ObservedRun(session, out_shown, checkpoint_every)  # the folder resolved once, before the script
    run.prepare()  # writable and ours, before the script starts (exit 2 otherwise)
    assert run.output is not None
    if on_call_end is not None:  # the CLI's progress line; nothing on the call path otherwise
        session.on_call_end.append(on_call_end)
    old_argv, old_path0 = sys.argv[:], sys.path[0] if sys.path else None
    exit_code, message = 0, None
    received: list[int] = []
    previous_handlers = watch_signals(session, received, run.output.lock)
    finish: Any = None
    path: str | None = None
    pid = os.getpid()
    user_code = False
    """Whether the script itself is running: an exception from there is the script's, whatever
    its type (even seamscope's own ``UnusableInput``, raised by a ``load_receipt`` in it)."""
    try:
        run.start()  # a failure is recorded below and ends in the receipt (``run.end``)
        if setup is not None:
            finish = setup.setup(session)
        user_code = launch is None
        _run_the_target(target, args, module, setup, launch)
        session.status = status_of_signal(received[0]) if received else status_of_exception(None)
        if received:  # the script caught the signal's exception and returned
            exit_code = int(session.status.exit_code or 130)
    except UnusableInput as e:
        if user_code or received or os.getpid() != pid:
            exit_code, message = _ended(e, session, received, target)
        else:  # seamscope's own: a workload that does not load, a marker that cannot be written
            session.status = RunStatus(state="exited", exit_code=e.exit_code,
                                       detail=(str(e).splitlines() or [""])[0][:200])
            raise
    except SystemExit as e:
        session.status = status_of_exception(e)
        if e.code not in (None, 0):  # any non-zero status is the script's failure: exit 1
            exit_code, message = 1, f"{target} exited with status {e.code}"
    except BaseException as e:
        exit_code, message = _ended(e, session, received, target)
    finally:
        # A signal from here on stops at once, with the first signal's code; what is renamed into
        # place stays whole.
        with hard_exit_on_signal(run.output.lock, restore=previous_handlers, first=received):
            sys.argv = old_argv
            if old_path0 is not None and sys.path:
                sys.path[0] = old_path0
            try:
                if finish is not None:
                    finish()
            finally:
                # every exception was recorded above (seamscope's own one re-raised): a receipt
                # that cannot be written is what is raised then (disk full: exit 2)
                path = run.end()
    return RunResult(receipt_path=path, exit_code=exit_code, session=session, message=message,
                     out_shown=out_shown, signalled=received[0] if received else None,
                     forked=os.getpid() != pid)


def _new_session(
    target: str, args: list[str], module: bool, workload: bool, decision: Decision | None,
    first_calls: int | None, call_cap: int | None,
) -> Any:
    """The run's session: its command, the hash of what it runs, and the project root its
    paths are shown from (the working directory for ``-m``, else the script's folder)."""
    from .session import Session

    script_file = target.rpartition(":")[0] if workload else target
    root = project_root(os.getcwd() if module else os.path.dirname(os.path.abspath(script_file)))
    kwargs: dict[str, Any] = {}
    if first_calls is not None:
        kwargs["first_calls"] = first_calls
    if call_cap is not None:
        kwargs["call_cap"] = call_cap
    return Session(
        None,
        command=[as_text(w) for w in (("-m " if module else "") + target, *args)],
        input_trace_sha256=(script_sha256(script_file, [target, *args]) if workload
                            else script_sha256(target, args, module=module)),
        decision=decision,
        cwd=root,
        **kwargs,
    )


def _run_the_target(target: str, args: list[str], module: bool, setup: Any,
                    launch: Callable[[list[str]], object] | None) -> None:
    """Run the script, the module (as ``python -m``) or the launched target, as ``__main__``, with
    ``sys.argv`` its own (the script's folder first on ``sys.path``, as python puts it)."""
    sys.argv = [target, *args]
    if launch is not None:
        launch([target, *args])
    elif module:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        script = os.path.abspath(target)  # __file__ and code paths absolute, as python's own
        sys.path[0] = os.path.dirname(script)
        if setup is not None and setup.needs_transform():
            _run_transformed(script, setup.transform)
        else:
            runpy.run_path(script, run_name="__main__")


def _ended(e: BaseException, session: Any, received: list[int], target: str) -> tuple[int, str | None]:
    """The status, exit code and message of a run whose script ended with ``e`` (not
    ``SystemExit``); the user's own exception's traceback is printed, as python would."""
    from .lifecycle import status_of_exception
    from .persist import status_of_signal

    if received:  # a signal: SIGINT (KeyboardInterrupt), SIGTERM or SIGHUP (RunSignalled)
        session.status = status_of_signal(received[0])
        return (int(session.status.exit_code or 130),
                f"{session.status.state} ({session.status.detail}); the calls measured so far were written")
    session.status = status_of_exception(e)
    if isinstance(e, KeyboardInterrupt):
        return 130, "interrupted; the calls measured so far were written"
    etype, value, tb = type(e), e, e.__traceback__
    # Show the user's traceback, without seamscope's and runpy's frames on top.
    while tb is not None and tb.tb_next is not None and _is_launcher(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    traceback.print_exception(etype, value, tb)
    return 1, f"{target} raised {etype.__name__}"
