"""The codebase's shape: modules a newcomer can read in one sitting, and no import cycle.

Both are read from the source text (``ast``), so they hold for lazy imports inside functions too;
imports under ``if TYPE_CHECKING:`` are for annotations only and never run, so they do not count.
"""

from __future__ import annotations

import ast
import functools
import os
import re

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
PKG = os.path.join(SRC, "seamscope")

MAX_LINES = 700
LIMITS = {"seamscope.model.builder": 900}
"""The hot path's home may be longer: splitting it would cost a module lookup per call."""


def _modules() -> dict[str, str]:
    out = {}
    for folder, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, SRC)[: -len(".py")].replace(os.sep, ".")
                out[name.removesuffix(".__init__")] = path
    return out


@functools.cache
def _is_extension(name: str) -> bool:
    *pkg, leaf = name.split(".")
    folder = os.path.join(SRC, *pkg)
    return os.path.isdir(folder) and any(
        f.startswith(leaf + ".") and f.endswith((".so", ".pyd")) for f in os.listdir(folder))


@functools.cache
def _tree(text: str) -> ast.Module:
    """A module's syntax tree, parsed once per text (read-only: every check here shares it)."""
    return ast.parse(text)


def imported_names(name: str, path: str, mods: dict[str, str]) -> set[str]:
    """Every module a module imports, absolute (``click``, ``seamscope.model.receipt``), lazy
    imports included, ``if TYPE_CHECKING:`` ones not (``from . import x`` names module ``x`` when it
    is one, else the package)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return set(_imported_names(name, path, text, frozenset(mods)))


@functools.cache
def _imported_names(name: str, path: str, text: str, mods: frozenset[str]) -> frozenset[str]:
    """:func:`imported_names` of one source text (each module's text is parsed once per test run)."""
    tree = _tree(text)
    typing_only = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
                   for b in n.body for x in ast.walk(b)}
    is_pkg = path.endswith("__init__.py")
    out: set[str] = set()
    for n in ast.walk(tree):
        if id(n) in typing_only:
            continue
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[: len(parts) - (n.level - 1)]
                base = ".".join(parts + ([n.module] if n.module else []))
            else:
                base = n.module or ""
            for a in n.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in mods or _is_extension(sub) else base)
    return frozenset(out)


def import_graph(mods: dict[str, str]) -> dict[str, set[str]]:
    """Module → the package's modules it imports."""
    return {name: {t for t in imported_names(name, path, mods) if t in mods and t != name}
            for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_module_is_too_long() -> None:
    long = {}
    for name, path in _modules().items():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > LIMITS.get(name, MAX_LINES):
            long[name] = n
    assert not long, f"split by responsibility: {long}"


def test_no_import_cycle_lazy_imports_included() -> None:
    assert cycles(import_graph(_modules())) == []


LAYERS = {
    "seamscope.capture": ("click", "seamscope.experiments", "seamscope.commands"),
    "seamscope.experiments": ("seamscope.commands",),
    "seamscope.gates": ("click", "seamscope.experiments", "seamscope.commands"),
    "seamscope.examples": ("click", "seamscope.capture", "seamscope.commands"),
}
"""Import directions: capture (running and observing the user's code) knows nothing of the command
line or of the experiments built on it; the experiments know nothing of the command line; the gates
neither; the bundled examples are programs a user could write (a probe workload uses the public
``experiments.workload``), never capture's or the command line's. Each package's docstring says so."""


def layer_violations(mods: dict[str, str]) -> list[str]:
    out = []
    for name, path in sorted(mods.items()):
        for layer, banned in LAYERS.items():
            if name != layer and not name.startswith(layer + "."):
                continue
            for t in sorted(imported_names(name, path, mods)):
                if any(t == b or t.startswith(b + ".") for b in banned):
                    out.append(f"{name} imports {t}")
    return out


def test_layers_import_one_way() -> None:
    assert layer_violations(_modules()) == []


def test_the_layer_check_finds_a_planted_import(monkeypatch) -> None:
    probe = os.path.join(PKG, "capture", "runner.py")
    monkeypatch.setattr(
        "builtins.open", _fake_open(probe, "def f():\n    import click\n    from ..commands import run\n")
    )
    found = [v for v in layer_violations(_modules()) if v.startswith("seamscope.capture.runner ")]
    assert found == [
        "seamscope.capture.runner imports click",
        "seamscope.capture.runner imports seamscope.commands.run",
    ]


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("text, edge", [
    ("def f():\n    from .model import receipt\n", "seamscope.model.receipt"),  # lazy, a submodule
    ("from .model.receipt import Receipt\n", "seamscope.model.receipt"),
    ("from ._version import __version__\n", "seamscope._version"),
    ("from . import __version__\n", "seamscope"),  # an attribute of the package: the package itself
])
def test_the_graph_reads_lazy_and_relative_imports(monkeypatch, text, edge) -> None:
    probe = os.path.join(PKG, "cli.py")
    monkeypatch.setattr("builtins.open", _fake_open(probe, text))
    assert import_graph(_modules())["seamscope.cli"] == {edge}


def test_typing_only_imports_do_not_count(monkeypatch) -> None:
    probe = os.path.join(PKG, "cli.py")
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model.receipt import Receipt\n"
    monkeypatch.setattr("builtins.open", _fake_open(probe, text))
    graph = import_graph(_modules())
    assert "seamscope.model.receipt" not in graph["seamscope.cli"]


def _fake_open(path: str, text: str):
    import builtins
    import io

    real = builtins.open

    def fake(p, *a, **k):
        if os.fspath(p) == path:
            return io.StringIO(text)
        return real(p, *a, **k)

    return fake


def _named_in_strings() -> set[str]:
    """Every ``seamscope`` module a string names for a later import: the fork servers' preloads
    (``PRELOAD``) and the fresh processes' entry points (``Job(entry="module:function")``). No
    import checker sees these; a module moved without them would fail only at run time."""
    out: set[str] = set()
    for path in _modules().values():
        with open(path, encoding="utf-8") as f:
            tree = _tree(f.read())
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PRELOAD" for t in n.targets):
                out.update(
                    c.value for c in ast.walk(n.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
            elif isinstance(n, ast.keyword) and n.arg == "entry" and isinstance(n.value, ast.Constant):
                out.add(n.value.value)
    return {s for s in out if s.startswith("seamscope.")}


def _resolves(named: str, mods: dict[str, str]) -> bool:
    module, _, func = named.partition(":")
    if module not in mods:
        return False
    if not func:
        return True
    with open(mods[module], encoding="utf-8") as f:
        tree = _tree(f.read())
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == func for n in tree.body)


def test_every_module_named_in_a_string_exists() -> None:
    mods = _modules()
    named = _named_in_strings()
    assert "seamscope.cli:main" in named and "seamscope.experiments.trials.fingerprint" in named
    assert [s for s in sorted(named) if not _resolves(s, mods)] == []


def test_the_string_check_finds_a_planted_stale_name() -> None:
    mods = _modules()
    assert not _resolves("seamscope.experiments.fingerprint", mods)
    assert not _resolves("seamscope.cli:no_such_function", mods)
    assert _resolves("seamscope.experiments.trials.fingerprint", mods)


def test_the_trials_are_one_package_whose_init_imports_nothing() -> None:
    mods = _modules()
    flat = [m for m in mods if m.startswith("seamscope.experiments.trial_") or m == "seamscope.experiments.fingerprint"]
    assert flat == []
    parts = {m.rsplit(".", 1)[1] for m in mods if m.startswith("seamscope.experiments.trials.")}
    assert parts >= {"trial", "runs", "cache", "catalogue", "verdicts", "fingerprint"}
    # a child run imports trials.fingerprint: the package itself must stay free to import
    assert imported_names("seamscope.experiments.trials", mods["seamscope.experiments.trials"], mods) == set()


TRIALS_MAX_FUNCTION = 100
"""Lines a function of ``experiments/trials/`` may have at most: ``run_trials`` reads as its rounds."""


def long_functions(text: str, limit: int) -> list[str]:
    """``NAME (N lines)`` of each function in ``text`` longer than ``limit`` lines."""
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(_tree(text))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno is not None
            and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_of_the_trials_is_over_100_lines() -> None:
    long = {}
    for name, path in _modules().items():
        if name.startswith("seamscope.experiments.trials."):
            with open(path, encoding="utf-8") as f:
                if found := long_functions(f.read(), TRIALS_MAX_FUNCTION):
                    long[name] = found
    assert not long, f"cut at its steps: {long}"
    planted = "def f():\n" + "    x = 1\n" * TRIALS_MAX_FUNCTION
    assert long_functions(planted, TRIALS_MAX_FUNCTION) == [f"f ({TRIALS_MAX_FUNCTION + 1} lines)"]
    assert long_functions(planted, TRIALS_MAX_FUNCTION + 1) == []


ONE_DEFINITION = {
    "library_path": "seamscope.model.normalize",
    "is_library": "seamscope.model.normalize",
    "package_of": "seamscope.model.normalize",
    "short_path": "seamscope.model.normalize",
    "normalize_path": "seamscope.model.normalize",
    "project_root": "seamscope.model.normalize",
    "fmt_ns": "seamscope.analyze.units",
    "fmt_pct": "seamscope.analyze.units",
    "fmt_change": "seamscope.analyze.units",
    "fmt_bytes": "seamscope.analyze.units",
    "percent": "seamscope.analyze.units",
    "percent_change": "seamscope.analyze.units",
    "parse_duration": "seamscope.analyze.units",
    "DEFAULT_OUT": "seamscope.commands.options",
}
"""One rule per question, each in one module: which code is a library's, where a run's project
root is, how a duration, a share or a change is written, how a typed duration is read, where
output goes by default. ``analyze.verify`` is left out on purpose: it recomputes the figures
with code of its own, so that one bug cannot sit on both sides."""

INDEPENDENT = ("seamscope.analyze.verify", "seamscope.analyze.verify_hashes")

RETYPED = {
    "site-packages": "seamscope.model.normalize",
    "dist-packages": "seamscope.model.normalize",
    "lib/python3": "seamscope.model.normalize",
    "seamscope-out": "seamscope.commands.options",
}
"""Text that means one of those rules, in code (docstrings and comments apart): written anywhere
else, it is the rule written again."""

COPIES = ("_pct", "_fmt_pct", "_short", "_is_library", "_library_package", "_project_root", "_share",
          "_bytes", "_parse_duration")
"""Names the rules above once had in several modules."""


def rule_definitions() -> dict[str, list[str]]:
    """Name → the modules that define it at their top level (a function, a class, an assignment)."""
    out: dict[str, list[str]] = {}
    for name, path in sorted(_modules().items()):
        if name in INDEPENDENT:
            continue
        with open(path, encoding="utf-8") as f:
            tree = _tree(f.read())
        for n in tree.body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.setdefault(n.name, []).append(name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, []).append(name)
    return out


def retyped_rules() -> list[str]:
    """``module: text`` for each string constant outside a docstring that holds a rule's text
    (:data:`RETYPED`) away from the rule's module."""
    found = []
    for name, path in sorted(_modules().items()):
        with open(path, encoding="utf-8") as f:
            tree = _tree(f.read())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr)}
        docs |= {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # attribute docstrings
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                found += [f"{name}: {text}" for text, home in RETYPED.items()
                          if name != home and re.search(r"(?<![\w-])" + re.escape(text), n.value)]
    return found


def test_each_rule_has_one_definition() -> None:
    defs = rule_definitions()
    assert {rule: defs.get(rule) for rule in ONE_DEFINITION} == {rule: [m] for rule, m in ONE_DEFINITION.items()}
    assert {name: defs[name] for name in COPIES if name in defs} == {}
    assert retyped_rules() == []


def test_the_rule_check_finds_a_planted_copy(monkeypatch) -> None:
    probe = os.path.join(PKG, "analyze", "ranks.py")
    text = ('def is_library(p):\n    return "/site-packages/" in p\n\n'
            'def _pct(a, b):\n    """A docstring may say site-packages."""\n    return a / b\n')
    monkeypatch.setattr("builtins.open", _fake_open(probe, text))
    defs = rule_definitions()
    assert defs["is_library"] == ["seamscope.analyze.ranks", "seamscope.model.normalize"]
    assert defs["_pct"] == ["seamscope.analyze.ranks"]
    assert retyped_rules() == ["seamscope.analyze.ranks: site-packages"]


TESTS = os.path.dirname(os.path.abspath(__file__))


def modules_importing_test_modules(folder: str = TESTS) -> list[str]:
    """``importer imports imported`` for each test module that imports another test module."""
    out = []
    for f in sorted(os.listdir(folder)):
        if not (f.startswith("test_") and f.endswith(".py")):
            continue
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for n in ast.walk(tree):
            names = [a.name for a in n.names] if isinstance(n, ast.Import) else (
                [n.module or ""] if isinstance(n, ast.ImportFrom) else [])
            out += [f"{f[:-3]} imports {m}" for m in names if m.split(".")[-1].startswith("test_")]
    return out


def test_no_test_module_imports_another(tmp_path) -> None:
    assert modules_importing_test_modules() == []
    (tmp_path / "test_a.py").write_text("from test_b import helper\nimport fakes\n")
    (tmp_path / "test_b.py").write_text("def f():\n    import test_a\n")
    (tmp_path / "helpers.py").write_text("from test_a import x\n")  # a helper module is not a test module
    assert modules_importing_test_modules(str(tmp_path)) == ["test_a imports test_b", "test_b imports test_a"]



ROOT = os.path.dirname(SRC)
#: Names that frameworks call, never the code itself: pytest's and IPython's hooks, click's and
#: importlib's protocol methods, rich's and logging's overrides, ``ast.NodeVisitor``'s visits.
CALLED_BY_FRAMEWORKS = re.compile(
    r"pytest_\w+|unload_ipython_extension|list_commands|get_command|create_module|_recreate_cm|on_broken_pipe|emit"
    r"|visit_\w+")


def unused_names(overrides: dict[str, str] | None = None) -> list[str]:
    """``module:line name`` for each function, class, method or top-level assignment of ``src/``
    that nothing reads: no name, attribute, import or identifier string in ``src/`` (its syntax
    trees: a docstring that names it is no reader), and no word of ``tests/``, ``benchmarks/`` or
    the report's templates (their text) refers to it (``overrides``: path → text read instead)."""
    read: set[str] = set()
    for top in (TESTS, os.path.join(ROOT, "benchmarks"), PKG):
        for d, _, files in os.walk(top):
            for f in files:
                if f.endswith(".j2") or (f.endswith(".py") and top != PKG):
                    with open(os.path.join(d, f), encoding="utf-8") as fh:
                        read.update(re.findall(r"[A-Za-z_]\w*", fh.read()))
    defined: list[tuple[str, int, str]] = []
    for _, path in sorted(_modules().items()):
        if overrides and path in overrides:
            tree = _tree(overrides[path])
        else:
            with open(path, encoding="utf-8") as f:
                tree = _tree(f.read())
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                read.add(n.id)
            elif isinstance(n, ast.Attribute):
                read.add(n.attr)
            elif isinstance(n, ast.alias):
                read.add(n.name.rsplit(".", 1)[-1])
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
                read.add(n.value)  # __all__, getattr, a lazy import's name
        methods = [m for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for n in [*tree.body, *methods]:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.append((path, n.lineno, n.name))
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                defined += [(path, n.lineno, t.id) for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                            if isinstance(t, ast.Name)]
    return [f"{os.path.relpath(p, SRC)}:{line} {name}" for p, line, name in defined
            if name not in read and not name.startswith("__") and not CALLED_BY_FRAMEWORKS.fullmatch(name)]


def test_every_name_defined_in_src_is_read_somewhere() -> None:
    assert unused_names() == []


def test_the_unused_name_check_finds_a_planted_one() -> None:
    probe = os.path.join(PKG, "analyze", "skew.py")
    with open(probe, encoding="utf-8") as f:
        text = f.read()
    const, cls, method = (f"PLANTED_{k}" for k in ("TEXT", "Class", "method"))  # no word of this file names them
    planted = text + f"\n\n{const} = 'never read'\n\n\nclass {cls}:\n    def {method}(self):\n        pass\n"
    n = planted.count("\n")
    assert unused_names({probe: planted}) == [
        f"seamscope/analyze/skew.py:{n - 5} {const}", f"seamscope/analyze/skew.py:{n - 2} {cls}",
        f"seamscope/analyze/skew.py:{n - 1} {method}"]
