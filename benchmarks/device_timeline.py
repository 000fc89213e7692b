"""The device timeline against clocks capture does not read (run by ``gpu_check.py``).

Workload: two compiled blocks of matmuls (8192x8192 bf16 on CUDA) with a break between them,
once ``torch._dynamo.graph_break()`` (no host sync) and once an ``.item()`` branch (a host sync);
the loop synchronizes every 10 calls, like a training loop reading its loss. Per variant:

- the synchronized wall of a plain compiled copy (no seamscope);
- inside a session (every call timed on the device): per call, the ledger's device span against
  CUDA events recorded around the call; per region, the ledger's device time against the span
  from its first kernel's start to its last kernel's end in a ``torch.profiler`` CUDA trace of
  the same calls (kernels attributed to a region by Dynamo's "Torch-Compiled Region" ranges);
- the ``.item()`` break's cost as the findings rank it, against the difference of the two
  synchronized walls.

Then the cost of capture on an 8-region launch-bound call (steady calls, calls timed on the
device) and of recording a pooled event. On CPU the device parts are skipped and say so; the
workload still runs through a session (the CPU path, whose ledger has no device fields).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any

import msgspec

TOLERANCE = 0.05
BREAK_RANGE = (0.5, 2.0)

SOURCES = {
    "graph_break": '''
def step(x):
    y = x
    for _ in range(N_MM):
        y = y @ W1
    torch._dynamo.graph_break()
    for _ in range(N_MM):
        y = y @ W2
    return y
''',
    "item": '''
def step(x):
    y = x
    for _ in range(N_MM):
        y = y @ W1
    if y[0, 0].item() > float("inf"):  # a host sync; never true
        y = -y
    for _ in range(N_MM):
        y = y @ W2
    return y
''',
}


def fresh(torch: Any, variant: str, w1: Any, w2: Any, n_mm: int) -> Any:
    """A new code object each time, so Dynamo's cache is never shared between copies."""
    ns: dict[str, Any] = {"torch": torch, "W1": w1, "W2": w2, "N_MM": n_mm}
    exec(compile(SOURCES[variant], f"<{variant}>", "exec"), ns)
    return ns["step"]


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def _within(r: float | None, tol: float = TOLERANCE) -> bool:
    return r is not None and abs(r - 1) <= tol


def sync_wall_ms(torch: Any, fn: Any, x: Any, calls: int) -> float:
    walls = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        fn(x)
        torch.cuda.synchronize()
        walls.append(time.perf_counter_ns() - t0)
    return statistics.median(walls) / 1e6


def kernel_spans(trace_path: str, compile_ids: list[str]) -> list[list[int]]:
    """Per profiled call, per region (in ``compile_ids`` order): first kernel start to last
    kernel end (ns), kernels attributed by their launch inside the region's annotation range and
    outside the ranges of the regions after it."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    ranges: dict[str, list[tuple[float, float]]] = {cid: [] for cid in compile_ids}
    launches: dict[Any, float] = {}
    kernels: dict[Any, tuple[float, float]] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name, args = e.get("cat", ""), e.get("name", ""), e.get("args", {})
        if cat == "user_annotation" and name.startswith("Torch-Compiled Region: "):
            cid = name.split(": ", 1)[1]
            if cid in ranges:
                ranges[cid].append((e["ts"], e["ts"] + e["dur"]))
        elif cat in ("cuda_runtime", "cuda_driver") and "correlation" in args:
            launches[args["correlation"]] = e["ts"]
        elif cat == "kernel" and "correlation" in args:
            kernels[args["correlation"]] = (e["ts"], e["ts"] + e["dur"])
    for r in ranges.values():
        r.sort()
    n = min(len(r) for r in ranges.values()) if ranges else 0
    out = []
    for k in range(n):
        row = []
        for i, cid in enumerate(compile_ids):
            lo, hi = ranges[cid][k]
            later = [ranges[c][k] for c in compile_ids[i + 1:]]
            ks = [
                kernels[c] for c, t in launches.items()
                if c in kernels and lo <= t <= hi and not any(a <= t <= b for a, b in later)
            ]
            row.append(round((max(k_[1] for k_ in ks) - min(k_[0] for k_ in ks)) * 1000) if ks else 0)
        out.append(row)
    return out


def session_run(torch: Any, variant: str, backend: str, w1: Any, w2: Any, x: Any, n_mm: int, calls: int,
                out: str, profile_calls: int) -> dict[str, Any]:
    from seamscope.capture.session import session

    cuda = x.is_cuda
    torch._dynamo.reset()
    ext: list[tuple[Any, Any]] = []
    prof_path = None
    with session(out=os.path.join(out, variant), first_calls=100_000, call_cap=100_000) as s:
        g = torch.compile(fresh(torch, variant, w1, w2, n_mm), backend=backend)
        for _ in range(3):  # cold calls: compile
            g(x)
        if cuda:
            torch.cuda.synchronize()
        first = s.builder.call_count
        for i in range(calls):
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                g(x)
                e1.record()
                ext.append((e0, e1))
            else:
                g(x)
            if (i + 1) % 10 == 0 and cuda:
                torch.cuda.synchronize()
        if cuda and profile_calls:
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(profile_calls):
                    g(x)
                torch.cuda.synchronize()
            prof_path = os.path.join(tempfile.mkdtemp(), "trace.json")
            prof.export_chrome_trace(prof_path)
        if cuda:
            torch.cuda.synchronize()
    led = s.ledger
    receipt = s.last_receipt
    assert led is not None and receipt is not None
    res: dict[str, Any] = {"calls": calls, "schema_version": led.schema_version}
    by_index = {c.index: c for c in led.calls}
    if not cuda:
        res["device"] = "skipped: no CUDA here"
        res["ledger_has_device_fields"] = not isinstance(led.totals.device, msgspec.UnsetType)
        return res
    rows = []
    for i, (e0, e1) in enumerate(ext):
        c = by_index.get(first + i)
        dev = getattr(c, "device", None)
        span = dev.span_ns if dev is not None and not isinstance(dev, msgspec.UnsetType) else None
        events_ns = round(e0.elapsed_time(e1) * 1e6)
        rows.append({"call": first + i, "ledger_device_ms": None if span is None else span / 1e6,
                     "events_ms": events_ns / 1e6, "ratio": None if span is None else _ratio(span, events_ns)})
    res["per_call"] = rows
    res["calls_within_5pct"] = sum(1 for r in rows if _within(r["ratio"]))
    walls = [by_index[r["call"]].wall_ns for r in rows if r["call"] in by_index]
    res["ledger_host_wall_ms_median"] = statistics.median(walls) / 1e6 if walls else None
    res["ledger_device_ms_median"] = (
        statistics.median(r["ledger_device_ms"] for r in rows if r["ledger_device_ms"]) if rows else None
    )
    if prof_path:
        prof_calls = sorted(i for i in by_index if i >= first + calls)[-profile_calls:]
        timed = [by_index[i].device for i in prof_calls]
        timed = [t for t in timed if not isinstance(t, msgspec.UnsetType)]
        cids = [r.compile_id for r in timed[0].regions] if timed else []
        spans = kernel_spans(prof_path, cids)
        regions = []
        for t, row in zip(timed, spans, strict=False):
            for r, k in zip(t.regions, row, strict=False):
                regions.append(
                    {
                        "region": r.compile_id,
                        "ledger_ms": r.duration_ns / 1e6,
                        "profiler_kernels_ms": k / 1e6,
                        "ratio": _ratio(r.duration_ns, k),
                    }
                )
        res["per_region"] = regions
        res["regions_within_5pct"] = sum(1 for r in regions if _within(r["ratio"]))
    frag = [f for f in receipt.findings.findings if f.axis == "fragmentation" and f.cost is not None]
    res["breaks"] = [
        {
            "site": f.finding_id,
            "gb_type": f.cause.gb_type if f.cause else None,
            "host_island_median_ms": None if f.cost.island_median_ns is None else f.cost.island_median_ns / 1e6,
            "device_gap_per_call_ms": None
            if isinstance(f.cost.device, msgspec.UnsetType)
            else f.cost.device.gap_per_call_ns / 1e6,
            "syncs_per_call": None if isinstance(f.cost.device, msgspec.UnsetType) else f.cost.device.syncs_per_call,
        }
        for f in frag
    ]
    return res


def overhead(torch: Any, backend: str, calls: int) -> dict[str, Any]:
    """An 8-region launch-bound call: observed vs plain, interleaved; steady calls (the default
    sampling) and every call timed on the device."""
    import capture_overhead as co

    from seamscope.capture.session import session

    x = torch.randn(64, 64, device="cuda")
    out: dict[str, Any] = {}
    for label, every in (("steady", None), ("device_timed", 1)):
        torch._dynamo.reset()
        with co.quiet_stderr(), session(first_calls=0, call_cap=16) as s:
            co.first_compiled_aside(x, backend)
            observed, plain = co.pair(x, backend, observed_first=True)
            for _ in range(2000):  # past the calls kept in detail
                observed(x)
            if every is not None and s.builder.device is not None:
                s.builder.device_every = every
                s.builder.first_calls = 10**9  # every call due in detail: timed
            a, b = co.interleaved(plain, observed, x, calls)
            torch.cuda.synchronize()
        q1, q2, q3 = co.block_ratios(a, b)
        out[label] = {"plain_us": statistics.median(a) / 1e3, "ratio_median": round(q2, 4),
                      "ratio_q1": round(q1, 4), "ratio_q3": round(q3, 4),
                      "device_attached": s.builder.device is not None}
    return out


def event_costs(torch: Any, n: int = 2000) -> dict[str, float]:
    """Host cost of one record() of a fresh event, of a pooled (already recorded) one, of query()
    and of elapsed_time(), in µs."""
    Event = torch.cuda.Event
    fresh_evs = [Event(enable_timing=True) for _ in range(n)]
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    for e in fresh_evs:
        e.record()
    t1 = time.perf_counter_ns()
    pool = fresh_evs[:16]
    torch.cuda.synchronize()
    t2 = time.perf_counter_ns()
    for i in range(n):
        pool[i % 16].record()
    t3 = time.perf_counter_ns()
    torch.cuda.synchronize()
    t4 = time.perf_counter_ns()
    for i in range(n):
        pool[i % 16].query()
    t5 = time.perf_counter_ns()
    for _ in range(n):
        pool[0].elapsed_time(pool[1])
    t6 = time.perf_counter_ns()
    return {"record_fresh_us": (t1 - t0) / n / 1e3, "record_pooled_us": (t3 - t2) / n / 1e3,
            "query_us": (t5 - t4) / n / 1e3, "elapsed_time_us": (t6 - t5) / n / 1e3}


def timeline_check(device: str, backend: str, size: int | None, calls: int, out: str) -> dict[str, Any]:
    import torch

    cuda = device.startswith("cuda") and torch.cuda.is_available()
    size = size or (8192 if cuda else 64)
    dtype = torch.bfloat16 if cuda else torch.float32
    gen = torch.Generator().manual_seed(0)
    w1 = (torch.randn(size, size, generator=gen) / size ** 0.5).to(device, dtype)
    w2 = (torch.randn(size, size, generator=gen) / size ** 0.5).to(device, dtype)
    x = torch.randn(size, size, generator=gen).to(device, dtype)
    n_mm = 2
    fig: dict[str, Any] = {"workload": "timeline", "size": size, "dtype": str(dtype), "backend": backend}
    if not cuda:
        fig["device"] = "skipped: no CUDA here (ledger vs CUDA events, vs the profiler's kernels, break cost, overhead)"
    walls: dict[str, float] = {}
    for variant in SOURCES:
        if cuda:
            torch._dynamo.reset()
            plain = torch.compile(fresh(torch, variant, w1, w2, n_mm), backend=backend)
            for _ in range(3):
                plain(x)
            walls[variant] = sync_wall_ms(torch, plain, x, 20)
        fig[variant] = session_run(torch, variant, backend, w1, w2, x, n_mm, calls, out, profile_calls=5 if cuda else 0)
        if cuda:
            fig[variant]["sync_wall_ms"] = walls[variant]
    if cuda:
        diff = walls["item"] - walls["graph_break"]
        ranked = [b["device_gap_per_call_ms"] for b in fig["item"]["breaks"] if b["syncs_per_call"]]
        cost = max(ranked) if ranked else None
        fig["item_break"] = {
            "sync_wall_difference_ms": round(diff, 4),
            "ledger_ranked_cost_ms": cost,
            "ratio": _ratio(cost, diff) if cost is not None else None,
            "within_0.5_2x": cost is not None and diff > 0 and BREAK_RANGE[0] <= cost / diff <= BREAK_RANGE[1],
        }
        fig["event_costs"] = event_costs(torch)
        fig["overhead"] = overhead(torch, "eager", 1000)
    return fig
