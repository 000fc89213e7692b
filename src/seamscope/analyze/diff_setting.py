"""What ``seamscope diff`` opens with: what differs in the two runs' setting (versions, backend,
device, schema, Dynamo settings), the totals side by side, the frames whose compile time changed,
and notes on the differences the project knows to change counts without any change to the code.

An upgrade check (the same script under two torch releases) reads these first: a changed break
count next to a changed ``nested_graph_breaks`` default is not a change in the user's code."""

from __future__ import annotations

from collections import defaultdict

from ..model.compile_time import STAGES
from ..model.diff import FrameCompileChange, SettingChange, TotalRow
from ..model.receipt import Receipt
from .compile_time import split_of
from .diff_runs import steady_median

KNOWN_SETTINGS = {
    "nested_graph_breaks": (
        "a break inside a nested call keeps the callers' graphs (one resume per frame of the chain): "
        "break sites, graphs and compilations change with no change to the code"
    ),
    "recompile_limit": "frames fall back to eager after a different number of recompiles",
    "accumulated_recompile_limit": "frames fall back to eager after a different number of recompiles",
    "automatic_dynamic_shapes": "a size that changes is (or is not) made dynamic on its second value",
    "assume_static_by_default": "sizes start static (or dynamic): recompiles on sizes change",
    "specialize_int": "Python ints are (or are not) specialised as constants: recompiles on ints change",
    "specialize_float": "Python floats are (or are not) specialised as constants: recompiles on floats change",
    "capture_scalar_outputs": "`.item()` is (or is not) captured in the graph: its break comes or goes",
    "capture_dynamic_output_shape_ops": "`nonzero` and other data-dependent shapes are (or are not) captured",
    "suppress_errors": "a compile error falls back to eager (or raises)",
}
"""Dynamo settings whose value changes counts by itself, and how: a setting recorded with another
value on the other side (a new default in a release, or set by the script) is named in a note."""


def setting_changes(before: Receipt, after: Receipt) -> list[SettingChange]:
    """What of the setting differs, in the order a reader checks it: versions first."""
    eb, ea = before.ledger.environment, after.ledger.environment
    rows: list[tuple[str, str | None, str | None]] = [
        ("torch", eb.torch_version, ea.torch_version),
        ("python", eb.python_version or None, ea.python_version or None),
    ]
    for name in sorted(set(eb.packages) | set(ea.packages)):
        rows.append((name, eb.packages.get(name), ea.packages.get(name)))
    rows += [
        ("seamscope", eb.seamscope_version, ea.seamscope_version),
        ("schema", str(before.schema_version), str(after.schema_version)),
        ("backend", eb.backend, ea.backend),
        ("device", eb.device or None, ea.device or None),
        ("platform", eb.platform or None, ea.platform or None),
    ]
    for name in sorted(set(eb.compile_options) | set(ea.compile_options)):
        rows.append((f"compile option {name}", eb.compile_options.get(name), ea.compile_options.get(name)))
    if eb.dynamo_config and ea.dynamo_config:  # an imported log records none: nothing to compare
        for name in sorted(set(eb.dynamo_config) | set(ea.dynamo_config)):
            rows.append((f"dynamo.{name}", eb.dynamo_config.get(name), ea.dynamo_config.get(name)))
    return [SettingChange(field=f, before=b, after=a) for f, b, a in rows if b != a]


def known_change_notes(changes: list[SettingChange]) -> list[str]:
    """A note for each difference that changes counts by itself (:data:`KNOWN_SETTINGS`), and for
    a Dynamo setting one side's torch does not have (renamed, new or removed)."""
    notes = []
    for c in changes:
        if not c.field.startswith("dynamo."):
            continue
        name = c.field.removeprefix("dynamo.")
        if c.before is None or c.after is None:
            side = "before" if c.before is None else "after"
            notes.append(f"Dynamo setting {name} does not exist {side} (renamed, new or removed in that torch)")
        elif name in KNOWN_SETTINGS:
            notes.append(f"Dynamo setting {name} is {c.before} before, {c.after} after: {KNOWN_SETTINGS[name]}")
    return notes


def totals(before: Receipt, after: Receipt) -> list[TotalRow]:
    """The summary's counts, compile time in all and by stage, the steady median, and where the
    findings have it, the guards and the dispatch estimate per call, each side."""
    rows = []
    for name, key in (("calls", "call_count"), ("compiles", "compile_count"), ("recompiles", "recompile_count"),
                      ("fallbacks", "fallback_count"), ("graphs", "graph_count"),
                      ("break sites", "break_site_count")):
        rows.append(TotalRow(name=name, unit="count", before=getattr(before.summary, key),
                             after=getattr(after.summary, key)))
    rows.append(TotalRow(name="compile time", unit="ns", before=before.summary.compile_ns,
                         after=after.summary.compile_ns))
    sb, sa = split_of(before.ledger.compilations), split_of(after.ledger.compilations)
    for stage in STAGES:
        vb, va = getattr(sb, f"{stage}_ns"), getattr(sa, f"{stage}_ns")
        if vb is not None or va is not None:
            rows.append(TotalRow(name=f"compile time: {stage}", unit="ns", before=vb, after=va))
    rows.append(TotalRow(name="steady median", unit="ns", before=steady_median(before), after=steady_median(after)))
    db, da = (r.findings.dispatch if r.findings is not None else None for r in (before, after))
    if db is not None or da is not None:
        rows.append(TotalRow(name="guards", unit="count", before=db.guard_count if db else None,
                             after=da.guard_count if da else None))
        rows.append(TotalRow(name="dispatch per call (estimate)", unit="ns", before=db.per_call_ns if db else None,
                             after=da.per_call_ns if da else None))
    return rows


def frame_changes(before: Receipt, after: Receipt, most: int = 10) -> list[FrameCompileChange]:
    """Frames (file and function, robust to line shifts) whose compile time or compilation count
    differs, largest absolute change in compile time first; at most ``most``."""

    def per_frame(r: Receipt) -> dict[str, tuple[int, int]]:
        acc: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for c in r.ledger.compilations:
            row = acc[f"{c.file} {c.frame_name}"]
            row[0] += 1
            row[1] += c.duration_ns or 0
        return {k: (v[0], v[1]) for k, v in acc.items()}

    fb, fa = per_frame(before), per_frame(after)
    out = []
    for key in set(fb) | set(fa):
        (nb, tb), (na, ta) = fb.get(key, (0, 0)), fa.get(key, (0, 0))
        if (nb, tb) != (na, ta):
            out.append(FrameCompileChange(frame=key, compilations_before=nb, compilations_after=na,
                                          compile_ns_before=tb, compile_ns_after=ta))
    out.sort(key=lambda f: (-abs(f.compile_ns_after - f.compile_ns_before), f.frame))
    return out[:most]
