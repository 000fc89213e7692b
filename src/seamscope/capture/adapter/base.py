"""What every part of the adapter shares: the exception that says an internal is missing, and
the torch versions seamscope was checked against (``model.compat``)."""

from __future__ import annotations

from ...model.compat import LANE_PASSED, NOT_CHECKED, TESTED_VERSIONS, is_tested, tested_range
from ...model.compat import minor as _minor

__all__ = ["LANE_PASSED", "NOT_CHECKED", "TESTED_VERSIONS", "AdapterProblem", "torch_version", "version_warning"]


class AdapterProblem(Exception):
    """An internal is missing or changed; the message says what capture will lack."""


def torch_version() -> tuple[str, tuple[int, int]]:
    import torch

    v = str(torch.__version__)
    return v, _minor(v)


def version_warning() -> str | None:
    """For a torch outside the releases the lane passed on: which version, the tested range, and
    what was not checked on it (None inside the range)."""
    v, _ = torch_version()
    if is_tested(v):
        return None
    return (
        f"torch {v} is outside the versions seamscope was tested with ({tested_range()}, "
        "docs/compatibility.md); not checked on it: " + "; ".join(NOT_CHECKED) + ": capture may be incomplete"
    )
