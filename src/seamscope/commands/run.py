"""``seamscope run SCRIPT.py [-- ARGS]`` / ``seamscope run -m MODULE`` / ``seamscope run FILE.py:FUNC``:
observe an unmodified program, or a probe workload called as the probe calls it."""

from __future__ import annotations

import click

from ..capture.runner import run_target
from ..experiments.remedy_spec import RemedySpec, spec_from_options
from ._common import ProgressLine, finish_run, need_torch, say, tolerant_output
from .options import remedy_options


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--out", "out", default="seamscope-out", show_default=True, help="Output folder.")
@click.option("-m", "module", is_flag=True, help="TARGET is a module name (as python -m).")
@click.option("--quiet", is_flag=True, help="No progress line and no summary.")
@click.option("--note", default=None, help="Decision record: a note kept in the receipt.")
@click.option("--intervention", default=None, help="Decision record: the change being evaluated.")
@click.option("--rollback-trigger", default=None, help="Decision record: when to undo it.")
@click.option("--nproc", type=click.IntRange(min=1), default=None,
              help="Start N ranks under torchrun (--standalone, this machine), then merge them.")
@click.option("--trace-out", type=click.Path(dir_okay=False), default=None,
              help="Also write seamscope's own bounded trace (JSON lines) to this file.")
@click.option("--trace-calls", type=click.IntRange(min=1), default=64, show_default=True,
              help="At most this many calls in the trace (totals still count every call).")
@click.option("--trace-events", type=click.IntRange(min=1), default=16, show_default=True,
              help="At most this many events per call in the trace.")
@click.option("--warm", is_flag=True,
              help="Run TARGET twice in fresh processes sharing one persistent compile cache (OUT/compile-cache): "
              "OUT/cold fills it, OUT/warm reads it; compare what a restarted worker pays (OUT/warm-start.json). "
              "Each run's output goes to OUT/NAME.log.")
@click.option("--save-cache-artifacts", "save_artifacts", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="After the script, write torch.compiler.save_cache_artifacts() to FILE "
              "(PyTorch's portable FX graph and AOTAutograd cache entries).")
@click.option("--load-cache-artifacts", "load_artifacts", type=click.Path(dir_okay=False, exists=True), default=None,
              metavar="FILE", help="Before the script, torch.compiler.load_cache_artifacts(FILE) into the run's "
              "cache directory (a worker shipped another's caches).")
@click.option("--checkpoint-every", type=click.FloatRange(min=0), default=60.0, show_default=True,
              metavar="SECONDS",
              help="Write the receipt so far (marked incomplete) this often, at a call boundary; 0: never.")
@remedy_options
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(out: str, module: bool, quiet: bool, note: str | None, intervention: str | None,
            rollback_trigger: str | None, target: str, args: tuple[str, ...], nproc: int | None = None,
            trace_out: str | None = None, trace_calls: int = 64, trace_events: int = 16, warm: bool = False,
            checkpoint_every: float = 60.0, save_artifacts: str | None = None, load_artifacts: str | None = None,
            **remedies: object) -> int:
    """Run TARGET (a script, -m MODULE, or a workload FILE.py:FUNC) with every torch.compile in it observed;
    write receipt.json, calls.csv, index.html. A workload takes --lengths, --lengths-file and --dim after --."""
    need_torch("run")
    from ..model.receipt import Decision

    decision = Decision(note=note, intervention=intervention, rollback_trigger=rollback_trigger)
    from ..errors import UnusableInput

    if not module:
        _check_utf8_path(target)
    args_l = list(args)
    if args_l and args_l[0] == "--":
        args_l = args_l[1:]
    elif "--" not in args_l:
        _warn_misplaced_options(("-m " if module else "") + target, args_l)
    if nproc is not None and not spec_of(remedies).is_empty():
        raise UnusableInput("remedy flags (--dynamo-config, --compile-option, ...) are not passed to --nproc ranks")
    if nproc is not None or warm:
        tolerant_output()  # the script runs in processes of its own
    if nproc is not None:
        from .merge import run_ranks

        return run_ranks(nproc, target, args_l, module=module, out=out, quiet=quiet,
                         decision_args={"--note": note, "--intervention": intervention,
                                        "--rollback-trigger": rollback_trigger},
                         checkpoint_every=checkpoint_every)
    if warm and (save_artifacts is not None or load_artifacts is not None):
        raise UnusableInput("--warm saves the cold run's cache artifacts and loads them itself: "
                            "drop --save-cache-artifacts / --load-cache-artifacts")
    if warm:
        return _run_warm(target, args_l, module, out, quiet, remedies)
    plan = _remedy_plan(target, module, remedies)
    if save_artifacts is not None or load_artifacts is not None:
        from ..capture.cache_artifacts import WithCacheArtifacts

        plan = WithCacheArtifacts(plan, load_artifacts, save_artifacts)
    pad = remedies.get("pad")
    if isinstance(pad, str):
        args_l += ["--pad", pad]  # checked by the plan: a workload target's own option
    from ..experiments.workload_run import launcher

    launch = launcher(target, args_l, module)
    progress = ProgressLine(not quiet)
    result = run_target(target, args_l, module=module, out=out, decision=decision,
                        on_call_end=progress if progress.enabled else None, setup=plan,
                        checkpoint_every=checkpoint_every, launch=launch)
    progress.clear()
    from ..capture.persist import hard_exit_on_signal

    with hard_exit_on_signal(note=f"; {result.receipt_path} is written" if result.receipt_path else ""):
        if trace_out is not None and result.session is not None and result.session.ledger is not None:
            from ..render.seamscope_trace import write_trace

            write_trace(result.session.ledger, trace_out, max_calls=trace_calls, max_events=trace_events)
            say(f"seamscope: wrote trace {trace_out}", err=True)
        return finish_run(result, quiet=quiet, html_report=not remedies.get("no_html"))


def _check_utf8_path(target: str) -> None:
    """A script whose path holds bytes that are not UTF-8 (``lat\\xe9in.py``): one line, exit 2,
    before anything runs. Its path would be in every frame, site and receipt, which are UTF-8 text."""
    import os

    from ..errors import UnusableInput

    try:
        os.path.abspath(target).encode("utf-8")
    except UnicodeEncodeError:
        shown = target.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UnusableInput(f"{shown}: the script's path is not UTF-8 text, which receipts hold; rename "
                            "the file or its folder, or run it through a symbolic link with a UTF-8 name") from None


def _warn_misplaced_options(target: str, args: list[str]) -> None:
    """Arguments after the target are the script's (as with ``python -m cProfile``), also those
    that look like ``run``'s own options. Say so in one line when one does, and how to write it."""
    own = {o: p for p in command.params if isinstance(p, click.Option) for o in p.opts}
    moved: list[str] = []
    i = 0
    while i < len(args):
        name = args[i].split("=", 1)[0]
        opt = own.get(name)
        if opt is not None:
            takes_value = not opt.is_flag and "=" not in args[i] and i + 1 < len(args)
            moved.extend(args[i : i + 2] if takes_value else args[i : i + 1])
            i += 2 if takes_value else 1
        else:
            i += 1
    if not moved:
        return
    given = " ".join(moved)
    rest = " ".join(args)
    say(
        f"seamscope: warning: {given} went to {target}, not to seamscope (what follows the script is the "
        f"script's); for seamscope write `seamscope run {given} {target}`, for the script "
        f"`seamscope run {target} -- {rest}`",
        err=True,
    )


def _run_warm(target: str, args: list[str], module: bool, out: str, quiet: bool, remedies: dict[str, object]) -> int:
    from ..analyze.display import shown
    from ..experiments.warm_start import log_tail, run_warm

    _remedy_plan(target, module, remedies)  # bad flags: exit 2 before anything runs

    def say(msg: str) -> None:  # paths and the job's end are data: control characters shown, never cut
        click.echo(f"seamscope: {shown(msg, None)}", err=True)

    got = run_warm(target, args, module, out, spec_of(remedies).flags(), progress=None if quiet else say)
    ws = got.comparison
    if ws is not None and not quiet:
        from rich.console import Console

        from ..render.compile_time_table import print_warm_start

        print_warm_start(Console(highlight=False), ws)
    if ws is not None:
        also = f", {out}/warm-artifacts" if ws.artifacts is not None else ""
        say(f"wrote {out}/cold, {out}/warm{also} and {out}/warm-start.json (each run's output: {out}/NAME.log)")
    elif got.interrupted:
        kept = ", ".join(f"{out}/{name}" for name in got.done)
        say(f"interrupted during the {got.failed} run" + (f"; {kept} kept" if kept else ""))
    elif got.ended is not None and got.ended.exit_code is not None and got.ended.exit_code > 0:
        tail = log_tail(got.log or "")
        said = f"; its last lines (all of it in {got.log}):" if tail else f"; its output: {got.log}"
        say(f"the {got.failed} run failed ({got.ended.text()}){said}")
        for line in tail:
            click.echo(f"  {shown(line)}", err=True)  # the script's own text: no control characters
    elif got.ended is not None:
        say(f"the {got.failed} run ended: {got.ended.text()}; its output: {got.log}")
    return got.exit_code


def spec_of(remedies: dict[str, object]) -> RemedySpec:
    return spec_from_options(**remedies)  # type: ignore[arg-type]


def _remedy_plan(target: str, module: bool, remedies: dict[str, object]) -> object:
    """The remedy flags checked before anything runs (None when none was given)."""
    from ..experiments.remedy_plan import prepare

    spec = spec_from_options(**remedies)  # type: ignore[arg-type]
    record = remedies.get("record_out")
    if spec.is_empty() and record is None:
        return None
    return prepare(spec, target, module=module, record_out=record if isinstance(record, str) else None,
                   fingerprint=bool(remedies.get("fingerprint")))
