"""Trial candidates that change how a process starts, not what the script does (torch-free).

- **warm cache directory** (``warm-cache-dir``): each run reads the persistent cache directory
  (``TORCHINDUCTOR_CACHE_DIR``: Inductor's FX graph cache, the AOTAutograd cache, compiled
  kernels) that the baseline's first run filled, as a restarted worker on the same machine would.
- **warm cache artifacts** (``warm-cache-artifacts``): each run starts with an empty cache
  directory and loads what the baseline's first run saved with
  ``torch.compiler.save_cache_artifacts`` (``torch.compiler.load_cache_artifacts``, before the
  script), as a worker on a fresh machine would that was shipped the artifacts.
- **compile threads** (``compile-threads-N``): Inductor's ``compile_threads``
  (``TORCHINDUCTOR_COMPILE_THREADS``): one thread when the default starts a pool of compile
  workers, all cores when the default is one.

Each applies only where the backend uses what it changes: the eager and aot_eager backends use
neither persistent cache and compile no kernels, so there the candidates are skipped with the
reason (``folded``). The trade each one makes is stated by :func:`trade_text`: compile time saved
per process start, the steady time per call (paired), and the worker lifetime at which it pays off.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from ...analyze.units import fmt_ns
from ...capture.persist import other_holder
from ...errors import UnusableInput
from ...model.receipt import Receipt
from ...model.trials import Candidate
from .catalogue import Draft

WARM_DIR = "warm-cache-dir"
WARM_ARTIFACTS = "warm-cache-artifacts"
STARTS = (WARM_DIR, WARM_ARTIFACTS)
THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"


@dataclass(frozen=True)
class RunExtra:
    """What one trial run gets besides its remedy flags."""

    cache_dir: str | None = None
    """A persistent cache directory, used as it is and kept (None: the run's own empty one)."""
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    """Words for ``seamscope run`` before the remedy flags (``--load-cache-artifacts FILE``)."""


def warm_paths(out: str) -> tuple[str, str]:
    """(the cache directory the baseline's first run fills, the artifacts file it saves)."""
    base = os.path.abspath(os.path.join(out, "trials", "warm-cache"))
    return os.path.join(base, "compile-cache"), os.path.join(base, "cache-artifacts.bin")


def prime_extra(out: str) -> RunExtra:
    """The baseline's first run: it fills the warm cache directory and saves the artifacts. The
    folder of a trial before in ``out`` is emptied first; that of a trial still running there (it
    holds ``out``'s lock) never: ``UnusableInput`` naming it."""
    holder = other_holder(out)
    if holder is not None:
        raise UnusableInput(f"{out}: in use by another seamscope run ({holder}); its warm cache is left as it is")
    cache, artifacts = warm_paths(out)
    shutil.rmtree(os.path.dirname(cache), ignore_errors=True)  # a trial before in the same folder
    os.makedirs(cache, exist_ok=True)
    return RunExtra(cache_dir=cache, args=["--save-cache-artifacts", artifacts])


def drop_warm(out: str) -> None:
    """Remove the warm cache folder (the baseline failed, or no candidate reads it)."""
    if other_holder(out) is not None:  # another trial's, running: never this one's to remove
        return
    shutil.rmtree(os.path.dirname(warm_paths(out)[0]), ignore_errors=True)


def extra_for(d: Draft, out: str) -> RunExtra | None:
    """How a candidate's runs start (None: as every other run, with an empty cache)."""
    if d.start is None and not d.env:
        return None
    cache, artifacts = warm_paths(out)
    if d.start == WARM_DIR:
        return RunExtra(cache_dir=cache, env=dict(d.env))
    if d.start == WARM_ARTIFACTS:
        return RunExtra(env=dict(d.env), args=["--load-cache-artifacts", artifacts])
    return RunExtra(env=dict(d.env))


def env_prefix(extra: RunExtra | None) -> str:
    """The shell words that set a run's environment as the trial did (before ``seamscope run``)."""
    if extra is None:
        return 'TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)" '
    words = [f"{k}={v}" for k, v in sorted(extra.env.items())]
    words.insert(0, f"TORCHINDUCTOR_CACHE_DIR={extra.cache_dir}" if extra.cache_dir
                 else 'TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)"')
    return " ".join(words) + " "


def backend_name(receipt: Receipt) -> str:
    return receipt.ledger.environment.backend or "the default backend (inductor)"


def uses_caches(receipt: Receipt) -> bool:
    """Whether any compilation of the run went through a persistent cache layer (an outcome recorded)."""
    return any(c.fx_cache is not None or c.aot_cache is not None for c in receipt.ledger.compilations)


def _backend_stages_ns(receipt: Receipt) -> int:
    """Compile time in the backend stages (what a cache hit skips): AOTAutograd, Inductor, autotuning."""
    from ...analyze.compile_time import split_of

    s = split_of(receipt.ledger.compilations)
    return sum(v or 0 for v in (s.aot_autograd_ns, s.inductor_ns, s.autotune_ns))


def start_drafts(receipt: Receipt, folded: list[str], artifacts_file: str | None = None,
                 cpu_count: int | None = None, env: dict[str, str] | None = None) -> list[Draft]:
    """The warm-cache and compile-threads candidates for the baseline's run, or why not (``folded``).

    ``artifacts_file``: what the baseline's first run saved with ``save_cache_artifacts`` (missing
    or empty: that torch has no such call, or nothing was recorded). ``cpu_count``/``env``: the
    machine's cores and environment, which decide Inductor's default ``compile_threads``."""
    env = dict(os.environ) if env is None else env
    cpus = cpu_count if cpu_count is not None else (os.cpu_count() or 1)
    if not receipt.ledger.compilations:
        folded.append("warm cache, compile threads: the baseline compiled nothing")
        return []
    backend = backend_name(receipt)
    if not uses_caches(receipt):
        folded.append(f"warm cache: the baseline's compilations used no persistent cache (backend {backend}: "
                      "the eager and aot_eager backends use neither the FX graph nor the AOTAutograd cache); "
                      "skipped")
        folded.append(f"compile threads: backend {backend} compiles no kernels in parallel (Inductor's "
                      "compile_threads only); skipped")
        return []
    cost = _backend_stages_ns(receipt)
    total = sum(c.duration_ns or 0 for c in receipt.ledger.compilations)
    what = f"{len(receipt.ledger.compilations)} compilation(s), {fmt_ns(total)} of compile time"
    out = [Draft(name=WARM_DIR, spec=_empty(), origin="compile time", start=WARM_DIR, cost_ns=cost,
                 targets=f"{what}: a restarted worker reading the cache directory the first start filled")]
    if artifacts_file and os.path.exists(artifacts_file) and os.path.getsize(artifacts_file) > 0:
        out.append(Draft(name=WARM_ARTIFACTS, spec=_empty(), origin="compile time", start=WARM_ARTIFACTS,
                         cost_ns=cost, targets=f"{what}: a worker on a fresh machine loading the first start's "
                         "torch.compiler.save_cache_artifacts"))
    else:
        folded.append("warm cache artifacts: the baseline's first run saved none (torch.compiler."
                      "save_cache_artifacts is missing in this torch, or returned nothing)")
    default = _default_threads(env, cpus)
    n = 1 if default > 1 else min(32, cpus)
    if n == default:
        folded.append(f"compile threads: one core, so compile_threads is already {default}; nothing to try")
    else:
        why = ("no pool of compile workers to start" if n == 1 else f"kernels built in parallel on {n} cores")
        out.append(Draft(name=f"compile-threads-{n}", spec=_empty(), origin="compile time", env={THREADS_ENV: str(n)},
                         cost_ns=cost, targets=f"{what}: Inductor's compile_threads {default} → {n} ({why})"))
    return out


def _default_threads(env: dict[str, str], cpus: int) -> int:
    """Inductor's default ``compile_threads`` (``decide_compile_threads``): the environment's, else
    the cores up to 32."""
    try:
        return int(env[THREADS_ENV])
    except (KeyError, ValueError):
        return min(32, cpus)


def _empty():  # type: ignore[no-untyped-def]
    from ..remedy_spec import RemedySpec

    return RemedySpec()


def code_change_of(d: Draft) -> str | None:
    """What a start candidate asks of the deployment (None: not one)."""
    if d.start == WARM_DIR:
        return ("keep TORCHINDUCTOR_CACHE_DIR on storage that outlives the process, the same directory for "
                "every restart (no code change)")
    if d.start == WARM_ARTIFACTS:
        return ("after the first start's compilations, artifacts = torch.compiler.save_cache_artifacts() and ship "
                "artifacts[0]; in a new worker, torch.compiler.load_cache_artifacts(data) before the first call")
    if THREADS_ENV in d.env:
        return (
            f"{THREADS_ENV}={d.env[THREADS_ENV]} in the worker's environment (torch._inductor.config.compile_threads)"
        )
    return None


def _median(c: Candidate, name: str) -> float | None:
    return next((m.median for m in c.metrics if m.name == name), None)


def trade_text(c: Candidate, base: Candidate) -> str | None:
    """Compile time saved per process start, the steady time per call (paired: calls steady in both
    runs), and the process lifetime at which the candidate pays off; for a warm cache, the
    restarts. A figure enters the arithmetic only where its verdict is ``faster`` or ``slower``:
    one within the noise is given as its interval, never as a saving. None without compile
    figures on both sides."""
    bc, cc = _median(base, "compile"), _median(c, "compile")
    if bc is None or cc is None:
        return None
    comp = next((m for m in c.metrics if m.name == "compile"), None)
    saved = bc - cc
    if comp is not None and comp.verdict in ("faster", "slower"):
        parts = [f"compile time {'saved' if saved >= 0 else 'added'} {fmt_ns(abs(saved))} per process start "
                 f"({fmt_ns(bc)} → {fmt_ns(cc)})"]
    else:
        saved = 0.0  # within the noise: nothing to build a lifetime on
        verdict = comp.verdict if comp is not None and comp.verdict != "n/a" else "not decided"
        ci = (f", interval {comp.ci_low:.2f}–{comp.ci_high:.2f}×"
              if comp is not None and comp.ci_low is not None and comp.ci_high is not None else "")
        parts = [f"compile time per process start {fmt_ns(bc)} → {fmt_ns(cc)} ({verdict}{ci})"]
    p = c.paired
    delta = 0.0
    steady_ns = p.baseline_ns if p is not None else None
    looks_slower = False
    if p is None or p.ratio_median is None or p.baseline_ns is None:
        parts.append("no call steady in both to pair")
    else:
        delta = (p.ratio_median - 1.0) * p.baseline_ns
        ci = (f", interval {p.ci_low:.2f}–{p.ci_high:.2f}×" if c.steady_verdict not in ("faster", "slower")
              and p.ci_low is not None and p.ci_high is not None else "")
        pair = (f"steady time per call {fmt_ns(p.baseline_ns)} → {fmt_ns(p.candidate_ns)} "
                f"({p.ratio_median:.3f}×, paired over {p.calls} call(s), {c.steady_verdict}{ci})")
        parts.append(pair)
        if c.steady_verdict not in ("faster", "slower"):
            looks_slower = delta > 0
            delta = 0.0  # within the noise: not a change to build a lifetime on
    if c.flags == [] and any(w in c.name for w in STARTS):
        parts.append(_restarts(saved, delta, steady_ns))
        return "; ".join(parts)
    unknown = comp is None or comp.verdict in ("noisy", "n/a") or c.steady_verdict == "noisy"
    parts.append(_lifetime(saved, delta, looks_slower, unknown))
    return "; ".join(parts)


def _restarts(saved: float, delta: float, steady_ns: float | None) -> str:
    if saved <= 0:
        return "it does not pay off: a warm start compiled no less"
    life = "pays off from the first restart (the first start fills the cache)"
    if delta > 0:
        life += f", for workers that serve up to about {int(saved / delta):,} steady calls per start"
    elif steady_ns:
        life += f"; each restart saves the time of about {int(saved / steady_ns):,} steady calls"
    return life


def _lifetime(saved: float, delta: float, looks_slower: bool, unknown: bool = False) -> str:
    """When a candidate pays off, from decided figures only (``delta``: steady time lost per call,
    0 where undecided; ``looks_slower``: undecided, but slower as measured; ``unknown``: a figure
    was too noisy to decide)."""
    if saved > 0 and delta > 0:
        return (f"pays off for processes of up to about {int(saved / delta):,} steady calls "
                "(past that the slower steady calls outweigh the compile time saved)")
    if saved > 0 and looks_slower:
        return ("pays off for short processes; whether the steady calls, slower as measured but within the "
                "noise, outweigh the compile time saved in long ones is not known")
    if saved > 0:
        return "pays off from the first call of every process"
    if delta < 0 and saved == 0:
        return "pays off from the first steady call (compile time not measurably changed)"
    if delta < 0:
        return f"pays off after about {int(-saved / -delta) + 1:,} steady calls per process"
    if unknown:
        return "whether it pays off is not known: the timings were too noisy to tell"
    return "it does not pay off: neither compile nor steady time is measurably lower"
