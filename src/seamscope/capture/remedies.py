"""Remedies applied to torch for one run, without editing the script (``seamscope run``'s
remedy flags, checked: ``experiments.remedy_plan.prepare`` builds a :class:`Remedies`).

What each one changes, and how it is undone when the script ends:

- Dynamo settings (``torch._dynamo.config``) and dynamic sources (``torch.compiler.config``): patched
  for the run, the receipt's environment records the values the script ran with;
- the stance (``torch.compiler.set_stance``), reset to ``default``;
- ``--disable``: a function of an imported module is wrapped in ``torch.compiler.disable`` (a module
  not yet imported is patched as it is imported, by a finder first on ``sys.meta_path``); a
  function of the script itself is decorated in the script's syntax tree (``transform``), the
  decorator reached through ``builtins`` for the run;
- ``torch.compile``'s arguments (``--compile-option``), the guard settings (``--guard-filter``,
  ``--skip-guard-eval-unsafe-after``: ``guard_settings.py``) and regional compilation:
  ``torch.compile`` wrapped for the run, outside the session's own wrapper;
- ``--patch``: the script's source patched in memory (``transform`` compiles the patched text, and
  ``linecache`` serves it, so tracebacks and break sites show the patched lines); another file the
  patch names is served patched as it is imported (a finder first on ``sys.meta_path``);
- ``--calls-of NAME`` (observation only): one statement ``NAME = __seamscope_calls_of__(NAME)``
  compiled right after the script's first statement binding NAME, with that statement's line
  number (no line of the script moves), hands the object to the session's ``track`` (and to the
  trials' output fingerprints) as ``torch.compile``'s result is: its calls are the run's calls,
  and what ``torch.compile`` returns is not tracked (a regional patch's blocks: nested in those
  calls, or outside them, as under ``--regional``);
- the seed: ``random``, ``numpy`` and ``torch`` seeded once.

An undo that raises does not stop the others; what it raised is printed as a warning.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..errors import UnusableInput
from .calls import is_block_compile


@dataclass
class Remedies:
    """What to change, checked against this torch before the script runs."""

    target: str
    settings: dict[str, Any] = field(default_factory=dict)
    additions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """A set setting's added callables, (module, qualname), imported once the script's folder is on the path."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """``torch.compile`` arguments; ``backend`` may be (module, qualname), imported at the first compile."""
    mark_dynamic: tuple[str, ...] = ()
    stance: str | None = None
    seed: int | None = None
    regional: tuple[str, ...] = ()
    script_disables: list[str] = field(default_factory=list)
    module_disables: list[tuple[str, str]] = field(default_factory=list)
    marks: list[tuple[str, str, str | None]] = field(default_factory=list)
    """(source, entry, compile id) of each dynamic source mark PyTorch applied."""
    script_ns: int = 0
    """The script's own time: from the end of ``apply`` to the start of its undo."""
    source: str | None = None
    """The script's patched text (``--patch``); None: the file as it is."""
    module_sources: dict[str, str] = field(default_factory=dict)
    """Other files' patched texts, by absolute path."""
    calls_of: str | None = None
    """The script's name whose object's calls are the run's calls (``--calls-of``)."""
    guard_filter: str | None = None
    """``--guard-filter``: one of PyTorch's guard filters, by name (``guard_settings.py``)."""
    skip_guard_eval_after: int | None = None
    """``--skip-guard-eval-unsafe-after``: the calls of warm-up before guard evaluation is skipped."""

    def transform(self, tree: ast.Module) -> ast.Module:
        """The patched source instead of the file's; then the script's own ``--disable`` targets
        decorated as the script defines them."""
        if self.source is not None:
            path = os.path.abspath(self.target)
            tree = ast.parse(self.source, filename=self.target)
            _serve_lines(path, self.source)
            if path != self.target:
                _serve_lines(self.target, self.source)
        tree = disable_in_tree(tree, self.script_disables, self.target)
        if self.calls_of is not None:
            tree = calls_of_in_tree(tree, self.calls_of)
        return tree

    def needs_transform(self) -> bool:
        return bool(self.script_disables) or self.source is not None or self.calls_of is not None

    def apply(self, session: Any, track: Callable[[Any], Any] | None = None) -> Callable[[], None]:
        """Apply everything; returns the undo. ``track``: wraps each callable ``torch.compile``
        returns (the trials' output fingerprints)."""
        return _apply(self, session, track)


class LateCallables(set):  # type: ignore[type-arg]
    """A Dynamo set of callables (``ignore_logging_functions``, ...) holding, besides the callables
    that exist when the run starts, names of ones that do not exist yet: each is looked up again
    whenever Dynamo reads the set, until it exists. A library can add a method on import
    (transformers adds ``logging.Logger.warning_once``), and a hint that names it was made in a run
    that had imported it; the same hint must work when the script imports that library later."""

    def __init__(self, items: Any, pending: list[tuple[Any, str, str]]) -> None:
        super().__init__(items)
        self.pending = pending
        """``(module, MODULE, QUALNAME)`` not found yet."""

    def _fill(self) -> None:
        if self.pending:
            still = []
            for obj, mod, qual in self.pending:
                found = _attr_path(obj, qual)
                if found is None:
                    still.append((obj, mod, qual))
                else:
                    set.add(self, found)
            self.pending = still

    def __contains__(self, item: object) -> bool:
        self._fill()
        return set.__contains__(self, item)

    def __iter__(self) -> Any:
        self._fill()
        return set.__iter__(self)

    def __len__(self) -> int:
        self._fill()
        return set.__len__(self)

    def __reduce__(self) -> Any:  # a copy (Dynamo copies its settings to log them) is a plain set
        return set, (list(self),)

    def __repr__(self) -> str:
        self._fill()
        names = [f"'{mod}:{qual} (looked up as the script runs)'" for _, mod, qual in self.pending]
        inner = ", ".join([repr(x) for x in set.__iter__(self)] + names)
        return "{" + inner + "}" if inner else "set()"


def _attr_path(obj: Any, qual: str) -> Any:
    for part in qual.split("."):
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj


def late_callables(name: str, current: Any, items: list[tuple[str, str]]) -> LateCallables:
    """``current`` with ``items`` added (``MODULE:QUALNAME`` each, for ``--dynamo-config NAME+=``):
    the module is imported now (one line and exit 2 when it cannot be); a name it does not hold
    yet is looked up again as Dynamo reads the set."""
    found: list[Any] = []
    pending: list[tuple[Any, str, str]] = []
    for m, q in items:
        module = resolve(m, "", f"--dynamo-config {name}+=")
        obj = _attr_path(module, q)
        if obj is None:
            pending.append((module, m, q))
        else:
            found.append(obj)
    return LateCallables([*current, *found], pending)


def resolve(mod: str, qual: str, flag: str) -> Any:
    obj: Any = importlib.import_module(mod)
    for part in qual.split(".") if qual else ():
        if not hasattr(obj, part):
            raise UnusableInput(f"{flag} {mod}:{qual}: {mod} has no {qual}")
        obj = getattr(obj, part)
    return obj


def _never_defined(session: Any, name: str, late: LateCallables) -> None:
    """At the end of the run: a name that never came to exist had no effect; the receipt says so."""
    late._fill()
    for _, mod, qual in late.pending:
        session.warnings.append(f"--dynamo-config {name}+={mod}:{qual}: {mod} never had {qual} while the "
                                "script ran (no library it imported added it), so the setting had no effect")


def find_def(tree: ast.Module, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parts = qual.split(".")
    body: list[ast.stmt] = tree.body
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        found: ast.stmt | None = None
        for node in body:
            if last and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == part:
                found = node
            elif not last and isinstance(node, ast.ClassDef) and node.name == part:
                found = node
        if found is None:
            return None
        if last:
            assert isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef))
            return found
        assert isinstance(found, ast.ClassDef)
        body = found.body
    return None


DISABLE_NAME = "__seamscope_disable__"


def disable_in_tree(tree: ast.Module, quals: list[str], target: str) -> ast.Module:
    """Add ``torch.compiler.disable`` as the outermost decorator of each named definition."""
    for qual in quals:
        node = find_def(tree, qual)
        if node is None:
            raise UnusableInput(f"--disable {qual}: the script defines no function {qual}")
        node.decorator_list.insert(0, ast.Name(id=DISABLE_NAME, ctx=ast.Load()))
    ast.fix_missing_locations(tree)
    return tree


CALLS_OF_NAME = "__seamscope_calls_of__"

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def binding_of(tree: ast.Module, name: str) -> tuple[list[ast.stmt], int] | None:
    """The first statement, in source order, that binds ``name`` in the module's own scope
    (``NAME = ...``, ``NAME: T = ...``, ``def NAME``, ``class NAME``; inside ``if``/``for``/``with``/
    ``try`` blocks too, not in a function or class body): (its block, its index); None if none."""

    def binds(s: ast.stmt) -> bool:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return s.name == name
        if isinstance(s, ast.Assign):
            return any(isinstance(t, ast.Name) and t.id == name for t in s.targets)
        if isinstance(s, ast.AnnAssign):
            return s.value is not None and isinstance(s.target, ast.Name) and s.target.id == name
        return False

    def search(body: list[ast.stmt]) -> tuple[list[ast.stmt], int] | None:
        for i, s in enumerate(body):
            if binds(s):
                return body, i
            if isinstance(s, _SCOPES):
                continue
            blocks = [getattr(s, f, None) for f in ("body", "orelse", "finalbody")]
            blocks += [h.body for h in getattr(s, "handlers", [])] + [c.body for c in getattr(s, "cases", [])]
            for b in blocks:
                if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                    found = search(b)
                    if found is not None:
                        return found
        return None

    return search(tree.body)


def calls_of_in_tree(tree: ast.Module, name: str) -> ast.Module:
    """``NAME = __seamscope_calls_of__(NAME)`` right after the statement binding ``name``, every
    node of it at that statement's position (tracebacks, break sites, findings: the file's lines)."""
    found = binding_of(tree, name)
    if found is None:
        raise UnusableInput(f"--calls-of {name}: the script binds no {name} outside its functions")
    body, i = found
    at = body[i]
    stmt = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                      value=ast.Call(func=ast.Name(id=CALLS_OF_NAME, ctx=ast.Load()),
                                     args=[ast.Name(id=name, ctx=ast.Load())], keywords=[]))
    for n in ast.walk(stmt):
        if "lineno" in n._attributes:
            ast.copy_location(n, at)
    body.insert(i + 1, stmt)
    return tree


def _serve_lines(path: str, text: str) -> None:
    """``linecache`` reads ``path`` as ``text`` (an entry without a modification time is never
    checked against the file)."""
    import linecache

    lines = text.splitlines(keepends=True)
    linecache.cache[path] = (len(text), None, lines, path)


class _PatchedLoader(importlib.abc.Loader):
    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text

    def create_module(self, spec: Any) -> Any:
        return None

    def exec_module(self, module: Any) -> None:
        _serve_lines(self.path, self.text)
        exec(compile(self.text, self.path, "exec"), module.__dict__)


class _PatchedSources(importlib.abc.MetaPathFinder):
    """Serves the patched text of a file ``--patch`` names when it is imported."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        import importlib.util

        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            origin = os.path.abspath(spec.origin) if spec.origin else None
            real = os.path.realpath(origin) if origin else None  # the sources are by real path
            if origin is None or real not in self.sources:
                return None
            return importlib.util.spec_from_file_location(
                fullname, origin, loader=_PatchedLoader(origin, self.sources[real]),
                submodule_search_locations=spec.submodule_search_locations)
        return None


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Wraps the named functions of a module in ``torch.compiler.disable`` once it is imported."""

    def __init__(self, targets: dict[str, list[str]], errors: list[str]) -> None:
        self.targets = targets
        self.errors = errors

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.targets:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                original = spec.loader.exec_module
                quals = self.targets[fullname]

                def exec_module(module: Any, _original: Any = original, _quals: list[str] = quals) -> None:
                    _original(module)
                    for q in _quals:
                        _patch_attr(module, q)

                spec.loader.exec_module = exec_module  # type: ignore[method-assign]
                return spec
        return None


def _patch_attr(module: Any, qual: str) -> None:
    import torch

    parts = qual.split(".")
    owner: Any = module
    for p in parts[:-1]:
        owner = getattr(owner, p, None)
        if owner is None:
            raise UnusableInput(f"--disable {module.__name__}:{qual}: {module.__name__} has no {qual}")
    fn = getattr(owner, parts[-1], None)
    if fn is None or not callable(fn):
        raise UnusableInput(f"--disable {module.__name__}:{qual}: {module.__name__} has no function {qual}")
    setattr(owner, parts[-1], torch.compiler.disable(fn))


def _apply(rem: Remedies, session: Any, track: Callable[[Any], Any] | None) -> Callable[[], None]:
    import contextlib

    import torch

    from . import adapter

    undo: list[Callable[[], None]] = []
    stack = contextlib.ExitStack()
    undo.append(stack.close)
    if rem.seed is not None:
        seed_everything(rem.seed)
    settings = dict(rem.settings)
    for name, items in rem.additions.items():
        _, current = adapter.dynamo_setting(name)
        late = settings[name] = late_callables(name, current, items)
        undo.append(functools.partial(_never_defined, session, name, late))
    if settings:
        stack.enter_context(adapter.dynamo_config_patch(settings))
    if rem.mark_dynamic:
        stack.enter_context(adapter.dynamic_sources_patch(",".join(rem.mark_dynamic)))
        undo.append(adapter.watch_dynamic_source_marks(lambda s, e, cid: rem.marks.append((s, e, cid))))
    if session.builder is not None and (settings or rem.mark_dynamic):
        # the receipt records the settings the script ran with, not those before the remedy
        env = session.builder.environment
        dyn = adapter.dynamo_settings()
        if rem.mark_dynamic:
            dyn["dynamic_sources"] = repr(",".join(rem.mark_dynamic))
        for name in settings:
            dyn.setdefault(name, repr(adapter.dynamo_setting(name)[1]))
        session.builder.environment = msgspec.structs.replace(env, dynamo_config=dyn)
    if rem.stance is not None:
        torch.compiler.set_stance(rem.stance)
        undo.append(lambda: torch.compiler.set_stance("default"))
    if rem.source is not None or rem.module_sources:
        _note_patch(rem, session)
    if rem.module_sources:
        patched = _PatchedSources(rem.module_sources)
        sys.meta_path.insert(0, patched)
        undo.append(lambda: sys.meta_path.remove(patched) if patched in sys.meta_path else None)
    if rem.module_disables:
        targets: dict[str, list[str]] = {}
        for m, q in rem.module_disables:
            if m in sys.modules:
                _patch_attr(sys.modules[m], q)
            else:
                targets.setdefault(m, []).append(q)
        if targets:
            finder = _PatchOnImport(targets, [])
            sys.meta_path.insert(0, finder)
            undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
    if rem.script_disables:
        import builtins

        setattr(builtins, DISABLE_NAME, torch.compiler.disable)
        undo.append(lambda: delattr(builtins, DISABLE_NAME) if hasattr(builtins, DISABLE_NAME) else None)
    if rem.calls_of is not None:
        import builtins

        def calls_of(obj: Any) -> Any:
            obj = session.track(obj) if getattr(session, "active", False) else obj
            return obj if track is None else track(obj)

        setattr(builtins, CALLS_OF_NAME, calls_of)
        undo.append(lambda: delattr(builtins, CALLS_OF_NAME) if hasattr(builtins, CALLS_OF_NAME) else None)
        # NAME's calls are the run's calls, a regional patch's blocks' never (called outside the model
        # too: BART's encoder under generate)
        tracks = getattr(session, "tracks_blocks", True)
        session.tracks_blocks = False
        undo.append(lambda: setattr(session, "tracks_blocks", tracks))
    if rem.regional:  # under _wrap_compile: its overrides and output fingerprints still apply
        from .regional import install_regional

        undo.append(install_regional(rem.regional, session))
    guards = None
    if rem.guard_filter is not None or rem.skip_guard_eval_after is not None:
        from .guard_settings import GuardSettings

        guards = GuardSettings(session, rem.guard_filter, rem.skip_guard_eval_after, rem.stance)
        undo.append(guards.undo)
    if rem.overrides or track is not None or guards is not None:
        undo.append(_wrap_compile(rem.overrides, track, guards, blocks=rem.calls_of is None))
    t0 = time.perf_counter_ns()

    def finish() -> None:
        rem.script_ns = time.perf_counter_ns() - t0
        while undo:
            try:
                undo.pop()()
            except Exception as e:  # noqa: BLE001 - every other undo still runs
                print(f"seamscope: warning: undoing a remedy raised {type(e).__name__}: {e}", file=sys.stderr)
        if rem.mark_dynamic:
            _note_marks(rem, session)

    return finish


def _note_marks(rem: Remedies, session: Any) -> None:
    """The frames whose compilations ``--mark-dynamic`` changed, in the decision record's note."""
    frames: dict[str, set[str]] = {}
    ledger = session.ledger if session.ledger is not None else None
    names: dict[str, str] = {}
    if session.builder is not None:
        try:
            led = ledger or session.build()
            names = {c.compile_id: f"{c.frame_name} ({os.path.basename(c.file)}:{c.line})" for c in led.compilations}
        except Exception:
            names = {}
    for src, entry, cid in rem.marks:
        frame = names.get(cid or "", cid or "outside a compilation")
        frames.setdefault(f"{entry} marked {src}", set()).add(f"{frame} [{cid}]")
    text = "; ".join(f"{k} in {', '.join(sorted(v))}" for k, v in sorted(frames.items()))
    text = "--mark-dynamic changed compilations of: " + (text or "no frame (no source matched)")
    matched = {entry for _, entry, _ in rem.marks}
    missing = [src for src in rem.mark_dynamic if src not in matched]
    if missing:
        # read back by ``trials`` (a candidate whose mark matched nothing is not a result)
        text += "; --mark-dynamic matched no source: " + " | ".join(missing)
    from ..model.receipt import Decision

    d = session.decision or Decision()
    note = (d.note + "; " if d.note else "") + text
    session.decision = msgspec.structs.replace(d, note=note)


def _note_patch(rem: Remedies, session: Any) -> None:
    """What ``--patch`` changed, in the decision record's note: the receipt's input hash is the
    file's on disk, the note names what ran instead (each patched text's SHA-256)."""
    import hashlib

    from ..model.receipt import Decision

    texts = dict(rem.module_sources)
    if rem.source is not None:
        texts[os.path.abspath(rem.target)] = rem.source
    text = "--patch: ran patched in memory: " + ", ".join(
        f"{os.path.basename(p)} (sha256 {hashlib.sha256(t.encode()).hexdigest()[:16]})"
        for p, t in sorted(texts.items())
    )
    d = session.decision or Decision()
    session.decision = msgspec.structs.replace(d, note=(d.note + "; " if d.note else "") + text)


def seed_everything(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (1 << 32))
    except ImportError:
        pass
    torch.manual_seed(seed)


def _wrap_compile(overrides: dict[str, Any], track: Callable[[Any], Any] | None,
                  guards: Any = None, blocks: bool = True) -> Callable[[], None]:
    """Override ``torch.compile``'s arguments, add the guard settings' (``guards``:
    :class:`.guard_settings.GuardSettings`), and hand each compiled callable to ``track`` (not a
    block's, from ``nn.Module.compile``, unless ``blocks``)."""
    import torch

    inner = torch.compile
    overrides = dict(overrides)
    backend = overrides.get("backend")
    resolved: list[Any] = []

    def options() -> dict[str, Any]:
        # A MODULE:QUALNAME backend is imported at the first torch.compile, once the script's
        # folder is on sys.path (a module next to the script is found as the script would find it).
        if isinstance(backend, tuple):
            if not resolved:
                resolved.append(resolve(backend[0], backend[1], "--compile-option backend"))
            return {**overrides, "backend": resolved[0]}
        return overrides

    def tracked(compiled: Any) -> Any:
        if guards is not None:
            compiled = guards.track(compiled)
        return compiled if track is None else track(compiled)

    @functools.wraps(inner)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        kwargs.update(options())
        if guards is not None:
            guards.options(kwargs)
        if model is None:
            decorator = inner(**kwargs)
            return lambda fn: tracked(decorator(fn))
        if not blocks and is_block_compile(model):
            return inner(model, **kwargs)
        return tracked(inner(model, **kwargs))

    torch.compile = compile

    def undo() -> None:
        torch.compile = inner

    return undo
