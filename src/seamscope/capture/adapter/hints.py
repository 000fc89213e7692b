"""PyTorch's graph-break hint classes and registry, read from the installed torch.

Internals used:
- ``torch._dynamo.graph_break_hints``: module-level lists of hint texts, one per class
  (``FUNDAMENTAL = ["This graph break is fundamental ..."]``), in 2.13–2.15;
- ``torch/_dynamo/graph_break_registry.json`` (beside ``torch._dynamo``'s ``__init__``): gb code
  → a list of entries, each with ``Gb_type``, ``Explanation`` and ``Hints`` (the texts written
  out, the shared class texts among them).

``python -m seamscope.capture.adapter.hints`` merges the installed torch's table into the one
seamscope ships (``seamscope/data/graph_break_hints.json``), for torch-free readers (import,
analysis of old receipts). A code keeps the classes every version gave it.
"""

from __future__ import annotations

import functools
import json
import os
import sys

from ...ingest.hints import TABLE_FILE, HintTable, order, shipped_table
from .base import AdapterProblem


@functools.lru_cache(maxsize=1)
def live_hint_table() -> HintTable:
    """The installed torch's classes and its registry's ``gb code → classes``. Raises
    :class:`AdapterProblem` when the hint module or the registry is missing."""
    try:
        import torch
        import torch._dynamo
        import torch._dynamo.graph_break_hints as gbh
    except ImportError as e:
        raise AdapterProblem(
            f"no torch._dynamo.graph_break_hints ({e}): breaks carry the shipped table's classes"
        ) from e
    classes = {
        name: tuple(str(t) for t in val)
        for name, val in vars(gbh).items()
        if name.isupper() and isinstance(val, list) and val and all(isinstance(t, str) for t in val)
    }
    path = os.path.join(os.path.dirname(os.path.abspath(torch._dynamo.__file__)), "graph_break_registry.json")
    try:
        with open(path, encoding="utf-8") as f:
            registry = json.load(f)
    except (OSError, ValueError) as e:
        raise AdapterProblem(f"no graph-break registry ({e}): breaks carry the shipped table's classes") from e
    codes: dict[str, tuple[str, ...]] = {}
    for code, entries in registry.items() if isinstance(registry, dict) else ():
        found: set[str] = set()
        for entry in entries if isinstance(entries, list) else ():
            hints = entry.get("Hints", []) if isinstance(entry, dict) else []
            for name, texts in classes.items():
                if any(t in hints for t in texts):
                    found.add(name)
        if found:
            codes[str(code).upper()] = order(found)
    return HintTable(classes=classes, codes=codes, torch_versions=(str(torch.__version__),))


def merged_table(old: HintTable, new: HintTable) -> HintTable:
    """``old`` with ``new`` added: the newer torch's class texts, each code's classes united."""
    codes = dict(old.codes)
    for k, v in new.codes.items():
        codes[k] = order(set(codes.get(k, ())) | set(v))
    classes = {k: tuple(dict.fromkeys([*old.classes.get(k, ()), *v])) for k, v in new.classes.items()}
    for k, v in old.classes.items():
        classes.setdefault(k, v)
    versions = tuple(sorted(set(old.torch_versions) | set(new.torch_versions)))
    return HintTable(classes=classes, codes=codes, torch_versions=versions)


def main() -> int:
    table = merged_table(shipped_table(), live_hint_table())
    doc = {
        "generated_by": "python -m seamscope.capture.adapter.hints (run under each torch in docs/compatibility.md; "
        "merges that torch's registry into this file)",
        "source": "torch/_dynamo/graph_break_hints.py and torch/_dynamo/graph_break_registry.json "
        "(PyTorch, BSD-3-Clause)",
        **table.to_json(),
    }
    with open(TABLE_FILE, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {TABLE_FILE}: {len(table.codes)} codes, torch {', '.join(table.torch_versions)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
