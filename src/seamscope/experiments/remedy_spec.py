"""What a remedy flag of ``seamscope run`` says, as data: no torch, no command line.

``--dynamo-config NAME=VALUE`` (``NAME+=MODULE:QUALNAME`` for a set of callables),
``--compile-option NAME=VALUE`` (overrides an argument of every ``torch.compile``),
``--mark-dynamic SOURCE`` (``torch.compiler.config.dynamic_sources``), ``--stance NAME``,
``--disable MODULE:QUALNAME`` (wraps one function in ``torch.compiler.disable``), ``--regional CLASS``,
``--patch FILE`` (a unified diff of the script, applied to its source in memory), ``--guard-filter NAME``
(one of PyTorch's guard filters, as ``torch.compile``'s ``guard_filter_fn`` option),
``--skip-guard-eval-unsafe-after CALLS`` (``set_stance(..., skip_guard_eval_unsafe=True)`` after that many
calls), ``--seed N``,
``--calls-of NAME`` (plumbing: what the script binds to NAME is observed as a compiled model, its
calls the run's calls) and, for a workload target (``FILE.py:FUNC``), ``--pad POLICY`` (a padding shape policy).

A :class:`RemedySpec` is the flags as given (what ``try`` passes to each candidate); :data:`FLAGS`
describes each flag once, for the command line's options (``commands/options.py``) and for
:func:`spec_from_words`. Checking a spec against the installed torch is ``remedy_plan.prepare``;
applying it is ``capture/remedies.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import UnusableInput

CALLABLE_SETS = ("reorderable_logging_functions", "ignore_logging_functions")
"""Dynamo settings that hold a set of callables: ``NAME+=MODULE:QUALNAME`` adds one."""

COMPILE_OPTIONS = ("dynamic", "fullgraph", "mode", "backend", "recompile_limit", "isolate_recompiles")
PER_CALLABLE_OPTIONS = ("recompile_limit", "isolate_recompiles")
"""``torch.compile`` arguments of torch 2.13+: a recompile limit for one compiled callable (instead of
``torch._dynamo.config.recompile_limit`` for the whole process), and its own compiled entries."""
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
GUARD_FILTERS = ("skip_guard_on_all_nn_modules_unsafe", "skip_guard_on_inbuilt_nn_modules_unsafe",
                 "keep_tensor_guards_unsafe", "skip_guard_on_globals_unsafe", "keep_portable_guards_unsafe",
                 "skip_all_guards_unsafe")
"""PyTorch's guard filters (``torch.compiler.NAME``, passed as ``options={"guard_filter_fn": ...}``): each
drops guards, and PyTorch names each ``_unsafe``: a change a dropped guard protected runs stale code."""
SETTING_MODULES = {"backed_size_oblivious": "torch.fx.experimental._config"}
"""Settings ``--dynamo-config`` takes from a PyTorch config module other than ``torch._dynamo.config``:
whether a size of 0 or 1 is specialized (a graph of its own) is the symbolic shapes' setting, in FX's."""


def setting_module(name: str) -> str:
    """The config module a ``--dynamo-config`` setting lives in."""
    return SETTING_MODULES.get(name, "torch._dynamo.config")


def setting_path(name: str) -> str:
    """A setting as the adapter reads and sets it: Dynamo's by its name, another module's dotted."""
    return f"{SETTING_MODULES[name]}.{name}" if name in SETTING_MODULES else name


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
    patch: tuple[str, ...] = ()
    """Unified diffs of the script, applied to its source as it is loaded (the file is not touched)."""
    calls_of: str | None = None
    """The script's name whose calls are the run's calls (observation only: a regional patch's
    model, whose blocks are what ``torch.compile`` gets; ``capture/remedies.py``)."""
    guard_filter: str | None = None
    """One of :data:`GUARD_FILTERS`, given to every ``torch.compile`` seamscope reaches (unsafe)."""
    skip_guard_eval_after: int | None = None
    """``set_stance(..., skip_guard_eval_unsafe=True)`` once that many top-level calls of the script's
    compiled callables have returned (the warm-up; unsafe)."""

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
        for v in self.patch:
            out += ["--patch", v]
        if self.calls_of is not None:
            out += ["--calls-of", self.calls_of]
        if self.guard_filter is not None:
            out += ["--guard-filter", self.guard_filter]
        if self.skip_guard_eval_after is not None:
            out += ["--skip-guard-eval-unsafe-after", str(self.skip_guard_eval_after)]
        return out

    def unsafe(self) -> bool:
        """Whether it drops guards (PyTorch's ``_unsafe`` settings): a change a dropped guard
        protected no longer recompiles."""
        return self.guard_filter is not None or self.skip_guard_eval_after is not None

    def is_empty(self) -> bool:
        return self == RemedySpec()


@dataclass(frozen=True)
class Flag:
    """One remedy flag, as the command line shows it (in this order) and :func:`spec_from_words` reads it."""

    opt: str
    dest: str
    kind: str = "str"
    """``str`` or ``int``."""
    multiple: bool = False
    metavar: str | None = None
    help: str | None = None
    hidden: bool = False
    """Plumbing ``try`` passes to its runs, left out of ``--help``."""


FLAGS = (
    Flag("--dynamo-config", "dynamo_config", multiple=True, metavar="NAME=VALUE",
         help="Set a torch._dynamo.config value (repeatable); NAME+=MODULE:QUALNAME adds a callable "
         "to a set setting."),
    Flag("--compile-option", "compile_option", multiple=True, metavar="NAME=VALUE",
         help="Override an argument of every torch.compile: dynamic, fullgraph, mode, backend, "
         "recompile_limit, isolate_recompiles (torch 2.13+)."),
    Flag("--mark-dynamic", "mark_dynamic", multiple=True, metavar="SOURCE",
         help="Mark a source dynamic in PyTorch's syntax, e.g. \"L['x']:0\" (repeatable)."),
    Flag("--stance", "stance", metavar="NAME",
         help="torch.compiler.set_stance for the whole run (eager_then_compile, force_eager, ...)."),
    Flag("--disable", "disable", multiple=True, metavar="MODULE:QUALNAME",
         help="Wrap one function in torch.compiler.disable (repeatable)."),
    Flag("--regional", "regional", multiple=True, metavar="CLASS",
         help="Compile each instance of CLASS instead of the whole module passed to torch.compile."),
    Flag("--patch", "patch", multiple=True, metavar="FILE",
         help="Run the script with this unified diff applied to its source in memory (the file is not "
         "touched); the diff is made from the project root, as git apply takes it (repeatable)."),
    Flag("--calls-of", "calls_of", metavar="NAME", hidden=True,
         help="Plumbing (what try's runs of a regional patch pass): the object the script binds to NAME is "
         "tracked as torch.compile's result would be, its calls the run's calls (observation only)."),
    Flag("--guard-filter", "guard_filter", metavar="NAME",
         help="Pass one of PyTorch's guard filters (torch.compiler.NAME: " + ", ".join(GUARD_FILTERS)
         + ") to every torch.compile as options={'guard_filter_fn': ...}. Unsafe: a change a dropped guard "
         "protected runs stale code."),
    Flag("--skip-guard-eval-unsafe-after", "skip_guard_eval_after", kind="int", metavar="CALLS",
         help="torch.compiler.set_stance(..., skip_guard_eval_unsafe=True) once CALLS top-level compiled calls "
         "have returned (the warm-up). Unsafe: only the guards that tell cache entries apart are checked."),
    Flag("--seed", "seed", kind="int", help="Seed random, numpy and torch before the script runs."),
    Flag("--pad", "pad", metavar="POLICY",
         help="A workload FILE.py:FUNC only: pad each call's length (pow2, buckets:64,128,...)."),
)


def spec_from_words(words: list[str]) -> RemedySpec:
    """Parse ``--dynamo-config X=1 --stance force_eager ...`` (a ``try --candidate`` string, or a
    catalogue entry), as the command line's options read them (``--opt VALUE`` or ``--opt=VALUE``)."""
    by_opt = {f.opt: f for f in FLAGS}
    values: dict[str, Any] = {}
    i = 0

    def bad(msg: str) -> UnusableInput:
        return UnusableInput(f"candidate {' '.join(words)!r}: {msg}")

    while i < len(words):
        word = words[i]
        i += 1
        name, eq, inline = word.partition("=") if word.startswith("--") else (word, "", "")
        flag = by_opt.get(name)
        if flag is None:
            if word.startswith("-") and word != "-":
                raise bad(f"No such option {name!r}.")
            raise bad(f"Got unexpected extra argument ({word})")
        if eq:
            raw = inline
        elif i < len(words):
            raw = words[i]
            i += 1
        else:
            raise bad(f"Option {flag.opt!r} requires an argument.")
        value: Any = raw
        if flag.kind == "int":
            try:
                value = int(raw.strip())
            except ValueError:
                raise bad(f"Invalid value for {flag.opt!r}: {raw!r} is not a valid integer.") from None
        if flag.multiple:
            values.setdefault(flag.dest, []).append(value)
        else:
            values[flag.dest] = value
    return spec_from_options(**values)


# --- parsing -----------------------------------------------------------------------------------------


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
    args = ", ".join(f"{k}={v!r}" for k, v in (compile_override(o) for o in spec.compile_option))
    if args and not spec.regional:  # with regional compilation, the options go to each block's compile
        parts.append(f"torch.compile(model, {args})")
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
            parts.append(f"{setting_module(name)}.{name} = {v!r}")
    if spec.mark_dynamic:  # one assignment: a second one replaces the first
        locs = [source_local(src) for src in spec.mark_dynamic]
        alt = "; ".join(f"torch._dynamo.mark_dynamic({loc})" for loc in locs) if all(locs) else ""
        value = ",".join(spec.mark_dynamic)
        text = f'r"{value}"' if "\\" in value and '"' not in value else repr(value)  # a regex reads as written
        parts.append(f"torch.compiler.config.dynamic_sources = {text}"
                     + (f"  # or {alt}" if alt else ""))
    if spec.stance is not None:
        parts.append(f"torch.compiler.set_stance({spec.stance!r})")
    for d in spec.disable:
        mod, qual = parse_target("--disable", d)
        parts.append(f"@torch.compiler.disable on {qual} ({mod})")
    if spec.pad is not None:
        parts.append(f"pad each request's length ({spec.pad}) and cut the output back")
    parts += [f"compile each {c} instead of the whole model (block.compile({args}))" for c in spec.regional]
    parts += [f"git apply {p}" for p in spec.patch]
    if spec.guard_filter is not None:
        parts.append(f"torch.compile(model, options={{'guard_filter_fn': torch.compiler.{spec.guard_filter}}}) "
                     "(unsafe: drops guards)")
    if spec.skip_guard_eval_after is not None:
        stance = spec.stance or "default"
        parts.append(f"torch.compiler.set_stance({stance!r}, skip_guard_eval_unsafe=True) after the first "
                     f"{spec.skip_guard_eval_after} calls (unsafe: checks only the guards that tell cache entries "
                     "apart)")
    return "; ".join(parts) if parts else "(no change)"


def source_local(src: str) -> str | None:
    """``L['x']:0`` → ``x, 0`` (the arguments of ``mark_dynamic``), when it is that simple."""
    import re

    m = re.fullmatch(r"L\['([A-Za-z_][A-Za-z0-9_]*)'\](?::(\d+))?", src.strip())
    if m is None or m.group(2) is None:
        return None
    return f"{m.group(1)}, {m.group(2)}"


def spec_from_options(*, dynamo_config: tuple[str, ...] = (), compile_option: tuple[str, ...] = (),
                      mark_dynamic: tuple[str, ...] = (), stance: str | None = None,
                      disable: tuple[str, ...] = (), seed: int | None = None, pad: str | None = None,
                      regional: tuple[str, ...] = (), patch: tuple[str, ...] = (), calls_of: str | None = None,
                      guard_filter: str | None = None, skip_guard_eval_after: int | None = None) -> RemedySpec:
    """The spec of the remedy flags' values, by :data:`FLAGS`' ``dest``. Any other keyword is a
    TypeError: a misspelt name, or a flag added to :data:`FLAGS` and not here, would otherwise be
    a flag that silently does nothing."""
    return RemedySpec(dynamo_config=tuple(dynamo_config), compile_option=tuple(compile_option),
                      mark_dynamic=tuple(mark_dynamic), stance=stance, disable=tuple(disable), seed=seed, pad=pad,
                      regional=tuple(regional), patch=tuple(patch), calls_of=calls_of, guard_filter=guard_filter,
                      skip_guard_eval_after=skip_guard_eval_after)
