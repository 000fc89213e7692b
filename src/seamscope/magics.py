"""``%load_ext seamscope`` in IPython or Jupyter gives the ``%%seamscope`` cell magic: the cell runs
inside a capture session, its receipt is written (``--out``, as ``seamscope run``), and the summary
is shown below the cell (the report's overview and top findings in Jupyter, the terminal summary
in a terminal). The session stays in the notebook as ``_seamscope``.

IPython is imported only by :func:`load_ipython_extension`, which IPython itself calls.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import click

from .commands.options import CELL_OPTIONS, missing_need, run_options


@click.command(name="%%seamscope", add_help_option=False)
@run_options(CELL_OPTIONS)
def cell_options(**options: Any) -> dict[str, Any]:
    """The options of ``%%seamscope``: those of ``seamscope run`` that apply to one cell."""
    need = missing_need(click.get_current_context())
    if need is not None:
        raise click.UsageError(need)
    return options


MAGIC_HELP = "%%seamscope " + " ".join(
    f"[{p.opts[0]}{'' if isinstance(p, click.Option) and p.is_flag else f' {p.metavar}'}]" for p in cell_options.params)


def parse_line(line: str) -> dict[str, Any]:
    """The magic's options, or ``ValueError`` with one line saying what is wrong."""
    try:
        argv = shlex.split(line)
        return cell_options.main(argv, standalone_mode=False)  # type: ignore[no-any-return]
    except click.ClickException as e:
        raise ValueError(f"{e.format_message()} (usage: {MAGIC_HELP})") from None
    except ValueError as e:
        raise ValueError(f"cannot read the options ({e}) (usage: {MAGIC_HELP})") from None


def run_cell(shell: Any, line: str, cell: str) -> Any:
    """Run one cell observed; returns the stopped session (also ``_seamscope`` in the notebook)."""
    from IPython.core.error import UsageError

    from .capture.session import Session, active_session
    from .model.receipt import Decision

    try:
        opts = parse_line(line)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if active_session() is not None:
        raise UsageError("a seamscope session is already active in this process: %%seamscope "
                         "observes a cell on its own")
    decision = Decision(note=opts["note"], intervention=opts["intervention"],
                        rollback_trigger=opts["rollback_trigger"])
    from .capture.persist import RunOutput
    from .capture.session import status_of_exception
    from .errors import UnusableInput

    s = Session(None, command=["%%seamscope", *shlex.split(line)], decision=decision)
    output = RunOutput(s, opts["out"], opts["checkpoint_every"])
    try:
        output.prepare()  # writable and not another run's, before the cell runs
    except UnusableInput as e:
        raise UsageError(str(e)) from None
    try:
        s.start()
        output.begin()
        result = shell.run_cell(cell)
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        s.status = status_of_exception(error if isinstance(error, BaseException) else None)
        s.stop()
        s.write(output.folder)  # resolved before the cell ran (it may change directory)
        path = os.path.join(opts["out"], "receipt.json")
    finally:
        s.stop()
        output.close()
    shell.user_ns["_seamscope"] = s
    notes = [f"wrote {path}"]
    from .render.html import write_html_report

    if s.last_receipt is not None:  # what write() just wrote
        write_html_report(s.last_receipt, output.folder, source_root=s.cwd)
        notes.append(f"report {os.path.join(opts['out'], 'index.html')}")
    if opts["trace_out"] is not None and s.ledger is not None:
        from .render.seamscope_trace import write_trace

        write_trace(s.ledger, opts["trace_out"], max_calls=opts["trace_calls"],
                    max_events=opts["trace_events"])
        notes.append(f"trace {opts['trace_out']}")
    if getattr(result, "error_in_exec", None) is not None or getattr(result, "error_before_exec", None):
        notes.append("the cell raised: the receipt holds what ran until then")
    if not opts["quiet"]:
        show(s, notes)
    return s


def show(s: Any, notes: list[str]) -> None:
    """The summary below the cell: HTML where the front end shows it, else the terminal summary."""
    from IPython.display import display

    from .analyze.display import shown
    from .render.notebook import notebook_html
    from .render.terminal import SENTENCE, notebook_text

    receipt = s.last_receipt
    # plain text without escapes or hard wraps; force_jupyter=False inside: in a Jupyter kernel rich
    # would display its text itself (ignoring ``file``), a second summary above the HTML one
    text = notebook_text(receipt)
    text += "".join(f"seamscope: warning: {shown(w, SENTENCE)}\n" for w in receipt.ledger.run.warnings)
    text += "".join(f"seamscope: {shown(n, None)}\n" for n in notes)
    html = notebook_html(receipt, source_root=s.cwd) + "".join(
        f'<p class="note" style="color:#667085;font-size:12px">seamscope: {_escape(n)}</p>' for n in notes)
    display({"text/plain": text, "text/html": html}, raw=True)


def _escape(text: str) -> str:
    import html

    return html.escape(text)


def load_ipython_extension(shell: Any) -> None:
    def seamscope(line: str, cell: str) -> None:
        run_cell(shell, line, cell)

    seamscope.__doc__ = f"Observe this cell with seamscope: {MAGIC_HELP}"
    shell.register_magic_function(seamscope, magic_kind="cell", magic_name="seamscope")


def unload_ipython_extension(shell: Any) -> None:
    """Nothing to undo: a cell's session is stopped when the cell ends."""
