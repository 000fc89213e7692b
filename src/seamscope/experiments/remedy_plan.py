"""A remedy spec checked against the installed torch, and what applying it to one run takes.

:func:`prepare` checks everything it can before the script runs (an unknown setting, a value of
the wrong type, a missing ``--disable`` target, ``--pad`` on a target that is no workload:
:class:`UnusableInput`, exit 2) and returns a :class:`Plan`, the runner's ``setup``: its
``setup(session)`` applies the remedies (``capture/remedies.py``) once the session has started and
returns the undo. With ``record_out`` (what ``try`` passes to each of its runs) the undo also writes
the script's own wall time there, with ``fingerprint`` the outputs of its compiled calls, and with
``guard_probe`` (``try``'s check run of an unsafe guard setting, ``trials/guard_check.py``) the
calls it makes on purpose once the script has returned: the file is the run's channel back to
``try``, which runs it in a process of its own.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..capture.remedies import Remedies, binding_of, find_def
from ..errors import UnusableInput
from .remedy_spec import (
    CALLABLE_SETS,
    GUARD_FILTERS,
    PER_CALLABLE_OPTIONS,
    SCRIPT_MODULES,
    RemedySpec,
    check_type,
    compile_override,
    parse_assignment,
    parse_target,
    parse_value,
    setting_module,
    setting_path,
    source_local,
)


@dataclass
class Plan:
    """What ``prepare`` checked; ``setup(session)`` applies it and returns the undo."""

    spec: RemedySpec
    remedies: Remedies
    record_out: str | None = None
    """Where ``try`` reads the script's own wall time (and the output fingerprints)."""
    fingerprint: bool = False
    guard_probe: bool = False

    @property
    def settings(self) -> dict[str, Any]:
        return self.remedies.settings

    @property
    def additions(self) -> dict[str, list[tuple[str, str]]]:
        return self.remedies.additions

    def transform(self, tree: ast.Module) -> ast.Module:
        return self.remedies.transform(tree)

    def needs_transform(self) -> bool:
        return self.remedies.needs_transform()

    def setup(self, session: Any) -> Callable[[], None]:
        from .trials.fingerprint import Recorder
        from .trials.guard_check import Prober

        recorder = Recorder() if self.record_out is not None else None
        remove = recorder.install() if recorder is not None and self.fingerprint else None
        prober = Prober() if recorder is not None and self.fingerprint and self.guard_probe else None
        track = _tracker(recorder, prober) if recorder is not None and self.fingerprint else None
        undo = self.remedies.apply(session, track)

        def finish() -> None:
            probes, note = None, None
            try:
                if prober is not None:  # before the undo: the settings under check still hold
                    probes, note = _probes(prober, recorder, session)
                undo()
            finally:
                if remove is not None:
                    remove()
            if recorder is not None and self.record_out is not None:
                recorder.write(self.record_out, script_ns=self.remedies.script_ns, probes=probes, probe_note=note)

        return finish


def _probes(prober: Any, recorder: Any, session: Any) -> tuple[list[Any], str | None]:
    """The check run's probes, or why none ran: only after a script that returned without
    updating parameters (after an update two runs differ whatever the compiler did)."""
    status = getattr(getattr(session, "status", None), "state", None)
    if status != "completed":
        return [], f"the script did not complete ({status})"
    if recorder.stopped_at is not None:
        return [], "the script updated parameters (an optimizer step): its compiled calls cannot be compared after it"
    return prober.run(), None


def _tracker(recorder: Any, prober: Any = None) -> Callable[[Any], Any]:
    """Fingerprint the outputs of a compiled callable's top-level calls; with ``prober``, keep their
    last inputs for the check run (its probes call under the recorder)."""
    import functools

    import torch

    def track(compiled: Any) -> Any:
        if isinstance(compiled, torch.nn.Module):
            inner = compiled.forward
            forward = recorder.wrap(inner)
            if prober is not None:
                forward = prober.watch(compiled, inner, forward)
            object.__setattr__(compiled, "forward", functools.wraps(inner)(forward))  # generate reads its signature
            return compiled
        if callable(compiled):
            wrapped = recorder.wrap(compiled)
            if prober is not None:
                wrapped = prober.watch(compiled, compiled, wrapped)
            return functools.wraps(compiled)(wrapped)
        return compiled

    return track


def prepare(spec: RemedySpec, target: str, module: bool = False, record_out: str | None = None,
            fingerprint: bool = False, guard_probe: bool = False) -> Plan:
    """Check every flag before anything runs; raise :class:`UnusableInput` naming the bad one."""
    from ..capture import adapter

    rem = Remedies(target=target, mark_dynamic=spec.mark_dynamic, stance=spec.stance, seed=spec.seed,
                   regional=spec.regional, calls_of=spec.calls_of, guard_filter=spec.guard_filter,
                   skip_guard_eval_after=spec.skip_guard_eval_after)
    fingerprint = fingerprint and record_out is not None
    plan = Plan(spec=spec, remedies=rem, record_out=record_out, fingerprint=fingerprint,
                guard_probe=guard_probe and fingerprint)
    _check_guard_settings(spec)
    for item in spec.dynamo_config:
        name, op, raw = parse_assignment("--dynamo-config", item)
        exists, current = adapter.dynamo_setting(setting_path(name))
        if not exists:
            raise UnusableInput(f"--dynamo-config: {setting_module(name)} has no setting {name}")
        if op == "+=":
            if not isinstance(current, (set, frozenset)):
                raise UnusableInput(f"--dynamo-config {name}+=: {name} is not a set of callables "
                                    f"(+= works for {', '.join(CALLABLE_SETS)})")
            rem.additions.setdefault(name, []).append(_check_importable("--dynamo-config " + name, raw, target))
            continue
        try:
            value = parse_value(raw)
        except (ValueError, SyntaxError):
            if isinstance(current, str):
                value = raw
            else:
                raise UnusableInput(f"--dynamo-config {item!r}: the value is not a Python literal") from None
        check_type(name, value, current)
        rem.settings[setting_path(name)] = value
    for item in spec.compile_option:
        k, v = compile_override(item)
        if k == "backend" and ":" in v:
            v = _check_importable("--compile-option backend", v, target)  # imported at the first compile
        if k in PER_CALLABLE_OPTIONS and not adapter.compile_accepts(k):
            raise UnusableInput(f"--compile-option {k}: this torch's torch.compile takes no {k} (torch 2.13+)")
        rem.overrides[k] = v
    if spec.mark_dynamic:
        has, per_dim = adapter.dynamic_sources_support()
        if not has:
            raise UnusableInput("--mark-dynamic: this torch has no torch.compiler.config.dynamic_sources")
        for src in spec.mark_dynamic:
            if not src.strip() or "," in src:
                raise UnusableInput(f"--mark-dynamic {src!r}: expected one source, e.g. \"L['x']:0\"")
            if not per_dim and source_local(src) is not None:
                raise UnusableInput(f"--mark-dynamic {src!r}: this torch reads no ':N' dimension suffix; "
                                    "give the source without it (all its dimensions)")
    if spec.pad is not None:
        from .workload import is_workload_spec
        from .workload_run import pad_policy

        if module or not is_workload_spec(target):
            raise UnusableInput(f"--pad {spec.pad}: padding applies to a workload target FILE.py:FUNC only")
        pad_policy(spec.pad)
    if spec.patch:
        _patch_sources(spec.patch, target, module, rem)
    if spec.calls_of is not None:
        _check_calls_of(spec.calls_of, target, module, rem)
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
            if find_def(tree, qual) is None:
                raise UnusableInput(f"--disable {d}: the script defines no function {qual} at module or class level "
                                    "(only those can be patched as the script defines them)")
            rem.script_disables.append(qual)
        else:
            _check_importable("--disable", d, target)
            rem.module_disables.append((mod, qual))
    return plan


def _check_guard_settings(spec: RemedySpec) -> None:
    """``--guard-filter``: one of PyTorch's filters, which this torch has; ``--skip-guard-eval-unsafe-after``:
    a count of calls, and a ``set_stance`` that takes ``skip_guard_eval_unsafe``."""
    from ..capture import adapter

    if spec.guard_filter is not None:
        if spec.guard_filter not in GUARD_FILTERS:
            raise UnusableInput(f"--guard-filter {spec.guard_filter!r}: expected one of {', '.join(GUARD_FILTERS)}")
        try:
            adapter.guard_filter(spec.guard_filter)
        except adapter.AdapterProblem as e:
            raise UnusableInput(f"--guard-filter {spec.guard_filter}: {e}") from None
    if spec.skip_guard_eval_after is not None:
        if spec.skip_guard_eval_after < 0:
            raise UnusableInput(f"--skip-guard-eval-unsafe-after {spec.skip_guard_eval_after}: expected a count of "
                                "calls (0 or more)")
        try:
            adapter.check_skip_guard_eval()
        except adapter.AdapterProblem as e:
            raise UnusableInput(f"--skip-guard-eval-unsafe-after: {e}") from None


def _patch_sources(patches: tuple[str, ...], target: str, module: bool, rem: Remedies) -> None:
    """``--patch``: each diff read and applied to the files it names, in memory: the script's text
    becomes ``rem.source``, another file's ``rem.module_sources[path]`` (served when it is imported;
    for a workload target, every file but the workload's own, which it loads by path).
    A path is taken from the current folder, else from the patch root (the script's git work
    tree, through any symbolic link), else from the script's folder. The diff is applied to the
    file's bytes as ``git apply`` does (its line endings, byte-order mark and encoding as they are),
    then the result is read as Python reads a source file."""
    from .source_file import SourceUnusable, decode_source
    from .unified_diff import apply, parse, patch_root

    workload = os.path.realpath(target.rpartition(":")[0]) if ".py:" in target else None
    script = None if module or workload else os.path.realpath(target)
    near = workload or script
    raw: dict[str, str] = {}  # each file's bytes, one character per byte (latin-1): applied as bytes
    for p in patches:
        try:
            with open(p, "rb") as f:
                diffs = parse(f.read().decode("latin-1"))
        except OSError as e:
            raise UnusableInput(f"--patch {p}: cannot read it ({e.strerror or e})") from None
        except UnusableInput as e:  # no diff: the one line names the option and the file
            raise UnusableInput(f"--patch {p}: {e}") from None
        for d in diffs:
            name = d.path = d.path.encode("latin-1").decode("utf-8", errors="replace")  # a path is UTF-8
            roots = [os.getcwd()] + ([patch_root(near), os.path.dirname(near), patch_root(os.path.abspath(target)),
                                      os.path.dirname(os.path.abspath(target))] if near else [])
            found = [os.path.realpath(c) for r in roots if os.path.isfile(c := os.path.join(r, name))]
            path = script if script in found else next(iter(found), None)  # the script first, where it is named
            if path is None:
                raise UnusableInput(f"--patch {p}: no file {name} (from the current folder or the script's)")
            if path == workload:
                raise UnusableInput(f"--patch {p}: a workload's own file cannot be patched ({name}); patch the "
                                    "modules it imports, or run a script")
            if path not in raw:
                with open(path, "rb") as f:
                    raw[path] = f.read().decode("latin-1")
            try:
                raw[path] = apply(raw[path], d)
            except UnusableInput as e:
                raise UnusableInput(f"--patch {p}: {e}") from None
    for path, data in raw.items():
        try:
            text = decode_source(data.encode("latin-1"), path).text
            ast.parse(text, filename=path)
        except SourceUnusable as e:
            raise UnusableInput(f"--patch: {e} once patched") from None
        except SyntaxError as e:
            raise UnusableInput(f"--patch: {path} does not parse once patched (line {e.lineno}: {e.msg})") from None
        if path == script:
            rem.source = text
        else:
            rem.module_sources[path] = text


def _check_calls_of(name: str, target: str, module: bool, rem: Remedies) -> None:
    """``--calls-of NAME``: a script's own name, bound outside its functions (in the patched text
    where ``--patch`` patches the script)."""
    if module or ".py:" in target:
        raise UnusableInput(f"--calls-of {name}: names a script's own variable (not one of a workload FILE.py:FUNC "
                            "or a -m module)")
    if not name.isidentifier():
        raise UnusableInput(f"--calls-of {name!r}: expected a name the script binds")
    tree = ast.parse(rem.source, filename=target) if rem.source is not None else _parse_script(target)
    if binding_of(tree, name) is None:
        raise UnusableInput(f"--calls-of {name}: the script binds no {name} outside its functions")


def _parse_script(target: str) -> ast.Module:
    try:
        with open(target, "rb") as f:  # its encoding as Python reads it (a BOM, a coding line)
            return ast.parse(f.read(), filename=target)
    except (OSError, SyntaxError, ValueError) as e:
        raise UnusableInput(f"{target}: cannot read the script ({e})") from None


def _check_importable(flag: str, text: str, target: str) -> tuple[str, str]:
    """``MODULE:QUALNAME`` whose module can be found from the script's folder (not imported yet)."""
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
