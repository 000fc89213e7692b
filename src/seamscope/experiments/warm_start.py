"""``seamscope run --warm``: the target run in fresh processes against persistent caches.

``OUT/cold`` runs with ``TORCHINDUCTOR_CACHE_DIR`` = ``OUT/compile-cache`` (emptied first) and
fills it; it also saves ``torch.compiler.save_cache_artifacts`` to ``OUT/cache-artifacts.bin``.
``OUT/warm`` reads the same directory, as a restarted worker on the same machine would. Where
artifacts were saved (the backend uses the caches, and torch has the call), ``OUT/warm-artifacts``
runs with an empty directory (``OUT/compile-cache-artifacts``) and loads them first, as a worker on
a fresh machine would. ``OUT/warm-start.json`` compares them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import msgspec

from ..analyze.warm_start import compare_artifacts, compare_warm
from ..ingest.receipt import load_receipt
from ..model.compile_time import ArtifactsStart, WarmStart


def _note_of(path: str) -> str:
    r = load_receipt(path)
    note = r.decision.note if r.decision is not None and r.decision.note else ""
    return "; ".join(p for p in note.split("; ") if p.startswith("cache artifacts: ")) or "no save recorded"


def run_warm(target: str, args: list[str], module: bool, out: str, flags: list[str]) -> tuple[int, WarmStart | None]:
    """The runs; the exit status of the first that did not succeed, else 0, and the comparison."""
    cache = os.path.abspath(os.path.join(out, "compile-cache"))
    fresh = os.path.abspath(os.path.join(out, "compile-cache-artifacts"))
    artifacts = os.path.abspath(os.path.join(out, "cache-artifacts.bin"))
    for d in (cache, fresh):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    if os.path.exists(artifacts):
        os.remove(artifacts)
    runs = [("cold", cache, ["--save-cache-artifacts", artifacts]), ("warm", cache, []),
            ("warm-artifacts", fresh, ["--load-cache-artifacts", artifacts])]
    paths = {}
    for name, cache_dir, extra in runs:
        if name == "warm-artifacts" and not (os.path.exists(artifacts) and os.path.getsize(artifacts) > 0):
            break
        os.makedirs(cache_dir, exist_ok=True)
        dest = os.path.join(out, name)
        cmd = [sys.executable, "-m", "seamscope", "run", "--quiet", "--out", dest, *extra, *flags,
               *(["-m"] if module else []), target, "--", *args]
        rc = subprocess.run(cmd, env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)).returncode
        if rc != 0:
            return rc, None
        paths[name] = os.path.join(dest, "receipt.json")
    cold = load_receipt(paths["cold"])
    art: ArtifactsStart | None = None
    note = _note_of(paths["cold"])
    if "warm-artifacts" in paths:
        art = compare_artifacts(cold, load_receipt(paths["warm-artifacts"]), artifacts, os.path.getsize(artifacts),
                                paths["warm-artifacts"])
    ws = compare_warm(cold, load_receipt(paths["warm"]), cache, paths["cold"], paths["warm"], artifacts=art,
                      artifacts_note=note)
    with open(os.path.join(out, "warm-start.json"), "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(ws, order="sorted"), indent=1) + b"\n")
    return 0, ws
