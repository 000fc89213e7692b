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


def _child(job: dict[str, Any]) -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = job.get("env")
    if isinstance(env, dict):
        os.environ.update({str(k): str(v) for k, v in env.items()})
    for k in job.get("unset") or []:
        os.environ.pop(str(k), None)
    if "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:  # read when Inductor's config was imported, before the fork
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = inductor_config.decide_compile_threads()
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    err = os.open(str(job["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(err, 2)
    os.chdir(str(job["cwd"]))
    from ..cli import main

    try:
        main([str(a) for a in job["argv"]])
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def serve(reply_fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401

    from .. import cli  # noqa: F401
    from ..analyze import findings, receipt, summary  # noqa: F401
    from ..capture import remedies, runner, session  # noqa: F401
    from ..commands import _common, run  # noqa: F401
    from ..ingest import receipt as ingest_receipt  # noqa: F401
    from ..render import receipt_json, terminal  # noqa: F401
    from . import fingerprint  # noqa: F401

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
