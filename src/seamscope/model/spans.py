"""The layout of a span: the plain tuple capture builds for each thing that happens inside a call.

A span is a tuple, not an object, because the hot path builds one per region run. Three places
read and write it: the builder (``model/builder.py``), capture's Python region wrapper
(``capture/regions.py``) and the C lane (``_speedups.c``, which mirrors these indices as
``SPAN_*`` constants; ``_speedups.SPAN_LAYOUT`` exposes them and a test checks both agree).

Every span starts with the same four items::

    (kind, start, end, key, ...)

- ``KIND`` (0): ``"r"`` a compiled region ran, ``"c"`` a compilation, ``"o"`` seamscope's own
  bookkeeping;
- ``START``, ``END`` (1, 2): absolute clock values in nanoseconds;
- ``KEY`` (3): the span's part of the call's structure key: a region's compile id, ``"c"`` for a
  compilation, ``"o"`` for overhead. The key of a call is ``tuple(map(itemgetter(KEY), spans))``,
  one C-level ``map``; that is why a region's compile id and a compilation's ``"c"`` share it.

Then, by kind:

- region (8 items): ``GRAPH_INDEX`` (4), ``OUT_TENSORS`` (5) and ``OUT_BYTES`` (6), the seam
  traffic (None: not sampled), and ``BOOK_END`` (7): when seamscope's bookkeeping right after the
  region ended (``END`` .. ``BOOK_END`` is overhead, carried in the same tuple);
- compilation (5 items): ``COMPILE_ID`` (4);
- overhead (4 items): nothing more.
"""

from __future__ import annotations

KIND = 0
START = 1
END = 2
KEY = 3
GRAPH_INDEX = 4
OUT_TENSORS = 5
OUT_BYTES = 6
BOOK_END = 7
COMPILE_ID = 4

REGION = "r"
COMPILATION = "c"
OVERHEAD = "o"

REGION_LEN = 8
COMPILATION_LEN = 5
OVERHEAD_LEN = 4

LAYOUT: dict[str, int] = {
    "KIND": KIND,
    "START": START,
    "END": END,
    "KEY": KEY,
    "GRAPH_INDEX": GRAPH_INDEX,
    "OUT_TENSORS": OUT_TENSORS,
    "OUT_BYTES": OUT_BYTES,
    "BOOK_END": BOOK_END,
    "COMPILE_ID": COMPILE_ID,
    "REGION_LEN": REGION_LEN,
    "COMPILATION_LEN": COMPILATION_LEN,
    "OVERHEAD_LEN": OVERHEAD_LEN,
}
"""What ``_speedups.SPAN_LAYOUT`` must equal."""

# The sums a call's accounting returns (``LedgerBuilder._account``): one tuple, by position.
SUM_REGION = 0
SUM_ISLAND = 1
SUM_COMPILE = 2
SUM_OVERHEAD = 3
SUM_COMPILES = 4
"""How many compilations ran in the call."""


def region(
    start: int, end: int, compile_id: str, graph_index: int, out_tensors: int | None, out_bytes: int | None,
    book_end: int,
) -> tuple[str, int, int, str, int, int | None, int | None, int]:
    """A region span (the hot paths build the same tuple inline)."""
    return (REGION, start, end, compile_id, graph_index, out_tensors, out_bytes, book_end)


def compilation(start: int, end: int, compile_id: str) -> tuple[str, int, int, str, str]:
    return (COMPILATION, start, end, COMPILATION, compile_id)


def overhead(start: int, end: int) -> tuple[str, int, int, str]:
    return (OVERHEAD, start, end, OVERHEAD)
