"""``seamscope run SCRIPT.py [-- ARGS]`` / ``seamscope run -m MODULE`` / ``seamscope run FILE.py:FUNC``:
observe an unmodified program, or a probe workload called as the probe calls it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..capture.runner import run_target
from ..experiments.remedy_spec import FLAGS, RemedySpec, spec_from_options
from ._common import ProgressLine, finish_run, need_torch, say, tolerant_output
from .options import flag_of, given, missing_need, remedy_options, run_options

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from ..capture.watch import Watcher

NOT_WITH: dict[str, dict[str, str]] = {
    "nproc": {
        "warm": "each warm-start run is one process, not ranks",
        "trace_out": "each rank would write the same file",
        "trace_calls": "each rank would write the same trace file",
        "trace_events": "each rank would write the same trace file",
        "save_artifacts": "each rank would write the same file",
        **{f.dest: "remedy flags are not passed to the ranks" for f in FLAGS},
        "fingerprint": "it is try's own flag for its runs",
        "guard_probe": "it is try's own flag for its runs",
        "record_out": "it is try's own flag for its runs",
        "no_html": "it is try's own flag for its runs",
        "watch": "watch mode watches one process",
    },
    "warm": {
        "trace_out": "its three runs would write the same file",
        "trace_calls": "its three runs would write the same trace file",
        "trace_events": "its three runs would write the same trace file",
        "save_artifacts": "it saves the cold run's cache artifacts and loads them itself",
        "load_artifacts": "it saves the cold run's cache artifacts and loads them itself",
        "fingerprint": "it is try's own flag for its runs",
        "guard_probe": "it is try's own flag for its runs",
        "record_out": "it is try's own flag for its runs",
        "watch": "watch mode watches one process",
    },
}
"""The options a route of ``run`` (``--nproc``, ``--warm``) does not take, and why: given with it,
one line and exit 2 before anything runs. Every other option is honoured on every route."""

PASSED_ON = ("note", "intervention", "rollback_trigger", "checkpoint_every", "load_artifacts", "no_html")
"""Options a route that runs ``seamscope run`` in other processes (``--nproc``'s ranks, ``--warm``'s
runs) gives to each of them as they were given."""


# --- watch mode (docs/watch.md): its options and the watcher they make, in one block --------------

WATCH_OPTIONS = ("watch", "warmup", "events", "fail_after_warmup", "metrics_port", "otel")


def watch_options(f: F) -> F:
    f = click.option("--otel", is_flag=True,
                     help="With --watch: also record the counts through OpenTelemetry's global MeterProvider "
                     "(the script configures its exporter).")(f)
    f = click.option("--metrics-port", default=None, metavar="[ADDR:]PORT",
                     help="With --watch: serve Prometheus metrics on this port (loopback unless ADDR is given; "
                     "with PROMETHEUS_MULTIPROC_DIR, the workers' counts summed).")(f)
    f = click.option("--fail-after-warmup", is_flag=False, flag_value="raise", default=None,
                     type=click.Choice(["raise", "log"]),
                     help="With --watch: a recompile or fallback after warm-up raises "
                     "seamscope.errors.RecompileAfterWarmup from the call (=log: logs it at ERROR).")(f)
    f = click.option("--events", default=None, type=click.Path(dir_okay=False), metavar="FILE",
                     help="With --watch: append each event after warm-up to FILE (JSON lines).")(f)
    f = click.option("--warmup", default=None, metavar="CALLS|SECONDS",
                     help="With --watch: warm-up length, in calls (100) or seconds (30s, 2m); default 100 calls.")(f)
    f = click.option("--watch", is_flag=True,
                     help="Watch a serving process: after warm-up, each recompile, fallback, new graph and new "
                     "break site is an event (logger 'seamscope', --events, --metrics-port).")(f)
    return f


def _watcher_of(options: dict[str, object]) -> Watcher | None:
    """The watcher the watch options ask for (None without --watch; ``options.NEEDS`` refuses the
    others without it)."""
    got = {k: options.pop(k, None) for k in WATCH_OPTIONS}
    if not got["watch"]:
        return None
    from ..capture.watch import DEFAULT_WARMUP, Watcher
    from ..capture.watch_metrics import make_sinks, parse_port

    port = got["metrics_port"]
    if port is not None:
        parse_port(str(port))  # exit 2 before anything runs
    sinks = make_sinks(str(port) if port is not None else None, None, True if got["otel"] else None)
    events = got["events"]
    return Watcher(got["warmup"] if got["warmup"] is not None else DEFAULT_WARMUP,
                   events=str(events) if events is not None else None, fail_after_warmup=got["fail_after_warmup"],
                   sinks=sinks, on_serving=_say_serving)


def _say_serving(url: str) -> None:
    """The metrics address once bound (``--metrics-port 0``: the port the system chose)."""
    click.echo(f"seamscope: watch: metrics at {url}", err=True)


class _RunCommand(click.Command):
    """Keeps the words it was given: ``--python`` hands the same command line to another interpreter."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[ARGV] = list(args)
        return super().parse_args(ctx, args)


ARGV = "seamscope.run.argv"


@click.command(cls=_RunCommand,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--python", "python", default=None, metavar="PATH",
              help="Run under another environment's Python (another torch release): this seamscope runs "
                   "there and writes a receipt of the same format. That environment needs torch, msgspec, "
                   "click, rich and jinja2.")
@run_options()
@watch_options
@remedy_options
@click.argument("target")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(out: str, module: bool, quiet: bool, note: str | None, intervention: str | None,
            rollback_trigger: str | None, nproc: int | None, trace_out: str | None, trace_calls: int,
            trace_events: int, warm: bool, save_artifacts: str | None, load_artifacts: str | None,
            checkpoint_every: float, fingerprint: bool, guard_probe: bool, record_out: str | None, no_html: bool,
            target: str, args: tuple[str, ...], python: str | None, **remedies: object) -> int:
    """Run TARGET (a script, -m MODULE, or a workload FILE.py:FUNC) with every torch.compile in it observed;
    write receipt.json, calls.csv, index.html. A workload takes --lengths, --lengths-file and --dim after --."""
    if python is not None:
        return under_python(python, click.get_current_context().meta[ARGV])
    need_torch("run")
    from ..model.receipt import Decision

    decision = Decision(note=note, intervention=intervention, rollback_trigger=rollback_trigger)
    if not module:
        _check_utf8_path(target)
    args_l = list(args)
    if args_l and args_l[0] == "--":
        args_l = args_l[1:]
    elif "--" not in args_l:
        _warn_misplaced_options(("-m " if module else "") + target, args_l)
    route = "nproc" if nproc is not None else "warm" if warm else None
    refuse_unsupported(click.get_current_context(), route)
    if route is not None:
        tolerant_output()  # the script runs in processes of its own
    watcher = _watcher_of(remedies)  # pops the watch options: what is left are the remedy flags
    if nproc is not None:
        from .merge import run_ranks

        return run_ranks(nproc, target, args_l, module=module, out=out, quiet=quiet,
                         passed=passed_on(click.get_current_context()))
    if warm:
        return _run_warm(target, args_l, module, out, quiet, remedies, passed_on(click.get_current_context()))
    plan = _remedy_plan(target, module, remedies, record_out=record_out, fingerprint=fingerprint or guard_probe,
                        guard_probe=guard_probe)
    if save_artifacts is not None or load_artifacts is not None:
        from ..capture.cache_artifacts import WithCacheArtifacts

        plan = WithCacheArtifacts(plan, load_artifacts, save_artifacts)
    if watcher is not None:
        from ..capture.watch import WithWatch

        plan = WithWatch(plan, watcher)
    pad = remedies.get("pad")
    if isinstance(pad, str):
        args_l += ["--pad", pad]  # checked by the plan: a workload target's own option
    from ..experiments.workload_run import launcher

    launch = launcher(target, args_l, module)
    progress = ProgressLine(not quiet and watcher is None)  # a server's stderr is its log
    result = run_target(target, args_l, module=module, out=out, decision=decision,
                        on_call_end=progress if progress.enabled else None, setup=plan,
                        checkpoint_every=checkpoint_every, launch=launch)
    progress.clear()
    if result.forked:  # a child the script forked, at the script's end: the output is the parent's
        return result.exit_code
    from ..capture.persist import hard_exit_on_signal

    with hard_exit_on_signal(note=f"; {result.shown(result.receipt_path)} is written" if result.receipt_path else "",
                             first=[result.signalled] if result.signalled else None):
        if trace_out is not None and result.session is not None and result.session.ledger is not None:
            from ..render.seamscope_trace import write_trace

            write_trace(result.session.ledger, trace_out, max_calls=trace_calls, max_events=trace_events)
            say(f"seamscope: wrote trace {trace_out}", err=True)
        return finish_run(result, quiet=quiet, html_report=not no_html)


INTERPRETER_CHECK = "import msgspec, click, rich, jinja2; import torch; print(torch.__version__)"
"""What ``--python`` checks the other environment has before the run, in one line."""


def under_python(python: str, argv: list[str]) -> int:
    """``seamscope run`` with the same words, less ``--python PATH``, in another interpreter: this
    seamscope's own package on its path (so the receipt has this format), the other environment's
    torch. Its exit code is the run's; a signal is passed on as for ``--nproc``'s ranks."""
    import sys

    from .merge import run_forwarding_signals

    rest = _without_option(argv, "--python")
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    version = check_interpreter(python, env)
    say(f"seamscope: running under {python} (torch {version})", err=True)
    sys.stdout.flush()
    rc, _ = run_forwarding_signals([python, "-m", "seamscope", "run", *rest], env)
    return 128 - rc if rc < 0 else rc


def check_interpreter(python: str, env: dict[str, str]) -> str:
    """The other environment's torch version; one line and exit 2 when seamscope cannot run there."""
    import subprocess

    from ..errors import UnusableInput

    try:
        got = subprocess.run([python, "-c", INTERPRETER_CHECK], env=env, capture_output=True, text=True, timeout=300)
    except OSError as e:
        raise UnusableInput(f"--python {python}: cannot start it ({e.strerror or e})") from None
    if got.returncode != 0:
        last = (got.stderr.strip().splitlines() or ["no output"])[-1]
        raise UnusableInput(f"--python {python}: cannot run seamscope there ({last}); that environment needs "
                            "torch, msgspec, click, rich and jinja2")
    return got.stdout.strip()


def _without_option(argv: list[str], name: str) -> list[str]:
    """``argv`` less its first ``NAME VALUE`` or ``NAME=VALUE`` (run's options come before the target,
    so the first is the one click read, not one of the script's own words)."""
    for i, word in enumerate(argv):
        if word == name:
            return argv[:i] + argv[i + 2:]
        if word.startswith(name + "="):
            return argv[:i] + argv[i + 1:]
    return list(argv)


def refuse_unsupported(ctx: click.Context, route: str | None) -> None:
    """One line and exit 2 for an option the route does not take (:data:`NOT_WITH`) or one given
    without the option it needs (``options.NEEDS``), before anything runs."""
    from ..errors import UnusableInput

    for name, why in NOT_WITH.get(route or "", {}).items():
        if given(ctx, name):
            raise UnusableInput(f"--{route} does not take {flag_of(ctx, name)}: {why}")
    need = missing_need(ctx)
    if need is not None:
        raise UnusableInput(need)


def passed_on(ctx: click.Context) -> list[str]:
    """The words of the :data:`PASSED_ON` options given, for a ``seamscope run`` in another process."""
    words: list[str] = []
    for p in ctx.command.params:
        if p.name in PASSED_ON and given(ctx, p.name):
            value = ctx.params[p.name]
            words += [p.opts[0]] if isinstance(p, click.Option) and p.is_flag else [p.opts[0], str(value)]
    return words


def _check_utf8_path(target: str) -> None:
    """A script whose path holds bytes that are not UTF-8 (``lat\\xe9in.py``): one line, exit 2,
    before anything runs. Its path would be in every frame, site and receipt, which are UTF-8 text."""
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


def _run_warm(target: str, args: list[str], module: bool, out: str, quiet: bool, remedies: dict[str, object],
              passed: list[str] | None = None) -> int:
    """``--warm``: its runs get the remedy flags and the :data:`PASSED_ON` options (``passed``)."""
    from ..analyze.display import shown
    from ..experiments.warm_start import log_tail, run_warm

    _remedy_plan(target, module, remedies)  # bad flags: exit 2 before anything runs

    def say(msg: str) -> None:  # paths and the job's end are data: control characters shown, never cut
        click.echo(f"seamscope: {shown(msg, None)}", err=True)

    got = run_warm(target, args, module, out, [*spec_of(remedies).flags(), *(passed or [])],
                   progress=None if quiet else say)
    ws = got.comparison
    if ws is not None:
        from ..model.canonical import pretty_bytes
        from ..render.files import write_atomic

        write_atomic(os.path.join(out, "warm-start.json"), pretty_bytes(ws))
    if ws is not None and not quiet:
        from ..render.compile_time_table import print_warm_start
        from ..render.console import SeamConsole

        print_warm_start(SeamConsole(highlight=False), ws)
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


def _remedy_plan(target: str, module: bool, remedies: dict[str, object], *, record_out: str | None = None,
                 fingerprint: bool = False, guard_probe: bool = False) -> object:
    """The remedy flags checked before anything runs (None when none was given and nothing is recorded)."""
    from ..experiments.remedy_plan import prepare

    spec = spec_of(remedies)
    if spec.is_empty() and record_out is None:
        return None
    return prepare(spec, target, module=module, record_out=record_out, fingerprint=fingerprint,
                   guard_probe=guard_probe)
