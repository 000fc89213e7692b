"""A probe workload run as a program: what ``seamscope run FILE.py:FUNC`` executes.

The workload's callable is compiled as the workload says (its backend and ``compile_options``) and
called as the probe calls it: the first ``steady`` entry cold, ``warm_calls`` warm calls cycling
over ``steady``, then every entry of the other families once, each call labelled with its family.
With ``--lengths`` the calls are a length trace instead (inputs from the workload's
``make_input``, or its first ``steady`` tensor resized), as the shape study makes them.

``--pad POLICY`` (``pow2``, ``buckets:64,128,...``) pads each call's varying tensor to the
policy's length and cuts the output back, so that a padded run's outputs compare with an
unpadded one's: the output fingerprint of a call is taken of what the caller gets back.

This runs inside an observed session, so ``torch.compile`` here is whatever the session and the
remedy flags made of it (``--compile-option`` overrides apply to this compile too).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from ..errors import UnusableInput


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="seamscope run FILE.py:FUNC --", add_help=True)
    p.add_argument("workload")
    p.add_argument("--lengths", default=None, help="A length trace: 128,129,256 (calls the workload's make_input).")
    p.add_argument("--lengths-file", default=None, help="A length trace from a file (one length per line, or JSON).")
    p.add_argument("--dim", type=int, default=None, help="The dim of the varying tensor that is the length.")
    p.add_argument("--pad", default=None, help="Pad each call's length: pow2 or buckets:64,128,...")
    try:
        return p.parse_args(argv)
    except SystemExit as e:
        if e.code in (0, None):
            raise
        raise UnusableInput(
            f"workload arguments {' '.join(argv[1:])!r}: see `seamscope run FILE.py:FUNC -- --help`"
        ) from None


def launcher(target: str, args: list[str], module: bool = False) -> Any:
    """:func:`main`, for ``capture.runner.run_target(launch=...)``, when ``target`` is a workload
    ``FILE.py:FUNC`` (its arguments checked first); None for a script or a module."""
    from .workload import is_workload_spec

    if module or not is_workload_spec(target):
        return None
    check_args([target, *args])
    return main


def pad_policy(text: str | None) -> Any:
    """A padding policy of the shape study (None: no padding); others are compile options."""
    if text is None:
        return None
    from .shapes import parse_policy

    pol = parse_policy(text)
    if not pol.pads:
        raise UnusableInput(f"--pad {text!r}: expected pow2 or buckets:SIZES (other shape policies are "
                            "--compile-option dynamic=... or --mark-dynamic)")
    return pol


def trace_lengths(ns: argparse.Namespace) -> list[int] | None:
    from .shapes import lengths_from_file, lengths_from_text

    if ns.lengths is not None and ns.lengths_file is not None:
        raise UnusableInput("give --lengths or --lengths-file, not both")
    if ns.lengths is not None:
        return lengths_from_text(ns.lengths)
    if ns.lengths_file is not None:
        return lengths_from_file(ns.lengths_file)
    return None


def schedule(wl: Any, lengths: list[int] | None) -> list[tuple[str, Any]]:
    """(family, entry or length) in call order."""
    if lengths is not None:
        return [("trace", n) for n in lengths]
    fams = wl.families()
    steady = fams["steady"]
    calls = [("steady", steady[0])]
    calls += [("steady", steady[(i + 1) % len(steady)]) for i in range(wl.warm_calls)]
    calls += [(f, e) for f, es in fams.items() if f != "steady" for e in es]
    return calls


@contextlib.contextmanager
def _label(family: str) -> Iterator[None]:
    from ..capture.session import active_session

    sess = active_session()
    if sess is None:
        yield
        return
    with sess.family(family):
        yield


def _cut_back(inputs: Any, length: int, padded: int, out: Any) -> Any:
    return inputs.slice(out, length, padded)


def check_args(argv: list[str]) -> None:
    """The workload's own options, checked before a session starts (a bad one: exit 2, nothing
    written)."""
    ns = parse_args(argv)
    pad_policy(ns.pad)
    trace_lengths(ns)


def main(argv: list[str]) -> int:
    """Run the workload ``argv[0]`` names; the rest are its options (see :func:`parse_args`)."""
    ns = parse_args(argv)
    pol = pad_policy(ns.pad)
    lengths = trace_lengths(ns)
    import torch

    from .ladder import resolve_backend
    from .shapes_worker import Inputs
    from .trials import fingerprint
    from .workload import as_call, grad_mode, load_workload, prepare

    wl = prepare(load_workload(ns.workload))
    dim = ns.dim if ns.dim is not None else wl.length_dim
    inputs = Inputs(wl, dim)
    kwargs = {k: v for k, v in wl.compile_options.items() if k != "backend"}  # the workload's backend field wins
    compiled = torch.compile(wl.fn_or_module, backend=resolve_backend(wl.backend), **kwargs)
    torch.manual_seed(wl.seed)
    with grad_mode(wl):
        for family, item in schedule(wl, lengths):
            entry = inputs.make(item) if lengths is not None else item
            view: Any = None
            if pol is not None:
                varying = inputs.varying(entry)
                if varying is None or varying.dim() <= dim:
                    raise UnusableInput(f"--pad: the call's first tensor has no dim {dim} to pad (--dim)")
                n = int(varying.shape[dim])
                target = pol.target(n)
                if target != n:
                    entry = inputs.pad(entry, target)
                    view = functools.partial(_cut_back, inputs, n, target)
            args, kw = as_call(entry)
            with _label(family), fingerprint.output_view(view):
                compiled(*args, **kw)
    return 0
