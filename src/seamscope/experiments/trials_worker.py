"""The trials' fork server: one process imports torch and seamscope once, then forks each run.

A forked child is as fresh as a new interpreter as far as Dynamo and the inductor cache are
concerned (the server compiles nothing, and each child gets its own ``TORCHINDUCTOR_CACHE_DIR``
before it runs anything), without the seconds of starting Python and importing torch. The child
runs ``seamscope run ...`` exactly as the command line would. Protocol: one JSON job a line on
stdin; on ``--reply-fd`` one line ``{"pid": N}`` when the child started, then ``{"exit": CODE}``
when it ended (a negative code: killed by that signal).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from typing import Any

PRELOAD = ("torch", "torch._dynamo", "seamscope.cli", "seamscope.analyze.findings", "seamscope.analyze.receipt",
           "seamscope.analyze.summary", "seamscope.capture.remedies", "seamscope.capture.runner",
           "seamscope.capture.session", "seamscope.commands._common", "seamscope.commands.run",
           "seamscope.ingest.receipt", "seamscope.render.receipt_json", "seamscope.render.terminal",
           "seamscope.experiments.fingerprint", "seamscope.experiments.remedy_plan")
"""Imported once by the server, before any fork: what every child's ``seamscope run`` imports (a
warm-up by name, not a dependency: the children run the command line, a process boundary away)."""


def _child(job: dict[str, Any]) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = job.get("env")
    if isinstance(env, dict):
        os.environ.update({str(k): str(v) for k, v in env.items()})
    for k in job.get("unset") or []:
        os.environ.pop(str(k), None)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    err = os.open(str(job["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.chdir(str(job["cwd"]))
    import importlib

    try:
        importlib.import_module("seamscope.cli").main([str(a) for a in job["argv"]])
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def serve(reply_fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)

    replies = os.fdopen(reply_fd, "w")
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(job)
            except BaseException:  # noqa: BLE001 - the parent reads the exit code and stderr
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
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reply-fd", type=int, required=True)
    a = ap.parse_args()
    sys.exit(serve(a.reply_fd))


if __name__ == "__main__":
    main()
