"""A candidate before it runs (torch-free): what the catalogue, the rewrites and the process-start
candidates make, and what the trial runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..remedy_spec import RemedySpec


@dataclass
class Draft:
    """A candidate before it runs."""

    name: str
    spec: RemedySpec
    origin: str
    targets: str
    cost_ns: int = 0
    start: str | None = None
    """How its processes start, where that is the remedy (:mod:`.cache`: a warm cache)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment its processes get (``TORCHINDUCTOR_COMPILE_THREADS``)."""
    patch: str | None = None
    """The patch file its runs apply (``--patch``) instead of its flags (:mod:`.patches`)."""
    diff: str | None = None
    change: str | None = None
    """The code change in words, where no flag says it (a code-change candidate)."""
    review: str | None = None
    """Why its patch is to be read before it is applied."""
    calls_of: str | None = None
    """With its patch: the script's name whose calls are the run's calls (``--calls-of``: a regional
    patch's model, which no longer goes to ``torch.compile`` whole)."""

    def run_flags(self) -> list[str]:
        """What its runs get: the patch where it has one (measured as applied), else its flags."""
        if not self.patch:
            return self.spec.flags()
        return ["--patch", self.patch, *(["--calls-of", self.calls_of] if self.calls_of else [])]
