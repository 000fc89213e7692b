"""Five mutations of the production accounting must die.

Each test rewrites one line (or three) of the real source of ``model/builder.py``,
``analyze/summary.py`` or ``analyze/diff.py``, swaps the mutated functions and classes in wherever
the real ones are referenced, builds a baseline/candidate pair through the ordinary path (fake
event source → builder → summary → receipt → comparison → files on disk), and requires that the
receipt hash changes and that ``verify`` names that mutation's own failure code — and none of the
other four, so each code means what it says.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import MUTATION_CODES, MUTATIONS, apply_mutation, apply_mutations, pair

from seamscope.analyze.verify import load_raw, verify


def _hashes(b: Path, c: Path) -> tuple[str, str]:
    return load_raw(b)["receipt_sha256"], load_raw(c)["receipt_sha256"]


def test_unmutated_pair_is_clean(tmp_path: Path) -> None:
    b, c = pair(tmp_path)
    v = verify(load_raw(c), load_raw(b))
    assert v.ok, v.lines()


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_mutation_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    clean = _hashes(*pair(tmp_path / "clean"))
    apply_mutations(monkeypatch, name)
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
