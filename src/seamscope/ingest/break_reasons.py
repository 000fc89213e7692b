"""The texts Dynamo writes about a graph break, read: a ``dynamo_graph_break_reason`` payload into
the :class:`~seamscope.model.ledger.BreakSite` it names (:func:`parse_break_reason`), and a break
site's id (:func:`site_id_for`, the older scheme's :func:`legacy_site_id`).

Torch-free and never executes anything from a log; used by the assembler of compile events
(:mod:`.compile_events`) for live capture and import alike.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from ..model.ledger import BreakSite, ChainedBreak, Frame
from ..model.normalize import normalize_path, normalize_text
from .hints import HintTable, break_chain, shipped_table
from .source_scope import statement_scope

# seamscope's own frames (the call wrapper) are not the user's.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OWN_DIR = os.path.join(_PACKAGE, "capture") + os.sep
# seamscope's launchers (`seamscope run`, the fork server, the magic, the gates): the frames up to
# the last of them, and the runpy frames that follow it, are how the script was started.
_LAUNCHERS = tuple(os.path.join(_PACKAGE, p) for p in
                    "__main__.py cli.py magics.py commands/ experiments/ gates/".split())
_RUNPY = ("<frozen runpy>", "runpy.py")
_GB_CODE = re.compile(r"/gb/gb(\d{4})\.html")
_SITE_LINE = re.compile(r"Graph break in user code at (.*):(\d+)\s*$")
_TB_FRAME = re.compile(r'^\s*File "(.*)", line (\d+), in (.+?)\s*$')
RESUME_AT = re.compile(r"^torch_dynamo_resume_in_(.+)_at_(\d+)$")
"""A resume function's name: Dynamo names it after the user's function and its line."""


def user_function(name: str) -> str:
    """Resume functions are named after the user's function: show the user's name."""
    m = RESUME_AT.match(name)
    return m.group(1) if m else name


def site_id_for(
    file: str, scope: str, gb_code: str | None, gb_type: str | None, statement: str, occurrence: int | None, line: int
) -> str:
    """A break site's id (scheme 2, ``SITE_ID_SCHEME``): one statement, one id. Made from the file,
    the enclosing function's qualified name, the statement's text and its position among
    identical lines of that function: a line shift elsewhere keeps it; a second copy of a
    statement in the same function, or a same-named method of another class, gets its own. When
    the source cannot be read (``occurrence`` None), the file and line name the statement instead.
    The break's code and type name the statement only when nothing else does (no location)."""
    if occurrence is not None:
        parts = [file, scope, statement.strip(), f"#{occurrence}"]
    elif file:
        parts = [file, f"@{line}"]
    else:
        parts = ["", gb_code or gb_type or "", statement.strip()]
    key = "\x1f".join(["2", *parts])
    return "B" + hashlib.sha256(key.encode()).hexdigest()[:8]


def legacy_site_id(file: str, function: str, gb_code: str | None, gb_type: str | None, statement: str) -> str:
    """The id scheme 1 gave the same site (file, bare function name, gb code and type, statement),
    to match sites against a baseline written before scheme 2."""
    key = "\x1f".join([file, function, gb_code or "", gb_type or "", statement.strip()])
    return "B" + hashlib.sha256(key.encode()).hexdigest()[:8]


#: How Dynamo words a break it could not resume after (``symbolic_convert``): it skips the frame.
SKIPPED_FRAME_PREFIX = "Failed to handle graph break gracefully."
_SKIPPED_INNER = "Graph break encountered:"
#: The ``gb_type`` site-id scheme 1 recorded for such a break (the wrapper's first line).
SKIPPED_FRAME_TYPE = (
    "Failed to handle graph break gracefully. Skipping the function and falling back to eager. "
    "Graph break encountered:"
)


@dataclass
class ParsedBreak:
    """One break record, read: the site it names (no compile ids yet) and what it lacked."""

    site: BreakSite
    missing: tuple[str, ...] = ()
    """Fields the record lacked (``user_stack``, ``gb_code``, ``location``)."""


def parse_break_reason(text: str, cwd: str | None = None, hints: HintTable | None = None) -> ParsedBreak:
    """Parse a ``dynamo_graph_break_reason`` payload (2.13 layout; tolerant of older ones).

    A break Dynamo could not resume after arrives wrapped ("Failed to handle graph break
    gracefully. Skipping the function ... Graph break encountered:" and the original message):
    the original's type is kept, and ``frame_skipped`` says that the frame ran eagerly.
    ``hints``: the classes' texts and the registry's codes (the live torch's during capture; the
    shipped table by default).
    """
    lines = text.splitlines()
    line = 0
    raw_file = ""
    if lines:
        m = _SITE_LINE.match(lines[0].strip())
        if m:
            raw_file, line = m.group(1), int(m.group(2))
    body, skipped = _reason_body(text)
    gb_type = body.splitlines()[0].strip() if body else None
    mcode = _GB_CODE.search(text)
    gb_code = f"GB{mcode.group(1)}" if mcode else None
    stack, inner_raw, code = _user_stack(text, cwd)
    function = ""
    if stack:
        inner = stack[-1]
        function = inner.function
        if not raw_file:
            raw_file, line = inner_raw, inner.line
    missing = tuple(
        name
        for name, gone in (("user_stack", not stack), ("gb_code", gb_code is None), ("location", not raw_file))
        if gone
    )
    scope, occurrence = function, None
    found = statement_scope(_resolve(raw_file, cwd), line, function) if raw_file else None
    if found is not None:
        scope, occurrence = found.qualname, found.occurrence
        if not code:
            code = found.text
        if not function:
            function = found.qualname.rsplit(".", 1)[-1]
    file = normalize_path(raw_file, cwd)
    table = hints if hints is not None else shipped_table()
    chain = break_chain(body, table)
    own = chain[0] if chain and chain[0].classes else None
    site = BreakSite(
        site_id=site_id_for(file, scope, gb_code, gb_type, code, occurrence, line),
        file=file,
        line=line,
        function=function,
        gb_code=gb_code,
        gb_type=gb_type,
        reason=normalize_text(body, cwd),
        user_stack=stack,
        compile_ids=[],
        scope=scope,
        statement=code.strip(),
        frame_skipped=skipped,
        hint_classes=list(own.classes) if own else list(table.codes.get(gb_code or "", ())),
        chained=[ChainedBreak(gb_code=b.gb_code, gb_type=b.gb_type, hint_classes=list(b.classes)) for b in chain[1:]],
    )
    return ParsedBreak(site, missing)


def _reason_body(text: str) -> tuple[str, bool]:
    """The reason (after "Graph Break Reason:", up to the user traceback), and whether Dynamo
    skipped the frame (the original reason unwrapped then)."""
    body = text
    i = body.find("Graph Break Reason:")
    if i >= 0:
        body = body[i + len("Graph Break Reason:") :]
    for stop in ("\nUser code traceback:", "\nTraceback (most recent call last):"):
        j = body.find(stop)
        if j >= 0:
            body = body[:j]
    body = body.strip()
    skipped = False
    if body.startswith(SKIPPED_FRAME_PREFIX):
        skipped = True
        j = body.find(_SKIPPED_INNER)
        body = body[j + len(_SKIPPED_INNER) :].strip() if j >= 0 else ""
    if body.startswith("Encountered graph break when attempting to trace"):
        parts = body.split("\n\n", 1)
        body = parts[1].strip() if len(parts) > 1 else body
    return body, skipped


def _user_stack(text: str, cwd: str | None) -> tuple[list[Frame], str, str]:
    """The frames of the "User code traceback" section, innermost last, without seamscope's own
    and those that started the script; the innermost frame's file as written, and its line of
    code when the traceback shows it."""
    stack: list[Frame] = []
    code = ""
    inner_raw = ""
    after_launcher = False
    k = text.find("User code traceback:")
    if k < 0:
        return stack, inner_raw, code
    tb = text[k:].split("\n\nTraceback (most recent call last):", 1)[0].splitlines()[1:]
    for idx, ln in enumerate(tb):
        fm = _TB_FRAME.match(ln)
        if fm and fm.group(1).startswith(_LAUNCHERS):
            stack, after_launcher, inner_raw, code = [], True, "", ""  # how the script was started
            continue
        if fm and (fm.group(1).startswith(_OWN_DIR) or after_launcher and fm.group(1).endswith(_RUNPY)):
            continue
        if fm:
            after_launcher = False
            stack.append(
                Frame(
                    file=normalize_path(fm.group(1), cwd),
                    line=int(fm.group(2)),
                    function=user_function(fm.group(3)),
                )
            )
            inner_raw = fm.group(1)
            nxt = tb[idx + 1] if idx + 1 < len(tb) else ""
            code = "" if _TB_FRAME.match(nxt) else nxt.strip()
    return stack, inner_raw, code


def _resolve(path: str, cwd: str | None) -> str:
    if os.path.isabs(path) or not path:
        return path
    return os.path.join(cwd or os.getcwd(), path)
