"""Each remedy as a patch of the user's script (torch-free): the edit a user applies, made from the
script's source with :mod:`ast` and written as a unified diff that ``git apply`` and ``patch -p1``
apply from the project root (the git work tree that holds the script, else the current folder
when the script is below it, else the script's folder). A trial of such a candidate runs
``seamscope run --patch FILE``, the patched source in memory, so its figures are those of the diff
the user gets.

What becomes what:

- a Dynamo setting ``NAME=VALUE``: the script's own ``torch._dynamo.config.NAME = ...`` line edited,
  else ``torch._dynamo.config.NAME = VALUE`` after the imports that precede the first statement
  holding ``torch.compile``; ``NAME+=MODULE:QUALNAME``: ``....NAME.add(QUALNAME)`` there;
- ``--compile-option NAME=VALUE``: the keyword set on every ``torch.compile(...)`` call of the
  script (a bare ``@torch.compile`` gets its parentheses);
- ``--mark-dynamic``: one ``torch.compiler.config.dynamic_sources = "..."`` line;
- ``--stance``: ``torch.compiler.set_stance(...)``; ``--disable`` of a function of the script, or
  of a module below the script's folder (the user's own, not site-packages): ``@torch.compiler.disable``
  above its definition, in that file (the diff then holds both files).

Regional compilation (``--regional CLASS``) becomes a loop over the block instances, at the
attribute path the baseline's compile-time finding saw (``L['self'].layers.0`` or
``L['args'][0].layers.0`` → ``for block in model.layers: block.compile(...)``), the compiled name
then bound to the model itself. Its trial runs the patch too, with ``--calls-of NAME`` (the compiled
name): the patched script hands no whole model to ``torch.compile``, so without it the run's calls
would be the blocks' (one per block per call); with it the model's calls are the run's calls, the
blocks' compiled calls nested in them, as under ``--regional`` (observation only: the compilations
are the patch's, ``Module.compile`` on each instance, the ones the flag makes).

A stacked spec (``try``'s ``combined`` candidate, an ``X+Y`` retry) is one patch of all its parts,
one diff per file: with ``--regional``, the loop's ``block.compile(...)`` gets the script's keywords
with the ``--compile-option`` values set over them (as the flags override them), beside the other
parts' lines (settings, ``dynamic_sources``, ``@torch.compiler.disable``).

A spec with any part that is no edit of the user's files (a workload's padding, a function of a
module elsewhere, a backend given as ``MODULE:QUALNAME``, a user's own ``--patch``), or a script
whose ``torch.compile`` is reached otherwise than by a call or decorator the patch can edit, gets no
patch: its trial runs the flags.
"""

from __future__ import annotations

import ast
import builtins
import os
from dataclasses import dataclass
from typing import Any

from ..remedy_spec import (
    SCRIPT_MODULES,
    RemedySpec,
    compile_override,
    parse_assignment,
    parse_target,
    parse_value,
)
from ..source_file import SourceUnusable, patch_bytes, read_source
from ..source_file import rel_path as rel_path
from ..unified_diff import make

PATCH_DIR = "trials"


@dataclass(frozen=True)
class Patch:
    diff: str
    path: str
    """The patched file, relative to the project root."""
    review: str | None = None
    """Why to read it before applying (a rewrite that changes what the code does beyond compiling)."""
    calls_of: str | None = None
    """The patched script's name whose calls are the run's calls (``run --calls-of``), where the
    patch hands ``torch.compile`` something else (a regional patch's blocks)."""


class Source:
    """A file's text and syntax tree, and edits at (line, column) positions in characters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.edits: list[tuple[int, int, int, int, str]] = []

    def col(self, line: int, byte_col: int) -> int:
        """ast's columns count UTF-8 bytes; the text counts characters."""
        raw = self.lines[line - 1] if line - 1 < len(self.lines) else ""
        return len(raw.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

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

    def result(self) -> str:
        lines = list(self.lines)
        if not lines or lines[-1].endswith("\n"):
            lines.append("")  # the position one past the last line
        for sl, sc, el, ec, text in sorted(self.edits, key=lambda e: (e[0], e[1], e[2], e[3]), reverse=True):
            head = lines[sl - 1][:sc]
            tail = lines[el - 1][ec:]
            lines[sl - 1:el] = [head + text + tail]
        return "".join(lines)


def _is_torch_compile(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def _contains_compile(node: ast.AST) -> bool:
    return any(_is_torch_compile(n) for n in ast.walk(node))


def _imports_torch(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Import) and any(
        a.asname is None and a.name.split(".")[0] == "torch" or a.asname == "torch" and a.name == "torch"
        for a in stmt.names)


def _imports(stmt: ast.stmt, module: str) -> bool:
    return isinstance(stmt, ast.Import) and any(a.asname is None and a.name == module for a in stmt.names)


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


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _own_assignment(src: Source, target: str) -> ast.Assign | None:
    """The script's module-level ``TARGET = ...`` statement (the last one)."""
    found = None
    for s in src.tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and _dotted(s.targets[0]) == target:
            found = s
    return found


def _literal(value: object) -> str:
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def _compile_edits(src: Source, opts: list[tuple[str, object]]) -> bool:
    """Set the keywords on every ``torch.compile`` of the script; False where one cannot be edited."""
    calls, decorators = [], []
    parents: dict[int, ast.AST] = {}
    for n in ast.walk(src.tree):
        for child in ast.iter_child_nodes(n):
            parents[id(child)] = n
    for n in ast.walk(src.tree):
        if not _is_torch_compile(n):
            continue
        parent = parents.get(id(n))
        if isinstance(parent, ast.Call) and parent.func is n:
            if any(k.arg is None for k in parent.keywords) or any(isinstance(a, ast.Starred) for a in parent.args):
                return False  # **options: the keyword might be there already
            calls.append(parent)
        elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n in parent.decorator_list:
            decorators.append(n)
        else:
            return False  # torch.compile passed around: no call to edit
    if not calls and not decorators:
        return False
    for call in calls:
        missing = []
        for k, v in opts:
            kw = next((x for x in call.keywords if x.arg == k), None)
            if kw is not None:
                src.replace(kw.value, _literal(v))
            else:
                missing.append(f"{k}={_literal(v)}")
        if not missing:
            continue
        last = max([*call.args, *[k.value for k in call.keywords]],
                   key=lambda x: (x.end_lineno or 0, x.end_col_offset or 0), default=None)
        if last is not None:
            assert last.end_lineno is not None and last.end_col_offset is not None
            src.insert(last.end_lineno, src.col(last.end_lineno, last.end_col_offset), ", " + ", ".join(missing))
        else:
            assert call.func.end_lineno is not None and call.func.end_col_offset is not None
            line = call.func.end_lineno
            col = src.col(line, call.func.end_col_offset)
            open_at = src.lines[line - 1].find("(", col)
            if open_at < 0:
                return False
            src.insert(line, open_at + 1, ", ".join(missing))
    for d in decorators:
        assert d.end_lineno is not None and d.end_col_offset is not None
        src.insert(d.end_lineno, src.col(d.end_lineno, d.end_col_offset),
                   "(" + ", ".join(f"{k}={_literal(v)}" for k, v in opts) + ")")
    return True


def _find_def(tree: ast.Module, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = tree.body
    parts = qual.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        kinds: tuple[type, ...] = (ast.FunctionDef, ast.AsyncFunctionDef) if last else (ast.ClassDef,)
        node = next((n for n in reversed(body) if isinstance(n, kinds) and getattr(n, "name", None) == part), None)
        if node is None:
            return None
        if last:
            return node  # type: ignore[return-value]
        body = node.body  # type: ignore[attr-defined]
    return None


def _source_of(script: str) -> Source | None:
    """The script's source, parsed; None where it cannot be read or parsed (no patch then)."""
    try:
        return Source(read_source(script).text)
    except (SyntaxError, ValueError):  # SourceUnusable too
        return None


def spec_patch(spec: RemedySpec, script: str, receipt: Any = None) -> Patch | None:
    """The patch of the script that does what ``spec``'s flags do, all of them in one diff per file
    (a stacked spec, ``--regional CLASS --compile-option dynamic=True --dynamo-config ...``, too:
    the regional loop, its ``block.compile(...)`` given the compile options, and the other parts'
    lines); None where one part cannot be a patch (its runs then use the flags). ``--regional``
    needs the baseline's ``receipt`` (the attribute path its compile-time finding saw)."""
    if ".py:" in script or spec.pad is not None or spec.seed is not None or spec.is_empty() or spec.patch \
            or spec.calls_of is not None or len(spec.regional) > 1 or spec.regional and receipt is None:
        return None
    src = _source_of(script)
    if src is None:
        return None
    where, torch_seen = insertion_line(src)
    calls_of = None
    lines: list[str] = []
    stem = os.path.splitext(os.path.basename(script))[0]
    for item in spec.dynamo_config:
        name, op, raw = parse_assignment("--dynamo-config", item)
        if op == "+=":
            mod, qual = parse_target("--dynamo-config", raw)
            if mod in (*SCRIPT_MODULES, stem) or mod == "builtins" and not hasattr(builtins, qual):
                return None
            if mod != "builtins" and not any(_imports(s, mod) for s in src.tree.body):
                lines.append(f"import {mod}")
            ref = qual if mod == "builtins" else f"{mod}.{qual}"
            lines.append(f"torch._dynamo.config.{name}.add({ref})")
            continue
        try:
            value: object = parse_value(raw)
        except (ValueError, SyntaxError):
            value = raw
        own = _own_assignment(src, f"torch._dynamo.config.{name}")
        if own is not None:
            src.replace(own.value, _literal(value))
        else:
            lines.append(f"torch._dynamo.config.{name} = {_literal(value)}")
    if spec.mark_dynamic:
        lines.append(f"torch.compiler.config.dynamic_sources = {_literal(','.join(spec.mark_dynamic))}")
    if spec.stance is not None:
        lines.append(f"torch.compiler.set_stance({_literal(spec.stance)})")
    opts = [compile_override(o) for o in spec.compile_option]
    if any(k == "backend" and isinstance(v, str) and ":" in v for k, v in opts):
        return None
    if spec.regional:  # the loop's block.compile(...) takes the compile options
        calls_of = _regional_edits(src, spec.regional[0], receipt, opts)
        if calls_of is None:
            return None
    elif opts and not _compile_edits(src, opts):
        return None
    others: dict[str, Source] = {}  # a module of the user's beside the script, by path
    script_disable = False
    for d in spec.disable:
        mod, qual = parse_target("--disable", d)
        where_src = src
        if mod in (*SCRIPT_MODULES, stem):
            script_disable = True
        else:
            path = own_module_file(mod, script)
            if path is None:
                return None
            if path not in others:
                try:
                    others[path] = Source(read_source(path).text)
                except (SyntaxError, ValueError):  # SourceUnusable too
                    return None
            where_src = others[path]
        node = _find_def(where_src.tree, qual)
        if node is None:
            return None
        first = min([node.lineno, *(x.lineno for x in node.decorator_list)])
        indent = where_src.lines[first - 1][: where_src.col(first, node.col_offset)]
        where_src.insert_lines(first, f"{indent}@torch.compiler.disable\n")
    if not torch_seen and (lines or script_disable):
        lines.insert(0, "import torch")
    if lines:
        src.insert_lines(where, "".join(ln + "\n" for ln in lines))
    for o in others.values():
        at, has_torch = insertion_line(o)
        if not has_torch:
            o.insert_lines(at, "import torch\n")
    diffs = []
    for path, s0 in [(script, src), *others.items()]:
        new = s0.result()
        try:
            ast.parse(new)
        except SyntaxError:
            return None
        diffs.append(make(s0.text, new, rel_path(path)))
    diff = "".join(diffs)
    return Patch(diff=diff, path=rel_path(script), calls_of=calls_of) if diff else None


def own_module_file(mod: str, script: str) -> str | None:
    """The file of module ``mod`` below the script's folder (the user's own code, found as the
    script imports it); None for one elsewhere (site-packages: not the user's to edit)."""
    root = os.path.dirname(os.path.abspath(script))
    base = os.path.join(root, *mod.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def regional_patch(spec: RemedySpec, script: str, receipt: Any) -> Patch | None:
    """The patch of ``--regional CLASS`` alone (see :func:`spec_patch`, which composes it with the rest)."""
    if len(spec.regional) != 1 or spec.flags() != ["--regional", spec.regional[0]]:
        return None
    return spec_patch(spec, script, receipt)


def _regional_edits(src: Source, cls: str, receipt: Any, opts: list[tuple[str, object]]) -> str | None:
    """Replace the script's one ``NAME = torch.compile(MODEL, ...)`` by the loop over the instances of
    ``cls`` that ``--regional CLASS`` compiles, each ``block.compile(...)`` given the script's keywords
    with ``opts`` set over them (as ``--compile-option`` overrides them under ``--regional``); returns
    NAME (the run's ``--calls-of``), None when the path or the call is not that plain."""
    import re

    findings = getattr(receipt, "findings", None)
    if findings is None or findings.compile_time is None:
        return None
    block = next((ct.block for ct in findings.compile_time.findings
                  if ct.kind == "repeated_block" and ct.block is not None and ct.block.cls == cls), None)
    # the model as the compiled frame names it: L['self'], or L['args'][0] for a module's _call_impl
    m = re.fullmatch(r"L\['\w+'\](?:\[0\])?((?:\.[A-Za-z_]\w*)+)\.\d+", block.first_path if block else "")
    if m is None:
        return None
    compiles = [n for n in ast.walk(src.tree) if _is_torch_compile(n)]
    assign = next((n for n in ast.walk(src.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                   and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call)
                   and _is_torch_compile(n.value.func) and len(n.value.args) == 1
                   and _dotted(n.value.args[0]) is not None), None)
    keywords = assign.value.keywords if assign is not None else []  # type: ignore[attr-defined]
    if assign is None or len(compiles) != 1 or any(k.arg is None for k in keywords):
        return None
    call = assign.value
    assert isinstance(call, ast.Call)
    model = _dotted(call.args[0])
    first, last = assign.lineno, assign.end_lineno or assign.lineno
    indent = src.lines[first - 1][: src.col(first, assign.col_offset)]
    after = src.lines[last - 1][src.col(last, assign.end_col_offset or 0):].strip()
    if indent.strip() or (after and not after.startswith("#")):
        return None
    given = dict(opts)
    kwargs = [f"{k.arg}={_literal(given.pop(k.arg))}" if k.arg in given else ast.get_source_segment(src.text, k) or ""
              for k in call.keywords]
    kwargs += [f"{k}={_literal(v)}" for k, v in given.items()]
    name: str = assign.targets[0].id  # type: ignore[attr-defined]
    loop = (f"{indent}for block in {model}{m.group(1)}:  # each {block.cls if block else 'block'} compiled once, "
            f"one compilation serving them all\n{indent}    block.compile({', '.join(kwargs)})\n"
            f"{indent}{name} = {model}\n")
    if last == len(src.lines) and not src.lines[-1].endswith("\n"):  # the last line, without a newline
        src.edits.append((first, 0, last, len(src.lines[-1]), loop[:-1]))
    else:
        src.edits.append((first, 0, last + 1, 0, loop))
    return name


def write_patch(out: str, name: str, patch: Patch, script: str | None = None) -> str:
    """``OUT/trials/NAME.patch``; returns its path. With ``script``: each file's part in that file's
    own line endings, byte-order mark and encoding (:func:`.source_file.patch_bytes`;
    :class:`SourceUnusable` where it cannot be)."""
    data = patch.diff.encode("utf-8") if script is None else patch_bytes(patch.diff, script)
    path = os.path.join(out, PATCH_DIR, f"{name}.patch")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def attach(drafts: list[Any], out: str, script: str, receipt: Any = None, notes: list[str] | None = None) -> None:
    """Give each catalogue draft that can be a patch of the script its patch, written to
    ``OUT/trials/NAME.patch``: its runs apply it instead of its flags (a regional draft's with
    ``--calls-of``, see above). A user's ``--candidate`` and a process-start candidate (a warm cache,
    compile threads) keep their flags (one that is a single ``--patch`` is shown with its diff); a
    code-change draft comes with its diff. Where the script's file cannot hold a patch (mixed line
    endings, a character its encoding lacks) the draft keeps its flags, and ``notes`` gets the reason."""
    for d in list(drafts):
        if d.origin == "user" and len(d.spec.patch) == 1 and d.spec.flags() == [
                "--patch", d.spec.patch[0], *(["--calls-of", d.spec.calls_of] if d.spec.calls_of else [])]:
            try:  # the user's own patch: shown and written as the catalogue's are
                with open(d.spec.patch[0], encoding="utf-8", newline="") as f:
                    d.diff = f.read()
                d.patch, d.calls_of = d.spec.patch[0], d.spec.calls_of
            except (OSError, UnicodeDecodeError):
                pass
            continue
        if d.origin == "user" or d.start or d.env or d.patch:
            continue
        p = Patch(diff=d.diff, path=rel_path(script), review=d.review) if d.diff \
            else spec_patch(d.spec, script, receipt)
        if p is None:
            continue
        try:
            d.patch = write_patch(out, d.name, p, script)
        except SourceUnusable as e:
            if notes is not None and f"no patch: {e}" not in notes:
                notes.append(f"no patch: {e}")
            if d.diff:  # a code change no flag makes: without its patch there is nothing to run
                drafts[:] = [x for x in drafts if x is not d]
            continue
        d.diff, d.review = p.diff, p.review
        d.calls_of = p.calls_of or d.calls_of
