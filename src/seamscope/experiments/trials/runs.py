"""One trial run: a fresh process (``experiments/fresh.py``: forked from a server that imported
torch once, or a new interpreter) running ``seamscope run`` with a candidate's flags, its own empty
inductor cache, and what it measured read back as :class:`RunFigures`. A crash or a hang is the
run's result.

The child runs the command line (``seamscope.cli:main``) exactly as a user would type it: the
trials depend on what ``run`` writes (its receipt, the ``--record-out`` file), a process boundary
away, not on the commands' code."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...model.receipt import Receipt
from ...model.trials import CallTime, RunFigures
from ..fresh import FreshProcesses, Job, default_mode
from . import fingerprint as fpmod


@dataclass
class Setup:
    script: str
    args: list[str]
    out: str
    seed: int = 0
    repeat: int = 3
    max_repeat: int | None = None
    """Repetitions an undecided candidate may get in all (None: ``repeat``, no more)."""
    timeout: float | None = None
    budget_s: float | None = None
    python: str = sys.executable
    progress: Callable[[str], None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    """Seconds, for the budget and the ETA."""
    processes: FreshProcesses | None = None
    """Where each run's fresh process comes from (None: each run a new interpreter)."""
    deadline: float | None = None
    """When ``--budget`` ends, on ``clock``: no run starts after it, and a run still going then is
    killed (:class:`BudgetSpent`), so a run that hangs cannot outlast the budget."""
    budget_ended: str | None = None
    """The run the budget ended during (set with :class:`BudgetSpent`)."""
    baseline_flags: list[str] = field(default_factory=list)
    """The baseline's flags (a run given none gets them): ``--stance force_eager`` where the script
    fails compiled (:mod:`.split`)."""


class BudgetSpent(Exception):
    """The trial's budget ended before or during a run: the trial stops there (what was measured
    is kept; the runs not finished are listed)."""


def run_command(spec_flags: list[str], setup: Setup, out_dir: str) -> list[str]:
    """The ``seamscope run ...`` line of one run (what the table shows, without the output flags)."""
    return ["seamscope", "run", "--out", out_dir, *spec_flags, "--seed", str(setup.seed), setup.script,
            *(["--", *setup.args] if setup.args else [])]


def shell_join(words: list[str]) -> str:
    """Like ``shlex.join``, but a word with single quotes only (``L['x']:0``) goes in double quotes."""
    out = []
    for w in words:
        # in double quotes a backslash stays as written unless it precedes one of \ $ ` " (a regex's \[ does)
        if "'" in w and not any(ch in w for ch in '"$`!') and "\\\\" not in w and not w.endswith("\\"):
            out.append(f'"{w}"')
        else:
            out.append(shlex.quote(w))
    return " ".join(out)


@dataclass
class Outcome:
    figures: RunFigures
    receipt: Receipt | None
    stderr: str
    fingerprints: fpmod.Fingerprints | None = None


def run_once(setup: Setup, flags: list[str], rel_dir: str, label: str, fingerprint: bool = False,
             extra: Any = None) -> Outcome:
    """One fresh process with its own empty inductor cache; a crash or hang is its result.
    ``extra`` (:class:`.cache.RunExtra`): a persistent cache directory instead (kept), more
    environment, words before the flags."""
    flags = flags or setup.baseline_flags
    out_dir = os.path.join(setup.out, rel_dir)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="seamscope-try-cache-")
    record = os.path.join(out_dir, "fingerprints.json")
    if not fingerprint:
        record = os.path.join(cache, "timing.json")  # only the script's own time is kept
    argv = ["run", "--quiet", "--no-html", "--out", out_dir, *(extra.args if extra else []), *flags,
            "--seed", str(setup.seed),
            "--record-out", record, *(["--fingerprint"] if fingerprint else []), setup.script]
    if setup.args:
        argv += ["--", *setup.args]
    env_set = dict(setup.env)
    env_set.update(extra.env if extra else {})
    inductor_dir = extra.cache_dir if extra and extra.cache_dir else cache
    env_set["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir
    env_set["TRITON_CACHE_DIR"] = os.path.join(inductor_dir, "triton")
    unset = ["TORCH_COMPILE_DYNAMIC_SOURCES"]
    t0 = time.perf_counter_ns()
    error = None
    err_path = os.path.join(cache, "stderr.txt")
    job = Job(entry="seamscope.cli:main", arg=argv, log=err_path, stdout=False, env=env_set, unset=unset,
              cwd=os.getcwd())
    try:  # the cache folder goes however the run ends: a hang, Ctrl-C, SIGTERM, the budget
        timeout, by_budget = _timeout(setup, rel_dir)
        if setup.processes is not None:
            ended = setup.processes.run(job, timeout)
        else:
            with FreshProcesses(mode="process", python=setup.python) as one:
                ended = one.run(job, timeout)
        if ended.timed_out and by_budget:
            setup.budget_ended = rel_dir
            raise BudgetSpent(f"the budget ended during {rel_dir}: killed after {timeout:.0f} s")
        exit_code = ended.exit_code
        if ended.lost is not None:
            error = ended.lost
        elif ended.timed_out:
            error = f"hung: killed after {timeout:g} s"
        process_ns = time.perf_counter_ns() - t0
        try:
            with open(err_path, "rb") as f:
                stderr = f.read().decode(errors="replace")
        except OSError:
            stderr = ""
        fps = None
        if os.path.exists(record):
            try:
                fps = fpmod.load(record)
            except (OSError, msgspec.DecodeError):
                fps = None
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    receipt = None
    path = os.path.join(out_dir, "receipt.json")
    if exit_code == 0 and os.path.exists(path):
        from ...ingest.receipt import load_receipt

        receipt = load_receipt(path)
    if error is None and exit_code != 0:
        if exit_code is not None and exit_code < 0:
            error = f"crashed: killed by signal {signal.Signals(-exit_code).name}"
        else:
            lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith("seamscope: wrote")]
            error = f"exit {exit_code}: " + (lines[-1].strip() if lines else "no message")
    fig = figures_of(label, receipt, exit_code, error, process_ns,
                     os.path.relpath(path, setup.out) if receipt is not None else None,
                     fps.script_ns if fps is not None else None)
    if fps is not None:  # the run's own CPU time and preemptions (what load did to it)
        fig = msgspec.structs.replace(fig, cpu_ns=fps.cpu_ns, preempted=fps.preempted)
    return Outcome(fig, receipt, stderr, fps if fingerprint else None)


def _timeout(setup: Setup, rel_dir: str) -> tuple[float | None, bool]:
    """The run's timeout: ``--timeout``, or the budget left when that is shorter (then True)."""
    if setup.deadline is None:
        return setup.timeout, False
    left = setup.deadline - setup.clock()
    if left <= 0:
        setup.budget_ended = rel_dir
        raise BudgetSpent(f"the budget ended before {rel_dir}")
    if setup.timeout is None or left < setup.timeout:
        return left, True
    return setup.timeout, False


PRELOAD = ("torch", "torch._dynamo", "seamscope.cli", "seamscope.analyze.findings", "seamscope.analyze.receipt",
           "seamscope.analyze.summary", "seamscope.capture.remedies", "seamscope.capture.runner",
           "seamscope.capture.session", "seamscope.commands._common", "seamscope.commands.run",
           "seamscope.ingest.receipt", "seamscope.render.receipt_json", "seamscope.render.terminal",
           "seamscope.experiments.trials.fingerprint", "seamscope.experiments.remedy_plan", "seamscope.analyze.causes",
           "seamscope.analyze.headline", "seamscope.capture.persist", "seamscope.experiments.workload_run",
           "seamscope.render.html", "seamscope.capture.adapter.compile_imports")
"""What the fork server imports once: what every child's ``seamscope run`` imports, and what its
first compilation imports (a warm-up by name; the children run the command line)."""


def fresh_processes(python: str) -> FreshProcesses:
    """Each run forked from a server that imported torch once, unless ``fork`` is missing or
    ``SEAMSCOPE_TRIALS_ISOLATION=process`` (then each run a new interpreter)."""
    return FreshProcesses(preload=PRELOAD, mode=default_mode(os.environ.get("SEAMSCOPE_TRIALS_ISOLATION")),
                          python=python)


def figures_of(label: str, receipt: Receipt | None, exit_code: int | None, error: str | None, process_ns: int,
               rel: str | None, script_ns: int | None) -> RunFigures:
    if receipt is None:
        return RunFigures(label=label, ok=False, exit_code=exit_code, error=error or "no receipt written",
                          process_ns=process_ns, script_ns=script_ns)
    s = receipt.summary
    steady = next((p for p in s.phases if p.phase == "steady"), None)
    total = sum(p.wall_ns for p in s.phases)
    return RunFigures(
        label=label, ok=True, exit_code=exit_code, error=None, process_ns=process_ns, script_ns=script_ns,
        receipt=rel, receipt_sha256=receipt.receipt_sha256, calls=s.call_count, total_ns=total,
        compile_ns=s.compile_ns, steady_calls=steady.calls if steady else 0,
        steady_median_ns=steady.median_ns if steady and steady.calls else None,
        steady_p90_ns=steady.p90_ns if steady and steady.calls else None,
        breaks=s.break_site_count, recompiles=s.recompile_count, fallbacks=s.fallback_count,
        per_call=[CallTime(index=c.index, phase=c.phase, wall_ns=c.wall_ns, family=c.family)
                  for c in receipt.ledger.calls],
        frame_status=frame_status(receipt), problems=compile_problems(receipt),
        unmatched_marks=unmatched_marks(receipt), size_guards=size_guards(receipt),
    )


def size_guards(receipt: Receipt) -> list[str]:
    """The distinct size and stride guards that failed in the run, up to twenty."""
    from ...analyze.findings_churn import split_guards  # a variant's reason may hold several guards

    out: list[str] = []
    for c in receipt.ledger.compilations:
        for text in (t for g in c.failed_guards for t in split_guards(g)):
            if " mismatch at index " in text and text not in out and len(out) < 20:
                out.append(text)
    return out


def _frame(c: Any) -> str:
    return f"{c.frame_name} ({os.path.basename(c.file)}:{c.line})"


def frame_status(receipt: Receipt) -> dict[str, int]:
    """Compilations counted by frame and status (compile ids differ between runs; frames do not)."""
    out: dict[str, int] = {}
    for c in receipt.ledger.compilations:
        key = f"{_frame(c)} {c.status}"
        out[key] = out.get(key, 0) + 1
    return out


def compile_problems(receipt: Receipt) -> list[str]:
    """``0/2 failed: could not guard on data-dependent expression ... at FILE:LINE`` for each
    compilation that failed or fell back."""
    out = []
    for c in receipt.ledger.compilations:
        if c.status not in ("failed", "fallback"):
            continue
        reason = (c.fail_reason or c.fail_type or "").strip().splitlines()
        text = reason[0].strip() if reason else ""
        if len(text) > 160:
            text = text[:157] + "..."
        out.append(f"{c.compile_id} {c.status}{': ' + text if text else ''} in {_frame(c)}")
    return out


UNMATCHED = "--mark-dynamic matched no source: "


def unmatched_marks(receipt: Receipt) -> list[str]:
    """The marks the run's decision note says matched nothing (see ``remedies._note_marks``)."""
    note = receipt.decision.note if receipt.decision is not None and receipt.decision.note else ""
    for part in note.split("; "):
        if part.startswith(UNMATCHED):
            return [s for s in part[len(UNMATCHED):].split(" | ") if s]
    return []
