"""PyTorch's logging settings (``TORCH_LOGS``, ``TORCH_TRACE``...), set up again from the
environment in a process forked after ``import torch`` read them.

``import torch`` reads these variables once (``torch._logging._internal._init_logs``): a process
forked from one that imported torch keeps the settings of its parent, whatever its own
environment says. :func:`reread_torch_logs` does again what the import did, so such a process logs
as a new interpreter with its environment would.

Internals used (``torch._logging._internal``, torch 2.13 read):
- the variables' names: ``LOG_ENV_VAR`` (``TORCH_LOGS``), ``LOG_OUT_ENV_VAR``, ``LOG_FORMAT_ENV_VAR``,
  ``LOG_TRACE_ID_FILTER``, ``TRACE_ENV_VAR`` (``TORCH_TRACE``), ``DTRACE_ENV_VAR``, and
  ``TORCH_COMPILE_DEBUG`` (its trace directory when ``TORCH_TRACE`` is unset);
- ``_init_logs()``: what the import calls (handlers and levels of every registered logger, the
  trace logger's handler); ``log_state``, set through ``_set_log_state(LogState())`` first, as at
  import (``_init_logs`` parses ``TORCH_LOGS`` only where it is set);
- ``LOG_TRACE_HANDLER``: the ``TORCH_TRACE`` file's handler, made once with its directory (set to
  None so that ``_init_logs`` makes it again); ``GET_DTRACE_STRUCTURED`` (set by ``TORCH_DTRACE``);
- ``DEFAULT_FORMATTER``, made once at import by ``_default_formatter()`` (``TORCH_LOGS_FORMAT``,
  the trace-id filter).
Inductor's own reading of ``TORCH_COMPILE_DEBUG`` (``torch._inductor.config``) is not redone.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .base import AdapterProblem

_NAME_ATTRS = ("LOG_ENV_VAR", "LOG_OUT_ENV_VAR", "LOG_FORMAT_ENV_VAR", "LOG_TRACE_ID_FILTER", "TRACE_ENV_VAR",
               "DTRACE_ENV_VAR")
_NEEDED = ("_init_logs", "LOG_TRACE_HANDLER")


def torch_log_variables() -> tuple[str, ...]:
    """The environment variables the loaded torch read at import for its logs (none where torch's
    logging is not imported: the process's own ``import torch`` will read them)."""
    internal = sys.modules.get("torch._logging._internal")
    if internal is None:
        return ()
    names = [getattr(internal, a, None) for a in _NAME_ATTRS]
    return (*(n for n in names if isinstance(n, str)), "TORCH_COMPILE_DEBUG")


def torch_log_environment() -> dict[str, str | None]:
    """This process's values of :func:`torch_log_variables` (None: unset)."""
    return {k: os.environ.get(k) for k in torch_log_variables()}


def reread_torch_logs() -> None:
    """Set torch's logs up again from this process's environment, as ``import torch`` does (a
    no-op where torch's logging is not imported). Loggers and handlers of others are left alone.

    Raises :class:`AdapterProblem` where this torch lacks what it needs: its logs then keep the
    settings read at import."""
    internal: Any = sys.modules.get("torch._logging._internal")
    if internal is None:
        return
    missing = [n for n in _NEEDED if not hasattr(internal, n)]
    if missing:
        raise AdapterProblem(
            f"torch._logging._internal has no {', '.join(missing)}: TORCH_LOGS and TORCH_TRACE keep the values "
            "read when torch was imported (run the job in a new interpreter to set them)")
    if hasattr(internal, "_default_formatter") and hasattr(internal, "DEFAULT_FORMATTER"):
        internal.DEFAULT_FORMATTER = internal._default_formatter()
    if hasattr(internal, "_set_log_state") and hasattr(internal, "LogState"):
        internal._set_log_state(internal.LogState())
    if hasattr(internal, "GET_DTRACE_STRUCTURED"):
        internal.GET_DTRACE_STRUCTURED = False
    # the old handler is not closed: a stream it holds is the parent's (its buffer is not ours)
    internal.LOG_TRACE_HANDLER = None
    internal._init_logs()
