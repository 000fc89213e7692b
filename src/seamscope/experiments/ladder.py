"""The backend ladder: eager → aot_eager → inductor, the first layer that fails.

Each layer compiles the workload with one backend and runs every distinct input, compared with
eager: compiled? ran? matches? The answer is the first layer that fails or mismatches. With
``isolate`` each layer runs in a fresh process of its own (``experiments/fresh.py``: :func:`child_main`,
forked from a server that imported torch once; ``SEAMSCOPE_PROBE_ISOLATION=process``: a new
interpreter), so a segfault, an abort or a hang (``timeout``) in a backend is a reported result and
the ladder goes on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import torch

from ..capture import adapter
from ..errors import UnusableInput
from ..model.probe import Ladder, LayerResult, LeafDiff, RandomOp
from .differential import (
    Rounding,
    aliasing,
    clone_tree,
    compare_aliasing,
    compare_trees,
    worst_leaf,
)
from .fresh import FreshProcesses, Job, default_mode
from .provenance import random_ops
from .workload import Workload, as_call, first_line, grad_mode, load_object, load_workload, prepare


def backend_label(b: Any) -> str:
    if isinstance(b, str):
        return b
    return getattr(b, "__name__", None) or type(b).__name__


def resolve_backend(b: Any) -> Any:
    """A name torch knows, a callable, or ``"pkg.mod:fn"`` / ``"file.py:fn"``."""
    if isinstance(b, str) and ":" in b:
        obj = load_object(b, "backend")
        if not callable(obj):
            raise UnusableInput(f"backend {b} is not callable")
        return obj
    return b


@dataclass
class BackendWatch:
    """Wraps a backend: records each graph it receives (compile id, random ops, backend time)."""

    backend: Any
    configuration: str
    compile_options: dict[str, Any] = field(default_factory=dict)
    graphs: list[tuple[str | None, int, int]] = field(default_factory=list)
    """(compile id, start ns, end ns) per graph handed to the backend."""
    random: list[RandomOp] = field(default_factory=list)
    returned: int = 0
    _inner: Any = None

    def __post_init__(self) -> None:
        self.__name__ = backend_label(self.backend)
        mode = self.compile_options.get("mode")
        options = self.compile_options.get("options")
        dynamic = self.compile_options.get("dynamic")
        be = resolve_backend(self.backend)
        if be == "inductor" or mode or options:
            self._inner = adapter.compile_wrapper(be, mode, options, dynamic)
        else:
            self._inner = adapter.lookup_backend(be)

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        sid = adapter.current_compile_id()
        for op in random_ops(gm):
            self.random.append(RandomOp(configuration=self.configuration, compile_id=sid, op=op))
        t0 = time.perf_counter_ns()
        try:
            return self._inner(gm, example_inputs)
        finally:
            self.graphs.append((sid, t0, time.perf_counter_ns()))
            self.returned += 1

    @property
    def compile_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for cid, _, _ in self.graphs:
            if cid is not None:
                seen.setdefault(cid.split("_", 1)[0], None)
        return list(seen)


def compile_kwargs(options: dict[str, Any]) -> dict[str, Any]:
    """``torch.compile`` kwargs other than those the wrapped backend takes itself."""
    return {k: v for k, v in options.items() if k not in ("mode", "options", "backend")}


def signature(entry: Any) -> str:
    from .differential import flatten

    parts = []
    for _, v in flatten(entry, "in"):
        if isinstance(v, torch.Tensor):
            parts.append("x".join(str(s) for s in v.shape) + ":" + str(v.dtype).replace("torch.", ""))
        else:
            parts.append(repr(v)[:20])
    return "(" + ", ".join(parts) + ")"


def distinct_inputs(wl: Workload) -> list[tuple[str, int, Any, str]]:
    """(family, index, entry, signature): the first entry of every distinct input signature."""
    seen: set[str] = set()
    out = []
    for fam, entries in wl.families().items():
        for i, e in enumerate(entries):
            sig = signature(e)
            if sig not in seen:
                seen.add(sig)
                out.append((fam, i, e, sig))
    return out


@dataclass
class Reference:
    """Eager's answer on one input: outputs, inputs after the call, state after, aliasing."""

    family: str
    index: int
    entry: Any
    signature: str
    out: Any
    inputs_after: Any
    state_before: dict[str, torch.Tensor]
    state_after: dict[str, torch.Tensor]
    aliases: dict[str, str | None]
    reductions: dict[str, int]
    rounding: Rounding | None = None
    """Eager in float64 on the same inputs: what rounding can explain per leaf."""


def is_compile_error(e: BaseException) -> bool:
    """Raised while capturing or compiling (Dynamo, a backend), not while running the result."""
    return adapter.is_compile_error(e)


def compare_to_reference(
    ref: Reference, fn: Callable[..., Any], module: Any, override: tuple[float, float] | None
) -> list[LeafDiff]:
    """Run ``fn`` on a fresh copy of the reference input and compare everything eager left."""
    from .differential import compare_side_effects, module_state, restore_state

    restore_state(module, ref.state_before)
    inputs = clone_tree(ref.entry)
    args, kwargs = as_call(inputs)
    try:
        out = fn(*args, **kwargs)
        after = module_state(module)
    finally:
        restore_state(module, ref.state_before)
    leaves = compare_trees(ref.out, out, "out", override, ref.reductions, ref.rounding)
    leaves += compare_aliasing(ref.aliases, aliasing(out, inputs))
    leaves += compare_side_effects(clone_tree(ref.entry), ref.inputs_after, inputs, "input", override, ref.rounding)
    leaves += compare_side_effects(ref.state_before, ref.state_after, after, "module", override, ref.rounding)
    return leaves


def eager_reference(wl: Workload, fam: str, idx: int, entry: Any, sig: str) -> Reference:
    """Eager on a fresh copy (under the reduction-tracking mode when it works), then eager in
    float64 on another copy: what rounding can explain for each leaf."""
    from .differential import module_state, restore_state
    from .provenance import float64_run, reduction_trace

    module = wl.fn_or_module
    before = module_state(module)
    inputs = clone_tree(entry)
    args, kwargs = as_call(inputs)
    allowances: dict[str, float] = {}
    try:
        out, red, allowances = reduction_trace(module, args, kwargs)
    except Exception:
        restore_state(module, before)
        inputs = clone_tree(entry)
        args, kwargs = as_call(inputs)
        out, red = module(*args, **kwargs), {}
    after = module_state(module)
    restore_state(module, before)
    rounding = float64_run(module, entry, as_call)
    rounding.allowances = allowances
    return Reference(fam, idx, entry, sig, out, inputs, before, after, aliasing(out, inputs), red, rounding)


def run_layer(wl: Workload, backend: Any, refs: Sequence[Reference]) -> LayerResult:
    """One layer in this process."""
    label = backend_label(backend)
    adapter.dynamo_reset()
    t0 = time.perf_counter_ns()
    try:
        watch = BackendWatch(backend, label, dict(wl.compile_options))
        compiled = torch.compile(wl.fn_or_module, backend=watch, **compile_kwargs(wl.compile_options))
    except UnusableInput:
        raise
    except Exception as e:
        return LayerResult(backend=label, verdict="compile_failed", compiled=False, ran=False, matches=None,
                           exception_type=type(e).__name__, message=first_line(e))
    leaves: list[LeafDiff] = []
    n = 0
    for ref in refs:
        try:
            with grad_mode(wl):
                got = compare_to_reference(ref, compiled, wl.fn_or_module, wl.tolerance)
        except Exception as e:
            comp = is_compile_error(e)
            return LayerResult(
                backend=label, verdict="compile_failed" if comp else "run_failed",
                compiled=not comp, ran=False, matches=None, exception_type=type(e).__name__,
                message=first_line(e), inputs_checked=n, wall_ns=time.perf_counter_ns() - t0,
            )
        n += 1
        leaves += [msgspec.structs.replace(lf, path=f"{ref.family}[{ref.index}] {lf.path}") for lf in got]
    worst = worst_leaf(leaves)
    klass = worst.klass if worst else "within_tolerance"
    verdict = {"within_tolerance": "ok", "above_tolerance": "suspect", "boundary_bug": "mismatch"}[klass]
    return LayerResult(
        backend=label, verdict=verdict,  # type: ignore[arg-type]
        compiled=True, ran=True, matches=klass != "boundary_bug",
        worst=worst, inputs_checked=n,
        wall_ns=time.perf_counter_ns() - t0,
    )


_WHERE = {
    "eager": "already at eager (Dynamo's capture alone, no compiler): the capture or the code's own compiled-only path",
    "aot_eager": "first at aot_eager (eager matched): AOTAutograd or the decompositions",
    "inductor": "first at inductor (aot_eager matched): inductor's code generation",
}


def bug_meaning(layers: Sequence[LayerResult]) -> tuple[str | None, str | None]:
    """(The first layer whose worst leaf is a boundary bug, one sentence on where the bug starts)."""
    for i, lr in enumerate(layers):
        if not (lr.verdict == "mismatch" and lr.worst is not None and lr.worst.klass == "boundary_bug"):
            continue
        before = layers[:i]
        if any(b.verdict not in ("ok", "suspect") for b in before):
            return lr.backend, (f"The first boundary bug is at {lr.backend}, but a layer before it did not run"
                                " to a comparison, so where the bug starts is not known.")
        names = [b.backend for b in before]
        if lr.backend == "eager":
            where = _WHERE["eager"]
        elif lr.backend == "aot_eager" and "eager" not in names:
            where = "first at aot_eager (eager not tried): Dynamo's capture, AOTAutograd or the decompositions"
        elif lr.backend == "inductor" and "aot_eager" not in names:
            where = ("first at inductor (aot_eager not tried): Dynamo's capture, AOTAutograd, the decompositions"
                     " or inductor's code generation" if "eager" not in names else
                     "first at inductor (eager matched, aot_eager not tried): AOTAutograd, the decompositions"
                     " or inductor's code generation")
        elif lr.backend in _WHERE:
            where = _WHERE[lr.backend]
        elif names:
            where = f"first at {lr.backend} ({', '.join(names)} matched): what {lr.backend} does beyond them"
        else:
            where = f"at {lr.backend}, the only layer tried: Dynamo's capture or what {lr.backend} does"
        return lr.backend, f"The boundary bug starts {where}."
    return None, None


def answer(layers: Sequence[LayerResult]) -> tuple[str | None, str]:
    for lr in layers:
        if lr.verdict in ("ok", "suspect", "not_run"):
            continue
        what = {
            "compile_failed": "fails to compile",
            "run_failed": "compiles but fails to run",
            "mismatch": "runs but does not match eager",
            "crashed": "crashed the process",
            "timeout": "hung (timed out)",
        }[lr.verdict]
        detail = ""
        if lr.exception_type:
            detail = f": {lr.exception_type}: {lr.message}"
        elif lr.signal:
            detail = f": {lr.signal}"
        elif lr.worst is not None:
            detail = f": worst leaf {lr.worst.path} is a {lr.worst.klass.replace('_', ' ')} ({lr.worst.reason})"
        text = f"first failing layer: {lr.backend} {what}{detail}"
        _, meaning = bug_meaning(layers)
        return lr.backend, text + (f". {meaning}" if meaning else "")
    sus = [lr.backend for lr in layers if lr.verdict == "suspect"]
    if sus:
        return (
            None,
            "every layer ran; over the tolerance, not called a bug (suspect; each leaf says why) on: " + ", ".join(sus),
        )
    return None, "every layer compiled, ran and matched eager"


def run_ladder(
    wl: Workload,
    refs: Sequence[Reference] | None,
    layers: Sequence[Any] | None = None,
    *,
    isolate: bool = False,
    timeout: float | None = None,
    spec: str | None = None,
    on_layer: Callable[[LayerResult], None] | None = None,
) -> Ladder:
    layers = list(layers if layers is not None else wl.ladder)
    results: list[LayerResult] = []
    if isolate and spec is None:
        raise UnusableInput("--isolate needs a workload loaded from FILE.py:FUNC")
    if not isolate and refs is None:
        raise ValueError("in-process ladder needs eager references")
    processes = _fresh_processes() if isolate else None
    try:
        for i, b in enumerate(layers):
            results.append(_layer(wl, b, i, layers, refs, processes, spec, timeout))
            if on_layer:
                on_layer(results[-1])
    finally:
        if processes is not None:
            processes.close()
    first, text = answer(results)
    bug, meaning = bug_meaning(results)
    return Ladder(layers=results, first_failing=first, answer=text, first_bug=bug, meaning=meaning)


def _layer(wl: Workload, b: Any, i: int, layers: list[Any], refs: Sequence[Reference] | None,
           processes: FreshProcesses | None, spec: str | None, timeout: float | None) -> LayerResult:
    if processes is not None:
        labels = [backend_label(x) if not isinstance(x, str) else x for x in layers]
        return run_isolated(processes, spec or "", i, labels, timeout)
    try:
        return run_layer(wl, b, refs or [])
    except UnusableInput as e:
        return LayerResult(backend=backend_label(b), verdict="compile_failed", compiled=False, ran=False,
                           matches=None, exception_type="UnusableInput", message=str(e))


# --- isolation: one child process per layer ------------------------------------------------------


PRELOAD = ("torch", "torch._dynamo", "seamscope.experiments.ladder", "seamscope.capture.adapter.compile_imports")
"""What the fork server imports once, before any fork (each child loads the workload itself)."""


def _fresh_processes() -> FreshProcesses:
    return FreshProcesses(preload=PRELOAD, mode=default_mode(os.environ.get("SEAMSCOPE_PROBE_ISOLATION")))


def run_isolated(processes: FreshProcesses, spec: str, index: int, labels: list[str],
                 timeout: float | None) -> LayerResult:
    """Run layer ``index`` in a fresh process; a crash or a hang becomes the layer's result."""
    label = labels[index]
    tmp = tempfile.mkdtemp(prefix="seamscope-layer-")
    path, log = os.path.join(tmp, "result.json"), os.path.join(tmp, "stderr.txt")
    argv = ["--spec", spec, "--index", str(index), "--result", path, "--backends", ",".join(labels)]
    try:
        ended = processes.run(Job(entry="seamscope.experiments.ladder:child_main", arg=argv, log=log,
                                  stdout=False), timeout)
        if ended.timed_out:
            return LayerResult(backend=label, verdict="timeout", compiled=None, ran=None, matches=None,
                               isolated=True, message=f"no result within {timeout:g} s; the child was killed",
                               wall_ns=ended.wall_ns)
        if os.path.exists(path):
            with open(path, "rb") as f:
                lr = msgspec.json.decode(f.read(), type=LayerResult)
            return msgspec.structs.replace(lr, isolated=True, exit_code=ended.exit_code, wall_ns=ended.wall_ns)
        with open(log, encoding="utf-8", errors="replace") as f:
            tail = f.read().strip().splitlines()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if ended.signal is not None:
        return LayerResult(backend=label, verdict="crashed", compiled=None, ran=None, matches=None, isolated=True,
                           exit_code=ended.exit_code, signal=ended.signal, message=(tail[-1] if tail else "")[:300],
                           wall_ns=ended.wall_ns)
    return LayerResult(backend=label, verdict="crashed", compiled=None, ran=None, matches=None, isolated=True,
                       exit_code=ended.exit_code,
                       message=(tail[-1] if tail else ended.lost or "child exited without a result")[:300],
                       wall_ns=ended.wall_ns)


def child_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="seamscope-ladder-child")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--backends", default="")
    a = ap.parse_args(argv)
    wl = prepare(load_workload(a.spec))
    names = [b for b in a.backends.split(",") if b]
    layers = list(wl.ladder)
    b: Any = (
        layers[a.index]
        if a.index < len(layers) and backend_label(layers[a.index]) == names[a.index]
        else names[a.index]
    )
    torch.manual_seed(wl.seed)
    with grad_mode(wl):
        refs = [eager_reference(wl, f, i, e, s) for f, i, e, s in distinct_inputs(wl)]
    lr = run_layer(wl, b, refs)
    from ..render.files import write_atomic

    write_atomic(a.result, msgspec.json.encode(lr))
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
