"""What every part of the adapter shares: the exception that says an internal is missing, and
the torch versions seamscope was checked against."""

from __future__ import annotations

LANE_PASSED = ("2.13.0", "2.14.1", "2.15.0")
"""The PyTorch releases the compatibility lane (``make test-torch TORCH=X``: every test marked
``torch``) passed on; ``docs/compatibility.md`` holds the table and ``tests/test_versions.py``
checks that the two agree. The tested range and the receipt's warning follow from it."""

NOT_CHECKED = (
    "the structured-trace records and their break-reason layout",
    "the hook on every compiled graph",
    "the compile-context hooks",
    "Dynamo's settings and torch.compile's arguments",
    "the counts against PyTorch's own counters",
)
"""What the lane checks on each release: what a version outside it was not checked for."""


def _minor(v: str) -> tuple[int, int]:
    try:
        major, minor = (int(p) for p in v.split("+")[0].split(".")[:2])
    except ValueError:
        return 0, 0
    return major, minor


TESTED_VERSIONS = (min(_minor(v) for v in LANE_PASSED), max(_minor(v) for v in LANE_PASSED))


class AdapterProblem(Exception):
    """An internal is missing or changed; the message says what capture will lack."""


def torch_version() -> tuple[str, tuple[int, int]]:
    import torch

    v = str(torch.__version__)
    return v, _minor(v)


def version_warning() -> str | None:
    """For a torch outside the releases the lane passed on: which version, the tested range, and
    what was not checked on it (None inside the range)."""
    v, mm = torch_version()
    lo, hi = TESTED_VERSIONS
    if not (lo <= mm <= hi):
        return (
            f"torch {v} is outside the versions seamscope was tested with "
            f"({lo[0]}.{lo[1]}–{hi[0]}.{hi[1]}, docs/compatibility.md); not checked on it: "
            + "; ".join(NOT_CHECKED)
            + ": capture may be incomplete"
        )
    return None
