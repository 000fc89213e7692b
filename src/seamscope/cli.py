"""The command line: a thin layer over the Python API.

Each subcommand lives in ``seamscope/commands/<name>.py`` and exposes ``command`` (a click
command); this module only finds them, and turns errors into one line and the exit
codes (0 ok, 1 the answer is no, 2 unusable input, 130 interrupted).

Output, for every command: a reader that closes the pipe early (``| head -1``) is not a verdict:
the command stops printing and exits 141 (128 + SIGPIPE), as ``git`` and ``grep`` do, never 1
(click's own handling) or 0. A standard output closed before the command starts (``>&-``) is
unusable: one line on stderr, exit 2, before anything runs.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import sys
from typing import Any, NoReturn

import click

from ._version import __version__
from .analyze.display import visible
from .commands._common import tolerant_output
from .errors import RunSignalled, SeamscopeError

# name -> module; a command whose module is absent is simply not offered.
COMMANDS = {
    "demo": "seamscope.commands.demo",
    "run": "seamscope.commands.run",
    "import": "seamscope.commands.import_",
    "probe": "seamscope.commands.probe",
    "shapes": "seamscope.commands.shapes",
    "report": "seamscope.commands.report",
    "diff": "seamscope.commands.diff",
    "verify": "seamscope.commands.verify",
    "check": "seamscope.commands.check",
    "merge": "seamscope.commands.merge",
    "summary": "seamscope.commands.summary",
    "try": "seamscope.commands.try_",
}


#: The exit status of a command whose reader closed the pipe: 128 + SIGPIPE, as a shell reports
#: ``git`` or ``grep`` stopped by it.
BROKEN_PIPE_EXIT = 141


class _ReaderGone(Exception):
    """Standard output's reader closed the pipe (EPIPE): nobody reads what is left to print."""


class _LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as e:  # before click's own handler, which exits 1 (a verdict) on EPIPE
            if e.errno == errno.EPIPE:
                raise _ReaderGone from e
            raise

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, m in COMMANDS.items() if importlib.util.find_spec(m) is not None)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        mod = COMMANDS.get(name)
        if mod is None or importlib.util.find_spec(mod) is None:
            return None
        return importlib.import_module(mod).command  # type: ignore[no-any-return]


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="seamscope")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """seamscope: what torch.compile really did to your program, and what it cost."""
    if ctx.invoked_subcommand != "run":  # `run` does it once the script (whose stdout it is) ends
        tolerant_output()


def _reader_gone() -> NoReturn:
    """Stop printing: what is still buffered goes nowhere (no "Exception ignored" at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (in-process)
        pass
    sys.exit(BROKEN_PIPE_EXIT)


def _exit(code: int) -> NoReturn:
    """Exit with ``code`` once what is printed has reached the reader (or the reader is gone)."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _reader_gone()
    except (OSError, ValueError):
        pass
    sys.exit(code)


def main(argv: list[str] | None = None) -> Any:
    if sys.stdout is None:  # descriptor 1 was closed when Python started (`seamscope ... >&-`)
        if sys.stderr is not None:
            print("seamscope: standard output is closed, so nothing could be printed: redirect it to a "
                  "file or /dev/null instead", file=sys.stderr)
        sys.exit(2)
    try:
        rv = cli.main(args=argv, prog_name="seamscope", standalone_mode=False)
    except _ReaderGone:
        _reader_gone()
    except SeamscopeError as e:
        click.echo(f"seamscope: {visible(str(e))}", err=True)
        _exit(e.exit_code)
    except (RecursionError, OverflowError) as e:
        # The readers refuse deep nesting and huge numbers (ingest.limits); this is the backstop.
        click.echo(f"seamscope: unusable input: {type(e).__name__}: {visible(str(e))}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("seamscope: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("seamscope: interrupted", err=True)
        sys.exit(130)
    except RunSignalled as e:  # a SIGTERM/SIGHUP that arrived outside the script (after writing)
        click.echo(f"seamscope: {e}: stopped", err=True)
        sys.exit(128 + e.signum)
    except click.ClickException as e:
        e.show()
        sys.exit(2)
    except Exception as e:
        # The backstop: a bug of seamscope's own must not read as a verdict (exit 1 is "over
        # budget", "the script raised"); one line, exit 2. SEAMSCOPE_TRACEBACK=1 shows where.
        if os.environ.get("SEAMSCOPE_TRACEBACK"):
            raise
        click.echo(f"seamscope: internal error: {type(e).__name__}: {visible(str(e))[:300]} "
                   f"(a seamscope bug; SEAMSCOPE_TRACEBACK=1 shows the traceback)", err=True)
        sys.exit(2)
    _exit(rv if isinstance(rv, int) else 0)
