"""Tables whose rows have a location (``file:line`` of a site, frame or compilation), for the
terminal: the location is never cut, whatever the width.

A user finds the line to change by its location, so it is the one cell that must survive a narrow
console (a CI log, a pipe: 80 columns). When the table fits with the location column as wide as
its longest location, it is a table whose other columns fold (wrap, never cut with a marker);
when it does not, each row prints as two lines: its location on a line of its own (never wrapped,
never cut), then its other cells as ``header value`` pairs that wrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..analyze.display import shown

#: The narrowest a folding column is allowed to get before a table gives way to two lines per row.
MIN_FOLD = 8


@dataclass(frozen=True)
class Located:
    """One row's location cell: ``file:line`` and what names it (a function, a frame)."""

    location: str
    name: str = ""


def _fits(console: Console, columns: Sequence[str], rows: Sequence[Sequence[str]], loc_col: int, width_loc: int) -> bool:
    need = width_loc
    for k, head in enumerate(columns):
        if k == loc_col:
            continue
        longest = max([len(head), *(len(r[k]) for r in rows)])
        need += min(longest, MIN_FOLD)
    need += 3 * len(columns) + 1  # borders and padding of rich's default box
    return need <= console.width


def print_located(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Sequence[tuple[Located, Sequence[str]]],
    loc_col: int = 1,
    right: Sequence[int] = (),
) -> None:
    """A table of ``rows`` (each: its location, and its other cells in order, as plain user text;
    :func:`shown` makes control characters visible). ``columns`` includes the location's header at
    ``loc_col``; ``right`` indexes of the other columns that are numbers."""
    locs = [(shown(loc.location, None), shown(loc.name, None)) for loc, _ in rows]
    cells = [[shown(c, None) for c in other] for _, other in rows]
    flat = [[*c[:loc_col], "", *c[loc_col:]] for c in cells]
    width_loc = max([len(columns[loc_col]), *(max(len(a), len(b)) for a, b in locs)])
    if _fits(console, columns, flat, loc_col, width_loc):
        t = Table(title=title, title_justify="left")
        for k, head in enumerate(columns):
            if k == loc_col:
                t.add_column(head, no_wrap=True, min_width=width_loc)
            else:
                t.add_column(head, overflow="fold", justify="right" if k in right else "left")
        for (loc, name), c in zip(locs, cells, strict=True):
            cell = Text(loc + (f"\n({name})" if name else ""))
            t.add_row(*(Text(x) for x in c[:loc_col]), cell, *(Text(x) for x in c[loc_col:]))
        console.print(t)
        return
    console.print(Text(title))
    others = [h for k, h in enumerate(columns) if k != loc_col]
    for (loc, name), c in zip(locs, cells, strict=True):
        lead = list(c[:loc_col])
        first = "  " + " ".join([*lead, loc, *([f"({name})"] if name else [])])
        console.print(Text(first), soft_wrap=True)  # one line: the location is never wrapped or cut
        pairs = [f"{h} {v}" for h, v in zip(others[loc_col:], c[loc_col:], strict=True)]
        console.print(Padding(Text(" · ".join(pairs), overflow="fold"), (0, 0, 0, 6), expand=False))


#: The widest a piped summary gets when neither a terminal nor ``COLUMNS`` says how wide to be.
PIPED_MAX = 200


def piped_width(locations: Sequence[str], other: int = 70) -> int:
    """A width for output that goes to no terminal and has no ``COLUMNS``: wide enough for the
    longest location beside the other columns of its table, at least 80, at most :data:`PIPED_MAX`."""
    longest = max((len(x) for x in locations), default=0)
    return max(80, min(PIPED_MAX, longest + other))
