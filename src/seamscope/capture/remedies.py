"""Remedies that ``seamscope run`` applies without editing the script.

``--dynamo-config NAME=VALUE`` (``NAME+=MODULE:QUALNAME`` for a set of callables),
``--compile-option NAME=VALUE`` (overrides an argument of every ``torch.compile``),
``--mark-dynamic SOURCE`` (``torch.compiler.config.dynamic_sources``), ``--stance NAME``,
``--disable MODULE:QUALNAME`` (wraps one function in ``torch.compiler.disable``), ``--seed N`` and,
for a workload target (``FILE.py:FUNC``), ``--pad POLICY`` (a padding shape policy).

:func:`prepare` checks everything it can before the script runs (an unknown setting, a value of
the wrong type, a missing ``--disable`` target: :class:`UnusableInput`, exit 2) and returns a
:class:`Plan` whose ``setup`` the runner calls right after the session starts.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.abc
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click
import msgspec

from ..errors import UnusableInput

F = TypeVar("F", bound=Callable[..., Any])

CALLABLE_SETS = ("reorderable_logging_functions", "ignore_logging_functions")
"""Dynamo settings that hold a set of callables: ``NAME+=MODULE:QUALNAME`` adds one."""

COMPILE_OPTIONS = ("dynamic", "fullgraph", "mode", "backend", "recompile_limit", "isolate_recompiles")
PER_CALLABLE_OPTIONS = ("recompile_limit", "isolate_recompiles")
"""``torch.compile`` arguments of torch 2.13+: a recompile limit for one compiled callable (instead of
``torch._dynamo.config.recompile_limit`` for the whole process), and its own compiled entries."""
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
SCRIPT_MODULES = ("__main__",)
"""Names that mean "the script itself" in ``--disable MODULE:QUALNAME`` (besides its file stem)."""


class RemedySpec(msgspec.Struct, frozen=True, kw_only=True):
    """The remedy flags of one ``run``, as given (what ``try`` passes to each candidate)."""

    dynamo_config: tuple[str, ...] = ()
    compile_option: tuple[str, ...] = ()
    mark_dynamic: tuple[str, ...] = ()
    stance: str | None = None
    disable: tuple[str, ...] = ()
    seed: int | None = None
    pad: str | None = None
    """A workload target's padding policy (``pow2``, ``buckets:64,128``)."""
    regional: tuple[str, ...] = ()
    """Classes whose instances are compiled one by one instead of the whole module (``regional.py``)."""

    def flags(self) -> list[str]:
        out: list[str] = []
        for v in self.dynamo_config:
            out += ["--dynamo-config", v]
        for v in self.compile_option:
            out += ["--compile-option", v]
        for v in self.mark_dynamic:
            out += ["--mark-dynamic", v]
        if self.stance is not None:
            out += ["--stance", self.stance]
        for v in self.disable:
            out += ["--disable", v]
        if self.seed is not None:
            out += ["--seed", str(self.seed)]
        if self.pad is not None:
            out += ["--pad", self.pad]
        for v in self.regional:
            out += ["--regional", v]
        return out

    def is_empty(self) -> bool:
        return self == RemedySpec()


def remedy_options(f: F) -> F:
    """The remedy flags as click options (``run``; ``try --candidate`` parses the same words)."""
    f = click.option("--no-html", "no_html", is_flag=True, hidden=True)(f)
    f = click.option("--record-out", "record_out", default=None, hidden=True)(f)
    f = click.option("--fingerprint", "fingerprint", is_flag=True, hidden=True)(f)
    f = click.option("--pad", default=None, metavar="POLICY",
                     help="A workload FILE.py:FUNC only: pad each call's length (pow2, buckets:64,128,...).")(f)
    f = click.option("--seed", type=int, default=None, help="Seed random, numpy and torch before the script runs.")(f)
    f = click.option("--regional", "regional", multiple=True, metavar="CLASS",
                     help="Compile each instance of CLASS instead of the whole module passed to torch.compile.")(f)
    f = click.option("--disable", "disable", multiple=True, metavar="MODULE:QUALNAME",
                     help="Wrap one function in torch.compiler.disable (repeatable).")(f)
    f = click.option("--stance", default=None, metavar="NAME",
                     help="torch.compiler.set_stance for the whole run (eager_then_compile, force_eager, ...).")(f)
    f = click.option("--mark-dynamic", "mark_dynamic", multiple=True, metavar="SOURCE",
                     help="Mark a source dynamic in PyTorch's syntax, e.g. \"L['x']:0\" (repeatable).")(f)
    f = click.option("--compile-option", "compile_option", multiple=True, metavar="NAME=VALUE",
                     help="Override an argument of every torch.compile: dynamic, fullgraph, mode, backend, "
                     "recompile_limit, isolate_recompiles (torch 2.13+).")(f)
    f = click.option("--dynamo-config", "dynamo_config", multiple=True, metavar="NAME=VALUE",
                     help="Set a torch._dynamo.config value (repeatable); NAME+=MODULE:QUALNAME adds a callable "
                     "to a set setting.")(f)
    return f


# --- parsing (torch-free) -------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    """A Python literal (``True``, ``8``, ``'x'``); ``true``/``false``/``none`` in any case too."""
    t = text.strip()
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    return ast.literal_eval(t)


def parse_assignment(flag: str, item: str) -> tuple[str, str, str]:
    """``NAME=VALUE`` or ``NAME+=VALUE`` → (name, op, raw value)."""
    name, sep, value = item.partition("=")
    op = "="
    if name.endswith("+"):
        name, op = name[:-1], "+="
    name = name.strip()
    if not sep or not name or not name.isidentifier():
        raise UnusableInput(f"{flag} {item!r}: expected NAME=VALUE")
    return name, op, value.strip()


def parse_target(flag: str, text: str) -> tuple[str, str]:
    """``MODULE:QUALNAME`` → (module, qualname)."""
    mod, sep, qual = text.strip().partition(":")
    parts = qual.split(".")
    if not sep or not mod or not qual or not all(p.isidentifier() for p in parts) or not all(
        p.isidentifier() for p in mod.split(".")
    ):
        raise UnusableInput(f"{flag} {text!r}: expected MODULE:QUALNAME")
    return mod, qual


def check_type(name: str, value: Any, current: Any) -> None:
    """A value must have the type of the setting's current value (an int setting takes no bool)."""
    if current is None:
        return
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif isinstance(current, str):
        ok = isinstance(value, str)
    elif isinstance(current, (set, frozenset)):
        ok = False
    else:
        ok = isinstance(value, type(current))
    if not ok:
        raise UnusableInput(
            f"--dynamo-config {name}: expected a value of type {type(current).__name__}, got {value!r}"
            + (f" (add one callable with {name}+=MODULE:QUALNAME)" if isinstance(current, (set, frozenset)) else "")
        )


def compile_override(item: str) -> tuple[str, Any]:
    name, op, raw = parse_assignment("--compile-option", item)
    if op != "=" or name not in COMPILE_OPTIONS:
        raise UnusableInput(f"--compile-option {item!r}: expected one of {', '.join(COMPILE_OPTIONS)}=VALUE")
    try:
        value = parse_value(raw)
    except (ValueError, SyntaxError):
        value = raw
    if name == "dynamic" and value is not None and not isinstance(value, bool):
        raise UnusableInput(f"--compile-option dynamic: expected true, false or none, got {raw!r}")
    if name == "fullgraph" and not isinstance(value, bool):
        raise UnusableInput(f"--compile-option fullgraph: expected true or false, got {raw!r}")
    if name == "mode" and value is not None and value not in MODES:
        raise UnusableInput(f"--compile-option mode: expected one of {', '.join(MODES)}, got {raw!r}")
    if name == "backend" and not isinstance(value, str):
        raise UnusableInput(f"--compile-option backend: expected a name or MODULE:QUALNAME, got {raw!r}")
    if name == "recompile_limit" and value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value < 1
    ):
        raise UnusableInput(f"--compile-option recompile_limit: expected a positive integer or none, got {raw!r}")
    if name == "isolate_recompiles" and not isinstance(value, bool):
        raise UnusableInput(f"--compile-option isolate_recompiles: expected true or false, got {raw!r}")
    return name, value


def per_callable_limit(spec: RemedySpec, torch_version: str | None) -> list[str] | None:
    """The per-callable form of a candidate that raises ``torch._dynamo.config.recompile_limit``
    (``--compile-option recompile_limit=N``: only the compiled callables of the script get the
    higher limit, not every frame of the process), when the torch that ran the baseline takes it
    (2.13+); None otherwise."""
    if torch_version is None or _minor(torch_version) < (2, 13):
        return None
    for item in spec.dynamo_config:
        name, op, raw = parse_assignment("--dynamo-config", item)
        if name == "recompile_limit" and op == "=":
            return ["--compile-option", f"recompile_limit={raw}"]
    return None


def _minor(version: str) -> tuple[int, int]:
    try:
        major, minor = (int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        return (0, 0)
    return major, minor


def code_change(spec: RemedySpec) -> str:
    """The code change a set of flags stands for, as a user would write it."""
    parts: list[str] = []
    opts = [compile_override(o) for o in spec.compile_option]
    if opts:
        parts.append("torch.compile(model, " + ", ".join(f"{k}={v!r}" for k, v in opts) + ")")
    for item in spec.dynamo_config:
        name, op, raw = parse_assignment("--dynamo-config", item)
        if op == "+=":
            mod, qual = parse_target("--dynamo-config", raw)
            ref = qual if mod == "builtins" else f"{mod}.{qual}"
            parts.append(f"torch._dynamo.config.{name}.add({ref})")
        else:
            try:
                v = parse_value(raw)
            except (ValueError, SyntaxError):
                v = raw
            parts.append(f"torch._dynamo.config.{name} = {v!r}")
    for src in spec.mark_dynamic:
        parts.append(f"torch.compiler.config.dynamic_sources = {src!r}"
                     + (f"  # or torch._dynamo.mark_dynamic({_source_local(src)})" if _source_local(src) else ""))
    if spec.stance is not None:
        parts.append(f"torch.compiler.set_stance({spec.stance!r})")
    for d in spec.disable:
        mod, qual = parse_target("--disable", d)
        parts.append(f"@torch.compiler.disable on {qual} ({mod})")
    if spec.pad is not None:
        parts.append(f"pad each request's length ({spec.pad}) and cut the output back")
    parts += [f"compile each {c} instead of the whole model (block.compile())" for c in spec.regional]
    return "; ".join(parts) if parts else "(no change)"


def _source_local(src: str) -> str | None:
    """``L['x']:0`` → ``x, 0`` (the arguments of ``mark_dynamic``), when it is that simple."""
    import re

    m = re.fullmatch(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\](?::(\d+))?", src.strip())
    if m is None or m.group(2) is None:
        return None
    return f"{m.group(1)}, {m.group(2)}"


def spec_from_words(words: list[str]) -> RemedySpec:
    """Parse ``--dynamo-config X=1 --stance force_eager ...`` (a ``try --candidate`` string)."""

    @click.command()
    @remedy_options
    def _parse(**kw: Any) -> RemedySpec:
        return spec_from_options(**kw)

    try:
        rv = _parse.main(args=list(words), standalone_mode=False)
    except click.ClickException as e:
        raise UnusableInput(f"candidate {' '.join(words)!r}: {e.format_message()}") from None
    assert isinstance(rv, RemedySpec)
    return rv


def spec_from_options(dynamo_config: tuple[str, ...] = (), compile_option: tuple[str, ...] = (),
                      mark_dynamic: tuple[str, ...] = (), stance: str | None = None,
                      disable: tuple[str, ...] = (), seed: int | None = None, pad: str | None = None,
                      regional: tuple[str, ...] = (), **_: Any) -> RemedySpec:
    return RemedySpec(dynamo_config=tuple(dynamo_config), compile_option=tuple(compile_option),
                      mark_dynamic=tuple(mark_dynamic), stance=stance, disable=tuple(disable), seed=seed, pad=pad,
                      regional=tuple(regional))


# --- checking and applying (torch) ----------------------------------------------------------------


@dataclass
class Plan:
    """What ``prepare`` checked; ``setup(session)`` applies it and returns the undo."""

    spec: RemedySpec
    target: str
    settings: dict[str, Any] = field(default_factory=dict)
    additions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    script_disables: list[str] = field(default_factory=list)
    module_disables: list[tuple[str, str]] = field(default_factory=list)
    record_out: str | None = None
    """Where ``try`` reads the script's own wall time (and the output fingerprints)."""
    fingerprint: bool = False
    marks: list[tuple[str, str, str | None]] = field(default_factory=list)
    script_ns: int = 0
    _t0: int = 0

    def transform(self, tree: ast.Module) -> ast.Module:
        """Decorate the script's own ``--disable`` targets as the script defines them."""
        return disable_in_tree(tree, self.script_disables, self.target)

    def needs_transform(self) -> bool:
        return bool(self.script_disables)

    def setup(self, session: Any) -> Callable[[], None]:
        return _apply(self, session)


def prepare(spec: RemedySpec, target: str, module: bool = False, record_out: str | None = None,
            fingerprint: bool = False) -> Plan:
    """Check every flag before anything runs; raise :class:`UnusableInput` naming the bad one."""
    from . import adapter

    plan = Plan(spec=spec, target=target, record_out=record_out, fingerprint=fingerprint and record_out is not None)
    for item in spec.dynamo_config:
        name, op, raw = parse_assignment("--dynamo-config", item)
        exists, current = adapter.dynamo_setting(name)
        if not exists:
            raise UnusableInput(f"--dynamo-config: torch._dynamo.config has no setting {name}")
        if op == "+=":
            if not isinstance(current, (set, frozenset)):
                raise UnusableInput(f"--dynamo-config {name}+=: {name} is not a set of callables "
                                    f"(+= works for {', '.join(CALLABLE_SETS)})")
            plan.additions.setdefault(name, []).append(_check_importable("--dynamo-config " + name, raw, target))
            continue
        try:
            value = parse_value(raw)
        except (ValueError, SyntaxError):
            if isinstance(current, str):
                value = raw
            else:
                raise UnusableInput(f"--dynamo-config {item!r}: the value is not a Python literal") from None
        check_type(name, value, current)
        plan.settings[name] = value
    for item in spec.compile_option:
        k, v = compile_override(item)
        if k == "backend" and ":" in v:
            _check_importable("--compile-option backend", v, target)
        if k in PER_CALLABLE_OPTIONS and not adapter.compile_accepts(k):
            raise UnusableInput(f"--compile-option {k}: this torch's torch.compile takes no {k} (torch 2.13+)")
        plan.overrides[k] = v
    if spec.mark_dynamic:
        has, per_dim = adapter.dynamic_sources_support()
        if not has:
            raise UnusableInput("--mark-dynamic: this torch has no torch.compiler.config.dynamic_sources")
        for src in spec.mark_dynamic:
            if not src.strip() or "," in src:
                raise UnusableInput(f"--mark-dynamic {src!r}: expected one source, e.g. \"L['x']:0\"")
            if not per_dim and _source_local(src) is not None:
                raise UnusableInput(f"--mark-dynamic {src!r}: this torch reads no ':N' dimension suffix; "
                                    "give the source without it (all its dimensions)")
    if spec.pad is not None:
        from ..experiments.workload import is_workload_spec
        from ..experiments.workload_run import pad_policy

        if module or not is_workload_spec(target):
            raise UnusableInput(f"--pad {spec.pad}: padding applies to a workload target FILE.py:FUNC only")
        pad_policy(spec.pad)
    if spec.stance is not None and spec.stance not in adapter.stance_names():
        raise UnusableInput(f"--stance {spec.stance!r}: expected one of {', '.join(adapter.stance_names())}")
    stem = os.path.splitext(os.path.basename(target))[0]
    tree = None
    for d in spec.disable:
        mod, qual = parse_target("--disable", d)
        if not module and mod in (*SCRIPT_MODULES, stem):
            if ".py:" in target:
                raise UnusableInput(f"--disable {d}: a function of the workload's own file cannot be patched; "
                                    "move it to a module the file imports, or decorate it there")
            if tree is None:
                tree = _parse_script(target)
            if _find_def(tree, qual) is None:
                raise UnusableInput(f"--disable {d}: the script defines no function {qual} at module or class level "
                                    "(only those can be patched as the script defines them)")
            plan.script_disables.append(qual)
        else:
            _check_importable("--disable", d, target, attribute=False)
            plan.module_disables.append((mod, qual))
    return plan


def _parse_script(target: str) -> ast.Module:
    try:
        with open(target, encoding="utf-8") as f:
            return ast.parse(f.read(), filename=target)
    except (OSError, SyntaxError, ValueError) as e:
        raise UnusableInput(f"{target}: cannot read the script ({e})") from None


def _check_importable(flag: str, text: str, target: str, attribute: bool = True) -> tuple[str, str]:
    mod, qual = parse_target(flag, text)
    saved = sys.path[:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    try:
        spec = importlib.util.find_spec(mod)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None:
        raise UnusableInput(f"{flag} {text}: no module named {mod}")
    return mod, qual


def resolve(mod: str, qual: str, flag: str) -> Any:
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        if not hasattr(obj, part):
            raise UnusableInput(f"{flag} {mod}:{qual}: {mod} has no {qual}")
        obj = getattr(obj, part)
    return obj


def _find_def(tree: ast.Module, qual: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
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
        node = _find_def(tree, qual)
        if node is None:
            raise UnusableInput(f"--disable {qual}: the script defines no function {qual}")
        node.decorator_list.insert(0, ast.Name(id=DISABLE_NAME, ctx=ast.Load()))
    ast.fix_missing_locations(tree)
    return tree


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


def _apply(plan: Plan, session: Any) -> Callable[[], None]:
    import contextlib

    import torch

    from . import adapter

    undo: list[Callable[[], None]] = []
    stack = contextlib.ExitStack()
    undo.append(stack.close)
    if plan.spec.seed is not None:
        seed_everything(plan.spec.seed)
    settings = dict(plan.settings)
    for name, items in plan.additions.items():
        _, current = adapter.dynamo_setting(name)
        settings[name] = set(current) | {resolve(m, q, f"--dynamo-config {name}+=") for m, q in items}
    if settings:
        stack.enter_context(adapter.dynamo_config_patch(settings))
    if plan.spec.mark_dynamic:
        stack.enter_context(adapter.dynamic_sources_patch(",".join(plan.spec.mark_dynamic)))
        undo.append(adapter.watch_dynamic_source_marks(lambda s, e, cid: plan.marks.append((s, e, cid))))
    if session.builder is not None and (settings or plan.spec.mark_dynamic):
        # the receipt records the settings the script ran with, not those before the remedy
        env = session.builder.environment
        dyn = adapter.dynamo_settings()
        if plan.spec.mark_dynamic:
            dyn["dynamic_sources"] = repr(",".join(plan.spec.mark_dynamic))
        for name in settings:
            dyn.setdefault(name, repr(adapter.dynamo_setting(name)[1]))
        session.builder.environment = msgspec.structs.replace(env, dynamo_config=dyn)
    if plan.spec.stance is not None:
        torch.compiler.set_stance(plan.spec.stance)
        undo.append(lambda: torch.compiler.set_stance("default"))
    if plan.module_disables:
        targets: dict[str, list[str]] = {}
        for m, q in plan.module_disables:
            if m in sys.modules:
                _patch_attr(sys.modules[m], q)
            else:
                targets.setdefault(m, []).append(q)
        if targets:
            finder = _PatchOnImport(targets, [])
            sys.meta_path.insert(0, finder)
            undo.append(lambda: sys.meta_path.remove(finder) if finder in sys.meta_path else None)
    if plan.script_disables:
        import builtins

        setattr(builtins, DISABLE_NAME, torch.compiler.disable)
        undo.append(lambda: delattr(builtins, DISABLE_NAME) if hasattr(builtins, DISABLE_NAME) else None)
    from ..experiments.fingerprint import Recorder

    recorder = Recorder() if plan.record_out is not None else None
    if recorder is not None and plan.fingerprint:
        undo.append(recorder.install())
    if plan.spec.regional:  # under _wrap_compile: its overrides and output fingerprints still apply
        from .regional import install_regional

        undo.append(install_regional(plan.spec.regional, session))
    if plan.overrides or plan.fingerprint:
        undo.append(_wrap_compile(plan, recorder if plan.fingerprint else None))
    plan._t0 = time.perf_counter_ns()

    def finish() -> None:
        plan.script_ns = time.perf_counter_ns() - plan._t0
        while undo:
            try:
                undo.pop()()
            except Exception:
                pass
        if plan.spec.mark_dynamic:
            _note_marks(plan, session)
        if recorder is not None and plan.record_out is not None:
            recorder.write(plan.record_out, script_ns=plan.script_ns)

    return finish


def _note_marks(plan: Plan, session: Any) -> None:
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
    for src, entry, cid in plan.marks:
        frame = names.get(cid or "", cid or "outside a compilation")
        frames.setdefault(f"{entry} marked {src}", set()).add(f"{frame} [{cid}]")
    text = "; ".join(f"{k} in {', '.join(sorted(v))}" for k, v in sorted(frames.items()))
    text = "--mark-dynamic changed compilations of: " + (text or "no frame (no source matched)")
    matched = {entry for _, entry, _ in plan.marks}
    missing = [src for src in plan.spec.mark_dynamic if src not in matched]
    if missing:
        # read back by ``trials`` (a candidate whose mark matched nothing is not a result)
        text += "; --mark-dynamic matched no source: " + " | ".join(missing)
    from ..model.receipt import Decision

    d = session.decision or Decision()
    note = (d.note + "; " if d.note else "") + text
    session.decision = msgspec.structs.replace(d, note=note)


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


def _wrap_compile(plan: Plan, recorder: Any) -> Callable[[], None]:
    """Override ``torch.compile``'s arguments, and fingerprint the outputs of top-level calls."""
    import torch

    inner = torch.compile
    overrides = dict(plan.overrides)
    backend = overrides.get("backend")
    resolved: list[Any] = []

    def options() -> dict[str, Any]:
        # A MODULE:QUALNAME backend is imported at the first torch.compile, once the script's
        # folder is on sys.path (a module next to the script is found as the script would find it).
        if isinstance(backend, str) and ":" in backend:
            if not resolved:
                m, q = parse_target("--compile-option backend", backend)
                resolved.append(resolve(m, q, "--compile-option backend"))
            return {**overrides, "backend": resolved[0]}
        return overrides

    def track(compiled: Any) -> Any:
        if recorder is None:
            return compiled
        if isinstance(compiled, torch.nn.Module):
            object.__setattr__(compiled, "forward", recorder.wrap(compiled.forward))
            return compiled
        if callable(compiled):
            return functools.wraps(compiled)(recorder.wrap(compiled))
        return compiled

    @functools.wraps(inner)
    def compile(model: Any = None, **kwargs: Any) -> Any:
        kwargs.update(options())
        if model is None:
            decorator = inner(**kwargs)
            return lambda fn: track(decorator(fn))
        return track(inner(model, **kwargs))

    torch.compile = compile

    def undo() -> None:
        torch.compile = inner

    return undo
