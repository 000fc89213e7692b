"""The shape study's worker: one policy over the trace, in a process of its own.

The study runs each job (a preflight or a policy) as :func:`run_job` in a fresh process
(``experiments/fresh.py``), forked from a zygote that imported torch and, through :func:`preload`,
the workload's module (Dynamo state is created by the first compile, which only ever happens in a
child). ``python -m seamscope.experiments.shapes_worker --spec FILE`` runs one job in this
interpreter (the benchmark's policies run alone).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import msgspec

from ..analyze.shapes import CallRecord, PolicyRecords, policy_result
from ..errors import SeamscopeError, UnusableInput, UserCodeFailed
from ..model.canonical import round_float
from ..model.shapes import MemoryStep, Mismatch, PolicyResult
from .shapes import Policy, Preflight, WorkerSpec, parse_policy
from .workload import described, grad_mode, map_tensors, to_device

# --- inputs of a given length, padding, slicing back -----------------------------------------------


class Inputs:
    """The workload's own ``make_input``/``pad``/``slice_output`` where given; otherwise the
    defaults: the first tensor of the steady entry resized along ``dim`` (tiled, so values stay
    valid token ids), zero-padded at the end of ``dim``, outputs narrowed back on ``dim``."""

    def __init__(self, wl: Any, dim: int) -> None:
        self.wl = wl
        self.dim = dim

    def make(self, length: int) -> Any:
        import torch

        torch.manual_seed(self.wl.seed + length)
        if self.wl.make_input is not None:
            return to_device(self.wl.make_input(length), self.wl.device, self.wl.dtype)
        entry = self.wl.families()["steady"][0]
        return _map_first_tensor(entry, lambda t: _resize(t, self.dim, length))

    def varying(self, entry: Any) -> Any:
        found: list[Any] = []

        def keep(t: Any) -> Any:
            found.append(t)
            return t

        _map_first_tensor(entry, keep)
        return found[0] if found else None

    def pad(self, entry: Any, target: int) -> Any:
        if self.wl.pad is not None:
            return self.wl.pad(entry, target)
        return _map_first_tensor(entry, lambda t: _pad_end(t, self.dim, target))

    def slice(self, out: Any, length: int, padded: int) -> Any:
        if self.wl.slice_output is not None:
            return self.wl.slice_output(out, length)
        return _narrow_tree(out, self.dim, padded, length)


def _map_first_tensor(entry: Any, fn: Any) -> Any:
    done = [False]

    def first(t: Any) -> Any:
        done[0] = True
        return fn(t)

    return map_tensors(entry, first, lambda: done[0])


def _resize(t: Any, dim: int, length: int) -> Any:
    if t.dim() <= dim:
        raise UnusableInput(f"dim {dim} does not exist: the varying input has shape {tuple(t.shape)}")
    n = t.shape[dim]
    if n == length:
        return t.clone()
    reps = [1] * t.dim()
    reps[dim] = -(-length // max(n, 1))
    return t.repeat(*reps).narrow(dim, 0, length).contiguous()


def _pad_end(t: Any, dim: int, target: int) -> Any:
    import torch

    n = t.shape[dim]
    if target <= n:
        return t
    shape = list(t.shape)
    shape[dim] = target - n
    return torch.cat([t, t.new_zeros(shape)], dim=dim)


def _narrow_tree(o: Any, dim: int, padded: int, length: int) -> Any:
    import torch

    if isinstance(o, torch.Tensor):
        return o.narrow(dim, 0, length) if o.dim() > dim and o.shape[dim] == padded else o
    if isinstance(o, dict):
        new = {k: _narrow_tree(v, dim, padded, length) for k, v in o.items()}
        if type(o) is dict:
            return new
        try:
            return type(o)(**new)
        except Exception:
            return new
    if isinstance(o, tuple) and hasattr(o, "_fields"):
        return type(o)(*(_narrow_tree(v, dim, padded, length) for v in o))
    if isinstance(o, (tuple, list)):
        return type(o)(_narrow_tree(v, dim, padded, length) for v in o)
    return o


def _leaves(out: Any) -> list[tuple[str, Any]]:
    import torch

    from .differential import flatten

    return [(p, v.detach().clone() if isinstance(v, torch.Tensor) else v) for p, v in flatten(out, "out")]


# --- the preflight: bad input found before any policy runs ----------------------------------------


def _load(spec: WorkerSpec) -> tuple[Any, int]:
    from .workload import load_workload, prepare

    wl = prepare(load_workload(spec.workload))
    dim = spec.dim if spec.dim is not None else int(getattr(wl, "length_dim", 1))
    return wl, dim


def preflight(spec: WorkerSpec) -> tuple[Preflight, dict[int, list[tuple[str, Any]]]]:
    """Load the workload, check the dim and every distinct length, run eager on each (the
    references a policy's padded outputs are compared with)."""
    from .ladder import backend_label

    try:
        wl, dim = _load(spec)
    except SeamscopeError as e:
        return Preflight(ok=False, exit_code=e.exit_code, error=str(e)), {}
    distinct = sorted(set(spec.trace))
    base = Preflight(ok=True, dim=dim, backend=backend_label(wl.backend), device=str(wl.device),
                     rtol=wl.tolerance[0] if wl.tolerance else None, atol=wl.tolerance[1] if wl.tolerance else None,
                     max_length=wl.max_length)
    if wl.max_length is not None and distinct[-1] > wl.max_length:
        over = [n for n in distinct if n > wl.max_length]
        return msgspec.structs.replace(base, ok=False, exit_code=2, error=(
            f"length {over[0]} is beyond what the model accepts (max_length {wl.max_length}); "
            f"{len(over)} distinct length(s) over it")), {}
    inputs = Inputs(wl, dim)
    try:
        probe = inputs.make(distinct[0])
    except SeamscopeError as e:
        return msgspec.structs.replace(base, ok=False, exit_code=e.exit_code, error=str(e)), {}
    except Exception as e:
        return msgspec.structs.replace(base, ok=False, exit_code=1,
                                       error=f"make_input({distinct[0]}) raised {described(e)}"), {}
    t = inputs.varying(probe)
    if t is None:
        return msgspec.structs.replace(base, ok=False, exit_code=2, error="the input has no tensor to vary"), {}
    if t.dim() <= dim:
        return msgspec.structs.replace(base, ok=False, exit_code=2, error=(
            f"dim {dim} does not exist: the varying input has shape {tuple(t.shape)} ({t.dim()} dims)")), {}
    if t.shape[dim] != distinct[0]:
        return msgspec.structs.replace(base, ok=False, exit_code=2, error=(
            f"dim {dim} of the input has size {t.shape[dim]}, not the requested length {distinct[0]}: "
            f"the input has shape {tuple(t.shape)}; pass the length's dim with --dim")), {}
    refs: dict[int, list[tuple[str, Any]]] = {}
    from .workload import as_call

    with grad_mode(wl):
        for n in distinct:
            args, kwargs = as_call(inputs.make(n))
            try:
                out = wl.fn_or_module(*args, **kwargs)
            except Exception as e:
                if n == distinct[0]:
                    return msgspec.structs.replace(base, ok=False, exit_code=1, error=(
                        f"the workload fails eagerly at length {n}: {described(e)}")), {}
                return msgspec.structs.replace(base, ok=False, exit_code=2, error=(
                    f"length {n} is beyond what the model accepts: eager raised {described(e)}")), {}
            refs[n] = _leaves(out)
    return base, refs


# --- one policy over the trace --------------------------------------------------------------------


def _references(spec: WorkerSpec, refs: dict[int, list[tuple[str, Any]]] | None) -> dict[int, list[tuple[str, Any]]]:
    """The eager references: given by the study, read from its file, or (a policy run alone)
    computed here as part of this policy's own cost."""
    import torch

    if refs is not None:
        return refs
    if spec.refs and os.path.exists(spec.refs):
        return dict(torch.load(spec.refs, weights_only=False))
    pre, computed = preflight(spec)
    if not pre.ok:
        raise UnusableInput(pre.error or "preflight failed") if pre.exit_code == 2 else UserCodeFailed(pre.error or "")
    return computed


def _refusal(pol: Policy, wl: Any, trace: list[int], opts: dict[str, Any]) -> PolicyResult | None:
    """A padding policy that would pad past what the model accepts is refused before it runs."""
    if pol.pads and wl.max_length is not None:
        over = sorted({(m, pol.target(m)) for m in trace if pol.target(m) > wl.max_length})
        if over:
            m, t = over[0]
            return _bare(pol, opts, "unusable", f"pads length {m} to {t}, beyond what the model accepts "
                         f"(max_length {wl.max_length})")
    return None


class _Loop:
    """The trace's calls under one policy: each call's record, the first output of each length
    (compared with eager) and a memory step at each new length."""

    def __init__(self, wl: Any, pol: Policy, inputs: Inputs, mdim: int, delay_s: float) -> None:
        import torch

        self.wl, self.pol, self.inputs, self.mdim, self.delay_s = wl, pol, inputs, mdim, delay_s
        self.cuda = str(wl.device).startswith("cuda") and torch.cuda.is_available()
        self.recs: list[CallRecord] = []
        self.firsts: dict[int, list[tuple[str, Any]]] = {}
        self.memory: list[MemoryStep] = []

    def call(self, compiled: Any, sess: Any, i: int, length: int) -> tuple[str, str] | None:
        """One call; ``(status, error)`` where it failed (the loop stops there)."""
        import torch

        from ..capture import adapter
        from .workload import as_call

        inputs, pol = self.inputs, self.pol
        entry = inputs.make(length)
        target = pol.target(length)
        real = int(inputs.varying(entry).numel())
        t0 = time.perf_counter_ns()
        e = inputs.pad(entry, target) if target != length else entry
        v = inputs.varying(e)
        if pol.kind == "mark_dynamic" and pol.in_range(target):
            # An input outside [MIN, MAX] is left unmarked (marking it raises in PyTorch):
            # it fails the range guard and recompiles, and the guard's text is reported.
            adapter.mark_dynamic(v, self.mdim, min=pol.lo, max=pol.hi)
        args, kwargs = as_call(e)
        try:
            with sess.family(str(length)):
                out = compiled(*args, **kwargs)
        except Exception as ex:
            if target != length and _fails_eager(self.wl, e):
                return "unusable", (f"pads length {length} to {target}, which the model does not accept "
                                    f"(eager raises too): {described(ex)}")
            return "failed", f"call {i} (length {length}): {described(ex)}"
        if target != length:
            out = inputs.slice(out, length, target)
        if self.cuda:
            torch.cuda.synchronize()
        if self.delay_s:
            time.sleep(self.delay_s)
        t1 = time.perf_counter_ns()
        self.recs.append(CallRecord(length=length, padded_length=target, latency_ns=t1 - t0,
                                    numel_padded=int(v.numel()), numel_real=real,
                                    compiled_variants=adapter.frames_ok()))
        if length not in self.firsts:
            self.firsts[length] = _leaves(out)
            self.memory.append(self._memory_step(i, length))
        return None

    def _memory_step(self, i: int, length: int) -> MemoryStep:
        import torch

        from ..capture import adapter
        from .probe import rss_bytes

        return MemoryStep(call_index=i, length=length, compiled_variants=adapter.frames_ok(), rss_bytes=rss_bytes(),
                          cuda_allocated_bytes=int(torch.cuda.memory_allocated()) if self.cuda else None)


def run_policy(
    spec: WorkerSpec, refs: dict[int, list[tuple[str, Any]]] | None = None
) -> tuple[PolicyResult, bytes | None]:
    """The torch loop: runs the trace under a session and keeps raw records; every figure of the
    result comes from :func:`seamscope.analyze.shapes.policy_result`."""
    import torch

    from ..capture import adapter
    from ..capture.session import Session
    from .ladder import compile_kwargs, resolve_backend

    t_start = time.perf_counter_ns()
    pol = parse_policy(spec.policy)
    wl, dim = _load(spec)
    opts = {**compile_kwargs(wl.compile_options), **pol.compile_options()}
    trace = list(spec.trace)
    refs = _references(spec, refs)
    adapter.dynamo_reset()
    adapter.clear_counters()
    if spec.recompile_limit is not None:
        adapter.set_recompile_limit(spec.recompile_limit)
    refused = _refusal(pol, wl, trace, opts)
    if refused is not None:
        return refused, None
    warnings: list[str] = []
    if pol.kind == "buckets" and trace and max(trace) > pol.sizes[-1]:
        k = sum(1 for m in trace if m > pol.sizes[-1])
        warnings.append(f"{k} calls longer than the largest bucket ({pol.sizes[-1]}) ran unpadded")
    loop = _Loop(wl, pol, Inputs(wl, dim), pol.dim if pol.dim is not None else dim, spec.delay_ns / 1e9)
    status, error = "ok", None
    n = len(trace)
    sess = Session(first_calls=max(n + 1, 256), call_cap=max(n + 1, 1024), write_html=False)
    sess.start()
    try:
        compiled = torch.compile(wl.fn_or_module, backend=resolve_backend(wl.backend), **opts)
        with grad_mode(wl):
            for i, length in enumerate(trace):
                stopped = loop.call(compiled, sess, i, length)
                if stopped is not None:
                    status, error = stopped
                    break
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted"
    except Exception as ex:  # torch.compile itself refused (bad options, unknown backend)
        status, error = "failed", described(ex)
    finally:
        sess.stop()
    ctr = adapter.dynamo_counters()
    ledger = sess.ledger
    assert ledger is not None
    correctness, worst = _compare(refs, loop.firsts, wl.tolerance)
    res = policy_result(PolicyRecords(
        policy=pol.name, kind=pol.kind, compile_options=opts, status=status, error=error, trace=trace,
        calls=loop.recs, ledger=ledger, frames_ok=adapter.frames_ok(),
        frames_total=int(ctr.get("frames", {}).get("total", 0)),
        unique_graphs=int(ctr.get("stats", {}).get("unique_graphs", 0)),
        memory=loop.memory, correctness=correctness, worst=worst, warnings=warnings,
        run_ns=time.perf_counter_ns() - t_start,
    ))
    return res, msgspec.json.encode(sess.receipt())


def _bare(pol: Policy, opts: dict[str, Any], status: str, error: str) -> PolicyResult:
    return PolicyResult(
        policy=pol.name,
        kind=pol.kind,  # type: ignore[arg-type]
        compile_options={k: repr(v) for k, v in opts.items()},
        status=status,  # type: ignore[arg-type]
        error=error,
    )


def _fails_eager(wl: Any, entry: Any) -> bool:
    from .workload import as_call

    args, kwargs = as_call(entry)
    try:
        with grad_mode(wl):
            wl.fn_or_module(*args, **kwargs)
    except Exception:
        return True
    return False


def _compare(refs: dict[int, list[tuple[str, Any]]], firsts: dict[int, list[tuple[str, Any]]],
             override: tuple[float, float] | None) -> tuple[str, Mismatch | None]:
    """Each length's first output (sliced back) against eager on the unpadded input."""
    from ..model.probe import LeafDiff
    from .differential import compare_leaf, worst_leaf

    if not firsts or not refs:
        return "not_checked", None
    per_length = []
    for length, leaves in firsts.items():
        ref = refs.get(length)
        if ref is None:
            continue
        got = dict(leaves)
        diffs = [compare_leaf(path, ev, got[path], override) if path in got else
                 LeafDiff(path=path, klass="boundary_bug", reason="structure: missing in compiled output")
                 for path, ev in ref]
        w = worst_leaf(diffs)
        if w is not None:
            per_length.append((w, length))
    worst = worst_leaf(w for w, _ in per_length)
    worst_len = next((n for w, n in per_length if w is worst), 0)
    if worst is None:
        return "not_checked", None
    def r(x: float | None) -> float | None:  # canonical floats, so a receipt round-trips exactly
        return round_float(x) if x is not None else None

    m = Mismatch(length=worst_len, path=worst.path, klass=worst.klass, reason=worst.reason,
                 tolerance_ratio=r(worst.tolerance_ratio), max_abs=r(worst.max_abs))
    return worst.klass, m


# --- process entry points --------------------------------------------------------------------------


def job(spec: WorkerSpec) -> int:
    """Run one job in this process and write its result file; the exit code says how it went.

    A library function that writes, on purpose: this runs in a child process (a fork of the
    zygote, or a fresh interpreter), and a file is its only channel back to the study. The write is
    atomic, so a child killed mid-way (timeout, crash in the user's code) leaves no half result."""
    import torch

    from ..render.files import write_atomic

    if spec.kind == "preflight":
        pre, refs = preflight(spec)
        if pre.ok and spec.refs:
            torch.save(refs, spec.refs)
        write_atomic(spec.result, msgspec.json.encode(pre))
        return 0
    try:
        res, receipt = run_policy(spec)
    except SeamscopeError as e:
        pol = parse_policy(spec.policy)
        res, receipt = _bare(pol, {}, "unusable" if e.exit_code == 2 else "failed", str(e)), None
    if receipt is not None:
        write_atomic(_receipt_path(spec.result), receipt)
    write_atomic(spec.result, msgspec.json.encode(res))
    return 0


def _receipt_path(result: str) -> str:
    return (result[:-5] if result.endswith(".json") else result) + ".receipt.json"


def run_job(arg: dict[str, Any]) -> int:
    """A job of the study's fresh processes (``experiments/fresh.py``): ``arg`` is a WorkerSpec."""
    try:
        return job(msgspec.convert(arg, type=WorkerSpec))
    except BaseException as e:  # noqa: BLE001 - the study reads the log and the exit code
        print(f"shapes worker: {described(e)}", file=sys.stderr)
        return 1


def preload(workload: str) -> None:
    """The zygote's warm-up: import the user's module (and what it imports) before any fork."""
    from .workload import load_object

    try:
        load_object(workload, "function")
    except Exception as e:  # the child reports it properly when it loads the workload
        print(f"zygote: preloading {workload}: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="seamscope-shapes-worker")
    ap.add_argument("--spec", required=True, help="a WorkerSpec JSON file: run that one job here")
    a = ap.parse_args(argv)
    with open(a.spec, "rb") as f:
        spec = msgspec.json.decode(f.read(), type=WorkerSpec)
    return job(spec)


if __name__ == "__main__":
    sys.exit(main())
