"""From a ledger to ranked, explained findings: what each break and recompile costs, why it
happens, and what to do.

A pure function over a :class:`~seamscope.model.ledger.Ledger`; the ledger is never edited.
Fragmentation (regions per call, island time) and churn (compiles, recompiles, variants, compile
time) are ranked on separate axes: a frequent cheap break and a recompile storm are different
problems with different fixes.

A break's measured cost is the eager island that follows each crossing of its site, summed over
steady calls: the time the program spends outside compiled code because capture stopped there.
It is a lower bound (lost fusion across the seam inside the regions is not visible) and it is
what was measured, not inferred from stack length or break count.
"""

from __future__ import annotations

import re
from collections import defaultdict

import msgspec

from ..model.canonical import round_float
from ..model.findings import (
    BreakCost,
    Cause,
    DeviceBreakCost,
    Finding,
    FindingsSection,
    FragmentationAxis,
    Remedy,
    Where,
)
from ..model.ledger import (
    BreakEvent,
    BreakSite,
    Call,
    Frame,
    IslandEvent,
    Ledger,
    RegionEvent,
    SiteTotal,
)
from ..model.normalize import normalize_text, package_of, short_path
from .classify import HOST_VALUE_BRANCH, classify, torch_hints
from .findings_churn import churn_axis, churn_findings, guard_pattern
from .findings_common import PROBE, config_remedy, replaced, retarget
from .findings_hints import class_clause, hint_remedies, resume_clause
from .stats import median_float, quantile
from .units import counted, fmt_bytes, fmt_ns

__all__ = ["OUTSIDE_CALLS", "PROBE", "analyze_findings", "guard_pattern"]

OUTSIDE_CALLS = ("crossings and island time: the site's compiled code ran outside observed calls, where "
                 "seamscope sees its regions but not the breaks between them")
"""What a break finding lacks when its code runs outside the calls (a compiled optimizer step)."""


# --- entry point ---------------------------------------------------------------------------------


def analyze_findings(ledger: Ledger) -> FindingsSection:
    """Every break site and every recompiling frame of ``ledger``, ranked by measured cost."""
    missing: list[str] = []
    has_rt = ledger.run.has_runtime
    calls = list(ledger.calls) if has_rt else []
    basis_name, basis = _basis(calls)
    if ledger.totals.calls == 0 and not ledger.compilations:
        missing.append("no compiled calls were observed: nothing to rank")
    if not has_rt:
        missing.append(
            "no runtime data (imported log): breaks are ranked by the compilations they appear in, "
            "not by measured island time; crossings per call, islands and seam traffic are unknown"
        )
        missing.extend(ledger.run.absent)
    elif basis_name == "all" and calls:
        missing.append("no steady calls were retained: break costs are over every call, cold included")
    if ledger.retention.dropped:
        missing.append(
            f"per-call detail kept for {ledger.retention.retained} of {ledger.totals.calls} calls: "
            "medians and shares are over retained calls, estimated totals scaled to all calls"
        )

    run = ledger.run
    breaks = [
        replaced(f, remedies=[retarget(r, run) for r in f.remedies]) for f in _break_findings(ledger, basis_name, basis)
    ]
    churn = [replaced(f, remedies=[retarget(r, run) for r in f.remedies]) for f in churn_findings(ledger)]
    from .causes import recompile_causes
    from .headline import build_headline, rank_across

    causes = [c if c.remedy is None else msgspec.structs.replace(c, remedy=retarget(c.remedy, run))
              for c in recompile_causes(ledger, churn)]
    from .compile_time import analyze_compile_time, rank_with, with_stage_sentence
    from .dispatch import analyze_dispatch, rank_dispatch

    costed = [] if has_rt else [cid.split("_", 1)[0] for s in ledger.break_sites for cid in s.compile_ids]
    compile_time = analyze_compile_time(ledger, causes, costed)
    compile_time = msgspec.structs.replace(compile_time, findings=[
        msgspec.structs.replace(f, remedies=[retarget(r, run) for r in f.remedies]) for f in compile_time.findings
    ])
    wall = sum(p.wall_ns for p in ledger.totals.phases)
    dispatch = analyze_dispatch(ledger)
    ranked = rank_dispatch(rank_with(rank_across(ledger, breaks, causes), compile_time, has_rt, wall), dispatch, wall)
    ranked_by = (
        "breaks: estimated island time after the site over steady calls; churn: compile time; "
        "across axes (ranked): time spent in this run"
        if has_rt
        else "breaks: compile time of the compilations in which the site broke (no runtime data); "
        "churn: compile time; across axes (ranked): compile time"
    )
    if not isinstance(ledger.totals.device, msgspec.UnsetType):
        ranked_by = _device_ranked_by(ranked_by)
    return FindingsSection(
        fragmentation=_fragmentation(ledger, basis_name, basis),
        churn=churn_axis(ledger),
        findings=breaks + churn,
        ranked_by=ranked_by,
        missing=missing,
        headline=with_stage_sentence(build_headline(ledger, ranked, causes), compile_time, ledger.environment.backend),
        ranked=ranked,
        causes=causes,
        compile_time=compile_time,
        dispatch=dispatch,
    )


# --- fragmentation: breaks -----------------------------------------------------------------------


def _basis(calls: list[Call]) -> tuple[str, list[Call]]:
    steady = [c for c in calls if c.phase == "steady" and c.error is None]
    if steady:
        return "steady", steady
    return ("all", calls) if calls else ("none", [])


class _Crossings:
    """One site's crossings in one call: the island after each (until the next crossing; islands
    split by a compile or seamscope's overhead are summed) and the seam traffic of the region
    before it. ``orphan_ns``: island time attributed to the site with no crossing before it in
    the call (an indirect seam counted by another frame): cost, but not a crossing."""

    __slots__ = ("islands", "tensors", "nbytes", "orphan_ns")

    def __init__(self) -> None:
        self.islands: list[int] = []
        self.tensors: list[int | None] = []
        self.nbytes: list[int | None] = []
        self.orphan_ns = 0


def _crossings(call: Call) -> dict[str, _Crossings]:
    out: dict[str, _Crossings] = defaultdict(_Crossings)
    last_region: RegionEvent | None = None
    current_site: str | None = None
    for e in call.events:
        if isinstance(e, RegionEvent):
            last_region = e
        elif isinstance(e, BreakEvent):
            cr = out[e.site_id]
            cr.islands.append(0)
            cr.tensors.append(last_region.out_tensors if last_region else None)
            cr.nbytes.append(last_region.out_bytes if last_region else None)
            current_site = e.site_id
        elif isinstance(e, IslandEvent) and e.after_site_id is not None:
            cr = out[e.after_site_id]
            if current_site == e.after_site_id and cr.islands:
                cr.islands[-1] += e.duration_ns
            else:
                cr.orphan_ns += e.duration_ns
    return out


def _where(site: BreakSite) -> Where:
    user = next((f for f in reversed(site.user_stack) if package_of(f.file) is None), None)
    if user is None and package_of(site.file) is None:
        user = Frame(file=site.file, line=site.line, function=site.function)
    return Where(
        file=site.file,
        line=site.line,
        function=site.function,
        package=package_of(site.file),
        user_frame=user,
        frame_skipped=site.frame_skipped,
    )


def _site_compile_ids(site: BreakSite, ledger: Ledger) -> set[str]:
    """Compilations whose region runs next to this seam: where it broke, and what resumes after it."""
    ids = {cid.split("_", 1)[0] for cid in site.compile_ids}
    for c in ledger.compilations:
        if site.site_id in (c.own_break_site_id, c.resume_site_id):
            ids.add(c.compile_id.split("_", 1)[0])
    return ids


def _break_cost(
    site: BreakSite,
    basis_name: str,
    basis: list[Call],
    crossings: list[dict[str, _Crossings]],
    ledger: Ledger,
) -> BreakCost:
    """Frequency and stability over the basis calls that ran the site's frame (calls of another
    compiled function do not dilute them); share over all basis calls (the program's time)."""
    site_id = site.site_id
    cids = _site_compile_ids(site, ledger)
    per_call: list[int] = []
    islands: list[int] = []
    tensors: list[int] = []
    nbytes: list[int] = []
    orphan = 0
    for c, by_site in zip(basis, crossings, strict=True):
        cr = by_site.get(site_id)
        if cr is None:
            if any(isinstance(e, RegionEvent) and e.compile_id in cids for e in c.events):
                per_call.append(0)
            continue
        per_call.append(len(cr.islands))
        islands.extend(cr.islands)
        tensors.extend(t for t in cr.tensors if t is not None)
        nbytes.extend(b for b in cr.nbytes if b is not None)
        orphan += cr.orphan_ns
    island_ns = sum(islands) + orphan
    wall = sum(c.wall_ns for c in basis)
    # Scale retained calls to every call of the basis phase (exact when nothing was dropped).
    if basis_name == "steady":
        phase_calls = next((p.calls for p in ledger.totals.phases if p.phase == "steady"), len(basis))
    else:
        phase_calls = ledger.totals.calls
    retained = len(basis)
    estimated = island_ns * phase_calls // retained if retained else 0
    tot = next((t for t in ledger.totals.sites if t.site_id == site_id), None)
    return BreakCost(
        basis="steady" if basis_name == "steady" else "all",
        calls=len(per_call),
        calls_crossing=sum(1 for n in per_call if n),
        crossings=sum(per_call),
        crossings_per_call=round_float(sum(per_call) / len(per_call)) if per_call else 0.0,
        crossings_min=min(per_call) if per_call else 0,
        crossings_max=max(per_call) if per_call else 0,
        stable=bool(per_call) and min(per_call) == max(per_call),
        island_median_ns=quantile(islands, 0.5),
        island_p90_ns=quantile(islands, 0.9),
        island_ns=island_ns,
        estimated_ns=estimated,
        share=round_float(island_ns / wall) if wall else 0.0,
        out_tensors_median=quantile(tensors, 0.5),
        out_bytes_median=quantile(nbytes, 0.5),
        all_calls_crossings=tot.crossings if tot else 0,
        all_calls_island_ns=tot.island_after_ns if tot else 0,
    )


def _break_findings(ledger: Ledger, basis_name: str, basis: list[Call]) -> list[Finding]:
    has_rt = ledger.run.has_runtime
    crossings = [_crossings(c) for c in basis] if has_rt else []
    rows: list[tuple[tuple[object, ...], Finding]] = []
    site_totals = {t.site_id: t for t in ledger.totals.sites}
    durations = {c.compile_id.split("_", 1)[0]: c.duration_ns for c in ledger.compilations}
    for site in ledger.break_sites:
        cause = classify(site.gb_code, site.gb_type, site.reason)
        where = _where(site)
        cost = _break_cost(site, basis_name, basis, crossings, ledger) if has_rt and basis else None
        missing: list[str] = []
        if cost is None:
            missing.append("crossings and island time: " + ("no runtime data" if not has_rt else "no calls retained"))
        elif cost.crossings and cost.out_tensors_median is None:
            missing.append("seam traffic: not sampled")
        if where.package is not None and where.user_frame is None:
            missing.append("user frame: the whole stack is library code (the compiled frame itself)")
        f = Finding(
            finding_id=site.site_id,
            axis="fragmentation",
            rank=0,
            sentence="",
            remedies=_break_remedies(cause, where, site.reason) + hint_remedies(site, ledger.break_sites),
            site_id=site.site_id,
            where=where,
            cause=cause,
            cost=cost,
            missing=missing,
        )
        dcost = _device_break_cost(ledger, site.site_id, basis_name) if cost is not None else None
        if cost is not None and dcost is not None:  # on a device: ranked by what the device lost
            cost = _with_device(cost, dcost)
            f = replaced(f, cost=cost)
        cost_ns, cost_basis = _site_cost(site, ledger, cost, site_totals, durations)
        f = replaced(f, cost_ns=cost_ns, basis=cost_basis)
        if cost is not None and dcost is not None:
            key: tuple[object, ...] = (-dcost.estimated_ns, -cost.crossings, f.finding_id)
        elif cost is not None:
            key = (-cost.estimated_ns, -cost.crossings, f.finding_id)
        elif not has_rt:
            key = (
                -(cost_ns or 0),
                -len(site.compile_ids),
                where.package is not None,
                site.file,
                site.line,
                f.finding_id,
            )
        else:
            key = (-len(site.compile_ids), where.package is not None, site.file, site.line, f.finding_id)
        rows.append((key, f))
    rows.sort(key=lambda r: r[0])
    out = []
    clauses = {s.site_id: class_clause(s) + resume_clause(s, ledger) for s in ledger.break_sites}
    outside = {s.site_id: _outside_runs(s, ledger) for s in ledger.break_sites}
    for rank, (_, f) in enumerate(rows, 1):
        f = replaced(f, rank=rank)
        n_out = outside.get(f.finding_id, 0)
        if f.cost is not None and f.cost.crossings == 0 and n_out:
            f = replaced(f, missing=[*f.missing, OUTSIDE_CALLS])
        out.append(replaced(f, sentence=_break_sentence(f, clauses.get(f.finding_id, ""), n_out)))
    return out


def _outside_runs(site: BreakSite, ledger: Ledger) -> int:
    """Runs outside any observed call (a compiled optimizer step, a compiled backward) of the
    compilations next to the site: a break there fires without a call to count it in."""
    ids = _site_compile_ids(site, ledger)
    return sum(r.outside_runs for r in ledger.totals.regions if r.compile_id.split("_", 1)[0] in ids)


def _site_cost(
    site: BreakSite,
    ledger: Ledger,
    cost: BreakCost | None,
    site_totals: dict[str, SiteTotal],
    compile_durations: dict[str, int | None],
) -> tuple[int | None, str]:
    """A break's cost in this run and what it measures: the islands after it over every call;
    without runtime data, the compile time of the compilations it broke in."""
    if ledger.run.has_runtime:
        dev = _device_break_cost(ledger, site.site_id, "all")
        if dev is not None:  # on a device the island's host time holds the previous region's work
            return dev.estimated_ns, f"device seam gaps after the site, scaled to every call ({ledger.totals.calls})"
        tot = site_totals.get(site.site_id)
        if tot is not None:
            return tot.island_after_ns, f"eager islands after the site over every call ({ledger.totals.calls})"
        if cost is not None and cost.all_calls_island_ns is not None:
            return cost.all_calls_island_ns, f"eager islands after the site over every call ({ledger.totals.calls})"
        return None, "not measured: the site was never crossed in an observed call"
    ids = {cid.split("_", 1)[0] for cid in site.compile_ids}
    durations = [compile_durations[i] for i in ids if i in compile_durations]
    n = len(ids)
    basis = f"compile time of the {n} compilation{'s' if n != 1 else ''} it broke in (no runtime data)"
    if not durations or any(d is None for d in durations):
        return (
            None,
            f"the {n} compilation{'s' if n != 1 else ''} it broke in (no runtime data, compile time not recorded)",
        )
    return sum(d for d in durations if d is not None), basis


def _break_remedies(cause: Cause, where: Where, reason: str) -> list[Remedy]:
    """What to try for a break, by its class (best first); PyTorch's hints ride on the first."""
    hints = torch_hints(normalize_text(reason))
    by_class = {
        "data_dependent_control_flow": _data_dependent_remedies,
        "host_side_effect": _side_effect_remedies,
        "unsupported_op": _unsupported_op_remedies,
        "python_state_mutation": _state_mutation_remedies,
        "explicit_boundary": _boundary_remedies,
    }
    remedies = by_class.get(cause.break_class or "")
    if remedies is None:
        return [Remedy(action="read_hints", text="see PyTorch's hints for this break", torch_hints=hints)]
    return remedies(cause, where, hints)


def _data_dependent_remedies(cause: Cause, where: Where, hints: list[str]) -> list[Remedy]:
    code = cause.gb_code
    rs: list[Remedy] = []
    if code == "GB0124" or cause.label == "Tensor.item()":
        rs.append(
            config_remedy(
                "capture_scalar_outputs",
                "let Dynamo trace Tensor.item() into the graph (the value becomes a symbolic scalar); "
                "measure it, since a later Python branch on that value may still break",
                "capture_scalar_outputs", "True", hints=hints,
            )
        )
    elif code in ("GB0036", "GB0037", "GB0033"):
        rs.append(
            config_remedy(
                "capture_dynamic_output_shape_ops",
                "let Dynamo trace operators whose output shape depends on data",
                "capture_dynamic_output_shape_ops", "True", hints=hints,
            )
        )
    if cause.label == HOST_VALUE_BRANCH:
        rs.append(
            Remedy(
                action="host_value_as_python",
                text="the branch tests a NumPy (or Python) value computed from sizes or settings, not a "
                "tensor: Dynamo traces NumPy calls as tensors. Compute it with plain Python (math.lcm, "
                "int(...)) or once outside the compiled function, so the branch sees a constant",
                torch_hints=[],
            )
        )
    else:
        rs.append(
            Remedy(
                action="tensor_ops_or_cond",
                text="keep the decision on the device: rewrite the branch with tensor ops (torch.where, "
                "masking) or torch.cond, so no value is read back to Python",
                torch_hints=[] if rs else hints,
            )
        )
    return rs


def _side_effect_remedies(cause: Cause, where: Where, hints: list[str]) -> list[Remedy]:
    rs: list[Remedy] = []
    logged = _logging_callable(cause.label)
    if logged is not None:
        key, target = logged
        what = ("so Dynamo moves it after the graph instead of breaking" if key == "reorderable_logging_functions"
                else "so Dynamo drops the call from compiled code instead of breaking (it no longer logs there)")
        rs.append(
            config_remedy(
                "reorder_logging", f"add {target.replace(':', '.')} to torch._dynamo.config.{key} {what}",
                key, target, add=True, hints=hints,
            )
        )
    rs.append(
        Remedy(
            action="move_out_of_hot_path",
            text="move the side effect out of the compiled call (log after it returns, or only every N steps)",
            torch_hints=[] if rs else hints,
        )
    )
    return rs


def _unsupported_op_remedies(cause: Cause, where: Where, hints: list[str]) -> list[Remedy]:
    lib = where.package
    rs: list[Remedy] = []
    if lib is None or lib not in ("torch",):
        rs.append(
            Remedy(
                action="custom_op",
                text="register the call as a custom operator (torch.library.custom_op with a fake "
                "implementation) so Dynamo records it as one node instead of breaking",
                torch_hints=hints,
            )
        )
    rs.append(
        Remedy(
            action="report_upstream" if lib else "move_out_of_hot_path",
            text=(f"the break is inside {lib}: try a newer version or report it; meanwhile call it outside "
                  "the compiled function" if lib else "move the call out of the compiled hot path"),
            torch_hints=[] if rs else hints,
        )
    )
    return rs


def _state_mutation_remedies(cause: Cause, where: Where, hints: list[str]) -> list[Remedy]:
    rs: list[Remedy] = []
    rs.append(
        Remedy(
            action="move_state_out",
            text="keep the mutated state in tensors or buffers, or move the assignment outside the compiled call",
            torch_hints=hints,
        )
    )
    return rs


def _boundary_remedies(cause: Cause, where: Where, hints: list[str]) -> list[Remedy]:
    rs: list[Remedy] = []
    rs.append(
        Remedy(
            action="keep_boundary",
            text="an eager boundary someone asked for: keep it if the callee cannot be traced; its measured "
            "cost is what the boundary costs",
            torch_hints=hints,
        )
    )
    rs.append(
        Remedy(
            action="remove_boundary",
            text="if the callee is traceable, remove the torch.compiler.disable/graph_break and measure again",
        )
    )
    return rs


def _logging_callable(label: str) -> tuple[str, str] | None:
    """The Dynamo setting and the ``MODULE:QUALNAME`` (as ``--dynamo-config NAME+=`` takes it) of
    the logging call a host-side-effect break names: ``print`` is reordered after the graph, a
    ``logging.Logger`` method ignored; None where the label does not name the callable."""
    if label.split(" ")[0] == "print":
        return "reorderable_logging_functions", "builtins:print"
    m = re.fullmatch(r"logging \((\w+)\)", label)
    if m:
        return "ignore_logging_functions", f"logging:Logger.{m.group(1)}"
    return None


def _break_sentence(f: Finding, pytorch_class: str = "", outside_runs: int = 0) -> str:
    w, c, cost = f.where, f.cause, f.cost
    assert w is not None and c is not None
    loc = f"{short_path(w.file)}:{w.line}"
    what = f"{c.label}, {c.break_class.replace('_', ' ')}"
    if c.host_read:
        what += ", reads a tensor value on the host"
    what += pytorch_class
    if w.package:
        what += f"; in {w.package}"
        if w.user_frame is not None:
            what += f", reached from {short_path(w.user_frame.file)}:{w.user_frame.line} ({w.user_frame.function})"
    if w.frame_skipped:
        what += "; Dynamo could not resume after it and runs the whole frame eagerly"
    head = f"break {f.finding_id} at {loc} ({what})"
    if cost is None:
        took = ""
        if f.cost_ns is not None and f.basis and "compilation" in f.basis:
            took = f" (the compilations it broke in took {fmt_ns(f.cost_ns)} to compile)"
        return head + " was seen at compile time; its cost is unknown without runtime data" + took
    basis = "steady" if cost.basis == "steady" else ""
    if cost.crossings == 0 and outside_runs:
        return (f"{head} is in code that runs outside the observed calls (a compiled optimizer step or "
                f"backward): its compiled regions ran {outside_runs}× there, where the break's crossings and "
                "islands are not observed")
    if cost.crossings == 0 and cost.calls == 0:
        return f"{head} was not crossed: no {basis} call ran its frame".replace("  ", " ")
    if cost.crossings == 0:
        return f"{head} was not crossed in {counted(cost.calls, (basis + ' call').strip())}".replace("  ", " ")
    if cost.stable:
        freq = f"is crossed {cost.crossings_min}× per call"
        stab = f"stable over {cost.calls} {basis} calls"
    else:
        freq = (f"is crossed in {cost.calls_crossing} of {cost.calls} {basis} calls "
                f"({cost.crossings_per_call:.3g}× per call)")
        stab = f"varying {cost.crossings_min}–{cost.crossings_max}× per call"
    island = f"{fmt_ns(cost.island_median_ns)} island each (p90 {fmt_ns(cost.island_p90_ns)})"
    share = f"{cost.share * 100:.3g}% of {basis} time".replace("  ", " ")
    traffic = ""
    if cost.out_tensors_median is not None:
        n = cost.out_tensors_median
        traffic = f", {n} tensor{'' if n == 1 else 's'}"
        if cost.out_bytes_median is not None:
            traffic += f" ({fmt_bytes(cost.out_bytes_median)})"
        traffic += " cross the seam" if n != 1 else " crosses the seam"
    return f"{head} {freq}, {island}, {stab}, {share}{traffic}{_device_clause(cost)}".replace("  ", " ")


# --- on a device ---------------------------------------------------------------------------------


def _device_break_cost(ledger: Ledger, site_id: str, basis_name: str) -> DeviceBreakCost | None:
    """A break's device-aware cost from the device totals (None on CPU, or when no call timed on
    the device crossed it). The device seam gap holds the island's own kernels and the time the
    device sat idle, which is the host time no device work hid; the host wait is not the break's
    (it is the previous region's device work, which the island only waited for)."""
    dev = ledger.totals.device
    if isinstance(dev, msgspec.UnsetType):
        return None
    phases = {"steady"} if basis_name == "steady" else {"cold", "steady", "fallback"}
    rows = [s for s in dev.sites if s.site_id == site_id and s.phase in phases]
    timed = sum(p.calls for p in dev.phases if p.phase in phases)
    crossing = sum(s.calls for s in rows)
    if not rows or not timed or not crossing:
        return None
    gap = sum(s.gap_ns for s in rows)
    phase_calls = sum(p.calls for p in ledger.totals.phases if p.phase in phases)
    return DeviceBreakCost(
        calls=crossing,
        gap_per_call_ns=gap // crossing,
        syncs_per_call=round_float(sum(s.syncs for s in rows) / crossing),
        host_wait_per_call_ns=sum(s.host_wait_ns for s in rows) // crossing,
        estimated_ns=gap * phase_calls // timed,
    )


def _with_device(cost: BreakCost, dcost: DeviceBreakCost) -> BreakCost:
    return msgspec.structs.replace(cost, device=dcost)


def _device_ranked_by(host: str) -> str:
    return (
        "breaks: on the device, the device seam gap after the site over the steady calls timed there "
        "(host island time where no timed call crossed it); " + host.split("; ", 1)[-1]
    )


def _device_clause(cost: BreakCost) -> str:
    d = cost.device
    if isinstance(d, msgspec.UnsetType):
        return ""
    text = f"; on the device its seam costs {fmt_ns(d.gap_per_call_ns)} per call (device idle or the island's kernels)"
    if d.syncs_per_call:
        text += (
            f" and it forces {d.syncs_per_call:.3g} device-to-host sync(s) per call: the sync, not the lost "
            f"fusion, is what it costs (the host waited {fmt_ns(d.host_wait_per_call_ns)} for earlier device work)"
        )
    return text



def _fragmentation(ledger: Ledger, basis_name: str, basis: list[Call]) -> FragmentationAxis:
    if not basis:
        return FragmentationAxis(
            basis="none", calls=0, break_sites=len(ledger.break_sites), regions_per_call_median=None,
            regions_per_call_max=None, island_per_call_median_ns=None, island_share=None, crossings_per_call=None,
        )
    regions = [sum(1 for e in c.events if isinstance(e, RegionEvent)) for c in basis]
    islands = [sum(e.duration_ns for e in c.events if isinstance(e, IslandEvent)) for c in basis]
    crossings = sum(sum(1 for e in c.events if isinstance(e, BreakEvent)) for c in basis)
    wall = sum(c.wall_ns for c in basis)
    rpc = median_float([float(r) for r in regions])
    return FragmentationAxis(
        basis="steady" if basis_name == "steady" else "all",
        calls=len(basis),
        break_sites=len(ledger.break_sites),
        regions_per_call_median=round_float(rpc) if rpc is not None else None,
        regions_per_call_max=max(regions),
        island_per_call_median_ns=quantile(islands, 0.5),
        island_share=round_float(sum(islands) / wall) if wall else None,
        crossings_per_call=round_float(crossings / len(basis)),
    )
