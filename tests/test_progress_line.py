"""``seamscope run``'s live progress line on a terminal shares it with the script's own output: it
never overwrites a line seamscope did not write. Run on a pseudo-terminal (a process of its own,
forked from the test run's server), the output replayed on a small terminal model (``\\r``,
``\\n``, erase-line)."""

from __future__ import annotations

import os
import re
import select
import time

import pytest
from fakes import Forked

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

HERE = os.path.dirname(os.path.abspath(__file__))


def screen(data: str) -> list[str]:
    """What a terminal shows after ``data``: lines of text, with carriage returns, newlines and
    the erase sequences seamscope and progress bars use applied."""
    lines, row, col = [""], 0, 0
    i = 0
    while i < len(data):
        ch = data[i]
        m = re.match(r"\x1b\[(\d*)([A-Za-z])", data[i:])
        if m:
            n, op = m.group(1), m.group(2)
            if op == "K" and n in ("", "0"):
                lines[row] = lines[row][:col]
            elif op == "K" and n == "2":
                lines[row] = ""
            elif op == "A":
                row = max(0, row - int(n or 1))
            i += m.end()
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
            col = 0
            if row == len(lines):
                lines.append("")
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + ch + line[col + 1:]
            col += 1
        i += 1
    return [ln.rstrip() for ln in lines]


def run_on_a_pty(server, args: list[str], cwd) -> str:
    """``seamscope ARGS`` in a process of its own (forked from the test run's server), its stdout
    and stderr on a pseudo-terminal; what the terminal received."""
    main, child = os.openpty()
    tty = os.ttyname(child)
    proc = Forked(server, args, cwd, stdout=tty, stderr=tty, env={"TERM": "xterm", "COLUMNS": "120"})
    out = bytearray()
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            running = proc.running()  # before the read: what it wrote before it ended is read below
            ready, _, _ = select.select([main], [], [], 0.05)
            if ready:
                out += os.read(main, 65536)
            elif not running:
                break
        code = proc.wait(30)
    finally:
        os.close(child)
        os.close(main)
    assert code == 0, out.decode(errors="replace")
    return out.decode(errors="replace").replace("\r\n", "\n")


def test_the_progress_line_never_overwrites_the_scripts_own_lines(tmp_path, fresh_server) -> None:
    raw = run_on_a_pty(fresh_server, ["run", "--out", str(tmp_path / "o"),
                                      os.path.join(HERE, "workloads", "own_progress_bar.py")], tmp_path)
    assert "seamscope: " in raw and " calls · " in raw  # the live line was drawn
    shown = screen(raw)
    # the script's lines, each whole on a line of its own, in order
    assert "epoch 0 done" in shown and "epoch 1 done" in shown
    assert shown.index("epoch 0 done") + 1 == shown.index("epoch 1 done")
    assert "step 10/10" in shown  # the bar's last draw survives, unfinished as the script left it
    # no live line left behind, and none mixed into the script's text
    assert not [ln for ln in shown if " calls · " in ln and " compiles" in ln and "·" not in ln[:9]]
    assert not [ln for ln in shown if ("epoch" in ln or "step" in ln) and "seamscope" in ln]
