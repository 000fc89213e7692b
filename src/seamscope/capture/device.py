"""CUDA as a :class:`~seamscope.model.device.DeviceSource`: timing events on the current stream,
and device-to-host syncs counted with ``torch.cuda.set_sync_debug_mode("warn")``.

Public torch APIs only (``torch.cuda.Event``, ``current_stream``, ``is_current_stream_capturing``,
``get_sync_debug_mode``/``set_sync_debug_mode``), so nothing here belongs in ``adapter``.

Syncs: while a call timed on the device runs, the sync debug mode is "warn" (restored to
"default" when the call ends). torch then warns at each synchronizing operation; a filter turns
those warnings into a count and the host time of the first, and nothing is printed. Where the
user set a sync debug mode themselves, it is left as it was and syncs are not counted (the
receipt says so).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from ..model.device import SyncCount

SYNC_TEXT = "called a synchronizing CUDA operation"
"""What torch warns at a sync in mode "warn"; matched loosely (any "synchroniz..." warning)."""
SYNC_FILTER = r".*synchroniz"


class CudaDevice:
    """Events on the current CUDA stream (see the module docstring)."""

    name = "cuda"

    def __init__(self, torch: Any) -> None:
        cuda = torch.cuda
        self._event = cuda.Event
        self._current_stream = cuda.current_stream
        self._capturing = cuda.is_current_stream_capturing
        self._synchronize = cuda.synchronize
        self._set_mode = cuda.set_sync_debug_mode
        self.syncs_counted = cuda.get_sync_debug_mode() == 0
        self._syncs = SyncCount(time.perf_counter_ns)
        self._watching = False
        self._old_show: Any = None
        if self.syncs_counted:
            self._install()

    # --- syncs -------------------------------------------------------------------------------

    def _install(self) -> None:
        """A showwarning that counts torch's sync warnings (and hides them), passing every other
        warning on; and an "always" filter so that Python does not show each location once."""
        warnings.filterwarnings("always", message=SYNC_FILTER)
        self._old_show = old = warnings.showwarning
        device = self

        def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
            if device._watching and "synchroniz" in str(message).lower():
                device._syncs.add()
                return
            old(message, category, filename, lineno, file, line)

        warnings.showwarning = show

    def close(self) -> None:
        """Restore what was changed (the session's end)."""
        if self._watching:
            self.close_call()
        if self._old_show is not None:
            warnings.showwarning = self._old_show
            self._old_show = None
            for f in list(warnings.filters):
                if f[0] == "always" and f[1] is not None and f[1].pattern == SYNC_FILTER:
                    warnings.filters.remove(f)  # type: ignore[attr-defined]

    def open_call(self) -> None:
        if self.syncs_counted and not self._watching:
            self._set_mode("warn")
            self._watching = True

    def close_call(self) -> None:
        if self._watching:
            self._watching = False
            self._set_mode("default")

    def take_syncs(self) -> tuple[int, int | None] | None:
        return self._syncs.take() if self.syncs_counted else None

    # --- events ------------------------------------------------------------------------------

    def new_event(self) -> Any:
        return self._event(enable_timing=True)

    def record(self, event: Any) -> None:
        event.record()

    def done(self, event: Any) -> bool:
        return bool(event.query())

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end))

    def synchronize(self) -> None:
        self._synchronize()

    def capturing(self) -> bool:
        return bool(self._capturing())

    def stream(self) -> Any:
        return self._current_stream().cuda_stream


def cuda_device(torch: Any) -> CudaDevice | None:
    """The CUDA device source, or None where CUDA is not available."""
    try:
        if not torch.cuda.is_available():
            return None
        return CudaDevice(torch)
    except Exception:
        return None


def holds_cuda_tensor(args: Any) -> bool:
    """Whether a compiled graph's inputs include a tensor on a CUDA device (a model on CPU in a
    CUDA process keeps the CPU path)."""
    for a in args if isinstance(args, (list, tuple)) else (args,):
        if isinstance(a, (list, tuple)):  # a boxed call: the inputs in one list
            if any(getattr(x, "is_cuda", False) is True for x in a):
                return True
        elif getattr(a, "is_cuda", False) is True:
            return True
    return False
