"""The libraries a trial's script imports, imported once by the fork server its runs come from.

Each run of a trial is a fresh process forked from one server; what the server imported, every
run starts with. A transformers script spends seconds of each run importing ``transformers`` and
its model's module: imported in the server instead, a run starts at the script's first line of
its own. Only installed libraries and the standard library are imported there (the rule of
:func:`seamscope.model.normalize.is_library`), never the user's own modules, whose import may run
anything; only the script's module-level imports (and those in a module-level ``try``), as the
script itself would import them first.

A library that starts a thread or initializes CUDA when imported makes forking unsafe (a fork
copies one thread; CUDA cannot be used again in a forked child): the server then starts each run
as a new interpreter instead (:func:`seamscope.experiments.fresh.fork_unsafe`).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator

from ...model.normalize import is_library
from ..source_file import SourceUnusable, read_source


def script_of(target: str) -> str | None:
    """The script file a ``try`` target runs (``train.py``, ``train.py:workload``), or None."""
    path = target.rpartition(":")[0] if ".py:" in target else target
    return path if path.endswith(".py") and os.path.isfile(path) else None


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
        elif isinstance(stmt, ast.Try):
            yield from _module_level(stmt.body)


def imports_of(source: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` for each module-level ``import module`` (name None) and ``from module
    import name``; relative imports, ``__future__`` and ``*`` left out. Unparsable source: none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[tuple[str, str | None]] = []
    for stmt in _module_level(tree.body):
        if isinstance(stmt, ast.Import):
            found += [(a.name, None) for a in stmt.names]
        elif stmt.level == 0 and stmt.module and stmt.module != "__future__":
            found += [(stmt.module, a.name) for a in stmt.names if a.name != "*"]
    return list(dict.fromkeys(found))


def _origin(top: str) -> str | None:
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("built-in", "frozen"):
        return spec.origin
    locations = list(spec.submodule_search_locations or [])
    return locations[0] if locations else None


def library_imports(source: str, folder: str) -> list[tuple[str, str | None]]:
    """The script's imports whose top-level package is a library as found from ``folder`` (the
    script's, first on ``sys.path`` when it runs): a module beside the script is the user's."""
    sys.path.insert(0, folder)
    try:
        kept = []
        for module, name in imports_of(source):
            origin = _origin(module.split(".", 1)[0])  # None for a built-in module: nothing to gain
            if origin is not None and is_library(origin):
                kept.append((module, name))
        return kept
    finally:
        sys.path.remove(folder)


def import_libraries(target: str) -> list[str]:
    """The fork server's warm-up for a trial of ``target``: import the script's libraries (a
    ``from`` import's name fetched too: it loads a lazy package's submodule). What fails to import
    is left for the run to meet and report. Returns what was imported."""
    path = script_of(target)
    if path is None:
        return []
    try:
        source = read_source(path).text  # a BOM, a coding line, CRLF: as Python reads it
    except SourceUnusable:
        return []
    done = []
    for module, name in library_imports(source, os.path.dirname(os.path.abspath(path))):
        try:
            mod = importlib.import_module(module)
            if name is not None and not hasattr(mod, name):
                importlib.import_module(f"{module}.{name}")
        except Exception:  # noqa: BLE001 - the run imports it again and says what failed
            continue
        done.append(module if name is None else f"{module}.{name}")
    return done
