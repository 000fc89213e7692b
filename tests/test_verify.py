"""The independent oracle: clean receipts pass, every kind of inconsistency is named, bad input
exits 2, and the oracle does not import the accounting it checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import examples
from fakes import baseline_program, build, candidate_program, pair
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt, rehash
from seamscope.analyze.verify import CODES, load_raw, read_raw, verify
from seamscope.analyze.verify_hashes import canonical
from seamscope.model.canonical import canonical_bytes
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.hashing import structure_sha256
from seamscope.model.receipt import Receipt
from seamscope.render.receipt_json import write_receipt_files


def edit(path: Path, fn: Any, *, rehash_it: bool = True) -> Path:
    """Hand-edit a receipt file (optionally re-hashing it as a careful forger would)."""
    raw = json.loads(path.read_text())
    fn(raw)
    if rehash_it:
        r = msgspec.convert(raw, type=Receipt)
        r = msgspec.structs.replace(r, structure_sha256=structure_sha256(r.ledger, r.summary))
        raw = msgspec.json.decode(canonical_bytes(rehash(r)))
    out = path.with_name("edited.json")
    out.write_bytes(canonical_bytes(raw))
    return out


# --- clean receipts pass ---------------------------------------------------------------------------


def test_clean_pair_verifies(tmp_path: Path) -> None:
    b, c = pair(tmp_path)
    v = verify(load_raw(c), load_raw(b))
    assert v.ok, v.lines()
    assert v.checks > 100


def test_clean_receipt_with_dropped_detail_verifies(tmp_path: Path) -> None:
    r = build(baseline_program(300), first_calls=8, call_cap=16)
    assert r.ledger.retention.dropped > 0
    v = verify(load_raw(write_receipt_files(r, tmp_path)))
    assert v.ok, v.lines()
    assert any("dropped" in n for n in v.notes)


@settings(max_examples=examples(40), deadline=None)
@given(
    walls=st.lists(
        st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**4), st.booleans()),
        min_size=1, max_size=12,
    )
)
def test_random_programs_verify(walls: list[tuple[int, int, int, bool]]) -> None:
    calls = []
    for i, (r, isl, ov, comp) in enumerate(walls):
        steps = [FakeStep("compile", r // 3 + 1, f"0/{i}")] if (comp or i == 0) else []
        steps += [FakeStep("compile", 5, "1/0")] if i == 0 else []
        steps += [FakeStep("region", r, "0/0"), FakeStep("island", isl), FakeStep("overhead", ov),
                  FakeStep("region", r // 2, "1/0")]
        calls.append(FakeCall(steps))
    rec = build(FakeProgram(breaks={"0/0": "s"}, calls=calls))
    raw = read_raw(msgspec.json.encode(msgspec.json.decode(canonical_bytes(rec))))
    v = verify(raw)
    assert v.ok, v.lines()


@settings(max_examples=examples(200), deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=5), ch, max_size=4),
    max_leaves=20,
))
def test_canonical_bytes_are_reproduced_independently(obj: Any) -> None:
    assert canonical(obj) == canonical_bytes(obj)


# --- each inconsistency is named -------------------------------------------------------------------


def _codes(path: Path, against: Path | None = None) -> set[str]:
    return verify(load_raw(path), load_raw(against) if against else None).codes


def test_hand_edit_without_rehash_is_hash_mismatch(tmp_path: Path) -> None:
    b, _ = pair(tmp_path)

    def bump(raw: dict[str, Any]) -> None:
        raw["ledger"]["run"]["warnings"] = ["edited"]

    assert _codes(edit(b, bump, rehash_it=False)) == {"HASH_MISMATCH"}


@pytest.mark.parametrize(
    "where, code",
    [
        (lambda r: r["summary"].__setitem__("compile_count", 7), "COMPILE_COUNT_MISMATCH"),
        (lambda r: r["summary"].__setitem__("recompile_count", 0), "RECOMPILE_COUNT_MISMATCH"),
        (lambda r: r["summary"].__setitem__("graph_count", 9), "GRAPH_COUNT_MISMATCH"),
        (lambda r: r["summary"].__setitem__("fallback_count", 1), "FALLBACK_COUNT_MISMATCH"),
        (lambda r: r["summary"].__setitem__("call_count", 19), "CALL_COUNT_MISMATCH"),
        (lambda r: r["summary"].__setitem__("compile_ns", 1), "COMPILE_TIME_MISMATCH"),
        (lambda r: r["summary"]["phases"][1].__setitem__("median_ns", 1), "QUANTILE_MISMATCH"),
        (lambda r: r["summary"]["phases"][1].__setitem__("p90_ns", 1), "QUANTILE_MISMATCH"),
        (lambda r: r["ledger"]["calls"][3].__setitem__("wall_ns", 1), "WALL_IDENTITY_BROKEN"),
        (lambda r: r["ledger"]["totals"]["phases"][1].__setitem__("region_ns", 0), "WALL_IDENTITY_BROKEN"),
        (lambda r: r["ledger"]["totals"]["sites"][0].__setitem__("crossings", 2), "BREAK_SITE_MISMATCH"),
        (lambda r: r["ledger"]["totals"]["regions"][0].__setitem__("runs", 2), "REGION_TOTAL_MISMATCH"),
        (lambda r: r["ledger"]["calls"][3].__setitem__("outcome", "recompile"), "CACHE_HIT_COUNTED_AS_COMPILE"),
        (lambda r: r["ledger"]["calls"][0].__setitem__("phase", "steady"), "PHASE_LABEL_MISMATCH"),
        (lambda r: r["ledger"]["calls"][0]["events"][0].__setitem__("compile_id", "9/0"), "UNKNOWN_REFERENCE"),
        (lambda r: r["ledger"]["calls"][3]["events"][0].__setitem__("start_ns", 10**9), "EVENT_ORDER"),
        (lambda r: r["decision"].__setitem__("call_families", {"warm": 3}), "FAMILY_COUNT_MISMATCH"),
    ],
)
def test_rehashed_forgeries_are_named(tmp_path: Path, where: Any, code: str) -> None:
    b, _ = pair(tmp_path)
    codes = _codes(edit(b, where))
    assert code in codes, codes
    assert "HASH_MISMATCH" not in codes  # re-hashed: only the numbers give it away


def test_phase_total_and_structure_hash(tmp_path: Path) -> None:
    b, _ = pair(tmp_path)

    def shift(raw: dict[str, Any]) -> None:  # wall moved between parts: identity kept
        p = raw["ledger"]["totals"]["phases"][1]
        p["region_ns"] += 10
        p["island_ns"] -= 10

    assert _codes(edit(b, shift)) == {"PHASE_TOTAL_MISMATCH"}

    def relabel(raw: dict[str, Any]) -> None:
        raw["ledger"]["compilations"][0]["frame_name"] = "other"

    codes = _codes(edit(b, relabel, rehash_it=False))
    assert codes == {"HASH_MISMATCH"}
    assert len(verify(load_raw(edit(b, relabel, rehash_it=False))).failures["HASH_MISMATCH"]) == 2


def test_comparison_checked_against_baseline(tmp_path: Path) -> None:
    b, c = pair(tmp_path)
    other = write_receipt_files(build(candidate_program(20)), tmp_path / "other")

    def shift(raw: dict[str, Any]) -> None:
        raw["comparison"]["phases"][1]["before"]["median_ns"] += 1

    forged = edit(c, shift)
    codes = _codes(forged, b)
    assert "COMPARISON_MISMATCH" in codes
    assert _codes(c, Path(other)) >= {"COMPARISON_LINK_BROKEN"}


def test_every_code_has_a_meaning() -> None:
    assert all(CODES.values())


# --- the oracle stands alone ----------------------------------------------------------------------


def test_verify_does_not_import_the_accounting() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import seamscope.analyze.verify, sys; print(sorted(sys.modules))"],
        capture_output=True, text=True, check=True,
    ).stdout
    loaded = set(eval(out))  # a printed list of module names
    forbidden = {
        "seamscope.model.builder", "seamscope.model.canonical", "seamscope.model.hashing",
        "seamscope.model.selfcheck", "seamscope.model.fake", "seamscope.analyze.summary",
        "seamscope.analyze.receipt", "seamscope.analyze.stats", "seamscope.analyze.diff", "torch",
    }
    assert "seamscope.analyze.verify" in loaded
    assert not loaded & forbidden, loaded & forbidden


# --- bad input: one line, exit 2 or 1, no traceback ------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("seamscope")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120)


def test_cli_verify_exit_codes(tmp_path: Path) -> None:
    b, c = pair(tmp_path)
    ok = _cli("verify", str(c), "--against", str(b))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok:" in ok.stdout
    forged = edit(b, lambda r: r["summary"].__setitem__("compile_count", 7))
    bad = _cli("verify", str(forged))
    assert bad.returncode == 1
    assert "COMPILE_COUNT_MISMATCH" in bad.stdout and "Traceback" not in bad.stderr
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(b.read_bytes()[:500])
    schema = tmp_path / "schema.json"
    raw = json.loads(b.read_text())
    raw["summary"]["compile_count"] = "three"
    schema.write_text(json.dumps(raw))
    future = tmp_path / "future.json"
    raw = json.loads(b.read_text())
    raw["schema_version"] = 99
    future.write_text(json.dumps(raw))
    for p in (truncated, schema, future, tmp_path / "missing.json"):
        r = _cli("verify", str(p))
        assert r.returncode == 2, (p, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    js = _cli("verify", str(forged), "--json")
    assert js.returncode == 1 and json.loads(js.stdout)["ok"] is False


def test_fallback_calls_and_outside_regions_verify(tmp_path: Path) -> None:
    calls = [
        FakeCall([FakeStep("compile", 40, "0/0"), FakeStep("region", 10, "0/0")]),
        FakeCall([FakeStep("fallback", 0, "0/1"), FakeStep("island", 30)]),
        FakeCall([FakeStep("island", 25)]),
    ]
    b = play(FakeProgram(calls=calls))
    b.region("0/0", 0, 10, 35)  # outside any call: a compiled backward, say
    b.outside_region("0/0", "backward", 7, attributed_call=0)
    assert b.compilation("0/0") is not None and b.compilation("9/9") is None
    led = b.build()
    assert [c.phase for c in led.calls] == ["cold", "fallback", "fallback"]
    assert [c.outcome for c in led.calls] == ["compile", "fallback", "hit"]
    assert (led.totals.outside_runs, led.totals.outside_ns) == (2, 32)
    assert [(o.kind, o.duration_ns, o.attributed_call) for o in led.outside] == [
        ("forward", 25, None), ("backward", 7, 0)]
    r = led.totals.regions[0]
    assert (r.runs, r.total_ns, r.outside_runs, r.outside_ns) == (1, 10, 2, 32)
    v = verify(load_raw(write_receipt_files(make_receipt(led), tmp_path)))
    assert v.ok, v.lines()

    def relabel(raw: dict[str, Any]) -> None:
        raw["ledger"]["calls"][1]["phase"] = "steady"
        raw["ledger"]["totals"]["phases"][1]["calls"] += 1
        raw["ledger"]["totals"]["phases"][2]["calls"] -= 1

    codes = _codes(edit(tmp_path / "receipt.json", relabel))
    assert "PHASE_LABEL_MISMATCH" in codes


def test_a_receipt_written_before_a_field_was_added_still_verifies(tmp_path: Path) -> None:
    """An older seamscope wrote every field it knew and hashed them; a field the schema added
    since (with its default) is not in its file, and must not make its hash mismatch."""
    from seamscope.analyze.verify_hashes import receipt_hash

    raw = json.loads(msgspec.json.encode(build(baseline_program())))
    del raw["ledger"]["environment"]["packages"]  # as written before receipts recorded library versions
    del raw["ledger"]["compilations"][0]["guard_latency_ns"]
    raw["receipt_sha256"] = receipt_hash(raw)  # the older writer's hash, over the fields it wrote
    older = tmp_path / "older.json"
    older.write_text(json.dumps(raw))
    assert verify(load_raw(older)).ok
    # ...and the hash still binds what is there: an edit is caught
    raw["ledger"]["environment"]["python_version"] = "3.99"
    older.write_text(json.dumps(raw))
    assert "HASH_MISMATCH" in verify(load_raw(older)).codes
