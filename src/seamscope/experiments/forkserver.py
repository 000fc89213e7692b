"""What the fork servers of the shape study and the remedy trials share: closing one.

A fork server is a child process that imported torch (and the workload) once and forks a fresh
child per job; its parent writes jobs to its stdin and reads one JSON reply a line from a pipe.
"""

from __future__ import annotations

import subprocess
from typing import IO, Any


def close_server(proc: subprocess.Popen[Any], replies: IO[str]) -> None:
    """End the server: close its stdin (it exits when it reads EOF), wait up to 30 s, kill it if it
    does not exit, then close the reply pipe."""
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)
    except Exception:
        proc.kill()
        proc.wait()
    replies.close()
