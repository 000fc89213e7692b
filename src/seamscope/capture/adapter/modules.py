"""Which module classes a graph traced instance by instance (a block repeated N times).

Internals used:
- ``node.meta["nn_module_stack"]`` of each FX node Dynamo produced: an ordered mapping, outermost
  first, of ``key → (path, class)`` (``("L['self'].h.0", GPT2Block)``), read before the graph is
  handed to the backend;
- ``node.meta["stack_trace"]``: the user stack that produced the node, as text (to see nodes
  made by ``transformers``' cache code, and the frames every node was traced under: what a
  generic wrapper frame wraps).
- ``OptimizedModule._orig_mod``: the module ``torch.compile(module)`` wraps (``compiled_module``).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from ...ingest.naming import common_chain

#: Classes kept per compilation, largest first.
MAX_CLASSES = 4
_CACHE_FILE = "cache_utils.py"
_TRACE_FRAME = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$', re.MULTILINE)


def _class_of(entry: Any) -> tuple[str, type | None] | None:
    if not isinstance(entry, tuple) or len(entry) != 2:
        return None
    path, cls = entry
    return str(path), cls if isinstance(cls, type) else None


def _where(cls: type) -> tuple[str, int]:
    fwd = getattr(cls, "forward", None)
    code = getattr(inspect.unwrap(fwd), "__code__", None) if fwd is not None else None
    if code is None:
        return "", 0
    return code.co_filename, code.co_firstlineno


def module_census(gm: Any) -> list[dict[str, Any]]:
    """The outermost module classes with two or more instances in ``gm``: per class, the
    instances, the nodes traced inside them (total, smallest, largest instance), the graph's
    nodes, the first instance's path, and whether its nodes include transformers' cache code.

    Plain dicts (the ledger's ``ModuleRepeat`` fields, ``file`` not yet normalised); an empty
    list when the graph carries no module stacks."""
    nodes = list(gm.graph.nodes)
    stacks: list[list[tuple[str, type]]] = []
    paths_of: dict[type, set[str]] = {}
    for n in nodes:
        if n.op in ("placeholder", "output", "get_attr"):
            continue
        raw = n.meta.get("nn_module_stack")
        stack: list[tuple[str, type]] = []
        if raw:
            for entry in raw.values():
                pc = _class_of(entry)
                if pc is not None and pc[1] is not None:
                    stack.append((pc[0], pc[1]))
                    paths_of.setdefault(pc[1], set()).add(pc[0])
        stacks.append(stack)
    repeated = {cls for cls, paths in paths_of.items() if len(paths) >= 2}
    if not repeated:
        return []
    per: dict[type, dict[str, int]] = {}
    cache_nodes: set[type] = set()
    kept = [n for n in nodes if n.op not in ("placeholder", "output", "get_attr")]
    for n, stack in zip(kept, stacks, strict=True):
        for path, cls in stack:  # the outermost repeated class holds the node
            if cls in repeated:
                counts = per.setdefault(cls, {})
                counts[path] = counts.get(path, 0) + 1
                if _CACHE_FILE in (n.meta.get("stack_trace") or ""):
                    cache_nodes.add(cls)
                break
    out: list[dict[str, Any]] = []
    for cls, counts in per.items():
        if len(counts) < 2:
            continue
        file, line = _where(cls)
        sizes = list(counts.values())
        out.append(
            {
                "cls": cls.__qualname__,
                "module": cls.__module__,
                "file": file,
                "line": line,
                "instances": len(counts),
                "nodes": sum(sizes),
                "nodes_min": min(sizes),
                "nodes_max": max(sizes),
                "graph_nodes": len(nodes),
                "first_path": next(iter(counts)),
                "kv_cache": cls in cache_nodes,
            }
        )
    out.sort(key=lambda d: (-d["nodes"], d["cls"]))
    return out[:MAX_CLASSES]


def _traced(n: Any) -> bool:
    return n.op not in ("placeholder", "output", "get_attr")


def graph_origin(gm: Any) -> dict[str, Any] | None:
    """Where every node of ``gm`` came from: ``chain``, the frames all its nodes were traced
    under, outermost first (``(file, line, function)``, the first node's line; Dynamo lists the
    compiled frame first and leaves PyTorch's own frames out), and ``module``, the outermost
    module all its nodes sit in (``cls``, ``file`` and ``line`` of its ``forward``), or None.

    Plain values, ``file`` not yet normalised; None when the graph has no node traced from
    the user's or a library's code."""
    # Nodes with neither a stack nor a module stack are Dynamo's own (sizes, grad mode).
    nodes = [n for n in gm.graph.nodes if _traced(n) and (n.meta.get("stack_trace") or n.meta.get("nn_module_stack"))]
    if not nodes:
        return None
    traces = dict.fromkeys(n.meta["stack_trace"] for n in nodes if n.meta.get("stack_trace"))  # distinct, in order
    chain = common_chain([(f, int(ln), fn) for f, ln, fn in _TRACE_FRAME.findall(t)] for t in traces)
    outer: set[tuple[str, type | None]] = set()
    for n in nodes:
        raw = n.meta.get("nn_module_stack")
        pc = _class_of(next(iter(raw.values()))) if raw else None
        outer.add(pc if pc is not None else ("", None))
    module = None
    if len(outer) == 1:
        _, cls = next(iter(outer))
        if cls is not None:
            file, line = _where(cls)
            module = {"cls": cls.__qualname__, "file": file, "line": line}
    return {"chain": chain, "module": module}


def compiled_module(compiled: Any) -> Any:
    """The ``nn.Module`` a compiled callable runs: the module ``torch.compile(module)`` wrapped (its
    ``OptimizedModule``'s ``_orig_mod``), or the owner of a compiled bound method
    (``torch.compile(model.forward)``, ``model.compile()``); None for anything else."""
    import torch

    orig = getattr(compiled, "_orig_mod", None)
    if isinstance(orig, torch.nn.Module):
        return orig
    fn = inspect.unwrap(compiled) if callable(compiled) else None
    owner = getattr(fn, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None
