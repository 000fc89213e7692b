"""Atomic file writing: each file is written under a temporary name in its own folder, then renamed
over the old one, so that nothing is ever half-written. Files are created with the mode the umask
gives (as ``open(path, "w")`` would), never the 0600 of a ``mkstemp`` file.

An output set (``receipt.json``, ``calls.csv``, ``index.html``) is written with :func:`write_set`:
every file is first written under its temporary name, then renamed into place, the receipt
first; no file of the set is committed without its receipt, and a file that could not be written
leaves no file of another run in its place (see ``docs/reliability.md``).

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
    no such file, so an older one is removed). The last entry is the set's anchor (the receipt):
    every file is staged before any is renamed into place; the anchor is renamed first, and no
    other file of the set is committed without it. Returns the paths written.

    When the anchor cannot be written (disk full, quota, permissions), nothing of the set is
    committed: the folder keeps this run's earlier anchor (a checkpoint), and a file of another
    run there is removed. When the anchor is written but another file cannot be, the anchor
    stands alone (that file's older version is removed): the folder never holds files of two
    runs, nor a file newer than its receipt. Then :class:`WriteFailed` names the files that were
    and were not written. ``fresh``: the first write of a new run (files written earlier by this
    process are another run's now).
    """
    d = os.fspath(folder)
    ensure_folder(d)
    if fresh:
        _WRITTEN.difference_update(os.path.abspath(os.path.join(d, name)) for name in files)
    names = list(files)
    anchor = names[-1] if names and files[names[-1]] is not None else None
    staged: dict[str, str] = {}
    failed: dict[str, str] = {}
    written: list[str] = []
    try:
        for name, data in files.items():
            if data is None:
                continue
            try:
                staged[name] = _stage(os.path.join(d, name), data)
            except OSError as e:
                failed[name] = _why(e)
        if anchor is not None and anchor in failed:  # nothing of this set can stand without it
            for name in names:
                path = os.path.join(d, name)
                if os.path.abspath(path) not in _WRITTEN:
                    _remove(path, name, failed)
        else:
            for name in names:  # what will not be this set's goes before the anchor is replaced
                if name not in staged:
                    _remove(os.path.join(d, name), name, failed)
            order = ([anchor] if anchor is not None else []) + [n for n in names if n in staged and n != anchor]
            for name in order:
                path = os.path.join(d, name)
                tmp = staged.pop(name)
                try:
                    _commit(tmp, path)
                    written.append(path)
                except OSError as e:
                    failed[name] = _why(e)
                    if name == anchor:
                        break
    finally:
        for tmp in staged.values():
            _drop(tmp)
    if failed:
        reasons = sorted(set(failed.values()))
        kept = ", ".join(os.path.basename(p) for p in written) or "nothing new"
        raise WriteFailed(
            f"{d}: could not write {', '.join(n for n in names if n in failed)} ({'; '.join(reasons)}); "
            f"written: {kept}",
            written, [n for n in names if n in failed],
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
