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
from ..model.receipt import Decision


@dataclass
class RunResult:
    receipt_path: str | None
    exit_code: int
    """0 ok; 1 the user's script raised or exited non-zero; 130 interrupted."""
    session: Any
    message: str | None = None


def _is_launcher(filename: str) -> bool:
    f = filename.replace(os.sep, "/")
    return (f.endswith("/seamscope/capture/runner.py") or f.endswith("/seamscope/experiments/workload_run.py")
            or "runpy" in f)


def _ignore_sigint() -> Any:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def _watch_sigint(session: Any) -> Any:
    """Ctrl-C raises KeyboardInterrupt as usual and also marks the session, so that an interrupt
    swallowed by library code still stops the run at the next observed call."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def on_sigint(signum: int, frame: Any) -> None:
        session.interrupted = True
        raise KeyboardInterrupt

    return signal.signal(signal.SIGINT, on_sigint)


def _restore_sigint(handler: Any) -> None:
    import signal

    if handler is not None:
        signal.signal(signal.SIGINT, handler)


def _run_transformed(target: str, transform: Any) -> None:
    """Run a script as ``runpy.run_path`` would, from a transformed syntax tree."""
    import ast
    import types

    with open(target, encoding="utf-8") as f:
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


def run_target(
    target: str,
    args: list[str],
    *,
    module: bool = False,
    out: str = "seamscope-out",
    decision: Decision | None = None,
    on_call_end: Callable[[Any], None] | None = None,
    first_calls: int | None = None,
    call_cap: int | None = None,
    setup: Any = None,
) -> RunResult:
    """``setup``: a remedy plan (``capture.remedies.Plan``) applied once the session has started:
    its ``setup(session)`` returns the undo, called before the session stops."""
    from ..experiments.workload import is_workload_spec
    from .session import Session

    workload = not module and is_workload_spec(target)
    if not module and not workload and not os.path.isfile(target):
        raise UnusableInput(f"{target}: no such script")
    if workload:
        from ..experiments.workload_run import check_args

        check_args([target, *args])
    out_dir = default_out_dir(out)
    kwargs: dict[str, Any] = {}
    if first_calls is not None:
        kwargs["first_calls"] = first_calls
    if call_cap is not None:
        kwargs["call_cap"] = call_cap
    session = Session(
        None,
        command=[("-m " if module else "") + target, *args],
        input_trace_sha256=(script_sha256(target.rpartition(":")[0], [target, *args]) if workload
                            else script_sha256(target, args, module=module)),
        decision=decision,
        **kwargs,
    )
    if on_call_end is not None:  # the CLI's progress line; nothing on the call path otherwise
        session.on_call_end.append(on_call_end)
    old_argv, old_path0 = sys.argv[:], sys.path[0] if sys.path else None
    exit_code, message = 0, None
    previous_handler = _watch_sigint(session)
    finish: Any = None
    try:
        session.start()
        if setup is not None:
            finish = setup.setup(session)
        if workload:
            from ..experiments.workload_run import main as run_workload

            sys.argv = [target, *args]
            run_workload([target, *args])
        elif module:
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            if setup is not None and setup.needs_transform():
                _run_transformed(target, setup.transform)
            else:
                runpy.run_path(target, run_name="__main__")
    except UnusableInput:
        raise
    except SystemExit as e:
        code = e.code
        exit_code = 0 if code in (None, 0) else (code if isinstance(code, int) else 1)
        if exit_code:
            exit_code = 1
            message = f"{target} exited with status {code}"
    except KeyboardInterrupt:
        exit_code, message = 130, "interrupted; the calls measured so far were written"
    except BaseException:
        etype, value, tb = sys.exc_info()
        # Show the user's traceback, without seamscope's and runpy's frames on top.
        while tb is not None and tb.tb_next is not None and _is_launcher(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
        traceback.print_exception(etype, value, tb)
        exit_code, message = 1, f"{target} raised {etype.__name__ if etype else 'an exception'}"
    finally:
        sys.argv = old_argv
        if old_path0 is not None and sys.path:
            sys.path[0] = old_path0
        if finish is not None:
            finish()
        # A second Ctrl-C must not lose what was measured: finish writing first.
        _ignore_sigint()
        try:
            session.stop()
            path = session.write(out_dir) if session.builder is not None else None
        finally:
            _restore_sigint(previous_handler)
    return RunResult(receipt_path=path, exit_code=exit_code, session=session, message=message)
