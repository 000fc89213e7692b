"""One way to show a user-derived string to people: as text, never as commands to the terminal.

A file name, a function name, a break reason or a guard text comes from the user's script, an
imported log or a colleague's receipt. Printed raw, ``ESC[2J`` clears the screen, an OSC 0
sequence retitles the window, an OSC 8 sequence plants a hyperlink to any address, and a
``[/]`` crashes rich's markup parser. Every renderer that writes to a terminal or to Markdown
passes such strings through :func:`shown` (plain text) or :func:`markup` (inside rich markup):

- control characters (C0 except tab and newline, DEL, C1) and the bidirectional-override
  characters become visible escapes (``\\x1b``, ``\\u202e``); an escape sequence is then inert text;
- strings longer than a limit are cut, with a marker saying how much was left out (the receipt
  keeps them whole);
- :func:`markup` also escapes rich markup, so ``[bold]`` and ``[/]`` print as written, and so do
  backslashes (``L\\['x'\\]``, a path ending in ``\\``), whatever markup the caller puts after it.
"""

from __future__ import annotations

import re

#: Longest user string a terminal line shows before it is cut (the receipt keeps it whole).
TERMINAL_LIMIT = 300

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C, 0x2028, 0x2029)


def _escape_of(cp: int) -> str:
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


_VISIBLE = {
    cp: _escape_of(cp)
    for cp in (*range(0x00, 0x20), *range(0x7F, 0xA0), *_BIDI)
    if cp not in (0x09, 0x0A)
}


#: What :func:`json_safe` escapes: DEL, C1 and bidi controls (JSON encoders escape C0 already).
_JSON_ESCAPES = {cp: f"\\u{cp:04x}" for cp in (0x7F, *range(0x80, 0xA0), *_BIDI)}


def json_safe(text: str) -> str:
    """JSON text for a terminal: DEL, C1 and bidi controls as ``\\uXXXX`` escapes, so a string
    cannot drive the terminal or reorder the line; the JSON reads back to the same values (such
    characters appear only inside JSON strings, where the escape means the character itself)."""
    return text.translate(_JSON_ESCAPES)


def visible(text: str) -> str:
    """``text`` with every control character as a visible escape (tab and newline kept)."""
    return text.translate(_VISIBLE)


def cut(text: str, limit: int = TERMINAL_LIMIT) -> str:
    """At most ``limit`` characters of ``text``, then ``…(+N chars)`` when some were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} chars)"


def shown(text: object, limit: int | None = TERMINAL_LIMIT) -> str:
    """A user string for a plain-text terminal line: control characters visible, cut at ``limit``
    (``None``: never cut)."""
    t = visible(str(text))
    return t if limit is None else cut(t, limit)


def markup(text: object, limit: int | None = TERMINAL_LIMIT) -> str:
    """:func:`shown`, escaped for rich markup: it prints as written, never styles or crashes."""
    # imported here: a command that prints no markup (``seamscope import``) never loads rich
    from rich.markup import escape

    # rich drops the backslash just before a "[" that opens no tag, and its escape() escapes only
    # those before a tag-like "[x...]": one more keeps a regex such as L\['x'\] as written
    t = shown(text, limit)
    body = t.rstrip("\\")
    out = escape(_LONE_BACKSLASHES.sub(lambda m: m.group(1) + "\\", body))
    if len(body) == len(t):
        return out
    # trailing backslashes (C:\tmp\): whether they escape what follows depends on what the caller
    # writes next, a tag ("[/dim]") or nothing, and escape() doubles one (printed doubled where
    # nothing follows) but not two or three (eating the caller's tag). Doubled and closed by an
    # empty span they print as written either way.
    return out + "\\" * (2 * (len(t) - len(body))) + "[none][/none]"


_LONE_BACKSLASHES = re.compile(r"(\\+)(?=\[(?![a-z#/@][^\[]*?\]))")


__all__ = ["TERMINAL_LIMIT", "json_safe", "visible", "cut", "shown", "markup"]
