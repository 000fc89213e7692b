"""Optional sections (memory, and those other analyses add), tabulated from their typed data."""

from __future__ import annotations

from typing import Any

import msgspec

from ...model.ledger import Struct
from ...model.receipt import Receipt
from .base import MAX_SECTION_ROWS, OptionalSection, Table

# --- optional sections, tabulated from their data --------------------------------------------------


MAX_CELL_CHARS = 300
MAX_LIST_ITEMS = 12


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list) and len(v) > MAX_LIST_ITEMS and all(isinstance(x, (int, float)) for x in v):
        return f"{len(v)} values"
    if isinstance(v, (list, dict)):
        if isinstance(v, list) and all(not isinstance(x, (list, dict)) for x in v):
            text = ", ".join(_cell(x) for x in v)
        else:
            text = msgspec.json.encode(v, order="sorted").decode()
    else:
        text = str(v)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _flat(row: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """One level of nested records spread into columns (``baseline.median_ns``)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and depth < 1:
            out.update(_flat(v, name + ".", depth + 1))
        else:
            out[name] = v
    return out


def _tables(title: str, data: Any, facts: list[tuple[str, str]], tables: list[Table], depth: int = 0) -> None:
    """Scalars become facts, lists of records become tables, nested records recurse."""
    if isinstance(data, dict):
        for k in sorted(data):
            v = data[k]
            name = f"{title}.{k}" if title else str(k)
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                v = [_flat(x) for x in v]
                cols: list[str] = []
                for row in v:
                    cols += [c for c in row if c not in cols]
                rows = [[_cell(row.get(c)) for c in cols] for row in v[:MAX_SECTION_ROWS]]
                note = f"first {MAX_SECTION_ROWS} of {len(v)} rows" if len(v) > MAX_SECTION_ROWS else ""
                tables.append(Table(name, cols, rows, note))
            elif isinstance(v, dict) and depth < 3:
                _tables(name, v, facts, tables, depth + 1)
            else:
                facts.append((name, _cell(v)))
    elif isinstance(data, list) and data and all(isinstance(x, dict) for x in data):
        _tables("", {title or "rows": data}, facts, tables, depth)
    else:
        facts.append((title or "value", _cell(data)))


def memory_section(receipt: Receipt) -> OptionalSection:
    """Memory over time, from the probe's points after each new shape (the shape study draws its
    own per policy); a ledger from ``run`` or ``import`` has none."""
    title = "Memory over time"
    points = receipt.probe.memory if receipt.probe is not None else []
    rows = [
        [
            "probe",
            _cell(p.configuration or None),
            _cell(p.phase),
            _cell(p.family or None),
            _cell(p.signature),
            "–" if p.rss_bytes is None else f"{p.rss_bytes / 2**20:.1f}",
            "–" if p.cuda_peak_bytes is None else f"{p.cuda_peak_bytes / 2**20:.1f}",
            _cell(p.compiled_variants),
        ]
        for p in points
    ]
    if not rows:
        return OptionalSection("memory", title, False)
    cols = ["from", "configuration", "phase", "family", "input", "RSS MiB", "CUDA peak MiB", "compiled variants"]
    return OptionalSection(
        "memory", title, True, [], [Table("after each first-seen input", cols, rows[:MAX_SECTION_ROWS])]
    )


def optional_section(key: str, title: str, value: Struct | None) -> OptionalSection:
    """A section another analysis added, tabulated from its data: scalars as facts, lists of
    records as tables."""
    if value is None:
        return OptionalSection(key, title, False)
    facts: list[tuple[str, str]] = []
    tables: list[Table] = []
    _tables("", msgspec.to_builtins(value), facts, tables)
    return OptionalSection(key, title, True, facts, tables)
