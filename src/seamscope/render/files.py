"""Atomic file writing: temp file in the same folder, then rename, so nothing is half-written."""

from __future__ import annotations

import os
import tempfile

from ..errors import UnusableInput


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> str:
    p = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(p))
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    except OSError as e:
        raise UnusableInput(f"{p}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p
