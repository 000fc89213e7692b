"""``seamscope run --warm``: the target run in fresh processes against persistent caches.

``OUT/cold`` runs with ``TORCHINDUCTOR_CACHE_DIR`` = ``OUT/compile-cache`` (emptied first) and
fills it; it also saves ``torch.compiler.save_cache_artifacts`` to ``OUT/cache-artifacts.bin``.
``OUT/warm`` reads the same directory, as a restarted worker on the same machine would. Where
artifacts were saved (the backend uses the caches, and torch has the call), ``OUT/warm-artifacts``
runs with an empty directory (``OUT/compile-cache-artifacts``) and loads them first, as a worker on
a fresh machine would. :func:`run_warm` returns their comparison (the command writes it to
``OUT/warm-start.json``).

Each run is a job of the fresh-process service (``experiments/fresh.py``) running ``seamscope run``
as a user would type it (``seamscope.cli:main``, a process boundary away): forked from a server
that imported what :data:`trials.runs.PRELOAD` names, or a new interpreter where ``fork`` is missing
or ``SEAMSCOPE_WARM_ISOLATION=process``; ``TRITON_CACHE_DIR`` is ``triton`` inside the run's cache
directory. A run's output (the script's and seamscope's) goes to ``OUT/NAME.log``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field

from ..analyze.warm_start import compare_artifacts, compare_warm
from ..ingest.receipt import load_receipt
from ..model.compile_time import ArtifactsStart, WarmStart
from .fresh import Ended, FreshProcesses, Job, default_mode
from .trials.runs import PRELOAD

ISOLATION_ENV = "SEAMSCOPE_WARM_ISOLATION"
TAIL_LINES = 20
"""How many of a failed run's last output lines the command shows."""


@dataclass(frozen=True)
class WarmRuns:
    """How ``run --warm`` went: an exit code, the comparison (None unless every run succeeded; what
    ``OUT/warm-start.json`` holds)."""

    exit_code: int
    comparison: WarmStart | None = None
    done: list[str] = field(default_factory=list)
    """The runs that finished and wrote their receipt (``OUT/NAME``), in order."""
    failed: str | None = None
    """The run that did not succeed (``cold``), or None."""
    ended: Ended | None = None
    """How the failed run's process ended (None: interrupted, or no failure)."""
    log: str | None = None
    """The failed (or interrupted) run's output file."""
    interrupted: bool = False


def _note_of(path: str) -> str:
    r = load_receipt(path)
    note = r.decision.note if r.decision is not None and r.decision.note else ""
    return "; ".join(p for p in note.split("; ") if p.startswith("cache artifacts: ")) or "no save recorded"


def fresh_processes() -> FreshProcesses:
    """The runs' fresh processes: forked from a server that imported torch once (inside
    ``fresh.shared``, that server), unless ``fork`` is missing or ``SEAMSCOPE_WARM_ISOLATION=process``."""
    return FreshProcesses(preload=PRELOAD, mode=default_mode(os.environ.get(ISOLATION_ENV)))


def exit_code_of(ended: Ended) -> int:
    """The command's exit code for a run that did not succeed: the run's own (the script failed: 1),
    128 + N for a run killed by signal N, 1 for one killed after the timeout or lost with its server."""
    code = ended.exit_code
    if code is None:
        return 1
    return 128 - code if code < 0 else code


def run_job(name: str, argv: list[str], cache_dir: str, log: str) -> Job:
    """One run: ``seamscope ARGV`` with its own cache directory, its output appended to ``log``."""
    env = {"TORCHINDUCTOR_CACHE_DIR": cache_dir, "TRITON_CACHE_DIR": os.path.join(cache_dir, "triton")}
    return Job(entry="seamscope.cli:main", arg=argv, log=log, stdout=True, env=env, cwd=os.getcwd())


def run_warm(target: str, args: list[str], module: bool, out: str, flags: list[str], *,
             processes: FreshProcesses | None = None, timeout: float | None = None,
             progress: Callable[[str], None] | None = None, heartbeat_s: float = 30.0) -> WarmRuns:
    """The runs, one after another; the first that does not succeed ends it (its exit code: see
    :func:`exit_code_of`); Ctrl-C kills the running one and returns 130 with what finished kept.
    ``progress`` is told when each run starts (and where its output goes), then every
    ``heartbeat_s`` that it still runs: a run's own output is in its log, not on the terminal."""
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
    paths: dict[str, str] = {}
    own = processes is None
    fp = fresh_processes() if processes is None else processes
    try:
        for name, cache_dir, extra in runs:
            if name == "warm-artifacts" and not (os.path.exists(artifacts) and os.path.getsize(artifacts) > 0):
                break
            os.makedirs(cache_dir, exist_ok=True)
            dest = os.path.join(out, name)
            log = os.path.join(out, f"{name}.log")
            if os.path.exists(log):
                os.remove(log)  # the job appends
            argv = ["run", "--quiet", "--out", dest, *extra, *flags, *(["-m"] if module else []), target, "--", *args]
            if progress is not None:
                progress(f"the {name} run: its output goes to {log}")
            try:
                ended = fp.run(run_job(name, argv, cache_dir, log), timeout, label=f"the {name} run",
                               progress=progress, heartbeat_s=heartbeat_s)
            except KeyboardInterrupt:
                return WarmRuns(exit_code=130, done=list(paths), failed=name, log=log, interrupted=True)
            if not ended.ok:
                return WarmRuns(exit_code=exit_code_of(ended), done=list(paths), failed=name, ended=ended, log=log)
            paths[name] = os.path.join(dest, "receipt.json")
    finally:
        if own:
            fp.close()
    cold = load_receipt(paths["cold"])
    art: ArtifactsStart | None = None
    note = _note_of(paths["cold"])
    if "warm-artifacts" in paths:
        art = compare_artifacts(cold, load_receipt(paths["warm-artifacts"]), artifacts, os.path.getsize(artifacts),
                                paths["warm-artifacts"])
    ws = compare_warm(cold, load_receipt(paths["warm"]), cache, paths["cold"], paths["warm"], artifacts=art,
                      artifacts_note=note)
    return WarmRuns(exit_code=0, comparison=ws, done=list(paths))


def log_tail(path: str, lines: int = TAIL_LINES) -> list[str]:
    """The last ``lines`` non-blank lines of a run's output file (none when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-lines:]
