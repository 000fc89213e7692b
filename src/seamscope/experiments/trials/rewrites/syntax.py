"""The syntax-tree helpers every edit of the user's script shares (torch-free): the
:class:`Source` buffer the edits are made in, the ``torch.compile`` predicates, the parent map,
the compiled callables of a script in both spellings, and the names a rewrite must not take.
:mod:`..patches` (the flags as patches) and every rewrite of this package use them; none is
written twice."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from ...unified_diff import split_lines


class Source:
    """A file's text and syntax tree, and edits at (line, column) positions in characters. A
    rewrite reads the tree of the :class:`Source` it is given and makes its edits in one of its
    own (``Source(source.text)``): the one given is shared by every rewrite."""

    def __init__(self, text: str) -> None:
        self.text = text
        # at "\n" only, as ast numbers lines: the text is in normal form (``source_file``), and a form
        # feed or a line separator inside a comment or a string ends no line
        self.lines = split_lines(text)
        self.tree = ast.parse(text)
        self.edits: list[tuple[int, int, int, int, str]] = []

    def col(self, line: int, byte_col: int) -> int:
        """ast's columns count UTF-8 bytes; the text counts characters."""
        raw = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return len(raw.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def indent(self, node: ast.stmt) -> str:
        """What precedes ``node`` on its first line (its indentation where it starts the line)."""
        return self.lines[node.lineno - 1][: self.col(node.lineno, node.col_offset)]

    def alone(self, node: ast.stmt) -> bool:
        """Whether ``node`` has its lines to itself (nothing before it, at most a comment after):
        an edit of whole lines then touches no other statement."""
        last = node.end_lineno or node.lineno
        after = self.lines[last - 1][self.col(last, node.end_col_offset or 0):].strip()
        return not self.indent(node).strip() and (not after or after.startswith("#"))

    def replace(self, node: ast.AST, text: str) -> None:
        n: ast.expr = node  # type: ignore[assignment]
        assert n.end_lineno is not None and n.end_col_offset is not None
        self.edits.append((n.lineno, self.col(n.lineno, n.col_offset), n.end_lineno,
                           self.col(n.end_lineno, n.end_col_offset), text))

    def insert(self, line: int, col: int, text: str) -> None:
        self.edits.append((line, col, line, col, text))

    def insert_lines(self, before_line: int, text: str) -> None:
        """Whole lines before line ``before_line`` (1-based; one past the end appends)."""
        if before_line > len(self.lines) and self.lines and not self.lines[-1].endswith("\n"):
            text = "\n" + text
        self.edits.append((before_line, 0, before_line, 0, text))

    def ensure_import(self) -> None:
        """``import torch`` where settings go (:func:`insertion_line`), unless torch is imported by then."""
        where, torch_seen = insertion_line(self)
        if not torch_seen:
            self.insert_lines(where, "import torch\n")

    def result(self) -> str:
        lines = list(self.lines)
        if not lines or lines[-1].endswith("\n"):
            lines.append("")  # the position one past the last line
        for sl, sc, el, ec, text in sorted(self.edits, key=lambda e: (e[0], e[1], e[2], e[3]), reverse=True):
            head = lines[sl - 1][:sc]
            tail = lines[el - 1][ec:]
            lines[sl - 1:el] = [head + text + tail]
        return "".join(lines)


def is_torch_compile(node: ast.AST) -> TypeGuard[ast.Attribute]:
    """``torch.compile`` (the name, called or not)."""
    return (isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def is_compile_decorator(node: ast.AST) -> bool:
    """``torch.compile`` or ``torch.compile(...)`` given no function (a decorator's two spellings)."""
    if isinstance(node, ast.Call):
        if node.args:
            return False
        node = node.func
    return is_torch_compile(node)


def parents(tree: ast.AST) -> dict[int, ast.AST]:
    """Each node's parent, by the child's ``id``."""
    return {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a block and of the blocks inside it (a ``main()``, an ``if __name__ ==
    "__main__":``), a class body's left out (a function put there would be a method)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from statements(getattr(stmt, field, []) or [])
        for h in getattr(stmt, "handlers", []) or []:
            yield from statements(h.body)


@dataclass(frozen=True)
class Compiled:
    """A function the script compiles, and the name its callers call."""

    fn: ast.FunctionDef
    alias: str
    """``f`` of ``f = torch.compile(fn, ...)``; ``fn``'s own name under ``@torch.compile``."""
    assign: ast.Assign | None = None
    """The ``f = torch.compile(fn, ...)`` statement; None for the decorator."""


def compiled_callables(tree: ast.Module) -> Iterator[Compiled]:
    """The script's compiled functions in both spellings, in the order of the source, at module
    level or in a block inside it (:func:`statements`):

    - ``f = torch.compile(fn, ...)``: one target, a name; ``fn`` alone as the positional argument
      (``torch.compile``'s others are keyword-only), a function of the script without decorators
      (a decorator may change the signature a shim would copy);
    - ``@torch.compile`` or ``@torch.compile(...)`` as the one decorator of ``def fn``: with others
      too, which wraps the compiled function and which the function compiled is theirs to say."""
    stmts = list(statements(tree.body))
    defs = {s.name: s for s in stmts if isinstance(s, ast.FunctionDef)}
    for s in stmts:
        if isinstance(s, ast.FunctionDef) and len(s.decorator_list) == 1 and is_compile_decorator(s.decorator_list[0]):
            yield Compiled(s, s.name)
        elif isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, ast.Call) and is_torch_compile(s.value.func) and len(s.value.args) == 1 \
                and isinstance(s.value.args[0], ast.Name):
            fn = defs.get(s.value.args[0].id)
            if fn is not None and not fn.decorator_list:
                yield Compiled(fn, s.targets[0].id, s)


def plain_params(fn: ast.FunctionDef) -> list[str] | None:
    """``fn``'s parameters where they are plain positional-or-keyword ones (a shim passes them on
    by position), at least one; None otherwise."""
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs or a.kwonlyargs or not a.args:
        return None
    return [x.arg for x in a.args]


def bound_names(tree: ast.AST) -> set[str]:
    """Every name the script binds or reads anywhere (assigned, defined, imported, a parameter):
    a name a rewrite adds must be none of them, or it would shadow or be shadowed."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            out.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)  # ``self._step_compiled``: not proof of a clash, but a name to avoid
    return out


def compiled_name(fn_name: str, taken: set[str]) -> str:
    """The name the compiled callable moves to: ``_step_compiled`` for ``torch.compile(step)``."""
    return fresh_name(f"_{fn_name.lstrip('_')}_compiled", taken)


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, with ``_2``, ``_3``... where the script already uses the name."""
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def multiline_string(stmt: ast.stmt) -> bool:
    """Indenting its lines would change a string's text."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and (n.end_lineno or n.lineno) > n.lineno
               for n in ast.walk(stmt))


def one_assign(body: list[ast.stmt]) -> ast.Assign | None:
    """The block's statement where it is its only one and assigns one name."""
    if len(body) == 1 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1 \
            and isinstance(body[0].targets[0], ast.Name):
        return body[0]
    return None


class Untensor(ast.NodeTransformer):
    """``t.item()`` → ``t``, ``bool(t)`` → ``t``: the condition kept a tensor."""

    def __init__(self) -> None:
        self.changed = False

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args and not node.keywords:
            self.changed = True
            return node.func.value
        if isinstance(node.func, ast.Name) and node.func.id == "bool" and len(node.args) == 1 and not node.keywords:
            self.changed = True
            return node.args[0]
        return node


def tensor_test(test: ast.expr) -> str:
    """An ``if``'s condition with its tensor kept (:class:`Untensor`), as source text."""
    return ast.unparse(Untensor().visit(ast.parse(ast.unparse(test), mode="eval").body))


def _contains_compile(node: ast.AST) -> bool:
    return any(is_torch_compile(n) for n in ast.walk(node))


def _imports_torch(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Import) and any(
        a.asname is None and a.name.split(".")[0] == "torch" or a.asname == "torch" and a.name == "torch"
        for a in stmt.names)


def insertion_line(src: Source) -> tuple[int, bool]:
    """(the line before which settings go: after the last import that precedes the first statement
    holding ``torch.compile``, whether ``torch`` is imported by then)."""
    body = src.tree.body
    first = next((i for i, s in enumerate(body) if _contains_compile(s)), len(body))
    after = 0
    torch_seen = False
    for s in body[:first]:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            after = s.end_lineno or s.lineno
            torch_seen = torch_seen or _imports_torch(s)
        elif after == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) \
                and isinstance(s.value.value, str):
            after = s.end_lineno or s.lineno  # the module's docstring
    return after + 1, torch_seen


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of a chain of attributes on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None
