"""Every use of a private PyTorch API, in one place: this package, one module per PyTorch area.

PyTorch's internals change between releases. Each function here does one thing, is tested on its
own (tests/test_adapter.py), and degrades with a message instead of a crash when the internal it
needs is missing: capture then records what it still can and says what it could not. torch
2.9–2.15 were read; the releases in ``base.LANE_PASSED`` pass every test marked ``torch``
(docs/compatibility.md). Each module's docstring names the internals it uses:

- ``structured_trace``: the structured-trace logger, read in process, and the filter in front of
  ``trace_structured`` that builds only the records capture reads;
- ``contexts``: the entry and exit hook of every compile context (callables compiled before capture
  started), and the graphs Dynamo holds compiled already;
- ``graphs``: the hook on every graph any backend compiles (a region per run), the compile id;
- ``config``: Dynamo's settings, read and set (``run``'s remedy flags);
- ``hints``: the graph-break hint classes and registry (``torch._dynamo.graph_break_hints``);
- ``dynamo``: whether Dynamo is compiling, its reset, counters, backends and errors;
- ``guard_failures``: every guard that failed on a cached variant at a recompile, not the first;
- ``modules``: the module classes a graph traced instance by instance (repeated blocks);
- ``caches``: Inductor's persistent cache directory and its entries;
- ``logs``: torch's logging settings (``TORCH_LOGS``, ``TORCH_TRACE``), set up again after a fork;
- ``compile_imports``: what a first compilation imports, for a fork server to preload (by name);
- ``distributed``: the default process group's timeout and backend (compile skew between ranks);
- ``base``: the exception every module raises, and the version check.

Import the names from here (``from seamscope.capture import adapter``; ``adapter.X``).
"""

from __future__ import annotations

from .base import (
    LANE_PASSED,
    NOT_CHECKED,
    TESTED_VERSIONS,
    AdapterProblem,
    torch_version,
    version_warning,
)
from .caches import cache_entries, inductor_cache_dir
from .config import (
    DYNAMIC_SOURCE_LOGGER,
    DYNAMO_SETTINGS,
    check_skip_guard_eval,
    dynamic_sources_patch,
    dynamic_sources_support,
    dynamo_config_patch,
    dynamo_setting,
    dynamo_settings,
    guard_filter,
    mark_dynamic,
    reread_compile_threads,
    set_recompile_limit,
    set_skip_guard_eval,
    stance_names,
    watch_dynamic_source_marks,
)
from .contexts import (
    COMPILED_FN_PREFIX,
    LiveGraphs,
    context_backend_name,
    graphs_compiled_so_far,
    hook_compiled_calls,
    hooked_contexts,
    live_compile_contexts,
    wrap_live_graphs,
)
from .distributed import process_group_timeout, watch_process_group
from .dynamo import (
    SHAPES_ARGUMENTS,
    clear_counters,
    compile_accepts,
    compile_wrapper,
    dynamo_counters,
    dynamo_reset,
    frames_ok,
    is_compile_error,
    is_compiling,
    is_compiling_fn,
    lookup_backend,
    shapes_argument,
)
from .graphs import (
    current_compile_id,
    may_have_compiled_backward,
    wrap_backward_of,
    wrap_compiled_graphs,
)
from .guard_failures import report_every_failed_guard
from .hints import live_hint_table
from .logs import reread_torch_logs, torch_log_environment, torch_log_variables
from .modules import compiled_module, graph_origin, module_census
from .structured_trace import (
    TraceWants,
    add_trace_handler,
    exception_chain_text,
    filter_trace_records,
    lean_break_reason,
    trace_filter_installed,
    trace_logger,
)

__all__ = [
    "COMPILED_FN_PREFIX",
    "LiveGraphs",
    "DYNAMIC_SOURCE_LOGGER",
    "DYNAMO_SETTINGS",
    "LANE_PASSED",
    "NOT_CHECKED",
    "TESTED_VERSIONS",
    "AdapterProblem",
    "SHAPES_ARGUMENTS",
    "TraceWants",
    "add_trace_handler",
    "cache_entries",
    "clear_counters",
    "compile_accepts",
    "compile_wrapper",
    "context_backend_name",
    "current_compile_id",
    "dynamic_sources_patch",
    "dynamic_sources_support",
    "dynamo_config_patch",
    "dynamo_counters",
    "dynamo_reset",
    "dynamo_setting",
    "dynamo_settings",
    "exception_chain_text",
    "filter_trace_records",
    "frames_ok",
    "graphs_compiled_so_far",
    "hook_compiled_calls",
    "hooked_contexts",
    "inductor_cache_dir",
    "is_compile_error",
    "is_compiling",
    "is_compiling_fn",
    "lean_break_reason",
    "live_hint_table",
    "live_compile_contexts",
    "lookup_backend",
    "mark_dynamic",
    "reread_compile_threads",
    "reread_torch_logs",
    "report_every_failed_guard",
    "graph_origin",
    "module_census",
    "may_have_compiled_backward",
    "set_recompile_limit",
    "shapes_argument",
    "stance_names",
    "compiled_module",
    "guard_filter",
    "set_skip_guard_eval",
    "check_skip_guard_eval",
    "torch_log_environment",
    "torch_log_variables",
    "torch_version",
    "trace_filter_installed",
    "trace_logger",
    "version_warning",
    "watch_dynamic_source_marks",
    "wrap_backward_of",
    "wrap_compiled_graphs",
    "wrap_live_graphs",
    "process_group_timeout",
    "watch_process_group",
]
