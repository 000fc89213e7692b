"""Fakes and helpers shared by the tests: fake programs, ledgers and receipts (torch-free, on the
fake event source), hostile text, and the five accounting mutations.

Nothing here imports torch, so the torch-free tests that use it run without it.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

import msgspec
import pytest

from seamscope import _native
from seamscope.analyze.diff import attach_comparison
from seamscope.analyze.receipt import make_receipt
from seamscope.model.builder import LedgerBuilder
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, fake_environment, play
from seamscope.model.ledger import Compilation, Ledger, RunInfo
from seamscope.model.probe import EvidenceRow, ProbeResult, ProbeSpec
from seamscope.model.receipt import Receipt
from seamscope.model.shapes import (
    MemoryStep,
    PolicyResult,
    Recommendation,
    ShapeCall,
    ShapeSpec,
    ShapeStudy,
)
from seamscope.model.trials import Candidate, Metric, OutputCheck, Trials
from seamscope.render.receipt_json import write_receipt_files

# --- reports: a small program with a break, a recompile and steady calls ----------------------------

XSS_SCRIPT = "<script>window.__seamscope_pwned = 1</script>"
XSS_IMG = '"><img src=x onerror="window.__seamscope_pwned=2">'


def fake_program(n_calls: int = 8, *, slow_steady: int = 0) -> FakeProgram:
    """Call 0 compiles two frames (the first ends at a print break); a later call recompiles
    frame 0; the rest are cache hits with two regions and an island between them."""
    S = FakeStep
    steady = [S("region", 100_000 + slow_steady, "0/0"), S("island", 20_000), S("region", 50_000, "1/0")]
    calls = [
        FakeCall([S("compile", 5_000_000, "0/0"), S("region", 100_000, "0/0"), S("island", 20_000),
                  S("compile", 3_000_000, "1/0"), S("region", 50_000, "1/0")]),
    ]
    for i in range(1, n_calls):
        if i == 3:
            calls.append(FakeCall([S("compile", 4_000_000, "0/1"), S("region", 100_000, "0/1"),
                                   S("island", 20_000), S("region", 50_000, "1/0")]))
        else:
            calls.append(FakeCall(list(steady)))
    return FakeProgram(breaks={"0/0": "print", "0/1": "print"}, calls=calls)


def fake_ledger(n_calls: int = 8, **kw: int) -> Ledger:
    return play(fake_program(n_calls, slow_steady=kw.pop("slow_steady", 0)), **kw).build()


def plant(ledger: Ledger, reason: str, file: str) -> Ledger:
    """Put hostile text into every break site's reason and file name, and into a failed guard."""
    sites = [msgspec.structs.replace(s, reason=reason, file=file) for s in ledger.break_sites]
    comps = [
        msgspec.structs.replace(c, failed_guards=[reason]) if c.is_recompile else c for c in ledger.compilations
    ]
    return msgspec.structs.replace(ledger, break_sites=sites, compilations=comps)


def fake_receipt(n_calls: int = 8, **kw: int) -> Receipt:
    return make_receipt(fake_ledger(n_calls, **kw), findings=None)  # the fallback ranking path


# --- optional receipt sections: a shape study, a probe, remedy trials ------------------------------

SHAPE_TRACE = [4, 8, 4, 16, 8, 4]
MIB = 2**20


def shape_policy(
    name: str, kind: str, *, pad: bool = False, total: int = 0, variants_at: dict[int, int] | None = None
) -> PolicyResult:
    """A policy that compiles at the first call of each length it sees (padded with ``pad``)."""
    seen: set[int] = set()
    calls, memory = [], []
    variants = 0
    for i, n in enumerate(SHAPE_TRACE):
        p = 16 if pad else n
        cold = p not in seen
        seen.add(p)
        variants += cold
        calls.append(ShapeCall(index=i, length=n, padded_length=p, phase="cold" if cold else "steady",
                               outcome="compile" if cold else "hit", latency_ns=(5_000_000 if cold else 10_000) + i,
                               compile_ns=4_000_000 if cold else 0, compiled_variants=variants))
        if n not in {c.length for c in calls[:-1]}:
            memory.append(
                MemoryStep(call_index=i, length=n, compiled_variants=variants, rss_bytes=(400 + 10 * variants) * MIB)
            )
    return PolicyResult(
        policy=name,
        kind=kind,
        compile_options={},
        status="ok",
        calls=calls,
        memory=memory,  # type: ignore[arg-type]
        compile_count=variants,
        recompile_count=max(variants - 1, 0),
        total_ns=total or sum(c.latency_ns for c in calls),
        padding_fraction=0.25 if pad else 0.0,
    )


def shape_study(*policies: PolicyResult, text: str = "auto: lowest total request cost over this trace") -> ShapeStudy:
    spec = ShapeSpec(workload="w.py:f", backend="eager", dim=1, trace=list(SHAPE_TRACE), repeat=1,
                     policies=[p.policy for p in policies])
    rec = Recommendation(policy=policies[0].policy, runner_up=None, margin_ns=None, margin_fraction=None, flip=None,
                         excluded=["pow2: outputs differ from unpadded eager"], text=text)
    return ShapeStudy(spec=spec, policies=list(policies), recommendation=rec, wall_ns=1_000_000_000)


def fake_probe() -> ProbeResult:
    return ProbeResult(
        spec=ProbeSpec(workload="w.py:f", backend="eager"),
        verdict="ok",
        answer="compiled matches eager",
        evidence=[EvidenceRow(configuration="eager", first_call_ns=5, steady_median_ns=3, recompiles=0,
                              compiles=0, peak_mib=None, peak_source="none")],
    )


def fake_trials() -> Trials:
    """A baseline and one candidate that was faster and kept the outputs."""
    def cand(name: str, origin: str, rank: int, ratio: float) -> Candidate:
        return Candidate(name=name, flags=[], origin=origin, targets="t", code_change="c", command="seamscope run",
                         verdict="faster", outputs=OutputCheck(status="equal"), rank=rank,
                         metrics=[Metric(name="steady median", median=1.0, min=1.0, max=1.0, ratio_median=ratio)])

    return Trials(script="s.py", args=[], seed=0, repeat=1, tolerance="x", deterministic=True,
                  baseline=cand("baseline", "baseline", 0, 1.0), candidates=[cand("cso", "F1", 1, 0.5)],
                  chosen="cso", decision="use cso", rollback_trigger="if slower")


# --- verification and diff: a baseline and a candidate that fixed its break ------------------------

TRACE = "ab" * 32


def _steady(i: int, fast: bool) -> FakeCall:
    j = i % 7  # some spread, so medians and p90 differ
    if fast:
        return FakeCall([FakeStep("region", 150 + j, "0/0"), FakeStep("island", 10),
                         FakeStep("overhead", 3)], family="warm" if i < 12 else "changed")
    return FakeCall(
        [FakeStep("region", 100 + j, "0/0"), FakeStep("island", 50 + 2 * j),
         FakeStep("region", 80, "1/0" if i < 5 else ("1/1" if i < 9 else "1/2")), FakeStep("overhead", 5)],
        family="warm" if i < 12 else "changed",
    )


def baseline_program(calls: int = 20) -> FakeProgram:
    """A break after frame 0 and two recompiles of frame 1: three cold calls."""
    out = []
    for i in range(calls):
        if i == 0:
            steps = [FakeStep("compile", 500, "0/0"), FakeStep("region", 100, "0/0"),
                     FakeStep("island", 60), FakeStep("compile", 300, "1/0"),
                     FakeStep("region", 80, "1/0"), FakeStep("overhead", 7)]
        elif i in (5, 9):
            cid = "1/1" if i == 5 else "1/2"
            steps = [FakeStep("region", 100, "0/0"), FakeStep("island", 55), FakeStep("compile", 250, cid),
                     FakeStep("region", 80, cid), FakeStep("overhead", 5)]
        else:
            steps = _steady(i, fast=False).steps
        out.append(FakeCall(steps, family="warm" if i < 12 else "changed"))
    return FakeProgram(breaks={"0/0": "a"}, calls=out)


def candidate_program(calls: int = 20) -> FakeProgram:
    """The break fixed: one graph, compiled once (slower to compile), faster steady calls."""
    out = []
    for i in range(calls):
        if i == 0:
            steps = [FakeStep("compile", 2400, "0/0"), FakeStep("region", 160, "0/0"), FakeStep("overhead", 4)]
            out.append(FakeCall(steps, family="warm"))
        else:
            out.append(_steady(i, fast=True))
    return FakeProgram(calls=out)


def build(program: FakeProgram, **kw: Any) -> Receipt:
    led = play(program, **kw).build()
    led = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, input_trace_sha256=TRACE))
    return make_receipt(led)


def pair(tmp: Path, calls: int = 20) -> tuple[Path, Path]:
    """Baseline and candidate receipt files, the candidate carrying its comparison."""
    base = build(baseline_program(calls))
    cand = attach_comparison(base, build(candidate_program(calls)))
    b = write_receipt_files(base, tmp / "before")
    c = write_receipt_files(cand, tmp / "after")
    return Path(b), Path(c)


# --- a compilation record for builder tests -------------------------------------------------------

def comp(cid, status="ok", graphs=1, site=None, ns=1000, reason=None, fail_type=None, guards=(), restarts=()):
    return Compilation(
        compile_id=cid,
        frame_name="forward",
        file="m.py",
        line=3,
        status=status,
        duration_ns=ns,
        graph_count=graphs,
        own_break_site_id=site,
        own_break_depth=0 if site else None,
        break_site_ids=[site] if site else [],
        fail_reason=reason,
        fail_type=fail_type,
        failed_guards=list(guards),
        restart_reasons=list(restarts),
    )


# --- capture's C lane (``_speedups``), driven without torch -----------------------------------------

def lane_builder(first_calls: int = 0, call_cap: int = 4):  # type: ignore[no-untyped-def]
    """A builder on the real clock with a C lane attached (the caller skips without the C path)."""
    speedups = _native.NATIVE
    assert speedups is not None
    b = LedgerBuilder(RunInfo(source="fake"), fake_environment(), first_calls=first_calls, call_cap=call_cap)
    lane = speedups.Lane()
    b.attach_lane(lane, speedups.PlanSums)
    return b, lane


def timers(lane, n: int):  # type: ignore[no-untyped-def]
    """C region timers of graphs ``0/0``, ``1/0``... that return their input."""
    speedups = _native.NATIVE
    assert speedups is not None

    def slow(*args, **kwargs):  # the Python wrapper's place: never reached in these calls
        raise AssertionError("slow path taken")

    return [speedups.RegionTimer(lambda x: x, lane, f"{i}/0", 0, slow, None) for i in range(n)]


class PerfClock:
    """The real clock, read as ``FakeDevice`` reads its host clock (``.now``)."""

    @property
    def now(self) -> int:
        return time.perf_counter_ns()


def drive(b: LedgerBuilder, lane, regions, calls: int, last_island=None) -> int:  # type: ignore[no-untyped-def]
    """What capture's call wrapper does; returns how many calls C opened. A call the builder
    opens runs its regions through the Python path, timed on the device when it is due there,
    then ``last_island()`` (if given) in its last island."""
    opened = 0
    clock = time.perf_counter_ns
    for _ in range(calls):
        if lane.enter():
            opened += 1
            for r in regions:
                r(1)
            lane.exit(None)
        else:
            t0 = clock()
            b.begin_call(t0)
            dc = b.device_call
            if not b.detailed and dc is None:
                lane.spans = b.open_spans
            b.overhead(t0, clock())
            for i, _ in enumerate(regions):
                entry = b.device.enter(dc, clock()) if dc is not None else None
                t = clock()
                t1 = clock()
                if dc is not None:
                    b.device.exit(dc, f"{i}/0", entry, t1)
                b.region(f"{i}/0", 0, t, t1)
            if last_island is not None:
                last_island()
            lane.spans = None
            b.end_call(clock())
    return opened


# --- the five accounting mutations -----------------------------------------------------------------

MUTATION_CODES = {
    "conflate_breaks_and_recompiles": "COMPILE_COUNT_MISMATCH",
    "drop_warmup": "WARMUP_DROPPED",
    "cache_hits_as_compiles": "CACHE_HIT_COUNTED_AS_COMPILE",
    "average_unequal_calls": "UNEQUAL_SAMPLES",
    "hide_eager_islands": "ISLANDS_HIDDEN",
}

# name -> [(module, [(anchor, replacement[, how many times the anchor occurs]), ...]), ...]: a
# mutation may edit several modules; a stale anchor fails loudly.
MUTATIONS: dict[str, list[tuple[str, list[tuple[Any, ...]]]]] = {
    # (1) compile count incremented at every break crossing.
    "conflate_breaks_and_recompiles": [(
        "seamscope.analyze.summary",
        [("compile_count=len(ok),", "compile_count=len(ok) + sum(s.crossings for s in ledger.totals.sites),")],
    )],
    # (2) cold calls removed before the totals are compared.
    "drop_warmup": [(
        "seamscope.analyze.diff",
        [
            (
                "return {p.phase: p for p in receipt.summary.phases}",
                'return {p.phase: p for p in receipt.summary.phases if p.phase != "cold"}',
            )
        ],
    )],
    # (3) a call whose regions were cache hits counted as a compiling call.
    "cache_hits_as_compiles": [(
        "seamscope.model.builder",
        [
            (
                "has_compile = sums[SUM_COMPILES] > 0",  # sums: region, island, compile, overhead, compilations
                "has_compile = sums[SUM_COMPILES] > 0 or sums[SUM_REGION] > 0",
            ),
            # the steady calls C sums, and those it hands over to be kept, the same way
            ('acc = self._phase["steady"]', 'acc = self._phase["cold"]'),
            (
                '_Kept(oc, end_ns, plan, "steady", "hit", wall, None)',
                '_Kept(oc, end_ns, plan, "cold", "compile", wall, None)',
            ),
        ],
    )],
    # (4) the candidate's totals divided by the baseline's (different, unstated) sample count.
    "average_unequal_calls": [(
        "seamscope.analyze.diff",
        [("a_side = _side(a, n=a.calls if a else 0)", "a_side = _side(a, n=b.calls if b else 0)")],
    )],
    # (5) island time zeroed; regions keep their positions (the transitions stay).
    "hide_eager_islands": [
        (
            "seamscope.model.builder_account",  # one call's sums and events
            [
                ("island_sum += gap", "island_sum += 0", 4),
                (
                    "IslandEvent(start_ns=cursor - start, duration_ns=gap,",
                    "IslandEvent(start_ns=cursor - start, duration_ns=0,",
                    2,
                ),
                (".island_after += gap", ".island_after += 0", 4),
            ],
        ),
        ("seamscope.model.builder", [(".island_after += gap", ".island_after += 0", 2)]),  # the sums C took
    ],
}


def apply_mutations(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Plant the accounting mutation ``name`` (:data:`MUTATIONS`) in every module it edits."""
    for module, edits in MUTATIONS[name]:
        apply_mutation(monkeypatch, module, edits)


def apply_mutation(monkeypatch: pytest.MonkeyPatch, module: str, edits: list[tuple[Any, ...]]) -> None:
    """Execute the module's real source with ``edits`` applied, then patch every function and
    class it defines into the module and into every seamscope module that imported it by name."""
    mod = importlib.import_module(module)
    src = inspect.getsource(mod)
    for old, new, *times in edits:
        n = times[0] if times else 1
        assert src.count(old) == n, f"mutation anchor not found {n} time(s) in {module}: {old!r}"
        src = src.replace(old, new)
    ns: dict[str, Any] = {"__name__": module, "__package__": mod.__package__, "__file__": mod.__file__}
    exec(compile(src, str(mod.__file__), "exec"), ns)
    for name, new_obj in ns.items():
        old_obj = getattr(mod, name, None)
        if not isinstance(new_obj, (types.FunctionType, type)) or getattr(new_obj, "__module__", None) != module:
            continue
        if old_obj is None or old_obj is new_obj:
            continue
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("seamscope") and getattr(other, name, None) is old_obj:
                monkeypatch.setattr(other, name, new_obj)


def seamscope_here(args: list[str], cwd: Any) -> Any:
    """``seamscope ARGS`` from folder ``cwd``, in this process, as a ``CompletedProcess`` (exit code,
    stdout, stderr); usable in a module fixture (no ``capsys``). For what is not about the process
    itself: a ``try`` or a probe's isolated ladder run this way forks its fresh processes from the
    test run's one server where the test asks for ``fresh_server``."""
    import contextlib
    import io
    import os
    import subprocess

    from seamscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
            main(list(args))
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(args, e.value.code, out.getvalue(), err.getvalue())


_ONE_JOB = threading.Lock()
"""Held while a job of the test run's server runs: the server runs one at a time."""


def seamscope_forked(server: Any, args: list[str], cwd: Any, env: dict[str, str] | None = None,
                     unset: tuple[str, ...] = (), entry: str = "seamscope.cli:main") -> Any:
    """``seamscope ARGS`` from folder ``cwd`` in a fresh process forked from ``server`` (the test
    run's ``fresh_server``: a process of its own, its exit code and its stderr, without a new
    interpreter's torch import), as a ``CompletedProcess`` (stdout not kept). ``entry``: another
    command's ``main(argv)`` (``torch.distributed.run:main``: torchrun)."""
    return job_forked(server, entry, args, cwd, env, unset)


def script_forked(server: Any, argv: list[str], cwd: Any, env: dict[str, str] | None = None,
                  unset: tuple[str, ...] = (), timeout: float = 600) -> Any:
    """``python SCRIPT ARGS...`` (``argv``) as :func:`seamscope_forked` runs ``seamscope``: forked
    from ``server``, ``env`` (``TORCH_TRACE``, ``TORCH_LOGS``...) in its environment as in a new
    interpreter's."""
    return job_forked(server, "fresh_jobs:script", [str(a) for a in argv], cwd, env, unset, timeout)


def job_forked(server: Any, entry: str, arg: list[str], cwd: Any, env: dict[str, str] | None = None,
               unset: tuple[str, ...] = (), timeout: float = 600) -> Any:
    """Job ``entry`` with ``arg`` forked from ``server``, as a ``CompletedProcess`` (``args`` is
    ``arg``, its stderr kept, not its stdout); a timeout or a lost server fails the test."""
    import os
    import subprocess
    import tempfile

    from seamscope.experiments.fresh import Job

    fd, log = tempfile.mkstemp(prefix="seamscope-test-", suffix=".log")
    os.close(fd)
    try:
        with _ONE_JOB:
            ended = server.run(Job(entry=entry, arg=list(arg), log=log, stdout=False, env=env or {},
                                   unset=list(unset), cwd=str(cwd)), timeout)
        with open(log, encoding="utf-8", errors="replace") as f:
            err = f.read()
    finally:
        os.unlink(log)
    assert not ended.timed_out and ended.lost is None, (arg, ended.text(), err)
    return subprocess.CompletedProcess(arg, ended.exit_code, "", err)


class Forked:
    """``seamscope ARGS`` from folder ``cwd``, started in a process forked from ``server`` (the test
    run's ``fresh_server``) and not waited for: a real process with its own pid, signals and exit
    code, without a new interpreter's torch import. Its stdout goes to the file ``stdout``, its
    stderr to ``stderr``. The server runs one job at a time: a second ``Forked`` starts when the
    first has ended (a test runs them one after another)."""

    def __init__(self, server: Any, args: list[str], cwd: Any, *, stdout: Any, stderr: Any,
                 env: dict[str, str] | None = None, unset: tuple[str, ...] = (), timeout: float = 300.0,
                 entry: str = "fresh_jobs:seamscope") -> None:
        """``entry``: a job of ``tests/fresh_jobs.py`` taking ``fresh_jobs.seamscope``'s argument
        (one that sets the process up first, then calls it)."""
        from seamscope.experiments.fresh import Job

        self.args = list(args)
        self._pid_dir = tempfile.mkdtemp(prefix="seamscope-test-")
        self._pid_file = f"{self._pid_dir}/pid"
        job = Job(entry=entry, arg={"args": self.args, "pid": self._pid_file, "stdout": str(stdout)},
                  log=str(stderr), stdout=False, env=env or {}, unset=list(unset), cwd=str(cwd))
        self.ended: Any = None
        self._pid: int | None = None
        _ONE_JOB.acquire()
        self._thread = threading.Thread(target=self._run, args=(server, job, timeout), daemon=True)
        self._thread.start()

    def _run(self, server: Any, job: Any, timeout: float) -> None:
        try:
            self.ended = server.run(job, timeout)
        finally:
            _ONE_JOB.release()
            shutil.rmtree(self._pid_dir, ignore_errors=True)

    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def pid(self) -> int:
        """The process's pid (waited for: it is written as the process starts)."""
        end = time.monotonic() + 60
        while self._pid is None:
            try:
                with open(self._pid_file, encoding="utf-8") as f:
                    self._pid = int(f.read())
            except FileNotFoundError:
                assert self.running() and time.monotonic() < end, f"{self.args}: no pid ({self.ended})"
                time.sleep(0.01)
        return self._pid

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def wait(self, timeout: float = 120.0) -> int | None:
        """Its exit code (negative: the signal that ended it; None: killed after ``timeout`` s)."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            os.kill(self.pid, signal.SIGKILL)
            self._thread.join()
            return None
        assert self.ended is not None and self.ended.lost is None, (self.args, self.ended)
        return self.ended.exit_code  # type: ignore[no-any-return]


def first_compile_imports(path: str) -> int:
    """A fork server's job: compile and call a function under eager, then aot_eager; write the
    modules that imported (JSON)."""
    import json

    import torch

    before = set(sys.modules)
    for backend in ("eager", "aot_eager"):
        torch.compile(lambda x: x.sin() + 1, backend=backend)(torch.ones(3))
    with open(path, "w") as f:
        json.dump(sorted(set(sys.modules) - before), f)
    return 0


# --- receipts with fields left out, as docs/receipt.schema.json allows --------------------------------

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "docs" / "receipt.schema.json"


def omissible_fields(raw: Any, schema: dict[str, Any] | None = None) -> list[tuple[tuple[Any, ...], bool]]:
    """Every field of the raw receipt ``raw`` that ``docs/receipt.schema.json`` does not require,
    as ``(path, holds_its_default)``: the fields a schema-valid receipt may leave out. Found by
    walking the schema beside the value (``$ref``, ``anyOf`` alternatives of the value's kind,
    the items of arrays: the first two of each)."""
    import json

    schema = schema or json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    defs = schema["$defs"]

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        return node

    out: list[tuple[tuple[Any, ...], bool]] = []

    def walk(value: Any, node: dict[str, Any], path: tuple[Any, ...]) -> None:
        node = resolve(node)
        for alt in node.get("anyOf", []) + node.get("oneOf", []):
            alt = resolve(alt)
            if (isinstance(value, dict) and alt.get("type") == "object") or (
                    isinstance(value, list) and alt.get("type") == "array"):
                if isinstance(value, dict) and "type" in value:  # a tagged union: the value's own tag
                    tag = alt.get("properties", {}).get("type", {})
                    if value["type"] not in tag.get("enum", [tag.get("const", value["type"])]):
                        continue
                walk(value, alt, path)
                return
        if isinstance(value, dict) and node.get("type") == "object":
            props, required = node.get("properties", {}), set(node.get("required", []))
            for k, v in value.items():
                if k not in props:
                    continue
                if k not in required:
                    out.append(((*path, k), props[k].get("default", resolve(props[k]).get("default", ...)) == v))
                walk(v, props[k], (*path, k))
        elif isinstance(value, list) and node.get("type") == "array" and "items" in node:
            for i, v in enumerate(value[:2]):
                walk(v, node["items"], (*path, i))

    walk(raw, schema, ())
    return out


def without(raw: Any, paths: list[tuple[Any, ...]]) -> Any:
    """A deep copy of ``raw`` with the fields at ``paths`` left out (a path under one already
    removed is skipped)."""
    import copy

    raw = copy.deepcopy(raw)
    for path in sorted(paths, key=len, reverse=True):
        node = raw
        for k in path[:-1]:
            try:
                node = node[k]
            except (KeyError, IndexError, TypeError):
                break
        else:
            if isinstance(node, dict):
                node.pop(path[-1], None)
    return raw


@contextlib.contextmanager
def dynamo_settings_kept() -> Any:
    """Dynamo's and ``torch.compiler``'s settings put back after the block: a patch is the script's
    own code, and a script run in this process (``run_target``) keeps the settings it made."""
    import copy

    import torch

    configs = (torch._dynamo.config, torch.compiler.config)
    saved = [{k: copy.copy(v) for k, v in c.get_config_copy().items()} for c in configs]
    try:
        yield
    finally:
        for c, before in zip(configs, saved, strict=True):
            for k, v in c.get_config_copy().items():
                if before.get(k, v) != v:
                    setattr(c, k, before[k])
