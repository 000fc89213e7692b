"""PyTorch's hint classes of a graph break (``torch._dynamo.graph_break_hints``), read torch-free.

Dynamo attaches to every break the hints of its registry entry
(``torch/_dynamo/graph_break_registry.json``); some of them are one of a few shared texts, each
naming a class: FUNDAMENTAL, SUPPORTABLE, USER_ERROR, DYNAMO_BUG, DIFFICULT,
CAUSED_BY_EARLIER_GRAPH_BREAK, INFERENCE_MODE, SPARSE_TENSOR. A break's classes are read from its
own ``Hint:`` lines (the texts of the torch that ran it, or of this package's table), else from
the table's ``gb code → classes`` (a log whose reasons lost their hints).

The table ``seamscope/data/graph_break_hints.json`` is generated from PyTorch's registry and hint
module (BSD-3-Clause) by ``python -m seamscope.capture.adapter.hints``, which merges the installed
torch into it; ``tests/test_versions_torch.py`` checks it against the live registry.

A reason can hold a chain: Dynamo meets a second break while handling the first ("graph break in
loop", "Graph break under GenericContextWrappingVariable"), and prints both, separated by
:data:`CHAIN_SEPARATOR`. The first is the site's own break; the others follow from it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from typing import Any

CHAIN_SEPARATOR = "*** While handling this graph break, another graph break occurred: ***"
_GB_LINK = re.compile(r"/gb/gb(\d{4})\.html", re.I)
TABLE_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "graph_break_hints.json")

CLASS_ORDER = (
    "FUNDAMENTAL",
    "SUPPORTABLE",
    "USER_ERROR",
    "DYNAMO_BUG",
    "DIFFICULT",
    "CAUSED_BY_EARLIER_GRAPH_BREAK",
    "INFERENCE_MODE",
    "SPARSE_TENSOR",
)

MEANING = {
    "FUNDAMENTAL": "PyTorch says Dynamo will likely never trace this: keep it as an honest boundary "
    "(torch.compiler.disable on the function around it, measured) or rewrite the code",
    "SUPPORTABLE": "PyTorch says Dynamo could learn to trace this: report it upstream, or try a newer "
    "PyTorch; meanwhile move it out of the compiled call",
    "USER_ERROR": "PyTorch says the code may fail in eager too: run it with "
    "torch.compiler.set_stance(\"force_eager\") and fix the error first",
    "DYNAMO_BUG": "PyTorch says this is likely a Dynamo bug: report it upstream (with the reason text) "
    "or try a newer PyTorch",
    "DIFFICULT": "PyTorch says this break is hard to debug: report it upstream for help",
    "CAUSED_BY_EARLIER_GRAPH_BREAK": "PyTorch says an earlier break may have caused this one: fix the "
    "earlier one first",
    "INFERENCE_MODE": "PyTorch says to avoid inference-mode checks in compiled code: use torch.no_grad",
    "SPARSE_TENSOR": "PyTorch says sparse tensors are not fully supported: allow breaks there, or create "
    "the sparse tensor outside the compiled call",
}
"""What each class means for the user (the findings' remedy text)."""


@dataclass(frozen=True)
class HintTable:
    """Class name → its hint texts, and gb code → classes (the codes whose registry entries carry one)."""

    classes: dict[str, tuple[str, ...]]
    codes: dict[str, tuple[str, ...]]
    torch_versions: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "classes": {k: list(v) for k, v in sorted(self.classes.items())},
            "codes": {k: list(v) for k, v in sorted(self.codes.items())},
            "torch_versions": list(self.torch_versions),
        }


def order(classes: set[str] | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    known = [c for c in CLASS_ORDER if c in classes]
    return tuple(known + sorted(c for c in classes if c not in CLASS_ORDER))


@functools.lru_cache(maxsize=1)
def shipped_table() -> HintTable:
    """The table this package ships (empty when the file is missing or unreadable)."""
    try:
        with open(TABLE_FILE, encoding="utf-8") as f:
            raw = json.load(f)
        return HintTable(
            classes={str(k): tuple(str(t) for t in v) for k, v in raw.get("classes", {}).items()},
            codes={str(k).upper(): order([str(c) for c in v]) for k, v in raw.get("codes", {}).items()},
            torch_versions=tuple(str(v) for v in raw.get("torch_versions", [])),
        )
    except (OSError, ValueError, AttributeError, TypeError):
        return HintTable(classes={}, codes={})


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class HintedBreak:
    """One break of a reason's chain: its registry name, code and hint classes."""

    gb_type: str | None
    gb_code: str | None
    classes: tuple[str, ...]


def classes_of_part(part: str, table: HintTable) -> tuple[str, ...]:
    """The classes of one break's text: from its ``Hint:`` lines, else from its code."""
    hints = [_squash(ln.strip()[len("Hint:"):]) for ln in part.splitlines() if ln.strip().startswith("Hint:")]
    found: set[str] = set()
    for name, texts in table.classes.items():
        for t in texts:
            st = _squash(t)
            if st and any(st in h for h in hints):
                found.add(name)
    if found:
        return order(found)
    m = _GB_LINK.search(part)
    if m:
        return table.codes.get(f"GB{m.group(1)}", ())
    return ()


def break_chain(reason: str, table: HintTable | None = None) -> list[HintedBreak]:
    """Each break of a reason's chain (the site's own first), with its hint classes."""
    t = table if table is not None else shipped_table()
    out = []
    for part in (reason or "").split(CHAIN_SEPARATOR):
        body = part.strip()
        if not body:
            continue
        first = body.splitlines()[0].strip()
        m = _GB_LINK.search(body)
        out.append(HintedBreak(gb_type=first or None, gb_code=f"GB{m.group(1)}" if m else None,
                               classes=classes_of_part(body, t)))
    return out


def hint_classes(reason: str, gb_code: str | None, table: HintTable | None = None) -> tuple[str, ...]:
    """The classes of a site's own break (the first of its chain); the code's when the reason has none."""
    t = table if table is not None else shipped_table()
    chain = break_chain(reason, t)
    if chain and chain[0].classes:
        return chain[0].classes
    return t.codes.get((gb_code or "").upper(), ())
