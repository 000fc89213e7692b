"""A user's source file as seamscope reads it and writes patches of it (torch-free).

The edits (:mod:`.trials.patches`, the code-change rewrites) work on one normal form of the text:
decoded, without a byte-order mark, every line ending ``\\n`` (what :mod:`ast` and the edit
positions see). A patch file is then written in the file's own form, so that ``git apply`` and
``patch -p1`` apply it byte for byte, and ``run --patch`` applies it as they do:

- **encoding**: as Python reads the file (PEP 263: a UTF-8 byte-order mark, else a ``coding:``
  line, else UTF-8), kept in the patch's lines (a latin-1 file gets a latin-1 patch);
- **byte-order mark**: kept on the first line;
- **line endings**: the file's own (``\\r\\n`` or ``\\n``); a file that mixes them, or ends lines
  with ``\\r`` alone, gets no patch (the reason is :class:`SourceUnusable`'s one line);
- **real path**: a script reached through a symbolic link is patched where it lies: the patch
  names the real file, relative to its project root.
"""

from __future__ import annotations

import io
import os
import tokenize
from dataclasses import dataclass

from .unified_diff import apply, make, parse, patch_root


class SourceUnusable(ValueError):
    """Why a file cannot be read, or a patch of it cannot be made (one line)."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    """The file's real path (symbolic links resolved)."""
    text: str
    """Decoded, no byte-order mark, ``\\n`` line endings."""
    codec: str
    """The codec of its bytes (``utf-8``, ``iso-8859-1``, ...)."""
    bom: bool
    newline: str | None
    """``\\n`` or ``\\r\\n``; None where the file mixes them or ends lines with ``\\r`` alone."""
    why_no_newline: str = ""

    def file_text(self, text: str) -> str:
        """``text`` (normal form) as the file holds it: its line endings, its byte-order mark."""
        if self.newline is None:
            raise SourceUnusable(f"{self.path}: {self.why_no_newline}; no patch is made of it")
        return ("\ufeff" if self.bom else "") + (text if self.newline == "\n" else text.replace("\n", self.newline))

    def to_bytes(self, text: str) -> bytes:
        """``text`` (already in file form) in the file's encoding."""
        try:
            return text.encode(self.codec)
        except UnicodeEncodeError as e:
            raise SourceUnusable(f"{self.path}: the patch holds {text[e.start:e.end]!r}, which the file's "
                                 f"encoding ({self.codec}) cannot hold; no patch is made of it") from None


def decode_source(data: bytes, path: str) -> SourceFile:
    """The file's bytes read as Python reads them; :class:`SourceUnusable` where they cannot be."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        raise SourceUnusable(f"{path}: {e.msg}") from None
    bom = encoding == "utf-8-sig"
    codec = "utf-8" if bom else encoding
    try:
        text = data.decode(codec)
    except (UnicodeDecodeError, LookupError) as e:
        raise SourceUnusable(f"{path}: not {codec}, its declared encoding ({e})") from None
    if bom and text.startswith("\ufeff"):
        text = text[1:]
    crlf = text.count("\r\n")
    cr, lf = text.count("\r") - crlf, text.count("\n") - crlf
    newline: str | None = "\r\n" if crlf and not lf else "\n"
    why = ""
    if cr:
        newline, why = None, "it ends lines with a carriage return alone"
    elif crlf and lf:
        newline, why = None, f"it mixes line endings ({crlf} CRLF, {lf} LF)"
    if crlf or cr:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return SourceFile(path=path, text=text, codec=codec, bom=bom, newline=newline, why_no_newline=why)


def read_source(path: str) -> SourceFile:
    """The file at ``path`` (through any symbolic link); :class:`SourceUnusable` where it cannot be read."""
    real = os.path.realpath(path)
    try:
        with open(real, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SourceUnusable(f"{path}: cannot read it ({e.strerror or e})") from None
    return decode_source(data, real)


def rel_path(path: str) -> str:
    """The file's real path relative to its project root: what a patch of it names (``a/REL``)."""
    real = os.path.realpath(path)
    return os.path.relpath(real, patch_root(real)).replace(os.sep, "/")


def patch_bytes(diff: str, script: str) -> bytes:
    """The patch file of ``diff`` (made on the normal form of each file it names, paths relative
    to the script's project root): each file's part in that file's own line endings,
    byte-order mark and encoding. :class:`SourceUnusable` where one cannot be."""
    root = patch_root(os.path.realpath(script))
    out = []
    for fd in parse(diff):
        src = read_source(os.path.join(root, fd.path))
        new = apply(src.text, fd)
        out.append(src.to_bytes(make(src.file_text(src.text), src.file_text(new), fd.path)))
    return b"".join(out)
