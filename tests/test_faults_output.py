"""Where a command's output goes: a pipe whose reader stops early, a closed standard output, a
``COLUMNS`` of nothing.

GIVEN a receipt within budget, WHEN ``seamscope check`` (or any reading command) prints into a pipe
whose reader has gone (``| head -1``), THEN it exits 141 as ``git`` and ``grep`` do, never 1 (a
verdict); WHEN standard output is closed, THEN one line on stderr and exit 2; WHEN ``COLUMNS=0``,
THEN the summary prints at a usable width.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seamscope.cli import BROKEN_PIPE_EXIT, main
from seamscope.render.console import MIN_WIDTH

RECEIPT = str(Path(__file__).parent / "golden" / "fake-breaks.receipt.json")
WITHIN = ["check", RECEIPT, "--max-breaks", "100"]


class _GoneReader(io.StringIO):
    """A standard output whose reader closed the pipe: every write fails as a pipe's does."""

    def write(self, s: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def _here(args: list[str], stdout: io.TextIOBase) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        main(args)
    return e.value.code, err.getvalue()  # type: ignore[return-value]


def _seamscope(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-m", "seamscope", *args], stderr=subprocess.PIPE, text=True,
                          env=env, timeout=120, **kwargs)  # type: ignore[call-overload,no-any-return]


def test_a_reader_that_closed_the_pipe_is_not_a_verdict() -> None:
    r, w = os.pipe()
    os.close(r)  # `| head -1` has read its line and gone
    try:
        p = _seamscope(WITHIN, stdout=w)
    finally:
        os.close(w)
    assert p.returncode == BROKEN_PIPE_EXIT == 141, p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr


@pytest.mark.parametrize("args", [WITHIN, ["check", RECEIPT, "--max-breaks", "0"], ["summary", RECEIPT],
                                  ["report", RECEIPT, "--out"]], ids=["within", "over", "summary", "report"])
def test_every_command_stopped_by_its_reader_exits_141(args: list[str], tmp_path: Path) -> None:
    if args[-1] == "--out":
        args = [*args, str(tmp_path)]  # the report is written here, never beside the golden receipt
    code, err = _here(args, _GoneReader())
    assert code == BROKEN_PIPE_EXIT, err
    assert "internal error" not in err


def test_a_closed_standard_output_is_one_line_and_exit_2() -> None:
    p = _seamscope(WITHIN, preexec_fn=lambda: os.close(1))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "standard output is closed" in p.stderr


@pytest.mark.parametrize("columns", ["0", "5"])
def test_a_columns_of_nothing_still_prints_the_summary(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    code, err = _here(["summary", RECEIPT], out)
    lines = out.getvalue().splitlines()
    assert code == 0, err
    assert lines and lines[0].startswith("seamscope · 15 calls")
    assert min(len(x) for x in lines if x.strip()) > 0 and max(len(x) for x in lines) >= MIN_WIDTH
