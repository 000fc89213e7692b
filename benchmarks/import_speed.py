"""``seamscope import`` vs ``tlparse`` on the same large TORCH_TRACE logs: wall time and peak RSS.

Not part of ``make test``. Usage::

    .venv/bin/python benchmarks/import_speed.py [--repeats 3] [--sizes 100,400]

Logs are made once from real runs and cached in ``.bench-cache/`` (git-ignored):

- ``event-heavy``: eager backend, many small functions, each recompiled on many shapes with
  ``dynamic=False`` (many frames, compilations and recompile reasons);
- ``payload-heavy``: inductor, wide MLPs recompiled on several shapes (FX graphs, AOT graphs and
  generated code in payloads).

A real run is grown to the target size by concatenating copies of itself (the copies are real
records; compile ids repeat, so seamscope reads each copy as one more generation of ids, as after
a reset, and tlparse files them under the same ids). Runs are interleaved (seamscope, tlparse,
seamscope, ...) and medians reported; peak RSS is the child's ``ru_maxrss``, CPU its user + system
time (a ratio of CPU times holds better than one of wall times on a loaded machine; tlparse spends
much of its wall time writing its HTML tree).

seamscope's bytecode is compiled first (``compileall``), as ``pip install`` does: with
``PYTHONDONTWRITEBYTECODE`` set, every run would otherwise compile its sources again (about 0.1 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench-cache"
BIN = Path(sys.executable).parent

EVENT_HEAVY = r'''
import torch
torch._dynamo.config.recompile_limit = 10_000
torch._dynamo.config.accumulated_recompile_limit = 1_000_000
def make(i):
    def fn(x):
        y = x.sin() * i
        print("b")                  # a break: two frames per function
        return (y + 1).cos()
    fn.__name__ = f"fn_{i}"
    return fn
for i in range(int(__import__("sys").argv[1])):
    cf = torch.compile(make(i), backend="eager", dynamic=False)
    for n in range(2, 12):
        cf(torch.randn(n))
'''

PAYLOAD_HEAVY = r'''
import torch
torch._dynamo.config.recompile_limit = 10_000
class MLP(torch.nn.Module):
    def __init__(self, d, depth):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(depth))
    def forward(self, x):
        for l in self.layers:
            x = torch.nn.functional.gelu(l(x)) * 0.5 + x.tanh()
        return x.softmax(-1)
for k in range(int(__import__("sys").argv[1])):
    m = torch.compile(MLP(32, 24), dynamic=False)
    for n in range(1, 4):
        m(torch.randn(n, 32))
'''


def generate(kind: str, script: str, arg: str) -> Path:
    """One real log from a run (cached)."""
    out = CACHE / f"{kind}-base.log"
    if out.exists():
        return out
    CACHE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCH_TRACE=d, TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
        t0 = time.time()
        subprocess.run([sys.executable, "-c", script, arg], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (log,) = Path(d).glob("dedicated_log_torch_trace_*.log")
        shutil.move(str(log), out)
        print(f"generated {out.name}: {out.stat().st_size / 1e6:.1f} MB in {time.time() - t0:.0f} s", flush=True)
    return out


def grow(base: Path, mb: int) -> Path:
    out = CACHE / f"{base.stem.removesuffix('-base')}-{mb}MB" / "dedicated_log_torch_trace_bench.log"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    data = base.read_bytes()
    with open(out, "wb") as f:
        written = 0
        while written < mb * 1_000_000:
            f.write(data)
            written += len(data)
    return out


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall seconds, peak RSS MB, CPU seconds) of one run of ``cmd`` in a fresh wrapper process."""
    wrapper = (
        "import resource, subprocess, sys, time;"
        "t=time.perf_counter(); r=subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
        " stderr=subprocess.DEVNULL); w=time.perf_counter()-t;"
        "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(w, u.ru_maxrss, u.ru_utime + u.ru_stime, r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True)
    wall, rss_kb, cpu, rc = out.stdout.split()
    if rc != "0":
        raise SystemExit(f"{cmd[0]} failed (exit {rc})")
    return float(wall), int(rss_kb) / 1024, float(cpu)


def compile_bytecode() -> None:
    """seamscope's modules compiled once, as an install does (see the module's docstring)."""
    where = subprocess.run([sys.executable, "-c", "import os, seamscope; print(os.path.dirname(seamscope.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "compileall", "-q", where], check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="100,400")
    ap.add_argument("--event-funcs", default="30")
    ap.add_argument("--payload-models", default="3")
    a = ap.parse_args()
    bases = {
        "event-heavy": generate("event-heavy", EVENT_HEAVY, a.event_funcs),
        "payload-heavy": generate("payload-heavy", PAYLOAD_HEAVY, a.payload_models),
    }
    compile_bytecode()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, base in bases.items():
            for mb in (int(s) for s in a.sizes.split(",")):
                log = grow(base, mb)
                tools = {
                    "seamscope": [str(BIN / "seamscope"), "import", str(log), "--out", f"{tmp}/ss"],
                    "tlparse": [str(BIN / "tlparse"), str(log), "-o", f"{tmp}/tl", "--overwrite", "--no-browser"],
                }
                samples: dict[str, list[tuple[float, float, float]]] = {t: [] for t in tools}
                for _ in range(a.repeats):
                    for t, cmd in tools.items():  # interleaved
                        samples[t].append(measure(cmd))
                med = {t: (statistics.median(w for w, _, _ in s), max(r for _, r, _ in s),
                           statistics.median(c for _, _, c in s)) for t, s in samples.items()}
                size = log.stat().st_size / 1e6
                rows.append((kind, size, med))
                print(
                    f"{kind:14s} {size:6.0f} MB  seamscope {med['seamscope'][0]:6.2f} s {med['seamscope'][1]:6.0f} "
                    "MB | "
                    f"tlparse {med['tlparse'][0]:6.2f} s {med['tlparse'][1]:6.0f} MB | "
                    f"ratio {med['seamscope'][0] / med['tlparse'][0]:.2f} (CPU "
                    f"{med['seamscope'][2] / med['tlparse'][2]:.2f})",
                    flush=True,
                )
    print(
        "\n| log | size | seamscope wall | seamscope peak RSS | tlparse wall | tlparse peak RSS | ratio | CPU ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for kind, size, med in rows:
        (sw, sr, sc), (tw, tr, tc) = med["seamscope"], med["tlparse"]
        print(f"| {kind} | {size:.0f} MB | {sw:.2f} s | {sr:.0f} MB | {tw:.2f} s | {tr:.0f} MB | {sw / tw:.2f}× "
              f"| {sc / tc:.2f}× ({sc:.2f} / {tc:.2f} s) |")
    _ = resource  # measured in the wrapper


if __name__ == "__main__":
    main()
