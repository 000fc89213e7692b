"""Compile skew between ranks: a rank that compiles while the others have moved on makes them wait.

Under ``torch.distributed`` every rank compiles on its own. When one rank compiles (a new shape, a
recompile, a cold cache) in a call where another does not, the other reaches the next collective
first and waits there; past the process group's timeout (NCCL's watchdog: 10 min by default) the
job fails. Per call index this compares the compile time of every rank that made the call: the
spread (max − min) is the longest wait it implies, the ranks that compiled most are named, and a
warning is set when a wait comes within half of the timeout. Torch-free arithmetic on the merged
ranks' per-call figures (:class:`~seamscope.model.ranks.RankEntry`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

from ..model.headline import RankedItem
from ..model.ranks import CompileSkew, RankEntry
from .compile_time import inductor_cached
from .units import fmt_ns, number_ranges

#: A call's compile times count as a skew only from this spread on: below it no wait matters.
SKEW_FLOOR_NS = 1_000_000
#: ... and when the rank that compiled least compiled under this share of the most (equal work
#: timed with noise is not a skew).
SKEW_RATIO = 0.5
#: The warning is set when a wait reaches this share of the process group's timeout.
TIMEOUT_SHARE_WARN = 0.5
#: NCCL's default process-group timeout (``torch.distributed.constants.default_pg_nccl_timeout``).
NCCL_DEFAULT_TIMEOUT_NS = 600 * 1_000_000_000
#: Skews kept in the receipt, largest wait first.
MAX_SKEWS = 100

SKEW_RULE = (
    f"a call is a compile skew when max − min compile time over the ranks that made it is at least "
    f"{fmt_ns(SKEW_FLOOR_NS)} and the rank that compiled least compiled under {SKEW_RATIO:.0%} of the "
    "most; the spread is the longest wait it implies at the next collective (none when no collective "
    f"follows before the ranks meet again); a warning when it reaches {TIMEOUT_SHARE_WARN:.0%} of the "
    f"process group's timeout; at most {MAX_SKEWS} calls kept, largest wait first"
)

_WARM_UP = (
    "run warm-up calls on every rank before the first collective (each input shape the job will "
    "see), then torch.distributed.barrier() after warm-up"
)
REMEDY = (
    _WARM_UP + "; or give every rank a shared warm compile cache (TORCHINDUCTOR_CACHE_DIR on a shared "
    "folder, or torch.compiler.save_cache_artifacts / load_cache_artifacts), so that no rank compiles alone"
)
#: The remedy where no persistent cache serves the backend (``eager``, ``aot_eager``).
REMEDY_UNCACHED = _WARM_UP + ", so that no rank compiles alone"


def remedy(backend: str | None) -> str:
    """The skew's remedy for the run's backend: a shared warm cache only where Inductor's caches
    serve it (:func:`~seamscope.analyze.compile_time.inductor_cached`)."""
    return REMEDY if inductor_cached(backend) else REMEDY_UNCACHED


def who(ranks: Sequence[int]) -> str:
    """``rank 3``, ``ranks 0–2, 4–7``."""
    return ("rank " if len(ranks) == 1 else "ranks ") + number_ranges(sorted(ranks))


def process_group_timeout(entries: Sequence[RankEntry]) -> tuple[int, str]:
    """The timeout the skews are compared with, and where it came from: the shortest the ranks
    recorded, else NCCL's default."""
    recorded = [(e.pg_timeout_ns, e.pg_backend, e.rank) for e in entries if e.pg_timeout_ns]
    if not recorded:
        return NCCL_DEFAULT_TIMEOUT_NS, (
            f"NCCL's default ({fmt_ns(NCCL_DEFAULT_TIMEOUT_NS)}): the ranks recorded no process group"
        )
    ns = min(t for t, _, _ in recorded)
    ranks = [r for t, _, r in recorded if t == ns]
    backends = sorted({b for t, b, _ in recorded if t == ns and b})
    on = f", {'/'.join(backends)}" if backends else ""
    return ns, f"recorded by {who(ranks)} ({fmt_ns(ns)}{on})"


def find_skews(entries: Sequence[RankEntry], timeout_ns: int | None = None,
               backend: str | None = None) -> list[CompileSkew]:
    """Every call in which the ranks' compile times differ past the rule, largest wait first;
    ``backend`` (the run's; None: not recorded) chooses the :func:`remedy`."""
    if len(entries) < 2:
        return []
    if timeout_ns is None:
        timeout_ns = process_group_timeout(entries)[0]
    per_call: dict[int, list[tuple[int, int, RankEntry]]] = {}
    for e in entries:
        if not e.has_runtime:
            continue
        for c in e.calls:
            per_call.setdefault(c.index, []).append((e.rank, c.compile_ns, e))
    out: list[CompileSkew] = []
    for index, got in per_call.items():
        if len(got) < 2:
            continue
        hi = max(ns for _, ns, _ in got)
        lo = min(ns for _, ns, _ in got)
        spread = hi - lo
        if spread < SKEW_FLOOR_NS or lo >= SKEW_RATIO * hi:
            continue
        out.append(_skew(index, got, hi, lo, timeout_ns, backend))
    out.sort(key=lambda s: (-s.wait_ns, s.call_index))
    return out[:MAX_SKEWS]


def _skew(index: int, got: list[tuple[int, int, RankEntry]], hi: int, lo: int, timeout_ns: int,
          backend: str | None) -> CompileSkew:
    spread = hi - lo
    slow = sorted(r for r, ns, _ in got if ns >= lo + spread / 2)
    fast = sorted(r for r, ns, _ in got if ns < lo + spread / 2)
    idle = sorted(r for r, ns, _ in got if ns == 0)
    slowest = min((r for r, ns, _ in got if ns == hi))
    entry = next(e for r, _, e in got if r == slowest)
    compiled = [cid for cid, call in zip(entry.compile_ids, entry.compile_calls, strict=False) if call == index]
    share = spread / timeout_ns if timeout_ns else None
    what = f" ({', '.join(compiled[:4])}{', …' if len(compiled) > 4 else ''})" if compiled else ""
    slow_ns = fmt_ns(hi) if len(slow) == 1 else f"up to {fmt_ns(hi)}"
    if idle:
        others = f"{who(idle)} did not compile"
        if len(idle) < len(fast):
            idle_set = set(idle)
            others += f" and {who([r for r in fast if r not in idle_set])} compiled less"
    else:
        others = f"{who(fast)} compiled {fmt_ns(lo)}" + (" or less" if len(fast) > 1 else "")
    sentence = (
        f"at call {index} {who(slow)} compiled for {slow_ns}{what} while {others}: "
        f"{'it' if len(fast) == 1 else 'they'} waited up to {fmt_ns(spread)} at the next collective"
    )
    warning = None
    if share is not None and share >= TIMEOUT_SHARE_WARN:
        warning = (
            f"the wait at call {index} ({fmt_ns(spread)}) is {share:.0%} of the process group's timeout "
            f"({fmt_ns(timeout_ns)}): a little more and the collective times out and the job fails"
        )
    digest = hashlib.sha256(f"{index}:{','.join(map(str, slow))}".encode()).hexdigest()[:8]
    return CompileSkew(
        skew_id=f"SK{digest}",
        call_index=index,
        spread_ns=spread,
        max_ns=hi,
        min_ns=lo,
        slow_ranks=slow,
        fast_ranks=fast,
        idle_ranks=idle,
        lone=bool(idle),
        wait_ns=spread,
        rank_wait_ns=sum(hi - ns for _, ns, _ in got),
        compile_ids=compiled,
        timeout_share=round(share, 6) if share is not None else None,
        warning=warning,
        sentence=sentence,
        remedy=remedy(backend),
    )


SKEW_BASIS = "the longest wait at the next collective it implies (max − min compile time over the ranks in that call)"


def rank_with_skews(
    ranked: Sequence[RankedItem], skews: Sequence[CompileSkew], wall_ns: int | None
) -> list[RankedItem]:
    """The findings ranked across axes with the skews among them, by cost (a skew's: its wait)."""
    items = list(ranked) + [
        RankedItem(
            rank=0,
            item_id=s.skew_id,
            axis="compile_skew",
            cost_ns=s.wait_ns,
            basis=SKEW_BASIS,
            share=round(s.wait_ns / wall_ns, 6) if wall_ns else None,
            sentence=s.sentence + (f"; warning: {s.warning}" if s.warning else ""),
        )
        for s in skews
    ]
    order = sorted(range(len(items)), key=lambda i: (items[i].cost_ns is None, -(items[i].cost_ns or 0), i))
    return [msgspec.structs.replace(items[i], rank=k + 1) for k, i in enumerate(order)]


__all__ = ["find_skews", "process_group_timeout", "rank_with_skews", "who", "remedy", "SKEW_RULE", "REMEDY",
           "NCCL_DEFAULT_TIMEOUT_NS", "SKEW_FLOOR_NS", "SKEW_RATIO", "TIMEOUT_SHARE_WARN"]
