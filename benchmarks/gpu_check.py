"""The probe on a small transformer on CUDA, in one short run.

What it shows that CPU cannot: synchronized timings (the probe synchronizes around every timed
call on CUDA), allocator peaks per configuration, and the number of device-to-host syncs per call
(``torch.cuda.set_sync_debug_mode("warn")`` warns once per implicit sync), which is the
dominant cost of a graph break: the bundled decoder's ``.item()`` branch is one per call.

    python benchmarks/gpu_check.py --out "$OUT"            # on the device machine
    python benchmarks/gpu_check.py --device cpu --warm 2   # the same path on CPU (no sync counts)
    python benchmarks/gpu_check.py --only timeline --out "$OUT"   # the device timeline check alone (a few minutes)

The device timeline check (``device_timeline.py``): two compiled blocks of matmuls with a break
between them, once a ``graph_break()`` and once an ``.item()`` branch; the ledger's device
times against CUDA events around each call and a ``torch.profiler`` kernel trace of the same
calls, the ``.item()`` break's ranked cost against the synchronized walls, and the capture
overhead of calls timed on the device.

Writes ``gpu_check.json`` (figures) and one receipt folder per workload under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # device_timeline.py beside this file

SYNC_WORDS = ("synchroniz",)


def count_syncs(call: Callable[[], Any], set_mode: Callable[[Any], None], get_mode: Callable[[], Any]) -> int:
    """Implicit device-to-host syncs during ``call()``: one warning each in sync-debug mode "warn"."""
    prev = get_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        set_mode("warn")
        try:
            call()
        finally:
            set_mode(prev)
    return sum(1 for w in caught if any(s in str(w.message).lower() for s in SYNC_WORDS))


def syncs_per_call(fn: Callable[..., Any], entry: Any, calls: int = 3) -> float | None:
    """Average implicit syncs per call on CUDA; None elsewhere (CPU has no device to wait for)."""
    import torch

    from seamscope.experiments.workload import as_call

    if not torch.cuda.is_available():
        return None
    args, kwargs = as_call(entry)

    def run() -> None:
        for _ in range(calls):
            fn(*args, **kwargs)

    n = count_syncs(run, torch.cuda.set_sync_debug_mode, torch.cuda.get_sync_debug_mode)
    torch.cuda.synchronize()
    return n / calls


def workloads(device: str, backend: str) -> dict[str, Any]:
    """The bundled decoder (a print and an ``.item()`` break) and a GPT-2 from a tiny config."""
    import torch

    from seamscope.examples.decoder import workload as decoder_workload
    from seamscope.experiments.workload import Workload

    out: dict[str, Any] = {}
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).eval()
    out["tiny"] = Workload(mlp, inputs={"steady": [torch.randn(8, 32)]}, backend=backend, device=device,
                           warm_calls=10, ladder=(), name="tiny-mlp")
    wl = decoder_workload(backend=backend)
    wl.device = device
    wl.ladder = ()
    out["decoder"] = wl
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return out
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=128)
    m = GPT2LMHeadModel(cfg).eval()
    ids = [torch.randint(0, 256, (4, n), generator=torch.Generator().manual_seed(n)) for n in (32, 48)]
    out["gpt2"] = Workload(m, inputs={"steady": [{"input_ids": ids[0]}], "changed": [{"input_ids": ids[1]}]},
                           backend=backend, device=device, warm_calls=10, ladder=(), name="gpt2-tiny")
    return out


def figures(name: str, receipt: Any, syncs_eager: float | None, syncs_compiled: float | None) -> dict[str, Any]:
    """The JSON twin of the printed lines, from the receipt (nothing recomputed)."""
    p = receipt.probe
    return {
        "workload": name,
        "verdict": p.verdict,
        "answer": p.answer,
        "evidence": [
            {
                "configuration": r.configuration,
                "first_call_ms": _ms(r.first_call_ns),
                "steady_median_ms": _ms(r.steady_median_ns),
                "compiles": r.compiles,
                "recompiles": r.recompiles,
                "peak_mib": r.peak_mib,
                "peak_source": r.peak_source,
            }
            for r in p.evidence
        ],
        "phases": {
            pr.phase: {
                "eager_median_ms": _ms(pr.baseline.median_ns),
                "compiled_median_ms": _ms(pr.candidate.median_ns),
                "n": len(pr.candidate.samples_ns),
            }
            for pr in p.pairs
        },
        "differential": [
            {
                "input": f"{d.family}[{d.index}]",
                "class": d.klass,
                "worst_leaf": d.worst.path if d.worst else None,
                "tolerance_ratio": d.worst.tolerance_ratio if d.worst else None,
                "rounding_ratio": d.worst.rounding_ratio if d.worst else None,
                "judged_by": d.worst.judged_by if d.worst else None,
            }
            for d in p.differential
        ],
        "syncs_per_call": {"eager": syncs_eager, "compiled": syncs_compiled},
        "break_sites": receipt.summary.break_site_count,
    }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--out", default=os.environ.get("OUT", "seamscope-out/gpu_check"))
    ap.add_argument("--only", default=None, help="one workload name (tiny, decoder, gpt2, timeline)")
    ap.add_argument("--size", type=int, default=None, help="timeline: matmul size (default 8192 on CUDA, 64 on CPU)")
    ap.add_argument("--calls", type=int, default=40, help="timeline: steady calls per variant")
    a = ap.parse_args(argv)
    import torch

    from seamscope.experiments.probe import probe
    from seamscope.experiments.workload import as_call
    from seamscope.render.receipt_json import write_receipt_files

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here (use --device cpu for the CPU path)", file=sys.stderr)
        return 2
    results = []
    if a.only in (None, "timeline"):
        from device_timeline import timeline_check

        fig = timeline_check(a.device, a.backend, a.size, a.calls, os.path.join(a.out, "timeline"))
        results.append(fig)
        print(json.dumps(fig, indent=1))
    for name, wl in workloads(a.device, a.backend).items() if a.only != "timeline" else ():
        if a.only and name != a.only:
            continue
        t0 = time.perf_counter()
        receipt, err = probe(wl, warm=a.warm, ladder=[], progress=lambda m: print("  " + m, file=sys.stderr))
        write_receipt_files(receipt, os.path.join(a.out, name))
        from seamscope.experiments.probe import prepare

        ready = prepare(wl)
        entry = ready.families()["steady"][0]
        with torch.no_grad():
            s_eager = syncs_per_call(ready.fn_or_module, entry)
            compiled = torch.compile(ready.fn_or_module, backend=a.backend)
            args, kwargs = as_call(entry)
            compiled(*args, **kwargs)  # warm: compile outside the counted calls
            s_comp = syncs_per_call(compiled, entry)
        fig = figures(name, receipt, s_eager, s_comp)
        fig["wall_s"] = round(time.perf_counter() - t0, 1)
        fig["error"] = str(err) if err else None
        results.append(fig)
        print(json.dumps(fig, indent=1))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "gpu_check.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else a.device,
                   "torch": str(torch.__version__), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
