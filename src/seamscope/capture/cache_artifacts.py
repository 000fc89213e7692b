"""``seamscope run --save-cache-artifacts FILE`` / ``--load-cache-artifacts FILE``: PyTorch's
portable compile caches (``torch.compiler.save_cache_artifacts`` / ``load_cache_artifacts``).

Loading happens once the session has started and before the script runs: the artifacts are
written into the run's cache directory (``TORCHINDUCTOR_CACHE_DIR``), so the script's
compilations can hit them as a worker shipped the first worker's caches would. Saving happens
after the script returned: what this process's compilations recorded (FX graph and AOTAutograd
cache entries). What either did is in the receipt's decision note (``cache artifacts: ...``).
Where torch has no such call, or saved nothing (the eager and aot_eager backends use neither
cache), the note says so and the run goes on. What the artifacts do not hold on CPU in torch
2.13: the C++ kernels Inductor built; a fresh machine builds them again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import msgspec

NOTE = "cache artifacts: "


class WithCacheArtifacts:
    """A run's setup (a remedy plan, or None) with the artifacts loaded before it and saved after."""

    def __init__(self, inner: Any, load: str | None, save: str | None) -> None:
        self.inner = inner
        self.load = load
        self.save = save

    def needs_transform(self) -> bool:
        return self.inner is not None and bool(self.inner.needs_transform())

    def transform(self, tree: Any) -> Any:
        return self.inner.transform(tree)

    def setup(self, session: Any) -> Callable[[], None]:
        said: list[str] = []
        if self.load is not None:
            said.append(load_artifacts(self.load))
        inner_finish = self.inner.setup(session) if self.inner is not None else None

        def finish() -> None:
            if inner_finish is not None:
                inner_finish()
            if self.save is not None:
                said.append(save_artifacts(self.save))
            _note(session, "; ".join(said))

        return finish


def _counts(info: Any) -> str:
    arts = getattr(info, "artifacts", None) or {}
    return ", ".join(f"{k} {len(v)}" for k, v in sorted(arts.items()) if v) or "no entries"


def load_artifacts(path: str) -> str:
    """Load the file into the caches; a sentence on what it did (errors are said, not raised)."""
    import torch

    fn = getattr(torch.compiler, "load_cache_artifacts", None)
    if fn is None:
        return f"{NOTE}not loaded: this torch has no torch.compiler.load_cache_artifacts"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"{NOTE}not loaded: {os.path.basename(path)}: {e.strerror or e}"
    t0 = time.perf_counter_ns()
    try:
        info = fn(data)
    except Exception as e:  # noqa: BLE001 - a stale or foreign file is the run's result, not a crash
        return f"{NOTE}not loaded: load_cache_artifacts raised {type(e).__name__}: {str(e)[:160]}"
    took = time.perf_counter_ns() - t0
    if info is None or not getattr(info, "artifacts", None):
        return f"{NOTE}not loaded: load_cache_artifacts found no cache entry in {os.path.basename(path)}"
    from ..analyze.units import fmt_ns

    return f"{NOTE}loaded {len(data):,} bytes ({_counts(info)}) in {fmt_ns(took)} before the script"


def save_artifacts(path: str) -> str:
    """Save what this process's compilations recorded; a sentence on what it did."""
    import torch

    fn = getattr(torch.compiler, "save_cache_artifacts", None)
    if fn is None:
        return f"{NOTE}not saved: this torch has no torch.compiler.save_cache_artifacts"
    try:
        got = fn()
    except Exception as e:  # noqa: BLE001
        return f"{NOTE}not saved: save_cache_artifacts raised {type(e).__name__}: {str(e)[:160]}"
    if got is None or not got[0] or not getattr(got[1], "artifacts", None):
        return f"{NOTE}none saved: the compilations recorded no cache entry (the backend uses no persistent cache)"
    data, info = got
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        return f"{NOTE}not saved: {os.path.basename(path)}: {e.strerror or e}"
    return f"{NOTE}saved {len(data):,} bytes ({_counts(info)}) to {os.path.basename(path)}"


def _note(session: Any, text: str) -> None:
    if not text:
        return
    from ..model.receipt import Decision

    d = session.decision or Decision()
    session.decision = msgspec.structs.replace(d, note=(d.note + "; " if d.note else "") + text)
