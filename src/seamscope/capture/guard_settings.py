"""The guard settings PyTorch names ``_unsafe``, applied for one run (``run``'s ``--guard-filter`` and
``--skip-guard-eval-unsafe-after``; ``remedies.py`` installs them with its ``torch.compile`` wrapper).

- ``--guard-filter NAME``: every ``torch.compile`` seamscope reaches gets
  ``options={"guard_filter_fn": torch.compiler.NAME}`` (the script's own options kept beside it).
  A call that passes ``mode`` other than ``default`` cannot take ``options`` too (``torch.compile``
  refuses both): it is left as it is, and the receipt's warnings say so. The receipt's compile
  options record ``options`` as passed, the filter by its name.
- ``--skip-guard-eval-unsafe-after N``: once N top-level calls of the compiled callables that
  ``torch.compile`` returned have returned (the warm-up), ``torch.compiler.set_stance(STANCE,
  skip_guard_eval_unsafe=True)`` (STANCE: ``--stance``'s, else ``default``); set back to that
  stance at the end. Recorded as the compile setting ``skip_guard_eval_unsafe``.

Both are unsafe by PyTorch's own word: a change a dropped guard protected runs stale code. What
``try`` does about that is its check run (``experiments/trials/guard_check.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import UnusableInput


class GuardSettings:
    """What ``_wrap_compile`` asks of the guard settings at each ``torch.compile``."""

    def __init__(self, session: Any, filter_name: str | None, after: int | None, stance: str | None) -> None:
        from . import adapter

        self.session = session
        self.filter_name = filter_name
        self.filter_fn = None
        try:
            if filter_name is not None:
                self.filter_fn = adapter.guard_filter(filter_name)
            if after is not None:
                adapter.check_skip_guard_eval()
        except adapter.AdapterProblem as e:
            flag = "--guard-filter" if filter_name is not None and self.filter_fn is None \
                else "--skip-guard-eval-unsafe-after"
            raise UnusableInput(f"{flag}: {e}") from None
        self.after = after
        self.stance = stance or "default"
        self.calls = 0
        self.depth = 0
        self.switched = False
        self.refused: list[str] = []
        if after is not None:
            session.note_compile_setting("skip_guard_eval_unsafe", f"True after {after} calls (stance {self.stance!r})")
            if after == 0:
                self._switch()

    def options(self, kwargs: dict[str, Any]) -> None:
        """Add the guard filter to one ``torch.compile`` call's arguments (in place)."""
        if self.filter_fn is None:
            return
        mode = kwargs.get("mode")
        if mode not in (None, "default"):
            text = (f"--guard-filter {self.filter_name}: not given to a torch.compile with mode={mode!r} "
                    "(torch.compile takes mode or options, not both)")
            if text not in self.refused:
                self.refused.append(text)
                self.session.warnings.append(text)
            return
        kwargs.pop("mode", None)
        kwargs["options"] = {**(kwargs.get("options") or {}), "guard_filter_fn": self.filter_fn}

    def track(self, compiled: Any) -> Any:
        """Count the top-level calls of what ``torch.compile`` returned (the warm-up)."""
        import torch

        if self.after is None or self.switched:
            return compiled
        if isinstance(compiled, torch.nn.Module):
            object.__setattr__(compiled, "forward", functools.wraps(compiled.forward)(self._counted(compiled.forward)))
            return compiled
        if callable(compiled):
            return functools.wraps(compiled)(self._counted(compiled))
        return compiled

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                if not self.depth and not self.switched:
                    self.calls += 1
                    if self.after is not None and self.calls >= self.after:
                        self._switch()

        return counted

    def _switch(self) -> None:
        from . import adapter

        try:
            adapter.set_skip_guard_eval(self.stance)
        except RuntimeError:  # inside a compiled region (a call nested in one): the next call
            return
        self.switched = True

    def undo(self) -> None:
        import torch

        if self.switched:
            torch.compiler.set_stance(self.stance)
