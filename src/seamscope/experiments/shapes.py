"""The shape study: every shape policy measured on the user's own length trace.

Each policy runs in a fresh process, so no Dynamo or inductor cache carries over between them.
Start-up is paid once: a *zygote* process (``shapes_worker --serve``) imports torch and the
workload's module, compiles nothing, and forks one child per policy; a child is as fresh as a new
interpreter as far as Dynamo is concerned, without its seconds of imports. Where ``fork`` is not
available every policy runs in its own interpreter instead.

This module is the parent's side and never imports torch: parsing the trace and the policies,
driving the workers, and the recommendation, which is derived from the measured totals only.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import SeamscopeError, UnusableInput, UserCodeFailed
from ..model.canonical import round_float
from ..model.shapes import PolicyResult, Recommendation, ShapeSpec, ShapeStudy
from .fresh import Ended, FreshProcesses, Job, default_mode

DEFAULT_POLICIES = ("static", "auto", "dynamic", "mark_dynamic", "pow2")
KINDS = ("static", "auto", "dynamic", "mark_dynamic", "pow2", "buckets")


# --- policies ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """A shape policy: what ``torch.compile`` is told and how a request's length is padded."""

    name: str
    kind: str
    sizes: tuple[int, ...] = ()
    """``buckets``: the sizes, ascending."""
    dim: int | None = None
    """``mark_dynamic:DIM:MIN:MAX``: the dim to mark (None: the study's ``--dim``)."""
    lo: int | None = None
    hi: int | None = None

    def target(self, length: int) -> int:
        """The length the compiled callable is called with. A length above the largest bucket
        runs unpadded (and the study says so)."""
        if self.kind == "pow2":
            return 1 << max(0, length - 1).bit_length() if length > 0 else 0
        if self.kind == "buckets":
            for s in self.sizes:
                if s >= length:
                    return s
        return length

    @property
    def pads(self) -> bool:
        return self.kind in ("pow2", "buckets")

    def compile_options(self) -> dict[str, Any]:
        """Padding policies keep the default ``torch.compile`` (what a user who pads gets): the
        first bucket compiles specialised, the second makes the length dynamic (automatic
        dynamic), so a frame compiles at most once per bucket. ``static`` is ``dynamic=False``."""
        if self.kind == "static":
            return {"dynamic": False}
        if self.kind == "dynamic":
            return {"dynamic": True}
        return {}

    def in_range(self, length: int) -> bool:
        return (self.lo is None or length >= self.lo) and (self.hi is None or length <= self.hi)


def parse_policy(text: str) -> Policy:
    t = text.strip()
    head, _, rest = t.partition(":")
    if head not in KINDS:
        raise UnusableInput(f"unknown policy {text!r}; known: {', '.join(KINDS)} "
                            "(mark_dynamic[:MIN:MAX], buckets:64,128,...)")
    if head == "buckets":
        parts = [p.strip() for p in rest.split(",") if p.strip()]
        if not parts:
            raise UnusableInput(f"policy {text!r}: buckets need sizes, e.g. buckets:64,128,256")
        sizes = [_positive(p, f"policy {text!r}: bucket size") for p in parts]
        return Policy(t, "buckets", tuple(sorted(set(sizes))))
    if head == "mark_dynamic":
        nums = [p for p in rest.split(":")] if rest else []
        vals = [_positive(p, f"policy {text!r}: mark_dynamic value", allow_zero=True) for p in nums]
        if len(vals) == 0:
            return Policy(t, "mark_dynamic")
        if len(vals) == 1:
            return Policy(t, "mark_dynamic", dim=vals[0])
        if len(vals) == 2:
            lo, hi = vals
            dim = None
        elif len(vals) == 3:
            dim, lo, hi = vals
        else:
            raise UnusableInput(f"policy {text!r}: expected mark_dynamic, mark_dynamic:MIN:MAX or "
                                "mark_dynamic:DIM:MIN:MAX")
        if lo > hi:
            raise UnusableInput(f"policy {text!r}: MIN {lo} is above MAX {hi}")
        return Policy(t, "mark_dynamic", dim=dim, lo=lo, hi=hi)
    if rest:
        raise UnusableInput(f"policy {text!r}: {head} takes no arguments")
    return Policy(t, head)


def split_policies(values: Sequence[str]) -> list[str]:
    """``static,auto,buckets:64,128,pow2`` → ``[static, auto, buckets:64,128, pow2]``: a bare
    number after a ``buckets:`` item is one more bucket size. Spaces and ``;`` also separate."""
    out: list[str] = []
    for v in values:
        for tok in re.split(r"[\s;,]+", v):
            if not tok:
                continue
            if tok.isdigit() and out and out[-1].startswith("buckets:"):
                out[-1] += "," + tok
            else:
                out.append(tok)
    return out


def _positive(text: str, what: str, allow_zero: bool = False) -> int:
    try:
        v = int(text.strip())
    except ValueError:
        raise UnusableInput(f"{what} {text.strip()!r} is not an integer") from None
    if v < 0 or (v == 0 and not allow_zero):
        raise UnusableInput(f"{what} {v} must be {'>= 0' if allow_zero else '> 0'}")
    return v


# --- the length trace ----------------------------------------------------------------------------


def parse_lengths(values: Sequence[Any], where: str = "--lengths") -> list[int]:
    """Positive integers; anything else is unusable input naming the offending item."""
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise UnusableInput(f"{where}: item {i + 1} ({v!r}) is not an integer length")
        if isinstance(v, str):
            s = v.strip()
            if not re.fullmatch(r"[+-]?\d+", s):
                raise UnusableInput(f"{where}: item {i + 1} ({s!r}) is not an integer length")
            v = int(s)
        if v <= 0:
            raise UnusableInput(f"{where}: item {i + 1} is {v}; lengths must be positive")
        out.append(int(v))
    if not out:
        raise UnusableInput(f"{where}: no lengths given")
    return out


def lengths_from_text(text: str) -> list[int]:
    return parse_lengths([p for p in text.split(",") if p.strip()] if text.strip() else [])


def lengths_from_file(path: str) -> list[int]:
    """One length a line (blank lines and ``#`` comments skipped), or a JSON list."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UnusableInput(f"cannot read lengths file {path}: {e.strerror or e}") from None
    if text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise UnusableInput(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        if not isinstance(data, list):
            raise UnusableInput(f"{path}: expected a JSON list of lengths")
        return parse_lengths(data, path)
    items = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    return parse_lengths([x for x in items if x], path)


# --- the recommendation --------------------------------------------------------------------------


def _eligible(p: PolicyResult) -> str | None:
    """Why a policy can never be recommended, or None."""
    if p.status != "ok":
        return f"{p.policy}: {p.status}" + (f" ({p.error})" if p.error else "")
    if p.correctness in ("above_tolerance", "boundary_bug"):
        w = p.worst
        where = f" at length {w.length}, {w.path}: {w.reason}" if w else ""
        return f"{p.policy}: outputs differ from unpadded eager ({p.correctness.replace('_', ' ')}){where}"
    return None


def recommend(results: Sequence[PolicyResult], n_calls: int) -> Recommendation:
    """Lowest total request cost over the trace wins; the flip point comes from each policy's
    one-time cost (cold calls) and steady cost per call: cost(N) = one_time + N * steady."""
    excluded = [why for p in results if (why := _eligible(p)) is not None]
    ok = sorted((p for p in results if _eligible(p) is None), key=lambda p: (p.total_ns, p.policy))
    if not ok:
        return Recommendation(policy=None, runner_up=None, margin_ns=None, margin_fraction=None, flip=None,
                              excluded=excluded, text="no policy ran the whole trace correctly; nothing to recommend")
    best = ok[0]
    second = ok[1] if len(ok) > 1 else None
    margin = second.total_ns - best.total_ns if second else None
    frac = round_float(margin / best.total_ns) if margin is not None and best.total_ns > 0 else None
    flip = _flip(best, ok[1:], n_calls)
    text = f"{best.policy}: lowest total request cost over this trace ({_fmt_s(best.total_ns)} for {n_calls} calls)"
    if second is not None and margin is not None:
        text += f"; runner-up {second.policy} costs {_fmt_s(margin)} more"
        if frac is not None:
            text += f" (+{frac * 100:.0f}%)"
    if flip is not None:
        text += f"; {flip[3]}"
    elif second is not None and best.steady_per_call_ns is not None:
        text += f"; {best.policy} stays cheapest at any worker lifetime with this length mix"
    return Recommendation(
        policy=best.policy, runner_up=second.policy if second else None, margin_ns=margin, margin_fraction=frac,
        flip=flip[3] if flip else None, flip_calls=flip[0] if flip else None, flip_policy=flip[1] if flip else None,
        flip_direction=flip[2] if flip else None, excluded=excluded, text=text,  # type: ignore[arg-type]
    )


def _flip(best: PolicyResult, others: Sequence[PolicyResult], n: int) -> tuple[int, str, str, str] | None:
    """The nearest worker lifetime (in calls, same length mix) at which another policy overtakes."""
    if best.steady_per_call_ns is None or best.one_time_ns is None:
        return None
    longer: tuple[float, PolicyResult] | None = None
    shorter: tuple[float, PolicyResult] | None = None
    for p in others:
        if p.steady_per_call_ns is None or p.one_time_ns is None:
            continue
        ds = best.steady_per_call_ns - p.steady_per_call_ns
        do = p.one_time_ns - best.one_time_ns
        if ds > 0 and do > 0:  # p is cheaper warm, dearer cold: wins in long-lived workers
            n_star = do / ds
            if n_star > n and (longer is None or n_star < longer[0]):
                longer = (n_star, p)
        elif ds < 0 and do < 0:  # p is cheaper cold, dearer warm: wins in short-lived workers
            n_star = do / ds
            if n_star < n and (shorter is None or n_star > shorter[0]):
                shorter = (n_star, p)
    if longer is not None:
        calls = math.ceil(longer[0])
        return calls, longer[1].policy, "longer", (
            f"with workers living longer than {calls} calls (this length mix), {longer[1].policy} wins")
    if shorter is not None:
        calls = max(1, math.floor(shorter[0]))
        return calls, shorter[1].policy, "shorter", (
            f"with workers living fewer than {calls} calls (this length mix), {shorter[1].policy} wins")
    return None


def _fmt_s(ns: int) -> str:
    return f"{ns / 1e9:.3f} s" if abs(ns) >= 1e7 else f"{ns / 1e6:.2f} ms"


# --- driving the workers -------------------------------------------------------------------------


class WorkerSpec(msgspec.Struct, kw_only=True):
    """What one worker is asked to do (JSON over a pipe or in a file)."""

    kind: str  # "preflight" | "policy"
    workload: str
    trace: list[int]
    dim: int | None = None
    policy: str = ""
    refs: str = ""
    """The eager references file the preflight wrote (policy workers compare against it)."""
    result: str = ""
    log: str = ""
    recompile_limit: int | None = None
    delay_ns: int = 0
    """Tests only: sleep this long in every request (an artificially slow policy)."""


class Preflight(msgspec.Struct, kw_only=True):
    ok: bool
    exit_code: int = 0
    error: str | None = None
    dim: int = 1
    backend: str = ""
    device: str = "cpu"
    rtol: float | None = None
    atol: float | None = None
    max_length: int | None = None
    warnings: list[str] = []


@dataclass
class Study:
    """What the study has measured so far (results arrive one policy at a time)."""

    spec: ShapeSpec
    results: list[PolicyResult] = field(default_factory=list)
    ledgers: dict[str, bytes] = field(default_factory=dict)
    """Each policy's receipt JSON (its own ledger), by policy name."""
    error: SeamscopeError | None = None
    warnings: list[str] = field(default_factory=list)
    t0: int = field(default_factory=time.perf_counter_ns)

    def section(self) -> ShapeStudy:
        rec = recommend(self.results, len(self.spec.trace)) if self.results else None
        return ShapeStudy(spec=self.spec, policies=list(self.results), recommendation=rec,
                          wall_ns=time.perf_counter_ns() - self.t0,
                          error=str(self.error) if self.error else None, warnings=list(self.warnings))


PRELOAD = ("torch", "torch._dynamo", "seamscope.capture.session", "seamscope.experiments.differential",
           "seamscope.experiments.ladder", "seamscope.experiments.probe", "seamscope.experiments.shapes_worker",
           "seamscope.capture.adapter.compile_imports")
"""What the zygote imports once, before any fork (the workload's module is imported by ``warm``)."""


def _runner(workload: str, mode: str, log: str) -> FreshProcesses:
    """The study's fresh processes: a zygote that imported torch and the workload's module, or a
    new interpreter per job."""
    return FreshProcesses(preload=PRELOAD, warm=("seamscope.experiments.shapes_worker:preload", workload),
                          mode="fork" if mode == "fork" else "process", log=log)


def _job(spec: WorkerSpec) -> Job:
    return Job(entry="seamscope.experiments.shapes_worker:run_job", arg=msgspec.to_builtins(spec), log=spec.log)


def _tail(path: str, n: int = 3) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.rstrip() for ln in f.read().splitlines() if ln.strip()]
        return " | ".join(lines[-n:])[-500:]
    except OSError:
        return ""


def policy_slug(policy: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", policy).strip("_") or "policy"


def _checked(
    trace: Sequence[int], policies: Sequence[str], repeat: int, dim: int | None
) -> tuple[list[int], list[Policy]]:
    """The trace repeated and the policies parsed: any unusable option refused before anything runs."""
    if repeat < 1:
        raise UnusableInput(f"--repeat must be >= 1, got {repeat}")
    full = list(parse_lengths(list(trace))) * repeat
    parsed = [parse_policy(p) for p in (list(policies) or list(DEFAULT_POLICIES))]
    if len({p.name for p in parsed}) != len(parsed):
        raise UnusableInput("a policy is listed twice")
    if dim is not None and dim < 0:
        raise UnusableInput(f"--dim {dim}: must be >= 0")
    return full, parsed


def _preflight(runner: Any, spec: WorkerSpec, workdir: str) -> Preflight:
    """Eager on every distinct length in a process of its own; a failure there is the program's."""
    reply = runner.run(_job(spec))
    pre = _read(spec.result, Preflight)
    if pre is None:
        tail = _tail(os.path.join(workdir, "preflight.log"))
        raise UserCodeFailed(f"the preflight process died ({_reply_text(reply)})" + (f": {tail}" if tail else ""))
    if not pre.ok:
        if pre.exit_code == 2:
            raise UnusableInput(pre.error or "unusable input")
        raise UserCodeFailed(pre.error or "the workload failed eagerly")
    return pre


def _policy_run(runner: Any, spec: WorkerSpec, pol: Policy, workdir: str, slug: str) -> PolicyResult:
    """One policy in its own process; a process that died is a ``crashed`` result, never a raise."""
    t0 = time.perf_counter_ns()
    reply = runner.run(_job(spec))
    wall = time.perf_counter_ns() - t0
    res = _read(spec.result, PolicyResult)
    if res is None:
        res = PolicyResult(
            policy=pol.name,
            kind=pol.kind,  # type: ignore[arg-type]
            compile_options={},
            status="crashed",
            error=f"the policy's process died ({_reply_text(reply)}): " + _tail(os.path.join(workdir, f"{slug}.log")),
        )
    return msgspec.structs.replace(res, process_wall_ns=wall)


def run_study(
    workload: str,
    trace: Sequence[int],
    policies: Sequence[str],
    *,
    repeat: int = 1,
    dim: int | None = None,
    workdir: str,
    progress: Callable[[str], None] | None = None,
    recompile_limit: int | None = None,
    delays: dict[str, int] | None = None,
    isolation: str | None = None,
) -> Study:
    """Validate, preflight (eager references, bad input found before any policy runs), then each
    policy in its own fresh process. Never raises for a problem met after a policy was measured:
    the error is kept on the returned study, with every result measured before it."""
    say = progress or (lambda m: None)
    full, parsed = _checked(trace, policies, repeat, dim)
    os.makedirs(workdir, exist_ok=True)
    mode = isolation or os.environ.get("SEAMSCOPE_SHAPES_ISOLATION") or default_mode()
    spec = ShapeSpec(workload=workload, backend="", dim=dim if dim is not None else -1, trace=full, repeat=repeat,
                     policies=[p.name for p in parsed], recompile_limit=recompile_limit,
                     isolation="fork" if mode == "fork" else "process")
    study = Study(spec=spec)
    tmp = tempfile.mkdtemp(prefix="seamscope-shapes-")
    refs = os.path.join(tmp, "refs.pt")
    runner = _runner(workload, mode, os.path.join(workdir, "zygote.log"))
    try:
        say(f"preflight: eager on {len(set(full))} distinct lengths")
        pre = _preflight(runner, WorkerSpec(
            kind="preflight", workload=workload, trace=full, dim=dim, refs=refs,
            result=os.path.join(tmp, "preflight.json"), log=os.path.join(workdir, "preflight.log"),
            recompile_limit=recompile_limit), workdir)
        study.spec = spec = msgspec.structs.replace(spec, dim=pre.dim, backend=pre.backend, device=pre.device,
                                                    rtol=pre.rtol, atol=pre.atol)
        study.warnings += pre.warnings
        for i, pol in enumerate(parsed):
            say(f"policy {i + 1}/{len(parsed)}: {pol.name}")
            slug = policy_slug(pol.name)
            res = _policy_run(runner, WorkerSpec(
                kind="policy", workload=workload, trace=full, dim=pre.dim, policy=pol.name, refs=refs,
                result=os.path.join(tmp, f"{slug}.json"), log=os.path.join(workdir, f"{slug}.log"),
                recompile_limit=recompile_limit, delay_ns=(delays or {}).get(pol.name, 0)), pol, workdir, slug)
            study.results.append(res)
            led_path = os.path.join(tmp, f"{slug}.receipt.json")
            if os.path.exists(led_path):
                with open(led_path, "rb") as f:
                    study.ledgers[pol.name] = f.read()
            say(f"  {pol.name}: {res.status}, {res.compile_count} compiles, total {_fmt_s(res.total_ns)}")
            if res.status == "unusable" and study.error is None:
                study.error = UnusableInput(f"policy {pol.name}: {res.error}")
    except KeyboardInterrupt:
        study.error = _Interrupted("interrupted; what was measured is written")
    except SeamscopeError as e:
        study.error = e
    finally:
        runner.close()
        _rmtree(tmp)
    return study


class _Interrupted(SeamscopeError):
    exit_code = 130


def _reply_text(reply: Ended) -> str:
    return "zygote_died" if reply.lost is not None else reply.text()


def _read(path: str, typ: Any) -> Any:
    try:
        with open(path, "rb") as f:
            return msgspec.json.decode(f.read(), type=typ)
    except (OSError, msgspec.DecodeError):
        return None


def _rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


# --- the receipt ---------------------------------------------------------------------------------


def policy_receipts(study: Study) -> dict[str, Any]:
    """Each measured policy's own receipt (its own ledger), by policy name."""
    from ..model.receipt import Receipt

    out = {}
    for name, raw in study.ledgers.items():
        try:
            out[name] = msgspec.json.decode(raw, type=Receipt)
        except msgspec.DecodeError:
            continue
    return out


def study_receipt(study: Study, command: list[str] | None = None) -> Any:
    """The study's receipt: the ``shapes`` section, over the recommended policy's ledger (each
    policy's own ledger is its own receipt under ``policies/``)."""
    import platform

    from .._version import __version__
    from ..analyze.receipt import make_receipt
    from ..model.builder import LedgerBuilder
    from ..model.ledger import Environment, RunInfo
    from ..model.receipt import Decision

    section = study.section()
    rec = section.recommendation
    receipts = policy_receipts(study)
    pick = rec.policy if rec is not None and rec.policy in receipts else next(iter(receipts), None)
    absent = ["one ledger per receipt: the other policies' ledgers are in policies/<policy>/receipt.json"]
    if pick is not None:
        ledger = receipts[pick].ledger
        run = msgspec.structs.replace(
            ledger.run, source="shapes", command=list(command or ledger.run.command),
            absent=list(ledger.run.absent) + [f"this ledger is the {pick} policy's run; " + absent[0]])
        ledger = msgspec.structs.replace(ledger, run=run)
    else:
        ledger = LedgerBuilder(
            RunInfo(source="shapes", command=list(command or []), absent=["no policy produced a ledger"]),
            Environment(seamscope_version=__version__, python_version=platform.python_version()),
        ).build()
    decision = Decision(
        note=rec.text if rec is not None else None,
        intervention=f"shape policy {rec.policy}" if rec is not None and rec.policy else None,
        call_families={str(n): study.spec.trace.count(n) for n in sorted(set(study.spec.trace))},
        warmup_policy="cold = calls in which something compiled; steady (warm) = cache hits only; "
                      "fallback = after a recompile-limit hit",
    )
    return make_receipt(ledger, decision, shapes=section)
