"""``seamscope try SCRIPT.py [-- ARGS]`` / ``seamscope try FILE.py:FUNC [-- --lengths ...]``: apply each
suggested remedy, measure it, check the outputs."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import sys
from collections.abc import Iterator
from typing import Any

import click

from ..analyze.units import parse_duration
from ..errors import RunSignalled, UnusableInput, UserCodeFailed
from .options import DEFAULT_OUT


def parse_budget(text: str | None) -> float | None:
    """``90``, ``90s``, ``10m``, ``1h`` → seconds."""
    if text is None:
        return None
    seconds = parse_duration(text)
    if seconds is None or seconds <= 0:
        raise UnusableInput(f"--budget {text!r}: expected a duration such as 90s, 10m or 1h")
    return seconds


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, help="Output folder.")
@click.option("--repeat", type=click.IntRange(min=1), default=3, show_default=True,
              help="Timed repetitions per candidate (interleaved with the baseline).")
@click.option("--max-repeat", "max_repeat", type=click.IntRange(min=1), default=None,
              help="Repetitions an undecided candidate may get in all, interleaved with the baseline's "
                   "(default 6, or 1 with --repeat 1).")
@click.option("--seed", type=int, default=0, show_default=True, help="The seed of every run.")
@click.option("--timeout", type=float, default=None, help="Seconds before a run counts as hung.")
@click.option(
    "--budget",
    default=None,
    help="Bound the whole trial (90s, 10m, 1h): a candidate starts only when its runs fit, "
    "by measured run times; the rest is listed as not tried.",
)
@click.option("--candidate", "candidates", multiple=True, metavar="FLAGS",
              help="Your own candidate: remedy flags of `seamscope run`, quoted (repeatable).")
@click.option("--only", "only", multiple=True,
              help="Only these candidates (names, their start, or part of their flags).")
@click.option("--skip", "skip", multiple=True, help="Not these candidates.")
@click.option("--markdown", "markdown", default=None, type=click.Path(dir_okay=False),
              help="Also write the table as Markdown here (default OUT/trials.md).")
@click.option("--write-patch", "write_patch", default=None, type=click.Path(dir_okay=False),
              help="Also write the recommended candidate's patch here (a unified diff; git apply it from the "
              "project root).")
@click.option("--quiet", is_flag=True, help="No progress line.")
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(out: str, repeat: int, max_repeat: int | None, seed: int, timeout: float | None, budget: str | None,
            candidates: tuple[str, ...], only: tuple[str, ...], skip: tuple[str, ...], markdown: str | None,
            write_patch: str | None, quiet: bool, target: str, args: tuple[str, ...]) -> int:
    """Run TARGET (a script, or a workload FILE.py:FUNC) as it is and with each remedy its findings
    suggest; rank them with verdicts. A workload takes --lengths/--lengths-file/--dim after --."""
    from ._common import need_torch

    need_torch("try")
    from ..experiments.remedy_plan import prepare
    from ..experiments.remedy_spec import spec_from_words
    from ..experiments.trials.runs import Services, TrialSpec, default_max_repeat
    from ..experiments.trials.trial import BaselineFailed, run_trials

    args_l = list(args)
    if args_l and args_l[0] == "--":
        args_l = args_l[1:]
    from ..experiments.workload import is_workload_spec

    workload = is_workload_spec(target)
    if not workload and re.fullmatch(r".+\.py:[A-Za-z_][A-Za-z0-9_.]*", target):
        raise UnusableInput(f"{target}: no such workload file")
    if not workload and not os.path.isfile(target):
        raise UnusableInput(f"{target}: no such script")
    if workload:
        from ..experiments.workload_run import check_args

        check_args([target, *args_l])  # the workload's own options, checked first
    if timeout is not None and timeout <= 0:
        raise UnusableInput("--timeout must be > 0")
    budget_s = parse_budget(budget)
    extra = []
    for text in candidates:
        spec = spec_from_words(shlex.split(text))
        if spec.is_empty():
            raise UnusableInput(f"--candidate {text!r}: no remedy flag in it")
        if spec.seed is not None:
            raise UnusableInput(f"--candidate {text!r}: every run uses the trial's --seed")
        prepare(spec, target)  # every setting checked before anything runs
        extra.append(spec)
    from ..analyze.display import shown

    progress = None
    if not quiet:
        tty = sys.stderr.isatty()

        def progress(msg: str) -> None:
            msg = shown(msg, 1200)
            if tty:
                sys.stderr.write("\r\033[K" + "seamscope try: " + msg)
            else:
                sys.stderr.write("seamscope try: " + msg + "\n")
            sys.stderr.flush()

    trial = TrialSpec(script=target, args=args_l, out=out, seed=seed, repeat=repeat,
                      max_repeat=default_max_repeat(repeat) if max_repeat is None else max_repeat,
                      timeout=timeout, budget_s=budget_s)
    from ..capture.persist import held_folder
    from ..experiments.trials.budget import BudgetSpent
    from ..experiments.trials.runs import fresh_processes

    # OUT is this trial's alone (a second try or run into it is refused, naming this one)
    with signals_end_the_trial() as stop, held_folder(out, shlex.join(["seamscope", "try", target])):
        processes = None
        try:
            processes = fresh_processes(sys.executable, target)
            result = run_trials(trial, extra, list(only), list(skip), Services(progress=progress, processes=processes))
        except BaselineFailed as e:
            if progress is not None and sys.stderr.isatty():
                sys.stderr.write("\n")
            sys.stderr.write(e.stderr)
            from ..experiments.trials.split import SplitFailed

            told = "" if isinstance(e, SplitFailed) else "; no candidate was run"
            raise UserCodeFailed(f"{target} failed in the baseline ({e}){told}") from None
        except BudgetSpent as e:
            raise UserCodeFailed(f"{target}: {e} (--budget {budget}), in the baseline's first run; "
                                 "no candidate was run") from None
        except KeyboardInterrupt:
            if stop.signum:  # nothing finished yet: nothing to write
                raise RunSignalled(stop.signum, signal.Signals(stop.signum).name) from None
            raise
        finally:
            stop.hold()  # from here on a signal is noted, the writes finish, then it ends the command
            if processes is not None:
                processes.close()
        if progress is not None and sys.stderr.isatty():
            sys.stderr.write("\n")
        trials = result.trials
        paths = write_trials(trials, out, markdown)
        from ..render.trials_table import TrialsTerminalRenderer

        TrialsTerminalRenderer().print(trials)
        if write_patch is not None:
            chosen = next((c for c in trials.candidates if c.name == trials.chosen), None)
            if chosen is not None and chosen.diff:
                from ..render.files import write_atomic

                paths.append(write_atomic(write_patch, _patch_file(chosen.patch) or chosen.diff))
            else:
                why = "no candidate was recommended" if chosen is None else f"{chosen.name} is no edit of the script"
                click.echo(f"seamscope: --write-patch: {why}; nothing written to {shown(write_patch, None)} "
                           f"(each candidate's patch is in {shown(os.path.join(out, 'trials'), None)})", err=True)
        click.echo(f"seamscope: wrote {', '.join(shown(p, None) for p in paths)}", err=True)
        if result.budget_ended is not None:
            click.echo(f"seamscope: the budget (--budget {budget}) ended during {result.budget_ended}: the "
                       "trial stopped there; what did not finish is listed as over the budget", err=True)
        if stop.signum:
            click.echo(f"seamscope: {signal.Signals(stop.signum).name}: the trial stopped; the runs that "
                       "finished are in the table", err=True)
            return 128 + stop.signum
    return 130 if trials.interrupted else 0


def _patch_file(path: str | None) -> bytes | None:
    """The patch file's bytes as the trial wrote them (the script's own line endings and encoding)."""
    try:
        with open(path or "", "rb") as f:
            return f.read()
    except OSError:
        return None


class _Stop:
    signum = 0
    holding = False

    def hold(self) -> None:
        self.holding = True


@contextlib.contextmanager
def signals_end_the_trial() -> Iterator[_Stop]:
    """SIGTERM and SIGHUP (a CI time limit, a closed terminal) end a trial as Ctrl-C does: the run
    in progress is killed with its process group, its cache folder removed, the fork server
    closed, and what the finished runs measured written; the command then exits 128 + the
    signal's number (``stop.signum``: the first signal, once one came). Once the runs are over
    (``stop.hold()``) a signal is only noted: the writes finish first. A second signal is ignored
    (ending the writes would lose what was measured), and a signal set to be ignored (``nohup``)
    stays ignored."""
    stop = _Stop()

    def handler(signum: int, frame: object) -> None:
        if stop.signum:
            return
        stop.signum = signum
        if not stop.holding:
            raise KeyboardInterrupt

    before: dict[int, Any] = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None or signal.getsignal(sig) is signal.SIG_IGN:
            continue
        try:
            before[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: the caller's signals are its own
            break
    try:
        yield stop
    finally:
        for sig, old in before.items():
            signal.signal(sig, old)


def write_trials(trials: object, out: str, markdown: str | None = None) -> list[str]:
    """``OUT/trials.json`` (canonical), ``trials.md``, ``trials.html``, and the top receipt with its
    report (``index.html``: the trials table first, then the chosen run's report)."""
    from ..experiments.trials.trial import top_receipt
    from ..model.canonical import pretty_bytes
    from ..model.trials import Trials
    from ..render import write_rendered
    from ..render.files import write_atomic
    from ..render.receipt_json import write_receipt_files
    from ..render.trials_table import TrialsHtmlRenderer, TrialsMarkdownRenderer

    assert isinstance(trials, Trials)
    paths = [write_atomic(os.path.join(out, "trials.json"), pretty_bytes(trials))]
    md = TrialsMarkdownRenderer()
    paths.append(write_atomic(markdown, md.render(trials)) if markdown else write_rendered(md, trials, out, "trials"))
    paths.append(write_rendered(TrialsHtmlRenderer(), trials, out, "trials"))
    top = top_receipt(trials, out)
    if top is not None:
        paths.append(write_receipt_files(top, out))
        # the report of the chosen run, with the trials table as its first section
        from ..render.html import write_html_report

        paths.append(write_html_report(top, out, before=(TrialsHtmlRenderer().render_section(trials),)))
    return paths
