"""The PyTorch releases seamscope was tested with: one list that capture's warning, import's
version check and ``docs/compatibility.md`` all follow (``tests/test_versions.py`` checks the
doc's table against it). Torch-free."""

from __future__ import annotations

LANE_PASSED = ("2.13.0", "2.14.1", "2.15.0")
"""The PyTorch releases the compatibility lane (``make test-torch TORCH=X``: every test marked
``torch``) passed on."""

NOT_CHECKED = (
    "the structured-trace records and their break-reason layout",
    "the hook on every compiled graph",
    "the compile-context hooks",
    "Dynamo's settings and torch.compile's arguments",
    "the counts against PyTorch's own counters",
)
"""What the lane checks on each release: what a version outside it was not checked for."""


def minor(version: str) -> tuple[int, int]:
    """``"2.15.0+cu132"`` → (2, 15); (0, 0) when unreadable."""
    try:
        major, mnr = (int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        return 0, 0
    return major, mnr


TESTED_VERSIONS = (min(minor(v) for v in LANE_PASSED), max(minor(v) for v in LANE_PASSED))
"""The (major, minor) range of :data:`LANE_PASSED`."""


def tested_range() -> str:
    (a, b), (c, d) = TESTED_VERSIONS
    return f"{a}.{b}–{c}.{d}"


def is_tested(version: str) -> bool:
    lo, hi = TESTED_VERSIONS
    return lo <= minor(version) <= hi
