"""The receipt's JSON Schema, generated from the model's own types (``docs/receipt.schema.json``).

Regenerate after changing the model: ``python -m seamscope.model.schema docs/receipt.schema.json``.
A test fails when the committed file and the types disagree.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import msgspec

from .receipt import Receipt


def clean_descriptions(node: Any) -> Any:
    """Docstring indentation as ``inspect.cleandoc`` leaves it, whatever msgspec version made the
    schema (0.22 cleans field docstrings, 0.23 keeps their indentation)."""
    if isinstance(node, dict):
        return {
            k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else clean_descriptions(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [clean_descriptions(v) for v in node]
    return node


def receipt_schema() -> dict[str, Any]:
    schema = clean_descriptions(msgspec.json.schema(Receipt))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "seamscope receipt"
    return schema


def schema_text() -> str:
    return json.dumps(receipt_schema(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # pragma: no cover
    target = sys.argv[1] if len(sys.argv) > 1 else "docs/receipt.schema.json"
    with open(target, "w", encoding="utf-8") as f:
        f.write(schema_text())
