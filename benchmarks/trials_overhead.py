"""What ``seamscope try`` costs beyond the candidates' own scripts.

Runs ``seamscope try`` on a script whose calls take a chosen time (``--seconds`` of calls per run),
then prints, from ``trials.json``: the summed wall time of the timed runs' scripts, the time
each process spent starting (Python, torch, seamscope) and writing its receipt, the output
fingerprints, the comparisons, and the output runs. The target: process starts, fingerprints
and comparison together at most 10% of the summed timed runs.

    .venv/bin/python benchmarks/trials_overhead.py --seconds 20 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = '''
import sys, time, torch

def step(x):
    x = torch.sin(x) * x.abs().max().item()
    x = torch.sin(x) * x.abs().max().item()
    return torch.tanh(x @ x.T).sum(0)

f = torch.compile(step, backend="eager")
x = torch.randn(256, 256)
deadline = time.perf_counter() + float(sys.argv[1])
calls = 0
while time.perf_counter() < deadline or calls < 200:
    f(x)
    calls += 1
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0, help="Seconds of calls per run.")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "work.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        out = os.path.join(d, "out")
        cmd = [sys.executable, "-m", "seamscope", "try", "--quiet", "--repeat", str(a.repeat), "--out", out,
               "--only", "capture_scalar_outputs", script, "--", str(a.seconds)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(p.stderr)
        with open(os.path.join(out, "trials.json")) as f:
            t = json.load(f)
    o = t["overhead"]
    runs = [r for c in [t["baseline"], *t["candidates"]] for r in c["runs"]]
    starts = o["timed_process_ns"] - o["timed_script_ns"]
    own = starts + o["fingerprint_ns"] + o["compare_ns"]
    s = 1e9
    print(
        f"timed runs: {len(runs)}, scripts {o['timed_script_ns'] / s:.1f} s, processes "
        f"{o['timed_process_ns'] / s:.1f} s"
    )
    print(f"process start and receipt writing: {starts / s:.1f} s ({starts / len(runs) / s:.2f} s per run)")
    print("per run (process - script): " + ", ".join(f"{(r['process_ns'] - (r['script_ns'] or 0)) / s:.2f} s"
                                                     for r in runs))
    print(f"fingerprints: {o['fingerprint_ns'] / s:.3f} s, comparisons: {o['compare_ns'] / s:.4f} s")
    print(f"output runs (outside the timed ones): {o['check_process_ns'] / s:.1f} s")
    print(f"trial wall time: {o['trial_ns'] / s:.1f} s")
    print(f"own overhead / summed timed scripts: {own / o['timed_script_ns']:.3f} (target <= 0.10)")
    print(f"own overhead / summed timed process wall: {own / o['timed_process_ns']:.3f}")


if __name__ == "__main__":
    main()
