"""Atomic file writing: each file is written under a temporary name in its own folder, then renamed
over the old one, so that nothing is ever half-written. Files are created with the mode the umask
gives (as ``open(path, "w")`` would), never the 0600 of a ``mkstemp`` file.

An output set (``receipt.json``, ``calls.csv``, ``index.html``) is written with :func:`write_set`:
every file is first written under its temporary name, then renamed into place; a file that could
not be written leaves no file of another run in its place (see ``docs/reliability.md``).

A process that must stop at once while writing (a second signal) calls :func:`discard_pending`
first: it removes the temporary files of writes in progress.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import UnusableInput

_PENDING: set[str] = set()
"""Temporary files being written now (removed by ``discard_pending``)."""
_WRITTEN: set[str] = set()
"""Absolute paths this process wrote: a file of an earlier write of this run, not another run's."""


class WriteFailed(UnusableInput):
    """Some files of an output set could not be written (exit 2); ``written`` lists those that were."""

    def __init__(self, message: str, written: list[str], failed: list[str]) -> None:
        super().__init__(message)
        self.written = written
        self.failed = failed


def _temp_name(path: str) -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".tmp-{name}-{os.getpid()}-{os.urandom(4).hex()}")


def _stage(path: str, data: bytes | str) -> str:
    """Write ``data`` under a temporary name beside ``path``; return that name (OSError on failure)."""
    tmp = _temp_name(path)
    _PENDING.add(tmp)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
    except BaseException:
        _drop(tmp)
        raise
    return tmp


def _drop(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass
    _PENDING.discard(tmp)


def _commit(tmp: str, path: str) -> None:
    try:
        os.replace(tmp, path)
    except BaseException:
        _drop(tmp)
        raise
    _PENDING.discard(tmp)
    _WRITTEN.add(os.path.abspath(path))


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def ensure_folder(folder: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise UnusableInput(f"{folder}: cannot write: {_why(e)}") from None


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> str:
    p = os.fspath(path)
    ensure_folder(os.path.dirname(os.path.abspath(p)))
    try:
        _commit(_stage(p, data), p)
    except OSError as e:
        raise UnusableInput(f"{p}: cannot write: {_why(e)}") from None
    return p


def write_set(folder: str | os.PathLike[str], files: dict[str, bytes | str | None], *, fresh: bool = False) -> list[str]:
    """Write the files of one output set into ``folder`` (name → content; ``None``: this set has
    no such file, so an older one is removed). Every file is staged before any is renamed into
    place, in the order given (put the receipt last). Returns the paths written.

    When some files cannot be written (disk full, quota, permissions), the others are still
    written, and a file of the set that could not be written is removed unless this process
    wrote it earlier in the run (a checkpoint of the same run stays): the folder never holds
    files of two runs. Then :class:`WriteFailed` names the files that were and were not written.
    ``fresh``: the first write of a new run (files written earlier by this process are another
    run's now).
    """
    d = os.fspath(folder)
    ensure_folder(d)
    if fresh:
        _WRITTEN.difference_update(os.path.abspath(os.path.join(d, name)) for name in files)
    staged: list[tuple[str, str]] = []
    failed: dict[str, str] = {}
    try:
        for name, data in files.items():
            if data is None:
                continue
            path = os.path.join(d, name)
            try:
                staged.append((_stage(path, data), path))
            except OSError as e:
                failed[name] = _why(e)
        for name, data in files.items():
            path = os.path.join(d, name)
            if (data is None or name in failed) and os.path.abspath(path) not in _WRITTEN:
                _remove(path, name, failed)
        written: list[str] = []
        while staged:
            tmp, path = staged.pop(0)
            try:
                _commit(tmp, path)
                written.append(path)
            except OSError as e:
                failed[os.path.basename(path)] = _why(e)
    finally:
        for tmp, _ in staged:
            _drop(tmp)
    if failed:
        reasons = sorted(set(failed.values()))
        kept = ", ".join(os.path.basename(p) for p in written) or "nothing new"
        raise WriteFailed(
            f"{d}: could not write {', '.join(failed)} ({'; '.join(reasons)}); written: {kept}",
            written, list(failed),
        )
    return written


def _remove(path: str, name: str, failed: dict[str, str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        failed.setdefault(name, _why(e))


def check_writable(folder: str | os.PathLike[str]) -> str:
    """Create ``folder`` if needed and write (then remove) a small file in it; ``UnusableInput``
    with one line when that fails. Returns the folder."""
    d = os.fspath(folder)
    if os.path.exists(d) and not os.path.isdir(d):
        raise UnusableInput(f"{d}: cannot write the output there: it is a file, not a folder")
    ensure_folder(d)
    probe = os.path.join(d, ".seamscope-write-check")
    try:
        _drop(_stage(probe, b"seamscope\n"))
    except OSError as e:
        raise UnusableInput(f"{d}: cannot write: {_why(e)}") from None
    return d


def discard_pending(extra: Iterable[str] = ()) -> None:
    """Remove the temporary files of writes in progress (and ``extra``): before ``os._exit``."""
    for tmp in [*_PENDING, *extra]:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    _PENDING.clear()
