"""Five mutations of the production accounting must die.

Each test rewrites one line (or three) of the real source of ``model/builder.py``,
``analyze/summary.py`` or ``analyze/diff.py``, swaps the mutated functions and classes in wherever
the real ones are referenced, builds a baseline/candidate pair through the ordinary path (fake
event source → builder → summary → receipt → comparison → files on disk), and requires that the
receipt hash changes and that ``verify`` names that mutation's own failure code — and none of the
other four, so each code means what it says.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from seamscope.analyze.verify import load_raw, verify

sys.path.insert(0, str(Path(__file__).parent))
from test_verify import pair  # noqa: E402

MUTATION_CODES = {
    "conflate_breaks_and_recompiles": "COMPILE_COUNT_MISMATCH",
    "drop_warmup": "WARMUP_DROPPED",
    "cache_hits_as_compiles": "CACHE_HIT_COUNTED_AS_COMPILE",
    "average_unequal_calls": "UNEQUAL_SAMPLES",
    "hide_eager_islands": "ISLANDS_HIDDEN",
}

# module -> (anchor, replacement[, how many times the anchor occurs]); a stale anchor fails loudly.
MUTATIONS: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    # (1) compile count incremented at every break crossing.
    "conflate_breaks_and_recompiles": (
        "seamscope.analyze.summary",
        [("compile_count=len(ok),",
          "compile_count=len(ok) + sum(s.crossings for s in ledger.totals.sites),")],
    ),
    # (2) cold calls removed before the totals are compared.
    "drop_warmup": (
        "seamscope.analyze.diff",
        [("return {p.phase: p for p in receipt.summary.phases}",
          'return {p.phase: p for p in receipt.summary.phases if p.phase != "cold"}')],
    ),
    # (3) a call whose regions were cache hits counted as a compiling call.
    "cache_hits_as_compiles": (
        "seamscope.model.builder",
        [("has_compile = sums[SUM_COMPILES] > 0",  # sums: region, island, compile, overhead, compilations
          "has_compile = sums[SUM_COMPILES] > 0 or sums[SUM_REGION] > 0"),
         # the steady calls C sums, and those it hands over to be kept, the same way
         ('acc = self._phase["steady"]', 'acc = self._phase["cold"]'),
         ('_Kept(oc, end_ns, plan, "steady", "hit", wall, None)', '_Kept(oc, end_ns, plan, "cold", "compile", wall, None)')],
    ),
    # (4) the candidate's totals divided by the baseline's (different, unstated) sample count.
    "average_unequal_calls": (
        "seamscope.analyze.diff",
        [("a_side = _side(a, n=a.calls if a else 0)", "a_side = _side(a, n=b.calls if b else 0)")],
    ),
    # (5) island time zeroed; regions keep their positions (the transitions stay).
    "hide_eager_islands": (
        "seamscope.model.builder",
        [("island_sum += gap", "island_sum += 0", 4),
         ("IslandEvent(start_ns=cursor - start, duration_ns=gap,",
          "IslandEvent(start_ns=cursor - start, duration_ns=0,", 2),
         (".island_after += gap", ".island_after += 0", 6)],
    ),
}


def apply_mutation(monkeypatch: pytest.MonkeyPatch, module: str, edits: list[tuple[Any, ...]]) -> None:
    """Execute the module's real source with ``edits`` applied, then patch every function and
    class it defines into the module and into every seamscope module that imported it by name."""
    mod = importlib.import_module(module)
    src = inspect.getsource(mod)
    for old, new, *times in edits:
        n = times[0] if times else 1
        assert src.count(old) == n, f"mutation anchor not found {n} time(s) in {module}: {old!r}"
        src = src.replace(old, new)
    ns: dict[str, Any] = {"__name__": module, "__package__": mod.__package__, "__file__": mod.__file__}
    exec(compile(src, str(mod.__file__), "exec"), ns)
    for name, new_obj in ns.items():
        old_obj = getattr(mod, name, None)
        if not isinstance(new_obj, (types.FunctionType, type)) or getattr(new_obj, "__module__", None) != module:
            continue
        if old_obj is None or old_obj is new_obj:
            continue
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("seamscope") and getattr(other, name, None) is old_obj:
                monkeypatch.setattr(other, name, new_obj)


def _hashes(b: Path, c: Path) -> tuple[str, str]:
    return load_raw(b)["receipt_sha256"], load_raw(c)["receipt_sha256"]


def test_unmutated_pair_is_clean(tmp_path: Path) -> None:
    b, c = pair(tmp_path)
    v = verify(load_raw(c), load_raw(b))
    assert v.ok, v.lines()


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    clean = _hashes(*pair(tmp_path / "clean"))
    module, edits = MUTATIONS[name]
    apply_mutation(monkeypatch, module, edits)
    b, c = pair(tmp_path / "mutant")
    mutant = _hashes(b, c)
    assert mutant[1] != clean[1], "the candidate receipt_sha256 did not change"
    v = verify(load_raw(c), load_raw(b))
    expected = MUTATION_CODES[name]
    assert expected in v.codes, v.lines()
    others = set(MUTATION_CODES.values()) - {expected}
    assert not v.codes & others, v.lines()
    monkeypatch.undo()
    assert _hashes(*pair(tmp_path / "restored")) == clean  # the patch did not leak


def test_mutation_helper_refuses_a_stale_anchor(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssertionError, match="anchor"):
        apply_mutation(monkeypatch, "seamscope.analyze.summary", [("no such line", "x")])
