"""What every part of the adapter shares: the exception that says an internal is missing, and
the torch versions seamscope was checked against."""

from __future__ import annotations

TESTED_VERSIONS = ((2, 9), (2, 14))


class AdapterProblem(Exception):
    """An internal is missing or changed; the message says what capture will lack."""


def torch_version() -> tuple[str, tuple[int, int]]:
    import torch

    v = torch.__version__
    try:
        major, minor = (int(p) for p in v.split("+")[0].split(".")[:2])
    except ValueError:
        major, minor = 0, 0
    return v, (major, minor)


def version_warning() -> str | None:
    v, mm = torch_version()
    lo, hi = TESTED_VERSIONS
    if not (lo <= mm <= hi):
        return (
            f"torch {v} is outside the versions seamscope was tested with "
            f"({lo[0]}.{lo[1]}–{hi[0]}.{hi[1]}); capture may be incomplete"
        )
    return None
