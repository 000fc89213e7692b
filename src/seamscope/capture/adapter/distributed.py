"""The default process group's timeout and backend (``torch.distributed``).

Internals used: ``distributed_c10d._get_default_group()``, ``ProcessGroup._get_backend(device)`` and
the backend's ``options._timeout`` (gloo and NCCL both carry it); ``destroy_process_group`` is
wrapped so the figures are read before a script tears its group down.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem


def process_group_timeout() -> tuple[int, str] | None:
    """``(timeout in ns, backend name)`` of the default process group; None when torch.distributed
    is not imported or not initialised. Raises :class:`AdapterProblem` when the internals moved."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    try:
        import torch
        from torch.distributed import distributed_c10d as c10d

        pg = c10d._get_default_group()
        name = str(dist.get_backend(pg))
        timeout = None
        for dev in ("cuda", "cpu"):
            try:
                backend = pg._get_backend(torch.device(dev))
            except Exception:  # no backend for this device type
                continue
            opts = getattr(backend, "options", None)
            timeout = getattr(opts, "_timeout", None)
            if timeout is not None:
                break
        if timeout is None:
            return None
        return int(timeout.total_seconds() * 1e9), name
    except Exception as e:
        raise AdapterProblem(f"the process group's timeout could not be read ({type(e).__name__}: {e}); "
                             "merge compares compile skew with NCCL's default instead") from e


def watch_process_group(record: Callable[[tuple[int, str]], None]) -> Callable[[], None]:
    """Call ``record(process_group_timeout())`` just before the default group is destroyed (a script
    that calls ``destroy_process_group()`` at its end leaves none to read afterwards). Returns the undo."""
    import torch.distributed as dist

    if not dist.is_available():
        return lambda: None
    from torch.distributed import distributed_c10d as c10d

    original = c10d.destroy_process_group

    def destroy_process_group(group: Any = None) -> Any:
        if group is None:
            try:
                got = process_group_timeout()
            except AdapterProblem:
                got = None
            if got is not None:
                record(got)
        return original(group)

    destroy_process_group.__wrapped__ = original  # type: ignore[attr-defined]
    patched = [m for m in (dist, c10d) if getattr(m, "destroy_process_group", None) is original]
    for m in patched:
        m.destroy_process_group = destroy_process_group  # type: ignore[attr-defined]

    def undo() -> None:
        for m in patched:
            if getattr(m, "destroy_process_group", None) is destroy_process_group:
                m.destroy_process_group = original  # type: ignore[attr-defined]

    return undo
