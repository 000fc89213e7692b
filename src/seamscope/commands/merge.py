"""``seamscope merge DIR``: one multi-rank receipt from per-rank output, and where the ranks diverge.

DIR is the ``--out`` folder of a torchrun job (``rank-N/receipt.json`` from ``run``), the per-rank
output of ``import``, or a multi-rank ``TORCH_TRACE`` directory. Exit codes: 0 merged; 1 the ranks
diverge and ``--fail-on-divergence`` was given; 2 something in the input was wrong (a missing rank,
receipts of different runs, a world size that does not match the files) — the merged receipt of the
ranks that could be read is written all the same.
"""

from __future__ import annotations

import os
from typing import Any

import click

from ._common import say


@click.command("merge")
@click.argument("directory", type=click.Path())
@click.option("--out", "out", default=None, type=click.Path(),
              help="A folder (receipt.json, calls.csv, report) or a .json file. Default: DIRECTORY.")
@click.option("--fail-on-divergence", is_flag=True, help="Exit 1 when the ranks diverge.")
@click.option("--world-size", type=int, default=None,
              help="The job's world size, when the files do not record it (TORCH_TRACE logs).")
@click.option("--quiet", is_flag=True, help="Only problems and the line saying where the receipt is.")
def command(directory: str, out: str | None, fail_on_divergence: bool, world_size: int | None, quiet: bool) -> int:
    """Merge the ranks of one torch.distributed run; name the ranks that diverge and from which call."""
    from ..analyze.ranks import gather, merge

    receipt = merge(gather(directory), world_size=world_size)
    path = write_merged(receipt, out or directory)
    return report_merged(receipt, path, fail_on_divergence=fail_on_divergence, quiet=quiet)


def write_merged(receipt: Any, out: str) -> str:
    from ..render.files import write_atomic
    from ..render.html import write_html_report
    from ..render.receipt_json import ReceiptJsonRenderer, write_receipt_files

    if out.endswith(".json"):
        return write_atomic(out, ReceiptJsonRenderer().render(receipt))
    path = write_receipt_files(receipt, out)
    return f"{path}, {write_html_report(receipt, os.path.dirname(path))}"


def report_merged(receipt: Any, path: str, *, fail_on_divergence: bool = False, quiet: bool = False) -> int:
    """Print the rank table, divergences and problems; return the exit code."""
    from ..analyze.report_view.ranks import group_label, group_ranks, outlier_ranks, steady_range
    from ..analyze.units import number_ranges

    sec = receipt.ranks
    if not quiet:
        ws = f"world size {sec.world_size}" if sec.world_size is not None else "world size not recorded"
        say(f"{len(sec.ranks_present)} rank(s) merged ({ws}); {sec.ledger_note}")
        groups = group_ranks(list(sec.ranks), outlier_ranks(sec))
        labels = [group_label(g) for g in groups]
        w = max([4, *(len(x) for x in labels)])
        if len(groups) < len(sec.ranks):
            say(f"{len(sec.ranks)} ranks in {len(groups)} rows: ranks that behaved alike share a row "
                "(its lowest rank's figures); every rank a divergence or a compile skew names has its own")
        say(f"{'rank':>{w}}  {'calls':>5}  {'compiles':>8}  {'recompiles':>10}  {'graphs':>6}  "
                   f"{'sites (user/ddp/fsdp/other)':>27}  {'DDP splits':>10}  {'steady median':>13}")
        for g, label in zip(groups, labels, strict=True):
            e = g[0]
            o = [s.origin for s in e.sites]
            sites = f"{o.count('user')}/{o.count('ddp')}/{o.count('fsdp')}/{o.count('framework')}"
            splits = ", ".join(f"{d.compile_id}:{d.submodules}" for d in e.ddp_splits) or "–"
            calls = str(e.call_count) if e.has_runtime else "–"
            say(f"{label:>{w}}  {calls:>5}  {e.compile_count:>8}  {e.recompile_count:>10}  "
                       f"{e.graph_count:>6}  {sites:>27}  {splits:>10}  {steady_range(g):>13}")
        for e in sec.ranks:
            if e.status not in (None, "completed"):
                say(f"rank {e.rank}: {e.status}: its figures cover the calls until then")
        for e in sec.ranks[:1]:
            for d in e.ddp_splits:
                say(f"DDP split: {d.compile_id} {d.frame_name} ran as {d.submodules} submodules, one per "
                           "DDP bucket (DDPOptimizer; not graph breaks)")
            for s in e.sites:
                if s.origin != "user":
                    who = _WHOSE.get(s.origin, "library code")
                    say(f"framework break in {who}, not yours: {s.file}:{s.line} in {s.function}")
        if sec.divergences:
            say("divergences:")
            for d in sec.divergences:
                at = f" from call {d.first_call}" if d.first_call is not None else ""
                say(f"  {d.kind}: rank(s) {number_ranges(d.ranks)}{at}: {(d.detail.splitlines() or [''])[0]}")
        else:
            say("no divergence between the ranks")
        for k in sec.skews[:10]:
            say(f"compile skew: {k.sentence}")
        if len(sec.skews) > 10:
            say(f"compile skew: {len(sec.skews) - 10} more call(s) in the merged receipt")
        for k in [k for k in sec.skews if k.warning][:3]:
            if k.warning:
                say(f"seamscope: warning: {k.warning}; remedy: {k.remedy}", err=True)
        if sec.skews:
            say(f"compile skew remedy: {sec.skews[0].remedy}")
    for p in sec.problems:
        say(f"seamscope: problem: {p.message}", err=True)
    say(f"seamscope: wrote {path}", err=True)
    if sec.problems:
        return 2
    if fail_on_divergence and sec.divergences:
        return 1
    return 0


_WHOSE = {"ddp": "torch's DDP code", "fsdp": "torch's FSDP code"}


def run_forwarding_signals(cmd: list[str], env: dict[str, str] | None = None) -> tuple[int, int]:
    """Run a child (torchrun, or ``seamscope run`` under another Python) to its end: a SIGTERM or
    SIGHUP sent to this process is passed on to it (it stops the ranks or the run, which write their
    receipts), Ctrl-C reaches the child through the terminal, and either way this process waits, so
    nothing measured is lost. Returns (the child's status, the signal that stopped the job or 0)."""
    import signal
    import subprocess

    child = subprocess.Popen(cmd, env=env)
    got: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        got.append(signum)
        child.send_signal(signum)

    old = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: stays ignored
            old[sig] = signal.signal(sig, forward)
    try:
        while True:
            try:
                rc = child.wait()
                break
            except KeyboardInterrupt:  # the ranks got the same Ctrl-C and are writing their receipts
                got.append(signal.SIGINT)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    return rc, (got[0] if got else 0)


def run_ranks(
    nproc: int,
    target: str,
    args: list[str],
    *,
    module: bool,
    out: str,
    quiet: bool,
    passed: list[str] | None = None,
) -> int:
    """``seamscope run --nproc N``: torchrun starts N ranks, each under ``seamscope run`` with the
    words ``passed`` (``run``'s options the ranks take), then merge.

    Exit code: 2 when the merge found a problem in the ranks' output (a rank wrote no ledger), else
    1 when a rank's script failed, else 0.
    """
    import sys

    from ..analyze.ranks import gather, merge
    from ..errors import UnusableInput
    from ..experiments.workload import is_workload_spec

    if not module and is_workload_spec(target):  # its ranks would each run it alone: no collective to see
        raise UnusableInput(f"--nproc runs a script under torchrun; {target} is a workload (FILE.py:FUNC), "
                            "which runs in one process: run it without --nproc")
    if not module and not os.path.isfile(target):
        raise UnusableInput(f"{target}: no such script")
    cmd = [sys.executable, "-m", "seamscope.experiments.torchrun", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "seamscope", "run", "--out", out]
    if quiet or nproc > 1:  # the merged table replaces N per-rank summaries
        cmd.append("--quiet")
    cmd += passed or []
    cmd += (["-m"] if module else []) + [target, "--", *args]
    rc, stopped_by = run_forwarding_signals(cmd)
    if nproc == 1:  # WORLD_SIZE 1: the rank wrote OUT/receipt.json and its summary itself
        return 128 + stopped_by if stopped_by else (1 if rc else 0)
    receipt = merge(gather(out), world_size=nproc)
    path = write_merged(receipt, out)
    code = report_merged(receipt, path, quiet=quiet)
    if stopped_by:
        return 128 + stopped_by
    if code:
        return code
    if rc:
        click.echo(f"seamscope: torchrun exited with status {rc} (a rank's script failed)", err=True)
        return 1
    return 0
