"""Watch mode's text: the request tags (``seamscope.watch.tag``), the ``frame`` label, the log
line of an event, and the events file (``docs/watch.md``). Torch-free."""

from __future__ import annotations

import contextlib
import contextvars
import os
import stat

import msgspec

from ..analyze.display import cut, visible
from ..analyze.findings_common import stable_frame
from ..errors import UnusableInput
from ..ingest.source_scope import enclosing_def
from ..model.normalize import SITE_PREFIX, local_file
from ..model.watch import WatchEvent

NAME_LIMIT = 300
"""A name, cause or tag value in a log line is cut here (``docs/safety.md``); the events keep it whole."""
LINE_LIMIT = 2000
"""A whole log line is cut here."""

_CONTEXT: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "seamscope_watch_tags", default=None)


class tag:  # noqa: N801 - used as ``seamscope.watch.tag(request_id=...)``, like a function
    """Attach fields to what compiles in this context (a request): ``seamscope.watch.tag(request_id=r)``
    sets them until the context ends (a thread, an asyncio task); ``with seamscope.watch.tag(...):``
    sets them for the block. Events made meanwhile carry them in ``context``. The values are kept
    as given and made text only when an event is made (``current_tags``)."""

    def __init__(self, **fields: object) -> None:
        self._token = _CONTEXT.set({**(_CONTEXT.get() or {}), **fields})

    def __enter__(self) -> tag:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):  # reset in another context than the one that set it
            _CONTEXT.reset(self._token)


def as_text(value: object) -> str:
    """``str(value)``, or a placeholder when that fails: a tag never fails the request."""
    if type(value) is str:
        return value
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - any failure of the user's __str__
        text = None
    return text if isinstance(text, str) else f"<{type(value).__name__}: str() failed>"


def current_tags() -> dict[str, str]:
    return {k: as_text(v) for k, v in (_CONTEXT.get() or {}).items()}


def log_text(text: str, limit: int = NAME_LIMIT) -> str:
    """A user string in a log line: control characters shown, a newline as ``\\n`` (a tag cannot
    start a line of its own), cut at ``limit``."""
    return cut(visible(text).replace("\n", "\\n").replace("\t", "\\t"), limit)


def log_line(ev: WatchEvent, pid: int | None = None) -> str:
    """The event's log line, safe to print: user strings escaped and cut (``docs/safety.md``);
    ``pid`` names a forked child's events."""
    safe = msgspec.structs.replace(
        ev, frame=log_text(ev.frame), cause=log_text(ev.cause), detail=log_text(ev.detail),
        context={log_text(k): log_text(v) for k, v in ev.context.items()})
    who = f" pid={pid}" if pid is not None else ""
    return cut(f"seamscope: {safe.line_text()}{who}", LINE_LIMIT)


def open_events(path: str) -> int:
    """The events file opened for appending (unbuffered); one line (exit 2) for a FIFO, a socket,
    a folder or anything else that is neither a regular file nor a character device
    (``/dev/null``, ``/dev/full``, a terminal): opening a FIFO nobody reads would block."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UnusableInput(f"--events {path}: {e.strerror or e}") from None
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        raise UnusableInput(f"--events {path}: {kind}: events go to a regular file (or a device such as /dev/null)")
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        raise UnusableInput(f"--events {path}: cannot write: {e.strerror or e}") from None


def frame_key(name: str, file: str, line: int, root: str, qualname: str | None = None) -> str:
    """``module.Qualified.name`` of a frame: the module from its file (``site-packages/`` and
    ``.py`` dropped), the qualified name from its source (``qualname`` when known already), its
    bare name where the source cannot be read; a resume function's name without its line."""
    name = stable_frame(name)
    if qualname is None and not name.startswith("torch_dynamo_resume_in_"):
        path = local_file(file, root)
        found = enclosing_def(path, line, name) if path is not None else None
        if found is not None and found[0].rsplit(".", 1)[-1] == name:
            qualname = found[0]
    if qualname is None or qualname == "<module>":
        qualname = name
    rel = file[len(SITE_PREFIX):] if file.startswith(SITE_PREFIX) else os.path.basename(file) \
        if os.path.isabs(file) else file
    parts = [p for p in (rel[:-3] if rel.endswith(".py") else rel).split("/") if p and p != "__init__"]
    return ".".join([*parts, qualname]) if parts and not rel.startswith("<") else qualname
