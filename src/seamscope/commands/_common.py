"""What every capturing command does at the end: summary, report, one line on where things are."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

import click

from ..analyze.display import shown
from ..analyze.units import counted
from ..errors import UnusableInput

#: Commands that read files and work without PyTorch (every other one runs it).
TORCH_FREE = ("check", "diff", "import", "merge", "report", "summary", "verify")


#: A whole output line holding user strings is cut past this many characters.
LINE_LIMIT = 2000


def say(line: str, err: bool = False) -> None:
    """``click.echo`` of a line that holds user strings: control characters visible, long lines cut."""
    click.echo(shown(line, LINE_LIMIT), err=err)


def need_torch(command: str) -> None:
    """One line and exit 2 when PyTorch is not installed, before anything is started."""
    try:
        missing = importlib.util.find_spec("torch") is None
    except (ImportError, ValueError):
        missing = True
    if missing:
        raise UnusableInput(
            f"`seamscope {command}` needs PyTorch, which is not installed here: "
            f"pip install 'seamscope[torch]' (without it: {', '.join(TORCH_FREE)})"
        )


def finish_run(result: Any, quiet: bool = False, html_report: bool = True) -> int:
    from ..ingest.receipt import load_receipt
    from ..render.html import write_html_report
    from ..render.terminal import TerminalRenderer

    if result.receipt_path is None:
        return result.exit_code or 1
    receipt = getattr(result.session, "last_receipt", None) or load_receipt(result.receipt_path)
    out_dir = os.path.dirname(result.receipt_path)
    shown_path = getattr(result, "shown", lambda p: p)
    failed = None
    try:
        # source paths in the receipt are relative to the run's root, not to where the script chdir'd
        html = write_html_report(receipt, out_dir, source_root=getattr(result.session, "cwd", None)) \
            if html_report else None
    except UnusableInput as e:  # disk full, quota: the receipt is written; say so, exit 2 at the end
        why = str(e).rpartition("cannot write: ")[2] or str(e)
        html, failed = None, f"{shown_path(out_dir)}: could not write index.html ({why}); written: receipt.json, calls.csv"
    if not quiet:
        TerminalRenderer().print(receipt)
    for w in receipt.ledger.run.warnings:
        click.echo(f"seamscope: warning: {shown(w)}", err=True)
    where = shown_path(result.receipt_path) + (f", {shown_path(html)}" if html else "")
    click.echo(f"seamscope: wrote {shown(where, None)}", err=True)
    if result.message:
        click.echo(f"seamscope: {shown(result.message)}", err=True)
    if failed is not None:
        click.echo(f"seamscope: {shown(failed)}", err=True)
        return 2
    return int(result.exit_code)


def progress_words(calls: int, compiles: int) -> str:
    """The live line's counts: ``1 call · 1 compile``, ``3 calls · 2 compiles``."""
    return f"{counted(calls, 'call')} · {counted(compiles, 'compile')}"


class ProgressLine:
    """One line on stderr while a capturing command runs, updated at most every 0.25 s, only on a
    terminal. It is called at the end of each observed call, so when it is off nothing is added to
    the call path (``enabled`` is False and the command does not register it).

    The script shares the terminal, so the line never overwrites one seamscope did not write: the
    script's writes to ``sys.stdout`` and ``sys.stderr`` (where they are the terminal) are watched.
    Before the script's first write after the line was drawn, the line is erased (it was the last
    thing on the terminal), so the script's text lands where it would have without seamscope. The
    line is drawn again only where the script's last output ended a line: never over, or after,
    the script's own ``\r`` progress bar; at the end such an unfinished line is ended, so it stays
    whole above seamscope's summary. Writes below Python (a C library's, a subprocess's) are not
    seen; ``--quiet`` turns the line off."""

    REDRAW_S = 0.25  # 250 ms between redraws at most
    ERASE = "\r\x1b[2K"  # to the line's start, erase the line

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.last = 0.0
        self.shown = False
        """Whether seamscope's line is the last thing on the terminal (the cursor at its end)."""
        self.at_line_start = True
        """Whether the script's last output (as far as seen) ended a line."""
        self._write = sys.stderr.write  # seamscope's own writes: never through the watch below
        self._flush = sys.stderr.flush
        self._watched: list[tuple[Any, Any]] = []
        if self.enabled and not self._watch():
            self.enabled = False  # a stream that cannot be watched: no live line rather than a wrong one

    def _watch(self) -> bool:
        streams: dict[int, Any] = {id(s): s for s in (sys.stdout, sys.stderr)}
        for stream in streams.values():
            try:
                if not stream.isatty():
                    continue
                original = stream.write

                def write(text: Any, _original: Any = original) -> Any:
                    if text:
                        self._script_wrote(text)
                    return _original(text)

                stream.write = write
            except Exception:  # a replaced stream without isatty, or read-only attributes
                self._unwatch()
                return False
            self._watched.append((stream, write))
        return True

    def _script_wrote(self, text: Any) -> None:
        if self.shown:  # the line is the terminal's last: take it away before the script writes
            self._write(self.ERASE)
            self._flush()
            self.shown = False
        if isinstance(text, str):
            self.at_line_start = text.endswith("\n")

    def __call__(self, session: Any) -> None:
        now = time.monotonic()
        if now - self.last < self.REDRAW_S:
            return
        self.last = now
        if not self.shown and not self.at_line_start:
            return  # the script's line is unfinished (its own progress bar): leave it alone
        b = session.builder
        self._write(f"{self.ERASE}seamscope: {progress_words(b.call_count, b.compile_count)} ")
        self._flush()
        self.shown = True

    def clear(self) -> None:
        """Erase the line if it is still the terminal's last; else end the script's unfinished
        line, so that what seamscope prints next starts on a line of its own."""
        self._unwatch()
        if self.shown:
            self._write(self.ERASE)
            self._flush()
            self.shown = False
        elif self.enabled and not self.at_line_start:
            try:
                sys.stdout.flush()  # the script's own text first
            except Exception:
                pass
            self._write("\n")
            self._flush()
            self.at_line_start = True

    def _unwatch(self) -> None:
        for stream, write in self._watched:
            if getattr(stream, "__dict__", {}).get("write") is write:
                del stream.write
        self._watched.clear()
