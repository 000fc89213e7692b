"""Dynamo's settings: read for the receipt, set for one experiment or for one run by ``run``'s
remedy flags (``--dynamo-config``, ``--mark-dynamic``, ``--stance``, ``--guard-filter``,
``--skip-guard-eval-unsafe-after``).

Internals used:
- ``torch._dynamo.config``: the settings that decide behaviour; ``torch.fx.experimental._config``:
  the symbolic shapes' (``backed_size_oblivious``: sizes 0 and 1 not specialized).
- ``torch.compiler.config.dynamic_sources``; ``torch._dynamo.variables.builder._parse_source_entry``
  tells whether this torch reads a per-dimension ``:N`` suffix there, and the debug record that
  module's logger writes when a source is marked dynamic names the frames a ``--mark-dynamic``
  changed (only torch 2.13 was checked; without either, ``--mark-dynamic`` says what is missing).
- ``torch._dynamo.mark_dynamic``.
- ``torch._inductor.config.compile_threads`` and ``decide_compile_threads()``: read again in a
  process forked after Inductor's config was imported, so that ``TORCHINDUCTOR_COMPILE_THREADS``
  set for that process decides.
- ``torch._dynamo.eval_frame._optimize``'s ``guard_filter_fn`` parameter (what ``torch.compile`` hands its
  ``options["guard_filter_fn"]`` to) and ``torch.compiler.set_stance``'s ``skip_guard_eval_unsafe``:
  read from their signatures; where missing, the flag fails in one line (``guard-filter-unavailable``,
  ``skip-guard-eval-unavailable``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem
from .graphs import current_compile_id

DYNAMO_SETTINGS = (
    "recompile_limit",
    "accumulated_recompile_limit",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "automatic_dynamic_shapes",
    "assume_static_by_default",
    "specialize_int",
    "specialize_float",
    "optimize_ddp",
    "suppress_errors",
    "nested_graph_breaks",
)


def reread_compile_threads() -> None:
    """Decide Inductor's ``compile_threads`` again from this process's environment, where the
    config was imported before a fork (a no-op when it was not imported, or this torch lacks it)."""
    import os
    import sys

    cfg = sys.modules.get("torch._inductor.config")
    decide = getattr(cfg, "decide_compile_threads", None)
    if decide is not None and "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:
        cfg.compile_threads = decide()  # type: ignore[union-attr]


def dynamo_settings() -> dict[str, str]:
    try:
        import torch._dynamo.config as cfg
    except ImportError:  # pragma: no cover
        return {}
    import warnings

    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some settings warn that they are deprecated
        for name in DYNAMO_SETTINGS:
            if hasattr(cfg, name):
                out[name] = repr(getattr(cfg, name))
    return out


def _config_of(name: str) -> tuple[Any, str]:
    """The config module a setting lives in and its name there: a plain name is
    ``torch._dynamo.config``'s, a dotted one names its module
    (``torch.fx.experimental._config.backed_size_oblivious``)."""
    import importlib

    module, _, attr = name.rpartition(".")
    return importlib.import_module(module or "torch._dynamo.config"), attr


def dynamo_config_patch(settings: dict[str, Any]) -> Any:
    """A context manager that sets Dynamo settings (``capture_scalar_outputs=True``, ...; a dotted
    name sets another config module's) for the time of an experiment. Unknown names raise
    ``KeyError`` naming them."""
    import contextlib

    by_module: dict[Any, dict[str, Any]] = {}
    unknown = []
    for name, value in settings.items():
        cfg, attr = _config_of(name)
        if not hasattr(cfg, attr):
            unknown.append(name)
        by_module.setdefault(cfg, {})[attr] = value
    if unknown:
        raise KeyError(", ".join(sorted(unknown)))
    stack = contextlib.ExitStack()
    for cfg, values in by_module.items():
        stack.enter_context(cfg.patch(**values))
    return stack


def set_recompile_limit(limit: int) -> None:
    import torch._dynamo.config as cfg

    cfg.recompile_limit = limit


def mark_dynamic(t: Any, dim: int, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    import torch._dynamo

    torch._dynamo.mark_dynamic(t, dim, min=min, max=max)


def dynamo_setting(name: str) -> tuple[bool, Any]:
    """Whether ``torch._dynamo.config`` has the setting ``name`` (a dotted name: another config
    module), and its current value."""
    import warnings

    try:
        cfg, attr = _config_of(name)
    except ImportError:  # a torch without that config module
        return False, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(cfg, attr):
            return False, None
        return True, getattr(cfg, attr)


def dynamic_sources_support() -> tuple[bool, bool]:
    """(``torch.compiler.config.dynamic_sources`` exists, it accepts a per-dimension ``:N``
    suffix). The suffix parser is private; without it an entry ``L['x']:0`` would be read as a
    regular expression that matches no source."""
    import torch

    cfg = getattr(getattr(torch, "compiler", None), "config", None)
    has = cfg is not None and hasattr(cfg, "dynamic_sources")
    if not has:
        return False, False
    try:
        from torch._dynamo.variables.builder import _parse_source_entry
    except ImportError:
        return True, False
    return True, _parse_source_entry("L['x']:0") == ("L['x']", 0)


def dynamic_sources_patch(value: str) -> Any:
    """A context manager that sets ``torch.compiler.config.dynamic_sources`` (comma-separated)."""
    import torch

    return torch.compiler.config.patch(dynamic_sources=value)  # type: ignore[attr-defined]


DYNAMIC_SOURCE_LOGGER = "torch._dynamo.variables.builder"


def watch_dynamic_source_marks(on_mark: Callable[[str, str, str | None], None]) -> Callable[[], None]:
    """``on_mark(source, entry, compile_id)`` each time Dynamo marks a source dynamic because of a
    ``dynamic_sources`` entry (its debug record on the builder's logger). Returns the undo."""
    log = logging.getLogger(DYNAMIC_SOURCE_LOGGER)
    shown = log.getEffectiveLevel()

    class _Watch(logging.Filter):
        # A filter on the logger sees each record before any handler (its own or an ancestor's);
        # records below the level the logger had are dropped again, so nothing more is printed.
        def filter(self, record: logging.LogRecord) -> bool:
            try:
                if "marked dynamic due to dynamic-sources entry" in str(record.msg) and len(record.args or ()) == 2:
                    src, entry = record.args  # type: ignore[misc]
                    on_mark(str(src), str(entry), current_compile_id())
            except Exception:  # never break the user's compile
                pass
            return record.levelno >= shown

    watch = _Watch()
    old_level = log.level
    log.setLevel(logging.DEBUG)
    log.addFilter(watch)

    def undo() -> None:
        log.removeFilter(watch)
        log.setLevel(old_level)

    return undo


def stance_names() -> tuple[str, ...]:
    """The stances ``torch.compiler.set_stance`` accepts (read from its signature's Literal)."""
    import typing

    import torch

    fn = getattr(getattr(torch, "compiler", None), "set_stance", None)
    if fn is None:
        return ()
    try:
        hint = typing.get_type_hints(fn).get("stance")
        args = typing.get_args(hint)
        if args and all(isinstance(a, str) for a in args):
            return tuple(args)
    except Exception:
        pass
    return ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
            "aot_eager_then_compile")


GUARD_FILTER_UNAVAILABLE = "guard-filter-unavailable"
SKIP_GUARD_EVAL_UNAVAILABLE = "skip-guard-eval-unavailable"


def guard_filter(name: str) -> Callable[..., Any]:
    """``torch.compiler.NAME``, one of PyTorch's guard filters, checked to be passable as
    ``torch.compile(..., options={"guard_filter_fn": ...})`` (``torch._dynamo.eval_frame._optimize``
    takes ``guard_filter_fn``, and ``torch.compile`` pops it from ``options``). Raises
    :class:`AdapterProblem` starting with :data:`GUARD_FILTER_UNAVAILABLE` where this torch lacks either."""
    import inspect

    import torch

    fn = getattr(getattr(torch, "compiler", None), name, None)
    try:
        import torch._dynamo.eval_frame as ef

        optimize = getattr(ef, "_optimize", None) or ef.optimize  # optimize(*args, **kwargs) hands on to _optimize
        takes = "guard_filter_fn" in inspect.signature(optimize).parameters
    except (AttributeError, ImportError, TypeError, ValueError):
        takes = False
    if fn is None or not callable(fn) or not takes:
        what = f"no torch.compiler.{name}" if fn is None else "a torch.compile that takes no guard_filter_fn"
        raise AdapterProblem(f"{GUARD_FILTER_UNAVAILABLE}: torch {torch.__version__} has {what}")
    return fn  # type: ignore[no-any-return]


def set_skip_guard_eval(stance: str) -> None:
    """``torch.compiler.set_stance(stance, skip_guard_eval_unsafe=True)``; raises
    :class:`AdapterProblem` starting with :data:`SKIP_GUARD_EVAL_UNAVAILABLE` where this torch's
    ``set_stance`` takes no ``skip_guard_eval_unsafe``."""
    import torch

    check_skip_guard_eval()
    torch.compiler.set_stance(stance, skip_guard_eval_unsafe=True)


def check_skip_guard_eval() -> None:
    import inspect

    import torch

    fn = getattr(getattr(torch, "compiler", None), "set_stance", None)
    try:
        ok = fn is not None and "skip_guard_eval_unsafe" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise AdapterProblem(f"{SKIP_GUARD_EVAL_UNAVAILABLE}: torch {torch.__version__}'s "
                             "torch.compiler.set_stance takes no skip_guard_eval_unsafe")
