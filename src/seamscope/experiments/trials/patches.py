"""Each remedy as a patch of the user's script (torch-free): the edit a user applies, made from the
script's source with :mod:`ast` and written as a unified diff that ``git apply`` and ``patch -p1``
apply from the project root (the git work tree that holds the script, else the current folder
when the script is below it, else the script's folder). A trial of such a candidate runs
``seamscope run --patch FILE``, the patched source in memory, so its figures are those of the diff
the user gets.

What becomes what:

- a Dynamo setting ``NAME=VALUE``: the script's own ``torch._dynamo.config.NAME = ...`` line edited,
  else ``torch._dynamo.config.NAME = VALUE`` (a setting of another config module: that module's, and
  its import) after the imports that precede the first statement holding ``torch.compile``;
  ``NAME+=MODULE:QUALNAME``: ``....NAME.add(QUALNAME)`` there;
- ``--compile-option NAME=VALUE``: the keyword set on every ``torch.compile(...)`` call of the
  script (a bare ``@torch.compile`` gets its parentheses);
- ``--mark-dynamic``: one ``torch.compiler.config.dynamic_sources = "..."`` line;
- ``--stance``: ``torch.compiler.set_stance(...)``; ``--disable`` of a function of the script, or
  of a module below the script's folder (the user's own, not site-packages): ``@torch.compiler.disable``
  above its definition, in that file (the diff then holds both files).

Regional compilation (``--regional CLASS``) becomes a loop over ``model.modules()`` that compiles
each instance of the class the baseline's compile-time finding saw (``if isinstance(block, CLASS):
block.compile(...)``), the compiled name then bound to what was compiled, the model itself (or
``model.forward``, its blocks found below ``model``; a function of the script has no modules to
look below: no patch): found by class, the
blocks are found wherever they sit below the model and whichever frame traced them (the path the
finding names, ``L['self'].layer.0``, is relative to that frame's ``self``, an encoder after a
break). A frame Dynamo traced and gave up on (a break in a loop) gets the same loop
for the script's class whose frames compiled on their own under it (its blocks).
The class is named as the script names it, imported where the script does not; where no
name can reach it, no patch (:class:`NoPatch`, its reason in ``try``'s ``folded`` lines).
Its trial runs the patch too, with ``--calls-of NAME`` (the compiled
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..remedy_spec import (
    SCRIPT_MODULES,
    RemedySpec,
    compile_override,
    parse_assignment,
    parse_target,
    parse_value,
    setting_module,
)
from ..source_file import SourceUnusable, patch_bytes, read_source
from ..source_file import rel_path as rel_path
from ..unified_diff import make
from .rewrites.skipped_frame import regional_classes
from .rewrites.syntax import Source, bound_names, dotted, insertion_line, is_torch_compile, parents

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


def _imports(stmt: ast.stmt, module: str) -> bool:
    return isinstance(stmt, ast.Import) and any(a.asname is None and a.name == module for a in stmt.names)


def _own_assignment(src: Source, target: str) -> ast.Assign | None:
    """The script's module-level ``TARGET = ...`` statement (the last one)."""
    found = None
    for s in src.tree.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and dotted(s.targets[0]) == target:
            found = s
    return found


def _literal(value: object) -> str:
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def _compile_edits(src: Source, opts: list[tuple[str, object]]) -> bool:
    """Set the keywords on every ``torch.compile`` of the script; False where one cannot be edited."""
    calls, decorators = [], []
    up = parents(src.tree)
    for n in ast.walk(src.tree):
        if not is_torch_compile(n):
            continue
        parent = up.get(id(n))
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


def _disable_edits(targets: Sequence[str], script: str, src: Source,
                   stem: str) -> tuple[dict[str, Source], bool] | None:
    """``@torch.compiler.disable`` above each target's definition, in the script (``src``) or in a
    module of the user's beside it; returns those modules' sources by path, and whether the script
    got one; None where a target is neither."""
    others: dict[str, Source] = {}
    script_disable = False
    for d in targets:
        mod, qual = parse_target("--disable", d)
        where_src = src
        if mod in (*SCRIPT_MODULES, stem):
            script_disable = True
        else:
            path = own_module_file(mod, script)
            found = None if path is None else others[path] if path in others else _source_of(path)
            if path is None or found is None:
                return None
            where_src = others[path] = found
        node = _find_def(where_src.tree, qual)
        if node is None:
            return None
        first = min([node.lineno, *(x.lineno for x in node.decorator_list)])
        indent = where_src.lines[first - 1][: where_src.col(first, node.col_offset)]
        where_src.insert_lines(first, f"{indent}@torch.compiler.disable\n")
    return others, script_disable


def spec_patch(spec: RemedySpec, script: str, receipt: Any = None, why: list[str] | None = None) -> Patch | None:
    """The patch of the script that does what ``spec``'s flags do, all of them in one diff per file
    (a stacked spec, ``--regional CLASS --compile-option dynamic=True --dynamo-config ...``, too:
    the regional loop, its ``block.compile(...)`` given the compile options, and the other parts'
    lines); None where one part cannot be a patch (its runs then use the flags). ``--regional``
    needs the baseline's ``receipt`` (the class its compile-time finding saw); why its part cannot
    be a patch is added to ``why``. A guard setting (``spec.unsafe()``) is run as its flags, which
    the check run probes (its code change is printed as words)."""
    if ".py:" in script or spec.pad is not None or spec.seed is not None or spec.is_empty() or spec.patch \
            or spec.unsafe() or spec.calls_of is not None or len(spec.regional) > 1 \
            or spec.regional and receipt is None:
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
        module = setting_module(name)
        own = _own_assignment(src, f"{module}.{name}")
        if own is not None:
            src.replace(own.value, _literal(value))
        else:
            if module != "torch._dynamo.config" and not any(_imports(s, module) for s in src.tree.body):
                lines.append(f"import {module}")
            lines.append(f"{module}.{name} = {_literal(value)}")
    if spec.mark_dynamic:
        lines.append(f"torch.compiler.config.dynamic_sources = {_literal(','.join(spec.mark_dynamic))}")
    if spec.stance is not None:
        lines.append(f"torch.compiler.set_stance({_literal(spec.stance)})")
    opts = [compile_override(o) for o in spec.compile_option]
    if any(k == "backend" and isinstance(v, str) and ":" in v for k, v in opts):
        return None
    if spec.regional:  # the loop's block.compile(...) takes the compile options
        try:
            calls_of, import_line = _regional_edits(src, spec.regional[0], receipt, opts, script)
        except NoPatch as e:
            if why is not None:
                why.append(str(e))
            return None
        if import_line is not None:
            lines.insert(0, import_line)
    elif opts and not _compile_edits(src, opts):
        return None
    disabled = _disable_edits(spec.disable, script, src, stem)
    if disabled is None:
        return None
    others, script_disable = disabled
    if not torch_seen and (lines or script_disable):
        lines.insert(0, "import torch")
    if lines:
        src.insert_lines(where, "".join(ln + "\n" for ln in lines))
    for o in others.values():
        o.ensure_import()
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


class NoPatch(ValueError):
    """Why a remedy cannot be written as a patch of the script (its runs then use the flags)."""


def _block_ref(src: Source, cls: str, module: str) -> tuple[str, str | None]:
    """How the script names the block's class (the one the run saw: ``cls`` of ``module``), and the
    import line that binds it where the script has none."""
    head, _, rest = cls.partition(".")
    if "<" in cls:
        raise NoPatch(f"{cls} is defined inside a function: no name of the script reaches it")
    if module == "__main__":  # the script's own class: at its top level, or nothing names it
        if any(isinstance(s, ast.ClassDef) and s.name == head for s in src.tree.body):
            return cls, None
        raise NoPatch(f"{cls} is not a class at the script's top level")
    for s in src.tree.body:
        if isinstance(s, ast.ImportFrom) and s.module == module and not s.level:
            if (a := next((a for a in s.names if a.name == head), None)) is not None:
                return ".".join(filter(None, (a.asname or a.name, rest))), None
        if isinstance(s, ast.Import) and (a := next((a for a in s.names if a.name == module), None)) is not None:
            return f"{a.asname or module}.{cls}", None
    if head in bound_names(src.tree):
        raise NoPatch(f"the script uses the name {head} for something else (the class is {module}.{cls})")
    return cls, f"from {module} import {head}"


def _compiled_into(target: ast.expr, arg: ast.expr) -> bool:
    """``NAME = torch.compile(...)``, or the forward compiled in place: ``MODEL.forward =
    torch.compile(MODEL.forward)`` (transformers' advice for ``generate``)."""
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, ast.Attribute) and target.attr == "forward" and dotted(target) == dotted(arg)


def _regional_edits(src: Source, cls: str, receipt: Any, opts: list[tuple[str, object]],
                    script: str) -> tuple[str, str | None]:
    """Replace the script's one ``NAME = torch.compile(MODEL, ...)`` (or ``MODEL.forward =
    torch.compile(MODEL.forward, ...)``, whose NAME is MODEL) by a loop over ``MODEL.modules()``
    that compiles each instance of the block's class (found by the class the baseline's finding
    saw, wherever it sits below MODEL and whichever frame traced it), each ``block.compile(...)``
    given the script's keywords with ``opts`` set over them (as ``--compile-option`` overrides
    them under ``--regional``). Returns NAME (the run's ``--calls-of``) and the import line the
    class needs, if any; raises :class:`NoPatch` where the call or the class is not that plain."""
    findings = getattr(receipt, "findings", None)
    block = next((ct.block for ct in (findings.compile_time.findings if findings and findings.compile_time else [])
                  if ct.kind == "repeated_block" and ct.block is not None and ct.block.cls == cls), None)
    module = block.module if block is not None else "__main__" if getattr(receipt, "ledger", None) is not None \
        and cls in regional_classes(receipt, script) else None  # the blocks of a frame Dynamo gave up on
    if module is None:
        raise NoPatch(f"no repeated-block finding of the baseline saw {cls}, nor a frame it gave up on that calls it")
    ref, import_line = _block_ref(src, cls, module)
    compiles = [n for n in ast.walk(src.tree) if is_torch_compile(n)]
    assign = next((n for n in ast.walk(src.tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                   and isinstance(n.value, ast.Call) and is_torch_compile(n.value.func) and len(n.value.args) == 1
                   and dotted(n.value.args[0]) is not None and _compiled_into(n.targets[0], n.value.args[0])), None)
    if assign is None or len(compiles) != 1:
        raise NoPatch("the script does not hand one model to one `NAME = torch.compile(MODEL, ...)` "
                      "or `MODEL.forward = torch.compile(MODEL.forward, ...)`")
    call = assign.value
    assert isinstance(call, ast.Call)
    if any(k.arg is None for k in call.keywords) or not src.alone(assign):
        raise NoPatch("its torch.compile call takes **options or shares its line")
    model = dotted(call.args[0]) or ""
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == model for n in ast.walk(src.tree)):
        raise NoPatch(f"the script compiles the function {model}, not a module: no .modules() to find the blocks in")
    owner = model.removesuffix(".forward")  # torch.compile(model.forward): the blocks are below model
    given = dict(opts)
    kwargs = [f"{k.arg}={_literal(given.pop(k.arg))}" if k.arg in given else ast.get_source_segment(src.text, k) or ""
              for k in call.keywords]
    kwargs += [f"{k}={_literal(v)}" for k, v in given.items()]
    target = assign.targets[0]
    in_place = not isinstance(target, ast.Name)  # MODEL.forward = torch.compile(MODEL.forward): MODEL's calls
    if in_place and not owner.isidentifier():
        raise NoPatch(f"{owner} is no plain name the run can observe the calls of")
    name = owner if in_place else target.id  # type: ignore[attr-defined]
    indent = src.indent(assign)
    loop = (f"{indent}for block in {owner}.modules():  # each {cls} compiled once, one compilation serving them all\n"
            f"{indent}    if isinstance(block, {ref}):\n"
            f"{indent}        block.compile({', '.join(kwargs)})\n"
            + (f"{indent}{name} = {model}\n" if name != model and not in_place else ""))  # `model = model`: nothing
    first, last = assign.lineno, assign.end_lineno or assign.lineno
    if last == len(src.lines) and not src.lines[-1].endswith("\n"):  # the last line, without a newline
        src.edits.append((first, 0, last, len(src.lines[-1]), loop[:-1]))
    else:
        src.edits.append((first, 0, last + 1, 0, loop))
    return name, import_line


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
    code-change draft comes with its diff. A draft whose patch cannot be made for the script (a
    regional block no name of the script reaches) keeps its flags, and ``notes`` gets a
    ``no patch: NAME: why`` line; so does one whose file cannot hold a patch (mixed line endings, a
    character its encoding lacks)."""
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
        why: list[str] = []
        p = Patch(diff=d.diff, path=rel_path(script), review=d.review) if d.diff \
            else spec_patch(d.spec, script, receipt, why)
        if p is None:
            if notes is not None and why:
                notes.append(f"no patch: {d.name}: {why[0]}; its runs use its flags ({' '.join(d.spec.flags())})")
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
