"""Jobs the tests run in fresh processes (``tests/test_fresh.py``, ``fakes.Forked``'s
``seamscope``, and the tests that run a workload script in a process of its own, forked from the
test run's ``fresh_server``); torch is imported only by the jobs that compile."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

WARMED: list[str] = []
COUNTER = [0]


def warm(path: str) -> None:
    """The server's warm-up: leaves a mark in this process (the children inherit it) and a line in ``path``."""
    WARMED.append(path)
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")


def frozen(path: str) -> int:
    """Writes how many objects this process inherited frozen (``gc.freeze``) from its server."""
    import gc

    with open(path, "w", encoding="utf-8") as f:
        f.write(str(gc.get_freeze_count()))
    return 0


def start_a_thread(_: Any) -> None:
    """A warm-up that leaves a thread running in the server (as some libraries do when imported)."""
    import threading

    threading.Thread(target=time.sleep, args=(600,), name="left-running", daemon=True).start()


def cuda_initialized(_: Any) -> None:
    """A warm-up that leaves the server as one whose imports initialized CUDA (a stand-in for
    torch, in a server that never imported it: its forks could not use the GPU)."""
    from types import SimpleNamespace

    sys.modules["torch"] = SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: True))  # type: ignore[assignment]


def modules(arg: dict[str, Any]) -> int:
    """Writes which of ``arg["names"]`` the child had imported when it started (its server's)."""
    with open(arg["path"], "w", encoding="utf-8") as f:
        json.dump({n: n in sys.modules for n in arg["names"]}, f)
    return 0


def exit_mark(path: str) -> None:
    """A warm-up that leaves an ``atexit`` handler writing ``path`` (a server that ran the
    interpreter's teardown at its exit would write it)."""
    import atexit

    def mark() -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write("torn down\n")

    atexit.register(mark)


def report(arg: dict[str, Any]) -> int:
    """What the child saw: environment, folder, the server's warm-up, a counter of its own."""
    COUNTER[0] += 1
    print("to stdout")
    print("to stderr", file=sys.stderr)
    with open(arg["path"], "w", encoding="utf-8") as f:
        json.dump({"x": os.environ.get("FRESH_X"), "gone": "FRESH_GONE" in os.environ, "cwd": os.getcwd(),
                   "warmed": WARMED, "counter": COUNTER[0], "pid": os.getpid(),
                   "ppid": os.getppid()}, f)
    return int(arg.get("code", 0))


def script(argv: list[str]) -> int:
    """``python SCRIPT ARGS...`` (``argv``): the script run as ``__main__``, its folder first on
    ``sys.path``; its ``SystemExit`` is the exit code."""
    import runpy

    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    runpy.run_path(argv[0], run_name="__main__")
    return 0


def crash(_: Any) -> int:
    os.kill(os.getpid(), signal.SIGSEGV)
    return 0


def fail(_: Any) -> int:
    raise ValueError("planted failure")


def sleep_with_a_child(path: str) -> int:
    """Starts a grandchild, writes both pids, then sleeps (killed by the timeout or Ctrl-C)."""
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(path, "w", encoding="utf-8") as f:
        json.dump([os.getpid(), grandchild.pid], f)
    time.sleep(600)
    return 0


def compile_a_break(arg: dict[str, Any]) -> int:
    """Compile (eager backend) a function with a graph break, after each of ``arg["steps"]``
    (``{"env": {...}, "unset": [...]}``) is applied to this process's environment and torch's logs
    are set up again from it (``adapter.reread_torch_logs``)."""
    import torch

    from seamscope.capture import adapter

    for step in arg.get("steps", []):
        os.environ.update(step.get("env", {}))
        for k in step.get("unset", []):
            os.environ.pop(k, None)
        adapter.reread_torch_logs()

    def f(x):  # type: ignore[no-untyped-def]
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    torch.compile(f, backend="eager")(torch.ones(3))
    return 0


def seamscope(arg: dict[str, Any]) -> int:
    """``seamscope ARGS`` as a process of its own (``fakes.Forked``): its stdout to the file
    ``arg["stdout"]``, its pid written to ``arg["pid"]`` (whole, by a rename) before the command runs."""
    fd = os.open(arg["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.close(fd)
    with open(arg["pid"] + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    os.replace(arg["pid"] + ".tmp", arg["pid"])
    from seamscope.cli import main

    return int(main(list(arg["args"])) or 0)


def seamscope_ignoring_sigint(arg: dict[str, Any]) -> int:
    """:func:`seamscope`, started as a non-interactive shell starts a background job (``cmd &``):
    with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return seamscope(arg)


def second_signal_while_writing(arg: list[str]) -> int:
    """``run_target`` of script ``arg[0]`` (which signals itself) into folder ``arg[1]``, and signal
    ``arg[2]`` sent while the receipt is written (by the remedy plan's undo, which runs then); the
    process's exit code is the one the second signal's hard stop chose."""
    from seamscope.capture.runner import run_target

    script, out, second = arg

    class Plan:
        def setup(self, session: Any) -> Any:
            def undo() -> None:
                os.kill(os.getpid(), getattr(signal, second))
                time.sleep(30)  # never reached: the second signal stops the process at once

            return undo

        def needs_transform(self) -> bool:
            return False

    return run_target(script, [], out=out, setup=Plan(), checkpoint_every=0).exit_code


def seamscope_signalled_while_reporting(arg: dict[str, Any]) -> int:
    """:func:`seamscope` (a ``run``), with SIGTERM arriving while ``index.html`` is written, once
    the receipt is."""
    from seamscope.render import html

    def report(*a: Any, **k: Any) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # never reached: the signal stops the process at once
        return ""

    html.write_html_report = report  # type: ignore[assignment]
    return seamscope(arg)


def compile_templates(_: Any) -> None:
    """The test run's server's warm-up: the HTML report's templates compiled once, before the
    forks (each forked ``seamscope run`` that writes its report would compile them again)."""
    from seamscope.render.html import environment

    environment().get_template("report.html.j2")


def wait_for_a_signal(path: str) -> int:
    """Writes its pid, then sleeps until a signal ends it (a run ended from outside)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    return 0
