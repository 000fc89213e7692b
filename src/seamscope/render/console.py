"""The one console every terminal output of seamscope prints on.

Two things rich decides that a command must not leave to it:

- the width: ``COLUMNS=0`` (or a pseudo-terminal that reports a width of a few columns) gives a
  console of that width, on which rich prints nothing at all; the width is clamped to
  :data:`MIN_WIDTH`.
- a broken pipe: rich's console exits 1 when its reader closes the pipe (``| head -1``), which reads
  as a verdict ("over budget"); here it raises ``BrokenPipeError``, which the CLI turns into the
  exit status of a command stopped by SIGPIPE (141), as for every other write.
"""

from __future__ import annotations

import errno
from typing import Any

from rich.console import Console

#: The narrowest console seamscope prints on, whatever ``COLUMNS`` or the terminal say.
MIN_WIDTH = 40


class SeamConsole(Console):
    """A rich console (same arguments) at least :data:`MIN_WIDTH` wide that raises ``BrokenPipeError``
    when its reader is gone."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.width < MIN_WIDTH:
            self.width = MIN_WIDTH

    def on_broken_pipe(self) -> None:
        self.quiet = True  # what is still buffered goes nowhere
        raise BrokenPipeError(errno.EPIPE, "the reader of standard output closed the pipe")

