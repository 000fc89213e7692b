"""Many ranks, one run: merge per-rank receipts and say where the ranks diverge.

Under torch.distributed every rank compiles on its own. When one rank recompiles, breaks or runs
slower where the others do not, every collective after that point waits for it; a per-rank report
cannot show that, a comparison can. The merged receipt keeps the lowest rank's ledger (rank 0 when
present) as its primary ledger, so ``check``, ``diff`` and every report work on it unchanged, and
adds a :class:`RanksSection` with every rank's figures and the divergences.

Input problems (a rank that never wrote its ledger, receipts of different runs, a world size that
does not match the files) are named, and the ranks that could be read are still merged.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec

from ..errors import UnusableInput
from ..model.ledger import (
    BreakEvent,
    BreakSite,
    CompileEvent,
    IslandEvent,
    Ledger,
    RegionEvent,
    RunInfo,
    status_text,
)
from ..model.normalize import is_library
from ..model.ranks import (
    DdpSplit,
    RankCall,
    RankEntry,
    RankProblem,
    RankRecompile,
    RankSite,
    RanksSection,
    SiteOrigin,
)
from ..model.receipt import Receipt
from .ranks_divergences import MIN_STEADY_CALLS, TIME_RULE, find_divergences, majority, who
from .stats import median, quantile

#: Steady calls each rank needs before its steady time is compared: fewer give no usable spread.
_RANK_DIR = re.compile(r"^rank[-_]?(\d+)$")
_FSDP_PATHS = ("torch/distributed/fsdp/", "torch/distributed/_composable/fsdp/",
               "torch/distributed/_composable/fully_shard")
_DDP_PATHS = ("torch/nn/parallel/", "torch/distributed/_composable/replicate",
              "torch/distributed/algorithms/ddp_comm_hooks/")


@dataclass
class RankInput:
    """One rank's receipt reduced to what the merge needs, and where it came from. The receipt
    itself is not held: ``load`` reads it again (only the primary rank's is needed whole)."""

    run: RunInfo
    entry: RankEntry
    source: str
    load: Callable[[], Receipt]
    rank: int | None = None
    """From the directory name when the receipt does not record it."""


@dataclass
class Gathered:
    inputs: list[RankInput]
    problems: list[RankProblem] = field(default_factory=list)
    kind: str = "receipts"
    """``receipts`` (per-rank output of ``run`` or ``import``) or ``torch_trace`` (a log directory)."""


def reduce_input(receipt: Receipt, source: str, load: Callable[[], Receipt], rank: int | None = None) -> RankInput:
    """What the merge keeps of one rank: its run record and its :class:`RankEntry` (per-call
    figures, compile ids, sites), never its ledger, so that memory does not grow with every rank's
    events. The entry's rank is the one the ledger records, else the folder's (-1: neither)."""
    run = receipt.ledger.run
    decided = run.rank if run.rank is not None else rank
    entry = rank_entry(decided if decided is not None else -1, source, receipt)
    run = msgspec.structs.replace(run, warnings=[], absent=[], command=[_i(c) for c in run.command])
    return RankInput(run=run, entry=entry, source=source, load=load, rank=rank)


# --- where the ranks' files are ------------------------------------------------------------------


def gather(directory: str) -> Gathered:
    """Find the per-rank receipts (``DIR/rank-N/receipt.json``) or ``TORCH_TRACE`` logs in DIR."""
    from ..ingest.limits import MAX_RANK, rank_number
    from ..ingest.receipt import load_receipt

    if not os.path.isdir(directory):
        raise UnusableInput(f"{directory}: not a directory (merge reads a folder of per-rank output)")
    logs = _torch_trace_logs(directory)
    if logs:
        return _gather_torch_trace(directory, logs)
    inputs: list[RankInput] = []
    problems: list[RankProblem] = []
    rank_dirs: list[tuple[int, str]] = []
    other_dirs: list[str] = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isdir(path):
            continue
        m = _RANK_DIR.match(name)
        if m and rank_number(m.group(1)) is None:
            problems.append(RankProblem(kind="no_rank", paths=[name],
                                        message=f"{name[:40]}{'…' if len(name) > 40 else ''}/: a rank number "
                                                f"beyond {MAX_RANK} is no rank; left out"))
        elif m:
            rank_dirs.append((int(m.group(1)), name))
        elif os.path.isfile(os.path.join(path, "receipt.json")):
            other_dirs.append(name)
    candidates = [(r, n) for r, n in sorted(rank_dirs)] + [(None, n) for n in other_dirs]
    for rank, name in candidates:
        rpath = os.path.join(directory, name, "receipt.json")
        if not os.path.isfile(rpath):
            problems.append(
                RankProblem(
                    kind="missing_rank",
                    message=f"{name}/: no receipt.json: rank {rank} crashed or never wrote its ledger",
                    ranks=[rank] if rank is not None else [],
                    paths=[name],
                )
            )
            continue
        try:
            receipt = load_receipt(rpath)
        except UnusableInput as e:
            problems.append(
                RankProblem(kind="unreadable", message=str(e), ranks=[rank] if rank is not None else [],
                            paths=[f"{name}/receipt.json"])
            )
            continue
        if rank is None and receipt.ranks is not None:
            continue  # an earlier merged receipt, not a rank
        inputs.append(reduce_input(receipt, f"{name}/receipt.json", partial(load_receipt, rpath), rank))
        del receipt  # one rank's parsed receipt at a time
    if not inputs and not problems:
        raise UnusableInput(
            f"{directory}: no per-rank receipts (rank-N/receipt.json) and no TORCH_TRACE logs "
            "(dedicated_log_torch_trace_*.log); point merge at the --out folder of a torchrun job"
        )
    return Gathered(inputs=inputs, problems=problems)


def _torch_trace_logs(directory: str) -> list[str]:
    from ..ingest.torch_trace import find_logs

    return find_logs(directory)


def _gather_torch_trace(directory: str, logs: list[str]) -> Gathered:
    from ..ingest.torch_trace import import_torch_trace
    from .receipt import make_receipt

    inputs: list[RankInput] = []
    problems: list[RankProblem] = []
    for path in logs:
        name = os.path.relpath(path, directory)
        try:
            imported = import_torch_trace(path)
        except (OSError, UnusableInput) as e:
            problems.append(RankProblem(kind="unreadable", message=f"{name}: {e}", paths=[name]))
            continue
        inputs.append(reduce_input(make_receipt(imported.ledger), name, partial(_reimport, path),
                                   imported.ledger.run.rank))
        del imported
    return Gathered(inputs=inputs, problems=problems, kind="torch_trace")


def _reimport(path: str) -> Receipt:
    from ..ingest.torch_trace import import_torch_trace
    from .receipt import make_receipt

    return make_receipt(import_torch_trace(path).ledger)


# --- one rank, reduced ----------------------------------------------------------------------------


def site_origin(site: BreakSite) -> SiteOrigin:
    """``user`` when the break is in the user's own file; else the torch.distributed wrapper the
    library code it happened in was reached through, innermost first: ``fsdp`` (FSDP and FSDP2's
    ``fully_shard``: ``torch/distributed/fsdp/``, ``torch/distributed/_composable/fsdp/``), ``ddp``
    (``torch/nn/parallel/``, ``replicate``, DDP's comm hooks); else ``framework`` (other library
    code, other parts of torch.distributed)."""
    if not is_library(site.file):
        return "user"
    # Frames after the innermost user frame are the library code the break happened in.
    tail: list[str] = []
    for f in reversed(site.user_stack):
        if not is_library(f.file):
            break
        tail.append(f.file)
    scope = [site.file, *(tail or [f.file for f in reversed(site.user_stack)])]
    for path in scope:
        p = path.replace(os.sep, "/")
        if any(w in p for w in _FSDP_PATHS):
            return "fsdp"
        if any(w in p for w in _DDP_PATHS):
            return "ddp"
    return "framework"


def _call_view(c: Any) -> RankCall:
    return RankCall(
        index=c.index,
        phase=c.phase,
        outcome=c.outcome,
        wall_ns=c.wall_ns,
        region_ns=sum(e.duration_ns for e in c.events if isinstance(e, RegionEvent)),
        island_ns=sum(e.duration_ns for e in c.events if isinstance(e, IslandEvent)),
        compile_ns=sum(e.duration_ns for e in c.events if isinstance(e, CompileEvent)),
        regions=[_i(e.compile_id) for e in c.events if isinstance(e, RegionEvent)],
        sites=[_i(e.site_id) for e in c.events if isinstance(e, BreakEvent)],
    )


def _steady_walls(ledger: Ledger) -> list[tuple[int, int]]:
    return [(c.index, c.wall_ns) for c in ledger.calls if c.phase == "steady" and c.error is None]


def rank_entry(rank: int, source: str, receipt: Receipt) -> RankEntry:
    led, s = receipt.ledger, receipt.summary
    crossings = {t.site_id: t.crossings for t in led.totals.sites}
    walls = [w for _, w in _steady_walls(led)] if led.run.has_runtime else []
    q1, q3 = quantile(walls, 0.25), quantile(walls, 0.75)
    return RankEntry(
        rank=rank,
        source=source,
        world_size=led.run.world_size,
        input_trace_sha256=_i(led.run.input_trace_sha256) if led.run.input_trace_sha256 else None,
        structure_sha256=receipt.structure_sha256,
        receipt_sha256=receipt.receipt_sha256,
        has_runtime=led.run.has_runtime,
        call_count=s.call_count,
        compile_count=s.compile_count,
        recompile_count=s.recompile_count,
        graph_count=s.graph_count,
        fallback_count=s.fallback_count,
        break_site_count=s.break_site_count,
        compile_ids=[_i(f"{c.compile_id} {c.frame_name}") for c in led.compilations],
        recompiles=[
            RankRecompile(compile_id=_i(c.compile_id), frame_name=_i(c.frame_name), call_index=c.call_index,
                          failed_guards=[_i(g) for g in c.failed_guards])
            for c in led.compilations
            if c.is_recompile
        ],
        sites=[
            RankSite(site_id=_i(b.site_id), file=_i(b.file), line=b.line, function=_i(b.function),
                     origin=site_origin(b), crossings=crossings.get(b.site_id) if led.run.has_runtime else None)
            for b in led.break_sites
        ],
        ddp_splits=[
            DdpSplit(compile_id=c.compile_id, frame_name=c.frame_name, submodules=c.ddp_split_count)
            for c in led.compilations
            if c.ddp_split_count
        ],
        steady_calls=len(walls),
        steady_median_ns=median(walls),
        steady_iqr_ns=(q3 - q1) if q1 is not None and q3 is not None else None,
        calls=[_call_view(c) for c in led.calls] if led.run.has_runtime else [],
        compile_calls=[c.call_index for c in led.compilations],
        torch_version=_i(led.environment.torch_version or "") or None,
        python_version=_i(led.environment.python_version) or None,
        packages={_i(k): _i(v) for k, v in sorted(led.environment.packages.items())},
        pg_timeout_ns=_set_or_none(led.run.pg_timeout_ns),
        pg_backend=_set_or_none(led.run.pg_backend),
        status=_i(status_text(led.run.status) or "") or None,
    )


def _i(text: str) -> str:
    """One string object for a text every rank repeats (compile ids, phases, files): 256 ranks'
    entries then hold it once."""
    return sys.intern(text)


def _set_or_none(value: Any) -> Any:
    return None if isinstance(value, msgspec.UnsetType) else value


# --- checking the input ---------------------------------------------------------------------------


def check_inputs(
    gathered: Gathered, world_size: int | None = None
) -> tuple[list[tuple[int, RankInput]], list[RankProblem], int | None]:
    """Decide each input's rank, drop what cannot be merged, name every problem."""
    problems = list(gathered.problems)
    ranked = _ranked(gathered.inputs, problems)
    ranked = _one_run(ranked, problems)
    ranked = _unique_ranks(ranked, problems)
    world_size = _world_size(ranked, world_size, problems)
    return ranked, problems, world_size


def _ranked(inputs: list[RankInput], problems: list[RankProblem]) -> list[tuple[int, RankInput]]:
    """Each input with its rank (the ledger's, else the folder's); one without is left out."""
    ranked: list[tuple[int, RankInput]] = []
    for inp in inputs:
        recorded = inp.run.rank
        rank = recorded if recorded is not None else inp.rank
        if rank is None:
            problems.append(RankProblem(kind="no_rank", message=f"{inp.source}: records no rank; left out",
                                        paths=[inp.source]))
            continue
        if inp.rank is not None and recorded is not None and inp.rank != recorded:
            problems.append(RankProblem(
                kind="duplicate_rank",
                message=f"{inp.source}: the folder says rank {inp.rank} but the ledger says rank {recorded}; "
                "taken as rank " + str(recorded),
                ranks=[recorded], paths=[inp.source]))
        ranked.append((rank, inp))
    return ranked


def _one_run(ranked: list[tuple[int, RankInput]], problems: list[RankProblem]) -> list[tuple[int, RankInput]]:
    """The inputs of one run (the majority's): the same program and arguments (live), or the same
    kind of source; the others are named and left out."""

    def run_key(inp: RankInput) -> Hashable:
        run = inp.run
        return (run.source, run.input_trace_sha256 if run.source == "live" else None)

    groups: dict[Hashable, list[int]] = {}
    for rank, inp in ranked:
        groups.setdefault(run_key(inp), []).append(rank)
    if len(groups) > 1:
        keep = majority(groups)
        dropped = [(r, i) for r, i in ranked if run_key(i) != keep]
        ranked = [(r, i) for r, i in ranked if run_key(i) == keep]
        desc = "; ".join(f"{i.source} ({_run_desc(i)})" for _, i in dropped)
        kept_desc = _run_desc(ranked[0][1])
        problems.append(RankProblem(
            kind="mixed_runs",
            message=f"receipts of different runs in one folder: {desc} differ from the run of "
            f"rank(s) {', '.join(map(str, sorted(r for r, _ in ranked)))} ({kept_desc}); left out",
            ranks=sorted(r for r, _ in dropped), paths=[i.source for _, i in dropped]))
    return ranked


def _unique_ranks(ranked: list[tuple[int, RankInput]], problems: list[RankProblem]) -> list[tuple[int, RankInput]]:
    """One input per rank, the first by source; a second is named and left out."""
    seen: dict[int, RankInput] = {}
    for rank, inp in sorted(ranked, key=lambda t: (t[0], t[1].source)):
        if rank in seen:
            problems.append(RankProblem(
                kind="duplicate_rank",
                message=f"rank {rank} appears twice ({seen[rank].source}, {inp.source}); kept the first",
                ranks=[rank], paths=[inp.source]))
            continue
        seen[rank] = inp
    ranked = sorted(seen.items())
    return ranked


def _world_size(ranked: list[tuple[int, RankInput]], world_size: int | None, problems: list[RankProblem]) -> int | None:
    """The world size (given, else the largest recorded); ranks beyond it and ranks missing named."""
    recorded_ws = sorted({i.run.world_size for _, i in ranked if i.run.world_size})
    if world_size is None and recorded_ws:
        world_size = max(recorded_ws)
        if len(recorded_ws) > 1:
            problems.append(RankProblem(
                kind="world_size",
                message="the ranks record different world sizes ("
                + ", ".join(map(str, recorded_ws)) + f"); taking {world_size}"))
    elif world_size is not None and recorded_ws and recorded_ws != [world_size]:
        problems.append(RankProblem(
            kind="world_size",
            message=f"world size {world_size} was given but the ranks record "
            + ", ".join(map(str, recorded_ws))))
    if world_size is not None:
        beyond = [r for r, _ in ranked if r >= world_size]
        if beyond:
            problems.append(RankProblem(
                kind="world_size",
                message=f"world size is {world_size} but the folder holds rank(s) "
                + ", ".join(map(str, beyond)) + " (a stale rank from another run?)",
                ranks=beyond, paths=[i.source for r, i in ranked if r >= world_size]))
        already = {r for p in problems if p.kind in ("missing_rank", "unreadable") for r in p.ranks}
        present = {r for r, _ in ranked}
        missing = [r for r in range(world_size) if r not in present and r not in already]
        if missing:
            problems.append(RankProblem(
                kind="missing_rank",
                message=f"world size is {world_size} but no ledger for rank(s) "
                + ", ".join(map(str, missing)) + ": crashed, or never wrote one",
                ranks=missing))
    return world_size


def _run_desc(inp: RankInput) -> str:
    run = inp.run
    sha = (run.input_trace_sha256 or "")[:12]
    cmd = " ".join(run.command)[:60]
    return f"{run.source}: {cmd}" + (f", input {sha}" if run.source == "live" else "")


# --- divergences --------------------------------------------------------------------------------


# --- the merged receipt ---------------------------------------------------------------------------


def merge(gathered: Gathered, world_size: int | None = None) -> Receipt:
    """One receipt from many ranks. Raises :class:`UnusableInput` only when no rank is usable."""
    from .receipt import make_receipt
    from .skew import SKEW_RULE, find_skews, process_group_timeout, rank_with_skews

    ranked, problems, ws = check_inputs(gathered, world_size)
    if not ranked:
        raise UnusableInput(
            "no rank could be merged: " + "; ".join(p.message for p in problems) if problems else "no ranks"
        )
    entries = [i.entry for _, i in ranked]
    primary_rank, primary_input = ranked[0]
    primary = primary_input.load()
    note = (
        f"ledger, summary and hashes are rank {primary_rank}'s"
        + (" (rank 0 is absent)" if primary_rank != 0 else "")
        + "; every rank's figures, calls and the divergences are in ranks"
        + "".join(f"; rank {e.rank} {e.status}: its figures cover the calls until then"
                  for e in entries if e.status not in (None, "completed"))
    )
    judged = [e.rank for e in entries if e.has_runtime and e.steady_calls >= MIN_STEADY_CALLS]
    not_judged = [e.rank for e in entries if e.rank not in judged]
    rule = TIME_RULE + (
        f"; not judged here: {who(not_judged)} (too few steady calls, or no runtime data)" if not_judged else ""
    )
    timeout_ns, timeout_source = process_group_timeout(entries)
    skews = find_skews(entries, timeout_ns, primary.ledger.environment.backend)
    section = RanksSection(
        world_size=ws,
        ranks_present=[r for r, _ in ranked],
        primary_rank=primary_rank,
        ledger_note=note,
        ranks=entries,
        divergences=find_divergences(entries),
        problems=problems,
        time_rule=rule,
        skews=skews,
        pg_timeout_ns=timeout_ns,
        pg_timeout_source=timeout_source,
        skew_rule=SKEW_RULE,
    )
    sections = {
        f: getattr(primary, f)
        for f in _OPTIONAL_SECTIONS
        if f != "ranks" and getattr(primary, f, None) is not None
    }
    findings = sections.get("findings")
    if findings is not None and skews:
        wall = sum(c.wall_ns for c in primary.ledger.calls) if primary.ledger.run.has_runtime else None
        from .compile_time import with_stage_sentence
        from .headline import build_headline

        ranked_items = rank_with_skews(findings.ranked, skews, wall)
        # the headline's "Costliest" from the ranking the skews are in (a skew's wait can be the top)
        headline = build_headline(primary.ledger, ranked_items, list(findings.causes))
        if findings.compile_time is not None:
            headline = with_stage_sentence(headline, findings.compile_time, primary.ledger.environment.backend)
        sections["findings"] = msgspec.structs.replace(findings, ranked=ranked_items, headline=headline)
    return make_receipt(primary.ledger, primary.decision, ranks=section, **sections)


_CORE = {"schema_version", "kind", "ledger", "summary", "decision", "structure_sha256", "receipt_sha256"}
_OPTIONAL_SECTIONS = [f.name for f in msgspec.structs.fields(Receipt) if f.name not in _CORE]


__all__ = ["gather", "merge", "check_inputs", "find_divergences", "rank_entry", "site_origin", "Gathered",
           "RankInput", "MIN_STEADY_CALLS", "TIME_RULE"]
