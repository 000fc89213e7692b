"""The check run of an unsafe guard setting: inputs changed on purpose, then the candidate's
outputs against the baseline's.

A guard setting PyTorch names ``_unsafe`` (a guard filter such as
``skip_guard_on_all_nn_modules_unsafe``, or ``skip_guard_eval_unsafe`` after warm-up) drops guards,
and a change that a dropped guard protected then runs a graph compiled for the old input. The
script's own calls may never make such a change, so the differential check of its outputs cannot
show it. The check run makes it (``run --guard-probe``, given to the output-check runs of the
baseline and of each unsafe candidate): once the script has returned, and only where it took no
optimizer step, each compiled callable it made (the first :data:`MAX_CALLABLES`) is called again
with its last call's inputs, under the grad and inference mode of that call: once as they were
(:data:`REPLAY`, the control: a candidate that differs there, and on no change beyond it, is not
judged), then changed one way at a time:

1. **a module attribute**: each plain ``int`` or ``float`` attribute of the compiled module and its
   submodules (the script's own classes first, then PyTorch's; at most :data:`MAX_ATTRIBUTES`),
   doubled (an ``int`` plus one), then set back;
2. **the training flag**: every submodule's ``training`` flipped, then set back;
3. **a shape**: dimension 0 of the first tensor argument one longer (its first row repeated), and
   of every tensor argument of the same length with it;
4. **a dtype**: the first floating tensor argument as ``float64`` (else an ``int64`` one as ``int32``).

Each call is seeded alike and fingerprinted as the output check does (:mod:`.fingerprint`). The
baseline keeps every guard, so it recompiles where the change needs it; the candidate must give
the same outputs. Outputs that differ mean it ran a stale graph; an exception the baseline did not
raise means PyTorch refused the recompile (``skip_guard_eval_unsafe`` raises on one). A change the
baseline itself raises on is not a valid input, and says nothing. The comparison is torch-free.

Limits: only what the script's ``torch.compile`` calls return is probed (a module a compiled plain
function reads as a global is not found); an attribute the forward does not read changes nothing
on either side; the probes' calls count as calls in the check run's receipt.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...model.trials import GuardCheck, ProbeResult
from .fingerprint import Fingerprints, Probe, compare_leaves, leaves_of

MAX_CALLABLES = 2
"""Compiled callables probed (the first the script made that were called)."""
MAX_ATTRIBUTES = 3
"""Module attributes changed, per callable."""
PROBE_SEED = 0
REPLAY = "the last call again: unchanged"
"""The control probe's label: the last call's inputs as they were."""


# --- recording (torch, in the check run) ------------------------------------------------------


@dataclass
class _Entry:
    call: Callable[..., Any]
    """The compiled callable under the output recorder (a probe is no call of the script's)."""
    module: Any
    last: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    modes: tuple[bool, bool] = (True, False)
    """The last call's grad mode and inference mode (a probe in another mode would fail a global
    guard, not the one under check)."""


@dataclass
class Prober:
    """Keeps each compiled callable's last inputs; :meth:`run` makes the probes."""

    entries: list[_Entry] = field(default_factory=list)

    def watch(self, compiled: Any, call: Callable[..., Any], recorded: Callable[..., Any]) -> Callable[..., Any]:
        """``recorded`` (what the script calls), keeping its last inputs; ``call`` is what a probe
        calls; ``compiled`` what ``torch.compile`` returned (its module is found from it)."""
        from ...capture import adapter

        entry = _Entry(call=call, module=adapter.compiled_module(compiled))
        self.entries.append(entry)

        import torch

        def watched(*args: Any, **kwargs: Any) -> Any:
            entry.last = (args, kwargs)
            entry.modes = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
            return recorded(*args, **kwargs)

        return watched

    def run(self) -> list[Probe]:
        import torch

        out: list[Probe] = []
        for e in [e for e in self.entries if e.last is not None][:MAX_CALLABLES]:
            assert e.last is not None
            args, kwargs = e.last
            for label, kind, apply in _changes(e.module, args, kwargs, e.call):
                torch.manual_seed(PROBE_SEED)
                try:
                    with apply() as (a, kw), torch.inference_mode(e.modes[1]), torch.set_grad_enabled(e.modes[0]):
                        result = e.call(*a, **kw)
                        leaves = leaves_of(result)
                    out.append(Probe(label=label, kind=kind, leaves=leaves))
                except Exception as ex:  # noqa: BLE001 - what it raised is the probe's result
                    first = (str(ex).strip().splitlines() or [""])[0][:200]
                    out.append(Probe(label=label, kind=kind, error=f"{type(ex).__name__}: {first}"))
        return out


Change = tuple[str, str, Callable[[], Any]]


def _changes(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], call: Callable[..., Any]) -> list[Change]:
    """The changes to make, in an order both runs share: attributes, training, shape, dtype."""
    import contextlib

    @contextlib.contextmanager
    def unchanged() -> Iterator[Any]:
        yield args, kwargs

    out: list[Change] = [(REPLAY, "replay", unchanged)]
    if module is not None:
        root = type(module).__name__
        for owner, path, name, value in _attributes(module):
            new = value * 2 if isinstance(value, float) and value else (1.0 if isinstance(value, float) else value + 1)

            @contextlib.contextmanager
            def attr(owner: Any = owner, name: str = name, value: Any = value, new: Any = new) -> Iterator[Any]:
                setattr(owner, name, new)
                try:
                    yield args, kwargs
                finally:
                    setattr(owner, name, value)

            out.append((f"{root}{path}.{name}: {value!r} → {new!r}", "attribute", attr))

        @contextlib.contextmanager
        def training() -> Iterator[Any]:
            flags = [(m, m.training) for m in module.modules()]
            module.train(not module.training)
            try:
                yield args, kwargs
            finally:
                for m, t in flags:
                    m.training = t

        out.append((f"{root}.training: {module.training} → {not module.training}", "training", training))
    names = _names(module, call, args, kwargs)
    shape = _shape_change(args, kwargs, names)
    if shape is not None:
        out.append(shape)
    dtype = _dtype_change(args, kwargs, names)
    if dtype is not None:
        out.append(dtype)
    return out


def _attributes(module: Any) -> list[tuple[Any, str, str, Any]]:
    """(owner, its path under the module, name, value) of plain numbers, the script's classes first."""
    own: list[tuple[Any, str, str, Any]] = []
    builtin: list[tuple[Any, str, str, Any]] = []
    for path, sub in module.named_modules():
        for name, value in vars(sub).items():
            if name.startswith("_") or name == "training" or type(value) not in (int, float):
                continue
            where = builtin if type(sub).__module__.startswith("torch.") else own
            where.append((sub, f".{path}" if path else "", name, value))
    return (own + builtin)[:MAX_ATTRIBUTES]


def _names(module: Any, call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, str]:
    """Each argument's parameter name (``args[0]`` where the signature does not say)."""
    fn = getattr(module, "forward", None) if module is not None else inspect.unwrap(call)
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs) if fn is not None else None
    except (TypeError, ValueError):
        bound = None
    out = {f"args[{i}]": f"args[{i}]" for i in range(len(args))} | {k: k for k in kwargs}
    if bound is not None:
        for i, name in enumerate(list(bound.arguments)[: len(args)]):
            out[f"args[{i}]"] = name
    return out


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    import torch

    return [(k, v) for k, v in [*((f"args[{i}]", a) for i, a in enumerate(args)), *kwargs.items()]
            if isinstance(v, torch.Tensor)]


def _replaced(args: tuple[Any, ...], kwargs: dict[str, Any], new: dict[str, Any]) -> tuple[tuple[Any, ...], dict]:
    a = tuple(new.get(f"args[{i}]", x) for i, x in enumerate(args))
    return a, {k: new.get(k, v) for k, v in kwargs.items()}


def _shape_change(args: tuple[Any, ...], kwargs: dict[str, Any], names: dict[str, str]) -> Change | None:
    import contextlib

    import torch

    ts = [(k, t) for k, t in _tensors(args, kwargs) if t.dim() >= 1 and t.shape[0] >= 1]
    if not ts:
        return None
    n = ts[0][1].shape[0]
    new = {k: torch.cat([t, t[:1]]) for k, t in ts if t.shape[0] == n}

    @contextlib.contextmanager
    def shape() -> Iterator[Any]:
        yield _replaced(args, kwargs, new)

    return f"dim 0 of {names.get(ts[0][0], ts[0][0])}: {n} → {n + 1}", "shape", shape


def _dtype_change(args: tuple[Any, ...], kwargs: dict[str, Any], names: dict[str, str]) -> Change | None:
    import contextlib

    import torch

    ts = _tensors(args, kwargs)
    pick = next(((k, t, torch.float64) for k, t in ts if t.is_floating_point() and t.dtype != torch.float64), None)
    pick = pick or next(((k, t, torch.int32) for k, t in ts if t.dtype == torch.int64), None)
    if pick is None:
        return None
    k, t, dtype = pick
    new = {k: t.to(dtype)}

    @contextlib.contextmanager
    def cast() -> Iterator[Any]:
        yield _replaced(args, kwargs, new)

    short = str(t.dtype).removeprefix("torch."), str(dtype).removeprefix("torch.")
    return f"dtype of {names.get(k, k)}: {short[0]} → {short[1]}", "dtype", cast


# --- comparison (torch-free) ------------------------------------------------------------------


_BROKE = {"stale": "kept a stale graph when {}", "raised": "raised when {} ({})"}


def _changed(label: str) -> str:
    """``Net.scale: 1.0 → 2.0`` → ``Net.scale changed 1.0 → 2.0``."""
    what, sep, values = label.partition(": ")
    return f"{what} changed {values}" if sep else label


def probe_results(base: list[Probe], cand: list[Probe]) -> list[ProbeResult]:
    """Each change the baseline's check run made, the candidate's call against it."""
    by = {p.label: p for p in cand}
    out = []
    for b in base:
        c = by.get(b.label)
        if c is None:
            out.append(ProbeResult(label=b.label, outcome="missing",
                                   detail="the candidate's check run made no such call"))
        elif b.error is not None:
            out.append(ProbeResult(label=b.label, outcome="not applicable", detail=f"the baseline raised {b.error}"))
        elif c.error is not None:
            out.append(ProbeResult(label=b.label, outcome="raised", detail=c.error))
        else:
            diff = compare_leaves(b.leaves or [], c.leaves or [])
            out.append(ProbeResult(label=b.label, outcome="stale" if diff else "recompiled", detail=diff))
    return out


def guard_check(base: Fingerprints | None, cand: Fingerprints | None, cand_error: str | None = None,
                deterministic: bool | None = None) -> GuardCheck:
    """An unsafe candidate's check: ``broke a recompile`` at the first change it ran stale or
    raised on, ``kept every recompile`` when every change the baseline took gave the baseline's
    outputs, ``could not check`` otherwise (why in ``detail``): among others where the baseline's
    two check runs disagree (``deterministic`` False: a difference could be its own)."""
    if deterministic is False:
        return GuardCheck(status="could not check", detail="the baseline is not deterministic: its two runs disagree")
    if cand is None or base is None:
        side = "the candidate's" if cand is None else "the baseline's"
        return GuardCheck(status="could not check", detail=f"{side} check run recorded nothing"
                          + (f" ({cand_error})" if cand is None and cand_error else ""))
    for fp, side in ((base, "the baseline's"), (cand, "the candidate's")):
        if fp.probes is None or fp.probe_note:
            why = f": {fp.probe_note}" if fp.probe_note else ""
            return GuardCheck(status="could not check", detail=f"{side} check run made no probe{why}")
    results = probe_results(base.probes or [], cand.probes or [])
    control = next((r for r in results if r.label == REPLAY), None)
    bad = next((r for r in results if r.label != REPLAY and r.outcome in ("stale", "raised")), None)
    if bad is not None:
        text = _BROKE[bad.outcome].format(_changed(bad.label), bad.detail)
        return GuardCheck(status="broke a recompile", probes=results, broke=text)
    if control is not None and control.outcome != "recompiled":  # and no change made a difference of its own
        return GuardCheck(status="could not check", probes=results,
                          detail=f"the last call made again, unchanged, did not give the baseline's outputs "
                          f"({control.outcome}: {control.detail})")
    results = [r for r in results if r.label != REPLAY]
    if not any(r.outcome == "recompiled" for r in results):
        why = "no change could be made (no compiled callable was called with a tensor or a module)" if not results \
            else "the baseline raised on every change, or the candidate made none"
        return GuardCheck(status="could not check", probes=results, detail=why)
    if any(r.outcome == "missing" for r in results):
        return GuardCheck(status="could not check", probes=results,
                          detail="the candidate's check run did not make every change the baseline's made")
    return GuardCheck(status="kept every recompile", probes=results)

