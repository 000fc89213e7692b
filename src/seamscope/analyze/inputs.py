"""Input trace hashes: a digest of what a run was fed, so two receipts can prove the same inputs
(``diff`` and ``check`` refuse to compare receipts whose input traces differ).

``run`` hashes the script's bytes and its arguments (:func:`script_sha256`); ``import`` the log's
bytes as it reads them; a Python-API user hashes the inputs of each call with :class:`InputTrace`
and hands the digest to ``seamscope.session(input_trace_sha256=...)``. Torch-free: a tensor is
anything with ``.shape`` and ``.dtype``; its values are read (``.detach().cpu()``) only when torch
is already imported, so hashing never pulls torch in.
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


def script_sha256(script: str | os.PathLike[str], args: Iterable[str] = (), module: bool = False) -> str:
    """``run``'s trace: the script's bytes (the module's name, for ``run -m``) and its arguments."""
    h = hashlib.sha256(b"seamscope.script.v1\n")
    if not module and os.path.isfile(script):
        with open(script, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    else:
        h.update(b"module:" + os.fsencode(script))
    for a in args:
        h.update(b"\0" + os.fsencode(str(a)))
    return h.hexdigest()
