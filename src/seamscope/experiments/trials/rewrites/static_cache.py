"""``static-cache`` (torch-free): a ``transformers`` model under ``generate`` whose compiled forward
recompiles as its KV cache grows (a size guard on a cache layer's keys or values, ``kwargs['cache']
.layers[0].keys`` of the default ``DynamicCache``) gets the static cache ``transformers`` documents
for ``torch.compile``: ``cache_implementation="static"`` passed to each ``generate`` call of the
script. A ``StaticCache`` is allocated once at the generation's full length, so the decoding steps
see one shape: transformers' "Cache strategies" (https://huggingface.co/docs/transformers/kv_cache)
lists the static cache as the one that supports ``torch.compile()`` and the dynamic default as
not, and its "LLM inference optimization" page (https://huggingface.co/docs/transformers/llm_optims)
pairs ``cache_implementation="static"`` with ``torch.compile``. It is measured like any other
candidate; the marks of the same cause are tried beside it.

Made only where the script imports ``transformers`` and calls ``NAME.generate(...)`` without
``cache_implementation=`` or ``past_key_values=`` (a cache chosen already) and without ``**``
arguments (they may choose one). "Review before applying": the cache is allocated at the longest
length the call may generate, up front, and a model whose attention the static cache does not
support refuses it at its first call (the output check then fails the candidate).
"""

from __future__ import annotations

import ast
import re

from ....model.receipt import Receipt
from .base import Edit, churn_edit
from .syntax import Source

CACHE_GUARD = re.compile(r"\.layers\[\d+\]\.(?:keys|values)\b|\b(?:key|value)_cache\b|DynamicCache")
"""A guard on a growing KV cache: a layer's keys or values (transformers' ``DynamicCache`` layers,
the older ``key_cache``/``value_cache`` lists), or the cache's class."""
KEYWORD = 'cache_implementation="static"'
_CHOSEN = {"cache_implementation", "past_key_values"}


def _imports_transformers(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == "transformers" for a in n.names)
               or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "transformers"
               for n in ast.walk(tree))


def generate_calls(tree: ast.Module) -> list[ast.Call]:
    """The script's ``NAME.generate(...)`` calls that choose no cache and pass no ``**`` arguments."""
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "generate" and not any(k.arg is None or k.arg in _CHOSEN for k in n.keywords)
            and not any(isinstance(a, ast.Starred) for a in n.args)]


class StaticCache:
    name = "static-cache"

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]:
        findings = receipt.findings.findings if receipt.findings else []
        cause = next((f for f in findings if f.churn is not None
                      and any(CACHE_GUARD.search(g.split("#", 1)[0]) for g in f.churn.guards)), None)
        if cause is None or not _imports_transformers(source.tree):
            return []
        calls = generate_calls(source.tree)
        if not calls:
            return []
        src = Source(source.text)
        for call in calls:
            last = max([*call.args, *[k.value for k in call.keywords]],
                       key=lambda x: (x.end_lineno or 0, x.end_col_offset or 0), default=None)
            if last is None:  # generate(): the keyword goes inside the parentheses
                assert call.end_lineno is not None and call.end_col_offset is not None
                src.insert(call.end_lineno, src.col(call.end_lineno, call.end_col_offset) - 1, KEYWORD)
            else:
                assert last.end_lineno is not None and last.end_col_offset is not None
                src.insert(last.end_lineno, src.col(last.end_lineno, last.end_col_offset), f", {KEYWORD}")
        where = ", ".join(f"line {c.lineno}" for c in calls)
        return [churn_edit(
            self.name, cause, "recompiles as the KV cache grows", script, source, src.result(),
            change=f"pass {KEYWORD} to generate ({where}): transformers' static KV cache, allocated once at the "
                   "generation's full length, so the compiled forward sees one cache shape (review before applying)",
            review="the static cache is allocated at the longest length generate may reach, up front; a model whose "
                   "attention does not support it refuses it")]
