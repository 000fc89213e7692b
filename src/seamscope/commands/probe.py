"""``seamscope probe FILE.py:FUNC``: eager control, compiled phases, differential test, ladder."""

from __future__ import annotations

import click

from ..errors import AnswerIsNo, UnusableInput
from ._common import need_torch
from .options import DEFAULT_OUT


def parse_settings(items: tuple[str, ...]) -> dict[str, object]:
    """``NAME=VALUE`` pairs; values are Python literals (``True``, ``8``, ``'x'``), never code."""
    import ast

    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UnusableInput(f"--dynamo-config {item!r}: expected NAME=VALUE")
        try:
            out[name.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise UnusableInput(f"--dynamo-config {item!r}: the value is not a Python literal") from None
    return out


def dynamo_settings(items: tuple[str, ...], workload: str) -> dict[str, object]:
    """``NAME=VALUE`` and ``NAME+=MODULE:QUALNAME`` (a callable added to a set setting), checked."""
    if not any(i.partition("=")[0].endswith("+") for i in items):
        return parse_settings(items)
    from ..capture import adapter
    from ..capture.remedies import late_callables
    from ..experiments.remedy_plan import prepare
    from ..experiments.remedy_spec import RemedySpec

    script = workload.rsplit(":", 1)[0]
    plan = prepare(RemedySpec(dynamo_config=tuple(items)), script)
    out: dict[str, object] = dict(plan.settings)
    for name, targets in plan.additions.items():
        current = adapter.dynamo_setting(name)[1]
        out[name] = late_callables(name, current, targets)
    return out


@click.command()
@click.argument("workload")
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, type=click.Path(),
              help="Folder for receipt.json and calls.csv.")
@click.option("--isolate", is_flag=True, help="Run each ladder layer in a child process (a crash is a result).")
@click.option("--timeout", type=float, default=None, help="Seconds per isolated layer before it counts as hung.")
@click.option("--backends", default=None, help="Ladder layers, comma-separated (names or pkg.mod:fn); 'none' skips.")
@click.option("--warm", type=int, default=None, help="Warm calls (overrides the workload's warm_calls).")
@click.option("--fail-on-divergence", is_flag=True, help="Exit 1 when a boundary bug or failing layer is found.")
@click.option("--dynamo-config", "dynamo_config", multiple=True, metavar="NAME=VALUE",
              help="Set a torch._dynamo.config value for the probe (repeatable), e.g. capture_scalar_outputs=True; "
              "NAME+=MODULE:QUALNAME adds a callable to a set setting (reorderable_logging_functions).")
def command(workload: str, out: str, isolate: bool, timeout: float | None, backends: str | None,
            warm: int | None, fail_on_divergence: bool, dynamo_config: tuple[str, ...] = ()) -> int:
    """Probe the workload that FILE.py:FUNC returns (a seamscope.Workload)."""
    need_torch("probe")
    from ..analyze.display import markup, shown
    from ..experiments.probe import probe
    from ..experiments.workload import load_workload
    from ..render.console import SeamConsole
    from ..render.probe_table import ProbeTableRenderer
    from ..render.receipt_json import write_receipt_files
    from ..render.terminal import SENTENCE

    if warm is not None and warm < 1:
        raise UnusableInput("--warm must be >= 1")
    if timeout is not None and timeout <= 0:
        raise UnusableInput("--timeout must be > 0")
    layers = None
    if backends is not None:
        layers = [] if backends.strip() in ("", "none") else [b.strip() for b in backends.split(",") if b.strip()]
    settings = dynamo_settings(dynamo_config, workload)
    wl = load_workload(workload)
    err_console = SeamConsole(stderr=True, highlight=False)
    from ..capture.adapter import dynamo_config_patch

    try:
        patch = dynamo_config_patch(settings)
    except KeyError as e:
        raise UnusableInput(f"--dynamo-config: torch._dynamo.config has no setting {e.args[0]}") from None
    with patch:
        receipt, err = probe(wl, spec=workload, ladder=layers, isolate=isolate, timeout=timeout, warm=warm,
                             progress=lambda m: err_console.print(f"[dim]{markup(m, SENTENCE)}[/dim]"))
    path = write_receipt_files(receipt, out)
    assert receipt.probe is not None
    ProbeTableRenderer().print(receipt.probe)
    click.echo(f"receipt: {shown(path, None)}")
    if err is not None:
        raise err
    if fail_on_divergence and receipt.probe.verdict in ("boundary_bug", "fails_compiled"):
        raise AnswerIsNo(receipt.probe.answer)
    return 0
