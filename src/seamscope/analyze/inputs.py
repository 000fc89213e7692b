"""Input trace hashes: a digest of what a run was fed, so two receipts can prove the same inputs.

The probe hashes its workload's input families (shapes, dtypes and a digest of
the values), ``run`` the script's bytes and its arguments, ``import`` the log's bytes. Torch-free:
a tensor is anything with ``.shape`` and ``.dtype``; its values are read (``.detach().cpu()``)
only when torch is already imported, so hashing never pulls torch in.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable
from typing import Any


def _tensor_bytes(t: Any) -> bytes | None:
    """The tensor's raw bytes, or None when they cannot be read (meta, sparse, no torch)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(t, torch.Tensor):
        return None
    try:
        flat = t.detach().cpu().contiguous().reshape(-1)
        try:
            return bytes(flat.view(torch.uint8).numpy().tobytes())
        except (RuntimeError, TypeError):
            return bytes(flat.numpy().tobytes())
    except (RuntimeError, TypeError, NotImplementedError):
        return None


def _walk(obj: Any, h: Any, values: bool) -> None:
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        h.update(f"T{tuple(int(d) for d in obj.shape)}:{obj.dtype};".encode())
        if values:
            raw = _tensor_bytes(obj)
            h.update(hashlib.sha256(raw).digest() if raw is not None else b"?")
        return
    if isinstance(obj, dict):
        h.update(b"{")
        for k in sorted(obj, key=repr):
            h.update(repr(k).encode() + b":")
            _walk(obj[k], h, values)
        h.update(b"}")
    elif isinstance(obj, (list, tuple)):
        h.update(b"[" if isinstance(obj, list) else b"(")
        for x in obj:
            _walk(x, h, values)
        h.update(b"]")
    elif obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        h.update(f"{type(obj).__name__}={obj!r};".encode())
    else:
        h.update(f"<{type(obj).__qualname__}>;".encode())


def family_key(args: Any) -> str:
    """The input family: structure, shapes and dtypes, no values (``T(2, 8):torch.float32``)."""
    h = hashlib.sha256()
    _walk(args, h, values=False)
    return h.hexdigest()[:16]


def inputs_sha256(args: Any) -> str:
    """Structure, shapes, dtypes and a digest of the values of one call's inputs."""
    h = hashlib.sha256()
    _walk(args, h, values=True)
    return h.hexdigest()


class InputTrace:
    """Accumulates the inputs of successive calls (their order matters) into one digest."""

    def __init__(self) -> None:
        self._h = hashlib.sha256(b"seamscope.inputs.v1\n")
        self.calls = 0

    def add(self, args: Any, kwargs: dict[str, Any] | None = None, family: str | None = None) -> None:
        self._h.update(f"{family}|".encode() + inputs_sha256((args, kwargs or {})).encode() + b"\n")
        self.calls += 1

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def families_sha256(families: Iterable[tuple[str, Any]]) -> str:
    """The probe's trace: each named input family and its inputs, in the order given."""
    t = InputTrace()
    for name, args in families:
        t.add(args, family=name)
    return t.hexdigest()


def script_sha256(script: str | os.PathLike[str], args: Iterable[str] = ()) -> str:
    """``run``'s trace: the script's bytes and its arguments."""
    with open(script, "rb") as f:
        data = f.read()
    h = hashlib.sha256(b"seamscope.script.v1\n")
    h.update(hashlib.sha256(data).digest())
    for a in args:
        h.update(b"\0" + str(a).encode())
    return h.hexdigest()


def log_sha256(path_or_bytes: str | os.PathLike[str] | bytes) -> str:
    """``import``'s trace: the log's bytes (a file, or a folder of ``TORCH_TRACE`` files)."""
    h = hashlib.sha256(b"seamscope.log.v1\n")
    if isinstance(path_or_bytes, bytes):
        h.update(path_or_bytes)
        return h.hexdigest()
    p = os.fspath(path_or_bytes)
    files = (
        sorted(os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs)
        if os.path.isdir(p)
        else [p]
    )
    for fp in files:
        h.update(os.path.relpath(fp, p).encode() + b"\0" if fp != p else b"")
        with open(fp, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):  # noqa: B023
                h.update(chunk)
    return h.hexdigest()
