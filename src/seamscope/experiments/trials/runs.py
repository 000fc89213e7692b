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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ...analyze.classify import first_line
from ...analyze.display import cut
from ...analyze.findings_churn import cause_guards, guard_pattern, split_guards
from ...model.receipt import Receipt
from ...model.trials import CallTime, RunFigures
from ..fresh import FreshProcesses, Job, default_mode
from . import fingerprint as fpmod
from .budget import Budget, BudgetSpent

DEFAULT_MAX_REPEAT = 6
"""``--max-repeat`` when not given: 6 repetitions in all for an undecided candidate (1 with ``--repeat 1``)."""

REASON_LIMIT = 160
"""A break's reason is kept as its first meaningful line, cut here (PyTorch's reasons run to a page)."""


def default_max_repeat(repeat: int) -> int:
    """The command's ``--max-repeat`` when the user gave none."""
    return 1 if repeat == 1 else max(repeat, DEFAULT_MAX_REPEAT)


@dataclass(frozen=True)
class TrialSpec:
    """What the user asked for: the trial's inputs, fixed before it starts (nothing writes here)."""

    script: str
    args: Sequence[str]
    out: str
    seed: int = 0
    repeat: int = 3
    max_repeat: int | None = None
    """Repetitions an undecided candidate may get in all; None: ``repeat``, no more. Never below
    ``repeat`` (resolved here, once)."""
    timeout: float | None = None
    """``--timeout``: seconds before a run counts as hung."""
    budget_s: float | None = None
    """``--budget`` in seconds (:class:`.budget.Budget` owns what follows from it)."""
    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=dict)
    baseline_flags: tuple[str, ...] = ()
    """The baseline's flags (a run given none gets them): ``--stance force_eager`` where the script
    fails compiled (:mod:`.split`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_repeat", max(self.repeat, self.max_repeat or self.repeat))

    @property
    def most(self) -> int:
        """The repetitions an undecided candidate may get in all (``max_repeat``, resolved)."""
        return self.max_repeat or self.repeat


@dataclass(frozen=True)
class Services:
    """What the trial uses but does not own: the clock, the progress line, where processes come from."""

    clock: Callable[[], float] = time.monotonic
    """Seconds, for the budget and the ETA."""
    progress: Callable[[str], None] | None = None
    processes: FreshProcesses | None = None
    """Where each run's fresh process comes from (None: each run a new interpreter)."""


@dataclass(frozen=True)
class Runner:
    """What one run needs: the inputs, the process source, and the budget (its timeout)."""

    spec: TrialSpec
    budget: Budget
    processes: FreshProcesses | None = None


def run_command(spec_flags: list[str], spec: TrialSpec, out_dir: str) -> list[str]:
    """The ``seamscope run ...`` line of one run (what the table shows, without the output flags)."""
    return ["seamscope", "run", "--out", out_dir, *spec_flags, "--seed", str(spec.seed), spec.script,
            *(["--", *spec.args] if spec.args else [])]


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
    outside: str | None = None
    """Why the run ended from outside the script (a signal seamscope did not send, the machine
    killing it), or None: such a run says nothing of the candidate (:func:`outside_cause`)."""


OUTSIDE_EXITS = {128 + signal.SIGHUP: "SIGHUP", 128 + signal.SIGINT: "SIGINT", 128 + signal.SIGTERM: "SIGTERM"}
"""The exit codes ``seamscope run`` ends with after a signal (it writes what it measured first)."""
OUTSIDE_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL")
"""Signals a script does not send itself when it fails (a crash is SIGSEGV, SIGABRT, SIGBUS...)."""


def outside_cause(exit_code: int | None, lost: str | None) -> str | None:
    """Why a run ended from outside, or None (it finished, hung, or its own script failed).
    seamscope sends a run one signal only, SIGKILL after its timeout, and that run counts as
    hung (``exit_code`` None); any other SIGKILL came from the machine (the kernel's
    out-of-memory killer) or a user, and SIGTERM, SIGHUP, SIGINT or SIGQUIT from outside
    (``seamscope run`` exits 128 + the signal after writing what it measured)."""
    if lost is not None:
        return lost
    if exit_code is None:
        return None
    name = OUTSIDE_EXITS.get(exit_code)
    if name is None and exit_code < 0:
        name = signal.Signals(-exit_code).name if -exit_code in signal.valid_signals() else None
        if name not in OUTSIDE_SIGNALS:
            return None
    if name is None:
        return None
    if name == "SIGKILL":
        return "killed by SIGKILL, not sent by seamscope (the machine: out of memory, or a user)"
    return f"ended by {name}, not sent by seamscope"


def _command(runner: Runner, flags: list[str], out_dir: str, record: str, fingerprint: bool,
             extra: Any, probe: bool = False) -> list[str]:
    spec = runner.spec
    argv = ["run", "--quiet", "--no-html", "--out", out_dir, *(extra.args if extra else []), *flags,
            "--seed", str(spec.seed), "--record-out", record, *(["--fingerprint"] if fingerprint else []),
            *(["--guard-probe"] if probe and fingerprint else []), spec.script]
    return argv + (["--", *spec.args] if spec.args else [])


def _env(spec: TrialSpec, extra: Any, cache: str) -> dict[str, str]:
    env_set = dict(spec.env)
    env_set.update(extra.env if extra else {})
    inductor_dir = extra.cache_dir if extra and extra.cache_dir else cache
    env_set["TORCHINDUCTOR_CACHE_DIR"] = inductor_dir
    env_set["TRITON_CACHE_DIR"] = os.path.join(inductor_dir, "triton")
    return env_set


def run_once(runner: Runner, flags: list[str], rel_dir: str, label: str, fingerprint: bool = False,
             extra: Any = None, probe: bool = False) -> Outcome:
    """One fresh process with its own empty inductor cache; a crash or hang is its result.
    ``extra`` (:class:`.cache.RunExtra`): a persistent cache directory instead (kept), more
    environment, words before the flags. ``probe``: with ``fingerprint``, the check run of an
    unsafe guard setting (:mod:`.guard_check`). Raises :class:`.budget.BudgetSpent` when the
    budget ended before the run or killed it."""
    spec = runner.spec
    flags = flags or list(spec.baseline_flags)
    out_dir = os.path.join(spec.out, rel_dir)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="seamscope-try-cache-")
    record = os.path.join(out_dir, "fingerprints.json")
    if not fingerprint:
        record = os.path.join(cache, "timing.json")  # only the script's own time is kept
    t0 = time.perf_counter_ns()
    error = None
    err_path = os.path.join(cache, "stderr.txt")
    job = Job(entry="seamscope.cli:main", arg=_command(runner, flags, out_dir, record, fingerprint, extra, probe),
              log=err_path, stdout=False, env=_env(spec, extra, cache), unset=["TORCH_COMPILE_DYNAMIC_SOURCES"],
              cwd=os.getcwd())
    try:  # the cache folder goes however the run ends: a hang, Ctrl-C, SIGTERM, the budget
        timeout, by_budget = runner.budget.timeout(rel_dir)
        if runner.processes is not None:
            ended = runner.processes.run(job, timeout)
        else:
            with FreshProcesses(mode="process", python=spec.python) as one:
                ended = one.run(job, timeout)
        if ended.timed_out and by_budget:
            raise BudgetSpent(f"the budget ended during {rel_dir}: killed after {timeout:.0f} s", rel_dir)
        exit_code = ended.exit_code
        if ended.lost is not None:
            error = ended.lost
        elif ended.timed_out:
            error = f"hung: killed after {timeout:g} s"
        process_ns = time.perf_counter_ns() - t0
        stderr = _read(err_path)
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
        error = _error_text(exit_code, stderr)
    fig = figures_of(label, receipt, exit_code, error, process_ns,
                     os.path.relpath(path, spec.out) if receipt is not None else None,
                     fps.script_ns if fps is not None else None)
    if fps is not None:  # the run's own CPU time and preemptions (what load did to it)
        fig = msgspec.structs.replace(fig, cpu_ns=fps.cpu_ns, preempted=fps.preempted)
    return Outcome(fig, receipt, stderr, fps if fingerprint else None, outside_cause(exit_code, ended.lost))


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _error_text(exit_code: int | None, stderr: str) -> str:
    if exit_code is not None and exit_code < 0:
        return f"crashed: killed by signal {signal.Signals(-exit_code).name}"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip() and not ln.startswith("seamscope: wrote")]
    return f"exit {exit_code}: " + (lines[-1].strip() if lines else "no message")


PRELOAD = ("torch", "torch._dynamo", "seamscope.cli", "seamscope.analyze.findings", "seamscope.analyze.receipt",
           "seamscope.analyze.summary", "seamscope.capture.remedies", "seamscope.capture.runner",
           "seamscope.capture.session", "seamscope.commands._common", "seamscope.commands.run",
           "seamscope.ingest.receipt", "seamscope.render.receipt_json", "seamscope.render.terminal",
           "seamscope.experiments.trials.fingerprint", "seamscope.experiments.remedy_plan", "seamscope.analyze.causes",
           "seamscope.analyze.headline", "seamscope.capture.persist", "seamscope.experiments.workload_run",
           "seamscope.render.html", "seamscope.capture.adapter.compile_imports")
"""What the fork server imports once: what every child's ``seamscope run`` imports, and what its
first compilation imports (a warm-up by name; the children run the command line)."""


def fresh_processes(python: str, target: str | None = None) -> FreshProcesses:
    """Each run forked from a server that imported torch once, and the libraries ``target``'s
    script imports (:mod:`.libraries`), unless ``fork`` is missing or
    ``SEAMSCOPE_TRIALS_ISOLATION=process`` (then each run a new interpreter)."""
    warm = None if target is None else ("seamscope.experiments.trials.libraries:import_libraries", target)
    return FreshProcesses(preload=PRELOAD, warm=warm,
                          mode=default_mode(os.environ.get("SEAMSCOPE_TRIALS_ISOLATION")), python=python)


def figures_of(label: str, receipt: Receipt | None, exit_code: int | None, error: str | None, process_ns: int,
               rel: str | None, script_ns: int | None) -> RunFigures:
    if receipt is None:
        return RunFigures(label=label, ok=False, exit_code=exit_code, error=error or "no receipt written",
                          process_ns=process_ns, script_ns=script_ns)
    s = receipt.summary
    steady = next((p for p in s.phases if p.phase == "steady"), None)
    total = sum(p.wall_ns for p in s.phases)
    causes = recompile_causes(receipt)
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
        cause_guards=list(causes), cause_counts=causes,
        break_sites=sorted({b.site_id for b in receipt.ledger.break_sites}),
        break_reasons={b.site_id: cut(first_line(b.reason), REASON_LIMIT) for b in receipt.ledger.break_sites},
    )


def size_guards(receipt: Receipt) -> list[str]:
    """The distinct size and stride guards that failed in the run, up to twenty, each on its own
    (a variant's reason lists every guard that failed against it: ``0/0: a; b``)."""
    out: list[str] = []
    for c in receipt.ledger.compilations:
        for text in (g for entry in c.failed_guards for g in split_guards(entry)):
            if " mismatch at index " in text and text not in out and len(out) < 20:
                out.append(text)
    return out


def recompile_causes(receipt: Receipt) -> dict[str, int]:
    """The guards that explained the run's recompiles (:func:`~...analyze.findings_churn.cause_guards`,
    the one rule), one per distinct ``(pattern, subject)``, up to twenty, each with how many
    recompiles it explained."""
    text: dict[tuple[str, str], str] = {}
    count: dict[tuple[str, str], int] = {}
    for c in receipt.ledger.compilations:
        keys: dict[tuple[str, str], str] = {}
        for g in cause_guards(list(c.failed_guards)):
            pattern, subject, _ = guard_pattern(g)
            keys.setdefault((pattern, subject), g.split("#", 1)[0].strip())
        for key, t in keys.items():
            if key in text or len(text) < 20:
                text.setdefault(key, t)
                count[key] = count.get(key, 0) + 1
    return {text[k]: count[k] for k in text}


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
