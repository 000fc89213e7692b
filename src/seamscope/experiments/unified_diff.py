"""Unified diffs as ``git apply`` and ``patch -p1`` read them, torch-free: made from two texts
(:func:`make`) and applied to a text in memory (:func:`apply`, what ``seamscope run --patch``
does to the script before it runs), strictly: every hunk's context must match the file as it is,
at the line the hunk names, so that a patch that applies here applies there too.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field

from ..errors import UnusableInput

NO_NEWLINE = "\\ No newline at end of file"
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def patch_root(script: str) -> str:
    """Where a patch of the script applies from: the git work tree that holds it (``git apply``
    run below a work tree's top skips, silently, a path that is not below the current folder),
    else the current folder when the script is below it, else the script's folder."""
    path = os.path.abspath(script)
    d = os.path.dirname(path)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    for here in (os.path.abspath(os.getcwd()), os.path.realpath(os.getcwd())):  # a real path: the real folder
        if path.startswith(here + os.sep):
            return here
    return os.path.dirname(path)


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, each with its ``\\n`` (split there only, as ``git`` and ``patch`` do:
    ``str.splitlines`` would also split at form feeds, a lone ``\\r`` and other separators)."""
    out = text.split("\n")
    last = out.pop()
    return [ln + "\n" for ln in out] + ([last] if last else [])


def make(old: str, new: str, rel: str, context: int = 3) -> str:
    """The diff of one file from ``old`` to ``new``, its paths ``a/REL`` and ``b/REL`` (``-p1``);
    empty when they are equal."""
    if old == new:
        return ""
    a, b = split_lines(old), split_lines(new)
    out = [f"diff --git a/{rel} b/{rel}\n"]
    for line in difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}", n=context):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n").rstrip() + "\n")  # difflib puts a tab and no date: neither tool needs it
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n" + NO_NEWLINE + "\n")
    return "".join(out)


@dataclass
class Hunk:
    old_start: int
    lines: list[str] = field(default_factory=list)
    """Each line with its first character (`` ``, ``-``, ``+``) and its newline (or none: the
    file's last line without one)."""


@dataclass
class FileDiff:
    path: str
    """The path after ``b/`` (``-p1``)."""
    hunks: list[Hunk] = field(default_factory=list)


def parse(text: str) -> list[FileDiff]:
    """The files and hunks of a diff; :class:`UnusableInput` for a malformed one."""
    files: list[FileDiff] = []
    lines = split_lines(text)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            path = lines[i + 1][4:].rstrip("\n").split("\t")[0].strip()
            if path.startswith("b/"):
                path = path[2:]
            files.append(FileDiff(path=path))
            i += 2
            continue
        m = _HUNK.match(line)
        if m:
            if not files:
                raise UnusableInput("the patch has a hunk before any file header (--- a/FILE, +++ b/FILE)")
            old_n = int(m.group(2) if m.group(2) is not None else 1)
            new_n = int(m.group(4) if m.group(4) is not None else 1)
            hunk = Hunk(old_start=int(m.group(1)))
            i += 1
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < old_n or seen_new < new_n or lines[i].startswith("\\")):
                body = lines[i]
                if body.startswith("\\"):
                    if hunk.lines:
                        hunk.lines[-1] = hunk.lines[-1].rstrip("\n")
                    i += 1
                    continue
                blank = body in ("\n", "\r\n")  # an empty context line, its space left out
                tag = " " if blank else body[:1]
                if tag not in " -+":
                    raise UnusableInput(f"the patch's hunk at line {hunk.old_start} is cut short")
                hunk.lines.append(" " + body if blank else body)
                seen_old += tag in " -"
                seen_new += tag in " +"
                i += 1
            if seen_old != old_n or seen_new != new_n:
                raise UnusableInput(f"the patch's hunk at line {hunk.old_start} is cut short")
            files[-1].hunks.append(hunk)
            continue
        i += 1
    if not files:
        raise UnusableInput("the patch holds no file (expected a unified diff: --- a/FILE, +++ b/FILE, @@ hunks)")
    return files


def apply(text: str, diff: FileDiff) -> str:
    """``text`` with the hunks applied at the lines they name (no fuzz, no offset)."""
    src = split_lines(text)
    out: list[str] = []
    pos = 0  # lines of src consumed
    for h in diff.hunks:
        start = max(0, h.old_start - 1) if any(ln[0] in " -" for ln in h.lines) else h.old_start
        if start < pos:
            raise UnusableInput(f"{diff.path}: the patch's hunks overlap at line {h.old_start}")
        out += src[pos:start]
        pos = start
        for ln in h.lines:
            tag, body = ln[0], ln[1:]
            if tag in " -":
                if pos >= len(src) or src[pos] != body:
                    raise UnusableInput(f"{diff.path}: the patch does not apply at line {pos + 1} "
                                        "(the file differs from what the patch was made against)")
                pos += 1
            if tag in " +":
                out.append(body)
    out += src[pos:]
    return "".join(out)
