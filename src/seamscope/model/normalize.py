"""Run-specific text made comparable: addresses, absolute paths, object ids and process ids.

Applied where text enters the ledger (capture and import), so that two runs of the same program
produce the same sites, guard texts and hashes (docs/conventions.md, "Hashes and determinism"); and
back: where a file a receipt names is on this machine (:func:`local_file`, for the report's source
context and capture's frame names).
"""

from __future__ import annotations

import os
import re
from typing import Any

_ADDR = re.compile(r"0x[0-9a-fA-F]{4,}")
_OBJ_ID = re.compile(r"(___check_obj_id\([^,()]*(?:\([^()]*\))?[^,()]*,\s*)\d+")
_ID_EQ = re.compile(r"(\bid\([^()]*\)\s*==\s*)\d{6,}")
_PID = re.compile(r"\b(pid[ =:]+)\d+", re.IGNORECASE)
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.+-]+/)+[\w.+-]+")


SITE_PREFIX = "site-packages/"
"""How a receipt names a file of an installed package (:func:`normalize_path`)."""


def site_package_dirs() -> list[str]:
    """Where installed packages live for this interpreter: the ``site-packages`` and
    ``dist-packages`` folders on ``sys.path`` and those ``site`` names, in that order, once each."""
    import site
    import sys

    found = [p for p in sys.path if os.path.basename(p.rstrip("/")) in ("site-packages", "dist-packages")]
    try:
        found += [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a virtualenv's old site module
        pass
    return list(dict.fromkeys(found))


def local_file(file: str, root: str) -> str | None:
    """Where a file a receipt names (as :func:`normalize_path` wrote it: relative to the run's
    ``root``, ``site-packages/...``, or absolute) is on this machine; None when it is not here."""
    if not file or file.startswith("<"):
        return None
    candidates = [file if os.path.isabs(file) else os.path.join(root, file)]
    if file.startswith(SITE_PREFIX):  # an installed package's file
        candidates += [os.path.join(d, file[len(SITE_PREFIX):]) for d in site_package_dirs()]
    return next((p for p in candidates if os.path.isfile(p)), None)


def normalize_path(path: str, cwd: str | None = None) -> str:
    """An absolute path as it should appear in a receipt: relative to ``cwd`` when under it,
    ``site-packages/...`` for installed packages, else unchanged."""
    if not path or not path.startswith("/"):
        return path
    i = path.find("-packages/")
    if i >= 0 and (path[:i].endswith("/site") or path[:i].endswith("/dist")):
        return SITE_PREFIX + path[i + len("-packages/") :]
    base = cwd if cwd is not None else os.getcwd()
    base = base.rstrip("/") + "/"
    if path.startswith(base):
        return path[len(base) :]
    return path


_STDLIB = re.compile(r"(?:^|/)lib/python3\.\d+t?/")
_INSTALLED = ("site-packages/", "dist-packages/")


def _installed(p: str) -> str | None:
    """The part of a ``/``-separated path after its last ``site-packages/`` (``dist-packages/``)."""
    for marker in _INSTALLED:
        i = p.rfind(marker)
        if i == 0 or (i > 0 and p[i - 1] == "/"):
            return p[i + len(marker) :]
    return None


def library_path(path: str) -> str | None:
    """A library file's path below the folder it is installed in: ``transformers/models/x.py`` for
    ``site-packages/transformers/models/x.py`` (as :func:`normalize_path` writes it, or absolute,
    ``dist-packages`` too) and ``collections/__init__.py`` for the standard library's
    ``/usr/lib/python3.11/collections/__init__.py``; ``importlib/_bootstrap`` for a frozen module
    (``<frozen importlib._bootstrap>``); None for the user's code. The one answer to "is this
    library code?" (:func:`is_library`, :func:`package_of`); code given as text (``<string>``, a
    notebook's ``<ipython-input-...>``) is the user's."""
    p = path.replace(os.sep, "/")
    rest = _installed(p)
    if rest is not None:
        return rest
    if p.startswith("<frozen ") and p.endswith(">"):
        return p[len("<frozen ") : -1].replace(".", "/")
    stdlib = list(_STDLIB.finditer(p))
    return p[stdlib[-1].end() :] if stdlib else None


def is_library(path: str) -> bool:
    """Whether a file is library code (installed packages, the standard library), not the user's."""
    return library_path(path) is not None


def package_of(path: str) -> str | None:
    """``transformers``, ``torch``, ``contextlib``: the top-level package or module a library file
    belongs to; None for the user's code."""
    rest = library_path(path)
    if rest is None:
        return None
    return rest.split("/", 1)[0].removesuffix(".py") or None


def short_path(path: str) -> str:
    """A path as findings and reports show it: an installed package's file from the package's
    folder on (``transformers/models/x.py``), any other unchanged."""
    rest = _installed(path.replace(os.sep, "/"))
    return path if rest is None else rest


PROJECT_MARKERS = (".git", "pyproject.toml")
"""What makes a folder a project's root (``project_root``)."""


def project_root(start: str) -> str:
    """The folder paths in a ``seamscope run`` receipt are relative to (so that break-site ids do
    not depend on how the script was spelled, on the working directory, or on where the checkout
    is): the nearest folder at or above ``start`` (the script's folder; the working directory for
    ``-m``) holding ``.git`` or ``pyproject.toml``, else ``start`` itself."""
    here = os.path.abspath(start)
    d = here
    while True:
        if any(os.path.exists(os.path.join(d, m)) for m in PROJECT_MARKERS):
            return d
        up = os.path.dirname(d)
        if up == d:
            return here
        d = up


def normalize_text(text: str, cwd: str | None = None) -> str:
    """Normalise every run-specific token inside free text (reasons, guards, stacks)."""
    if not text:
        return text
    text = _ADDR.sub("0x…", text)
    text = _OBJ_ID.sub(r"\g<1><id>", text)
    text = _ID_EQ.sub(r"\g<1><id>", text)
    text = _PID.sub(r"\g<1><pid>", text)
    return _ABS_PATH.sub(lambda m: normalize_path(m.group(0), cwd), text)


def reason_headline(text: str) -> str:
    """A reason's first line, as a one-line summary; when that line only introduces what follows
    (``backend='x' raised:``), the next line (the cause) is joined to it."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


class _Normalized(dict[str, str]):
    """Texts normalised (:func:`normalize_text`) against one ``cwd``, each once: a frame's
    recompile reasons repeat every earlier entry's reason, and each restart of a frame gives the
    same restart reason. Looked up in C (``map(d.__getitem__, ...)``); at most :data:`TEXTS_KEPT`."""

    def __init__(self, cwd: str | None) -> None:
        super().__init__()
        self.cwd = cwd

    def __missing__(self, text: str) -> str:
        if len(self) >= TEXTS_KEPT:
            self.clear()
        out = self[text] = normalize_text(text, self.cwd)
        return out


TEXTS_KEPT = 8192
_NORMALIZED: dict[str | None, _Normalized] = {}


def normalized(cwd: str | None) -> dict[str, str]:
    """``text → normalize_text(text, cwd)``, computed on first use and kept."""
    found = _NORMALIZED.get(cwd)
    if found is None:
        found = _NORMALIZED[cwd] = _Normalized(cwd)
    return found


class _NotText(Exception):
    """A value that is no string: :func:`stripped_normalized` gives up."""


class _Stripped(dict[str, "str | None"]):
    """A string → the text kept of it: stripped and normalised, or None (blank: dropped). A
    frame's ``k``-th recompile names the ``k - 1`` reasons before it again, so each distinct
    string is looked at once and every repeat is one lookup in C; at most :data:`TEXTS_KEPT`."""

    def __init__(self, cwd: str | None) -> None:
        super().__init__()
        self.normalized = normalized(cwd)

    def __missing__(self, raw: object) -> str | None:
        if type(raw) is not str:
            raise _NotText
        if len(self) >= TEXTS_KEPT:
            self.clear()
        text = raw.strip()
        out = self[raw] = self.normalized[text] if text else None
        return out


_STRIPPED: dict[str | None, _Stripped] = {}


def stripped_normalized(values: list[Any], cwd: str | None) -> list[str] | None:
    """``[normalize_text(v.strip(), cwd) for v in values if v.strip()]`` when every value is a
    string (a decoded ``recompile_reasons`` list), each distinct string worked out once; None
    when one is not a string (the caller converts)."""
    kept = _STRIPPED.get(cwd)
    if kept is None:
        kept = _STRIPPED[cwd] = _Stripped(cwd)
    try:
        out = list(map(kept.__getitem__, values))
    except (_NotText, TypeError):  # a number, a list, an object (TypeError: unhashable)
        return None
    return out if None not in out else [r for r in out if r is not None]  # type: ignore[return-value]
