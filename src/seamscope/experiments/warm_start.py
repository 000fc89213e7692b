"""``seamscope run --warm``: the target run twice in fresh processes against one persistent cache
directory (``TORCHINDUCTOR_CACHE_DIR`` = ``OUT/compile-cache``, emptied first): ``OUT/cold`` fills
it, ``OUT/warm`` reads it, as a restarted worker would. ``OUT/warm-start.json`` compares them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import msgspec

from ..analyze.warm_start import compare_warm
from ..ingest.receipt import load_receipt
from ..model.compile_time import WarmStart


def run_warm(target: str, args: list[str], module: bool, out: str, flags: list[str]) -> tuple[int, WarmStart | None]:
    """Both runs; the exit status of the first that did not succeed, else 0, and the comparison."""
    cache = os.path.abspath(os.path.join(out, "compile-cache"))
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
    paths = {}
    for name in ("cold", "warm"):
        dest = os.path.join(out, name)
        cmd = [sys.executable, "-m", "seamscope", "run", "--quiet", "--out", dest, *flags,
               *(["-m"] if module else []), target, "--", *args]
        rc = subprocess.run(cmd, env=env).returncode
        if rc != 0:
            return rc, None
        paths[name] = os.path.join(dest, "receipt.json")
    ws = compare_warm(load_receipt(paths["cold"]), load_receipt(paths["warm"]), cache, paths["cold"], paths["warm"])
    with open(os.path.join(out, "warm-start.json"), "wb") as f:
        f.write(msgspec.json.format(msgspec.json.encode(ws, order="sorted"), indent=1) + b"\n")
    return 0, ws
