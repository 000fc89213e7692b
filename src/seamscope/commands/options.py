"""``run``'s options, each defined once (:data:`RUN_OPTIONS`: ``run`` takes all of them, the
``%%seamscope`` magic those of :data:`CELL_OPTIONS`), and the remedy flags (``run``; ``try
--candidate`` parses the same words with ``remedy_spec.spec_from_words``).

A new option of ``run`` is one entry of :data:`RUN_OPTIONS` (its default a named constant) and one
parameter of ``commands/run.py``'s ``command``; a route of ``run`` that does not take it names it in
``run.NOT_WITH``, or ``tests/test_run_options.py`` fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ..capture.persist import DEFAULT_CHECKPOINT_EVERY
from ..experiments.remedy_spec import FLAGS
from ..render.seamscope_trace import DEFAULT_MAX_CALLS, DEFAULT_MAX_EVENTS

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_OUT = "seamscope-out"

RUN_OPTIONS: dict[str, Callable[[Any], Any]] = {
    "out": click.option("--out", "out", default=DEFAULT_OUT, show_default=True, metavar="DIR",
                        help="Output folder."),
    "module": click.option("-m", "module", is_flag=True, help="TARGET is a module name (as python -m)."),
    "quiet": click.option("--quiet", is_flag=True, help="No progress line and no summary."),
    "note": click.option("--note", default=None, metavar="TEXT",
                         help="Decision record: a note kept in the receipt."),
    "intervention": click.option("--intervention", default=None, metavar="TEXT",
                                 help="Decision record: the change being evaluated."),
    "rollback_trigger": click.option("--rollback-trigger", "rollback_trigger", default=None, metavar="TEXT",
                                     help="Decision record: when to undo it."),
    "nproc": click.option("--nproc", type=click.IntRange(min=1), default=None, metavar="N",
                          help="Start N ranks under torchrun (--standalone, this machine), then merge them."),
    "trace_out": click.option("--trace-out", "trace_out", type=click.Path(dir_okay=False), default=None,
                              metavar="FILE",
                              help="Also write seamscope's own bounded trace (JSON lines) to this file."),
    "trace_calls": click.option("--trace-calls", "trace_calls", type=click.IntRange(min=1),
                                default=DEFAULT_MAX_CALLS, show_default=True, metavar="N",
                                help="With --trace-out: at most this many calls in the trace (totals still "
                                "count every call)."),
    "trace_events": click.option("--trace-events", "trace_events", type=click.IntRange(min=1),
                                 default=DEFAULT_MAX_EVENTS, show_default=True, metavar="N",
                                 help="With --trace-out: at most this many events per call in the trace."),
    "warm": click.option("--warm", is_flag=True,
                         help="Run TARGET in fresh processes against a persistent compile cache "
                         "(OUT/compile-cache): OUT/cold fills it and saves its cache artifacts, OUT/warm reads "
                         "it (a restarted worker), then, where artifacts were saved, OUT/warm-artifacts loads "
                         "them into an empty cache (a fresh machine); OUT/warm-start.json compares them. Each "
                         "run's output goes to OUT/NAME.log."),
    "save_artifacts": click.option("--save-cache-artifacts", "save_artifacts", type=click.Path(dir_okay=False),
                                   default=None, metavar="FILE",
                                   help="After the script, write torch.compiler.save_cache_artifacts() to FILE "
                                   "(PyTorch's portable FX graph and AOTAutograd cache entries)."),
    "load_artifacts": click.option("--load-cache-artifacts", "load_artifacts",
                                   type=click.Path(dir_okay=False, exists=True), default=None, metavar="FILE",
                                   help="Before the script, torch.compiler.load_cache_artifacts(FILE) into the "
                                   "run's cache directory (a worker shipped another's caches)."),
    "checkpoint_every": click.option("--checkpoint-every", "checkpoint_every", type=click.FloatRange(min=0),
                                     default=DEFAULT_CHECKPOINT_EVERY, show_default=True, metavar="SECONDS",
                                     help="Write the receipt so far (marked incomplete) this often, at a call "
                                     "boundary; 0: never."),
    # what ``try`` passes to each of its runs (``experiments/trials/runs.py``), not for a user
    "fingerprint": click.option("--fingerprint", "fingerprint", is_flag=True, hidden=True),
    "guard_probe": click.option("--guard-probe", "guard_probe", is_flag=True, hidden=True),
    "record_out": click.option("--record-out", "record_out", default=None, hidden=True),
    "no_html": click.option("--no-html", "no_html", is_flag=True, hidden=True),
}
"""``run``'s own options by parameter name, in the order ``--help`` lists them."""

CELL_OPTIONS = ("out", "quiet", "note", "intervention", "rollback_trigger", "trace_out", "trace_calls",
                "trace_events", "checkpoint_every")
"""Those of ``run``'s options that apply to one notebook cell (``%%seamscope``)."""


NEEDS = {"trace_calls": "trace_out", "trace_events": "trace_out", "fingerprint": "record_out",
         "guard_probe": "record_out",
         **dict.fromkeys(("warmup", "events", "fail_after_warmup", "metrics_port", "otel"), "watch")}
"""Options that mean nothing without another one."""


def given(ctx: click.Context, name: str) -> bool:
    """Whether option ``name`` was given (on the command line), not left at its default."""
    source = ctx.get_parameter_source(name)
    return source is not None and source is not ParameterSource.DEFAULT


def flag_of(ctx: click.Context, name: str) -> str:
    """How the command line spells option ``name`` (``trace_out`` → ``--trace-out``)."""
    return next(p.opts[0] for p in ctx.command.params if p.name == name)


def missing_need(ctx: click.Context) -> str | None:
    """One line when an option was given without the one it needs (:data:`NEEDS`), else None."""
    for name, needed in NEEDS.items():
        if name in ctx.params and given(ctx, name) and ctx.params.get(needed) in (None, False):
            return f"{flag_of(ctx, name)} needs {flag_of(ctx, needed)}"
    return None


def run_options(names: tuple[str, ...] | None = None) -> Callable[[F], F]:
    """A decorator adding ``run``'s options (all of them, or those ``names``d) from :data:`RUN_OPTIONS`."""

    def add(f: F) -> F:
        for name in reversed(names if names is not None else tuple(RUN_OPTIONS)):
            f = RUN_OPTIONS[name](f)
        return f

    return add


def remedy_options(f: F) -> F:
    """The remedy flags as click options (``run``; ``try --candidate`` parses the same words with
    ``remedy_spec.spec_from_words``), from their one description, ``remedy_spec.FLAGS``."""
    for flag in reversed(FLAGS):
        f = click.option(flag.opt, flag.dest, multiple=flag.multiple, type=int if flag.kind == "int" else None,
                         default=() if flag.multiple else None, metavar=flag.metavar, help=flag.help,
                         hidden=flag.hidden)(f)
    return f
