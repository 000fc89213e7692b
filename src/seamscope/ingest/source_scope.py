"""Where a statement sits in its source file: the enclosing function's qualified name and the
statement's position among identical statements of that function.

A break site's id is built from these (not from the line number), so that it stays the same when
unrelated lines move, while two lines of one function holding the same text, or two same-named
methods of different classes in one file, stay apart. The file is read and parsed once (``ast``),
never executed. Torch-free.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class StatementScope:
    qualname: str
    """``Class.method``, ``outer.<locals>.inner``; ``<module>`` at module level."""
    occurrence: int
    """How many lines of the same function above this one hold the same stripped text."""
    text: str
    """The stripped text of the line."""


@dataclass(frozen=True)
class _Def:
    start: int
    end: int
    qualname: str
    name: str


@dataclass(frozen=True)
class _Source:
    lines: tuple[str, ...]
    defs: tuple[_Def, ...]


def _collect(tree: ast.AST) -> list[_Def]:
    out: list[_Def] = []

    def visit(node: ast.AST, prefix: str, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    out.append(_Def(first, child.end_lineno or child.lineno, qual, child.name))
                    visit(child, qual + ".<locals>.", True)
                else:
                    visit(child, qual + ".", in_function)
            else:
                visit(child, prefix, in_function)

    visit(tree, "", False)
    return out


@functools.lru_cache(maxsize=256)
def _load(path: str, mtime_ns: int, size: int) -> _Source | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text, filename=path)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
        return None
    return _Source(tuple(text.splitlines()), tuple(_collect(tree)))


def _file_key(path: str) -> tuple[int, int] | None:
    """(mtime, size) of a Python source file, what its parsed form is cached by; None when unreadable."""
    if not path or not path.endswith(".py"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def statement_scope(path: str, line: int, function: str = "") -> StatementScope | None:
    """The scope of ``path:line``, or None when the file cannot be read or parsed, or the line
    lies outside it.

    ``function`` is the frame's bare name from a traceback; the innermost ``def`` around the line
    with that name is chosen (a comprehension or lambda frame falls back to the innermost ``def``).
    """
    key = _file_key(path)
    return None if key is None else _scope(path, *key, line, function)


def enclosing_def(path: str, line: int, function: str = "") -> tuple[str, int] | None:
    """The qualified name and first line (its first decorator's, as ``co_firstlineno``) of the
    innermost ``def`` around ``path:line`` named ``function`` (any ``def`` when none is), or None
    when the file cannot be read or no ``def`` encloses the line."""
    key = _file_key(path)
    src = None if key is None else _load(path, *key)
    if src is None:
        return None
    scope = _innermost(src, line, function)
    return None if scope is None else (scope.qualname, scope.start)


def def_start(path: str, qualname: str) -> int | None:
    """The first line (its first decorator's) of the ``def`` of qualified name ``qualname``
    (``Block.forward``) in ``path``, or None when the file cannot be read or defines none."""
    key = _file_key(path)
    src = None if key is None else _load(path, *key)
    if src is None:
        return None
    return next((d.start for d in src.defs if d.qualname == qualname), None)


def _innermost(src: _Source, line: int, function: str) -> _Def | None:
    around = [d for d in src.defs if d.start <= line <= d.end]
    named = [d for d in around if d.name == function]
    return max(named or around, key=lambda d: d.start, default=None)


@functools.lru_cache(maxsize=4096)
def _scope(path: str, mtime_ns: int, size: int, line: int, function: str) -> StatementScope | None:
    src = _load(path, mtime_ns, size)
    if src is None or not 1 <= line <= len(src.lines):
        return None
    scope = _innermost(src, line, function)
    text = src.lines[line - 1].strip()
    if scope is None:
        return StatementScope("<module>", _count(src, 1, line, text, src.defs), text)
    inner = [d for d in src.defs if scope.start < d.start and d.end <= scope.end and d.qualname != scope.qualname]
    return StatementScope(scope.qualname, _count(src, scope.start, line, text, tuple(inner)), text)


def _count(src: _Source, start: int, line: int, text: str, nested: tuple[_Def, ...] | list[_Def]) -> int:
    """Lines in [start, line) with the same stripped text, not inside a nested def."""
    n = 0
    for ln in range(start, line):
        if src.lines[ln - 1].strip() == text and not any(d.start <= ln <= d.end for d in nested):
            n += 1
    return n
