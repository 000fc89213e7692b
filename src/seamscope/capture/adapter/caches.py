"""Inductor's persistent caches on disk, as a run finds them.

Internals used:
- ``torch._inductor.runtime.cache_dir_utils.default_cache_dir``: where Inductor keeps its caches
  when ``TORCHINDUCTOR_CACHE_DIR`` is unset (``cache_dir()`` itself is not called: it creates the
  directory and sets the variable).
- the layout under it: ``fxgraph/<2 chars>/<key>/`` (FX graph cache) and ``aotautograd/<key>/``
  (AOTAutograd cache), read in ``FxGraphCache._get_tmp_dir_for_key`` and
  ``AOTAutogradCache._get_tmp_dir_for_key`` (torch 2.13).
"""

from __future__ import annotations

import os


def inductor_cache_dir() -> str | None:
    """The directory Inductor's caches use in this process (None when it cannot be told)."""
    env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if env:
        return os.path.abspath(env)
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # pragma: no cover - depends on torch version
        return None
    try:
        return os.path.abspath(default_cache_dir())
    except Exception:  # pragma: no cover
        return None


def _entries(path: str, depth: int) -> int:
    """Directories ``depth`` levels below ``path`` (0 when it does not exist)."""
    level = [path]
    for _ in range(depth):
        nxt: list[str] = []
        for d in level:
            try:
                with os.scandir(d) as it:
                    nxt += [e.path for e in it if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
        level = nxt
    return len(level)


def cache_entries(cache_dir: str) -> tuple[int, int]:
    """Entries of the FX graph cache and of the AOTAutograd cache under ``cache_dir``."""
    return _entries(os.path.join(cache_dir, "fxgraph"), 2), _entries(os.path.join(cache_dir, "aotautograd"), 1)
