"""The ledger's arithmetic on fake events: totals, the self-check, bounded detail, canonical bytes."""

from __future__ import annotations

import random

import msgspec
import pytest
from conftest import MUTATION, examples
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt
from seamscope.ingest.receipt import parse_receipt
from seamscope.model.canonical import canonical_bytes, pretty_bytes
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import BreakEvent, IslandEvent, RegionEvent
from seamscope.model.selfcheck import SelfCheckError, check, self_check

step = st.one_of(
    st.builds(FakeStep, st.just("region"), st.integers(0, 10_000), st.sampled_from(["0/0", "1/0", "2/0"])),
    st.builds(FakeStep, st.just("island"), st.integers(0, 10_000)),
    st.builds(FakeStep, st.just("overhead"), st.integers(0, 500)),
    st.builds(FakeStep, st.just("compile"), st.integers(0, 100_000), st.sampled_from(["0/0", "0/1", "1/0"])),
)
calls = st.lists(st.builds(FakeCall, st.lists(step, max_size=12)), max_size=30)


@settings(max_examples=examples(150), deadline=None)
@given(calls, st.dictionaries(st.sampled_from(["0/0", "1/0"]), st.sampled_from(["print", "item"])))
def test_wall_is_regions_islands_compile_overhead(cs, breaks):
    ledger = play(FakeProgram(breaks=breaks, calls=cs)).build()
    self_check(ledger)
    for call, spec in zip(ledger.calls, cs, strict=True):
        expect_wall = sum(s.ns for s in spec.steps)
        assert call.wall_ns == expect_wall
        regions = sum(e.duration_ns for e in call.events if isinstance(e, RegionEvent))
        assert regions == sum(s.ns for s in spec.steps if s.kind == "region")
        islands = sum(e.duration_ns for e in call.events if isinstance(e, IslandEvent))
        assert islands == sum(s.ns for s in spec.steps if s.kind == "island")
        assert call.overhead_ns == sum(s.ns for s in spec.steps if s.kind == "overhead")
        has_compile = any(s.kind == "compile" for s in spec.steps)
        assert call.phase == ("cold" if has_compile else "steady")


timed_region = st.builds(
    FakeStep, st.just("region"), st.integers(0, 10_000), st.sampled_from(["0/0", "1/0", "2/0"]),
    st.integers(0, 300),
)
sites = st.dictionaries(st.sampled_from(["0/0", "1/0", "2/0", "0/1"]), st.sampled_from(["print", "item"]))



@st.composite
def repeated_calls(draw):  # type: ignore[no-untyped-def]
    """Like a real program: a few call shapes, each compiling the first time, then repeated."""
    shapes = draw(st.lists(st.lists(st.one_of(step, timed_region), max_size=12), min_size=1, max_size=4))
    picks = draw(st.lists(st.integers(0, len(shapes) - 1), max_size=40))
    seen: set[int] = set()
    out = []
    for i in picks:
        steps = shapes[i] if i not in seen else [s for s in shapes[i] if s.kind != "compile"]
        seen.add(i)
        out.append(FakeCall(list(steps)))
    return out


@settings(max_examples=examples(80), deadline=None)
@given(st.one_of(repeated_calls(), st.lists(st.builds(FakeCall, st.lists(st.one_of(step, timed_region),
                                                                         max_size=12)), max_size=30)),
       sites, sites)
def test_totals_exact_even_when_detail_is_bounded(cs, breaks, resumes):
    """Calls not kept in detail take the fast path: its totals must equal the detailed path's."""
    full = play(FakeProgram(breaks=breaks, resumes=resumes, calls=cs)).build()
    small = play(FakeProgram(breaks=breaks, resumes=resumes, calls=cs), first_calls=2, call_cap=5).build()
    self_check(small)
    assert small.totals == full.totals
    assert small.retention.retained <= 5
    assert small.retention.retained + small.retention.dropped == len(cs)
    kept = [c.index for c in small.calls]
    assert kept == sorted(kept)
    assert kept[:2] == list(range(min(2, len(cs))))


fallback = st.builds(FakeStep, st.just("fallback"), st.integers(0, 100), st.sampled_from(["0/0", "1/0"]))


@settings(max_examples=examples(80), deadline=None)
@given(st.one_of(repeated_calls(), st.lists(st.builds(FakeCall, st.lists(st.one_of(step, timed_region, fallback),
                                                                         max_size=12),
                                                      error=st.sampled_from([None, "RuntimeError: boom"])),
                                            max_size=30)),
       sites, sites, st.integers(0, 7))
def test_retained_calls_made_at_build_equal_those_made_at_once(cs, breaks, resumes, build_every):
    """A retained call's events are made in build() unless something watches every call: the
    ledger must not tell which (nor depend on builds made along the way)."""
    seen: list[int] = []
    at_once = play(FakeProgram(breaks=breaks, resumes=resumes, calls=cs), first_calls=3, call_cap=6,
                   observe=lambda call: seen.append(call.index)).build()
    late = play(FakeProgram(breaks=breaks, resumes=resumes, calls=cs), first_calls=3, call_cap=6,
                build_every=build_every).build()
    assert seen == list(range(len(cs)))
    assert late == at_once
    self_check(late)


def test_long_run_memory_is_bounded():
    n = 20_000 if MUTATION else 100_000
    cs = [FakeCall([FakeStep("region", 5, "0/0"), FakeStep("island", 3)]) for _ in range(n)]
    b = play(FakeProgram(calls=cs), first_calls=16, call_cap=64)
    ledger = b.build()
    assert ledger.totals.calls == n
    assert ledger.retention.retained <= 64
    assert ledger.totals.regions[0].runs == n
    assert ledger.totals.phases[1].wall_ns == n * 8
    # the sample spans the run, not just its start
    assert ledger.calls[-1].index > 0.9 * n


def test_break_crossing_and_island_after():
    steady = [FakeStep("region", 10, "0/0"), FakeStep("island", 7), FakeStep("region", 4, "1/0")]
    prog = FakeProgram(
        breaks={"0/0": "print"},
        calls=[FakeCall([FakeStep("compile", 100, "0/0"), *steady])] + [FakeCall(steady)] * 2,
    )
    led = play(prog).build()
    (site,) = led.totals.sites
    assert site.crossings == 3 and site.calls_crossing == 3 and site.island_after_ns == 21
    ev = led.calls[1].events
    kinds = [type(e).__name__ for e in ev]
    assert kinds == ["RegionEvent", "BreakEvent", "IslandEvent", "RegionEvent"]
    assert isinstance(ev[1], BreakEvent) and ev[2].after_site_id == ev[1].site_id


def test_self_check_catches_hidden_islands():
    led = play(FakeProgram(calls=[FakeCall([FakeStep("region", 10), FakeStep("island", 5)])])).build()
    call = led.calls[0]
    hidden = [
        msgspec.structs.replace(e, duration_ns=0) if isinstance(e, IslandEvent) else e for e in call.events
    ]
    bad = msgspec.structs.replace(led, calls=[msgspec.structs.replace(call, events=hidden)])
    with pytest.raises(SelfCheckError, match="wall"):
        self_check(bad)
    assert check(led) == []


@settings(max_examples=examples(40), deadline=None)
@given(calls, st.randoms())
def test_canonical_bytes_ignore_dict_insertion_order(cs, rnd: random.Random):
    receipt = make_receipt(play(FakeProgram(calls=cs)).build())
    raw = msgspec.to_builtins(receipt)

    def shuffle(o):
        if isinstance(o, dict):
            items = list(o.items())
            rnd.shuffle(items)
            return {k: shuffle(v) for k, v in items}
        if isinstance(o, list):
            return [shuffle(v) for v in o]
        return o

    assert canonical_bytes(shuffle(raw)) == canonical_bytes(receipt)


@settings(max_examples=examples(40), deadline=None)
@given(calls)
def test_receipt_round_trip(cs):
    receipt = make_receipt(play(FakeProgram(breaks={"0/0": "x"}, calls=cs)).build())
    back = parse_receipt(pretty_bytes(receipt))
    assert back == receipt
    assert pretty_bytes(back) == pretty_bytes(receipt)


def test_hashes_structure_ignores_timing_receipt_does_not():
    def prog(ns):
        return FakeProgram(calls=[FakeCall([FakeStep("region", ns, "0/0"), FakeStep("island", ns)])])

    a, b = make_receipt(play(prog(10)).build()), make_receipt(play(prog(99)).build())
    assert a.structure_sha256 == b.structure_sha256
    assert a.receipt_sha256 != b.receipt_sha256
    c = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 10, "1/0")])])).build())
    assert c.structure_sha256 != a.structure_sha256


def test_canonical_floats_and_layout():
    """Negative zero is written as 0.0, infinities pass through, and the pretty form (receipt.json)
    indents by one space: the bytes are a format, so they are pinned."""
    import math

    from seamscope.model.canonical import round_float

    z = round_float(-0.0)
    assert z == 0.0 and math.copysign(1.0, z) == 1.0
    assert canonical_bytes([-0.0, 0.0]) == b"[0.0,0.0]"
    assert round_float(math.inf) == math.inf and round_float(-math.inf) == -math.inf
    assert math.isnan(round_float(math.nan))
    assert round_float(1.0) == 1.0 and round_float(-2.5) == -2.5
    assert pretty_bytes({"b": [1], "a": 0.5}) == b'{\n "a": 0.5,\n "b": [\n  1\n ]\n}\n'


def test_receipt_hash_ignores_the_hash_field_itself():
    from seamscope.model.hashing import receipt_sha256

    receipt = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 5)])])).build())
    stamped = msgspec.structs.replace(receipt, receipt_sha256="f" * 64)
    assert receipt_sha256(stamped) == receipt_sha256(receipt) == receipt.receipt_sha256


def _reference_bytes(obj) -> bytes:
    """The canonical bytes one value at a time in Python: what :func:`canonical_bytes` must equal."""
    from seamscope.model.canonical import to_builtins

    return msgspec.json.encode(to_builtins(obj), order="sorted")


_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([-0.0, 1e16, 5e-7, 3.0, 1234567.5]))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), _floats, st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(-5, 5)), inner, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=examples(300), deadline=None)
@given(_json)
def test_canonical_bytes_equal_the_python_walk_on_any_json_value(value):
    """Floats rounded while decoding (C) give the bytes of rounding every value in Python: every
    float, its sign of zero, infinities and NaN (written null), big integers, integer keys."""
    assert canonical_bytes(value) == _reference_bytes(value)


@settings(max_examples=examples(40), deadline=None)
@given(calls)
def test_canonical_bytes_equal_the_python_walk_on_receipts(cs):
    receipt = make_receipt(play(FakeProgram(breaks={"0/0": "x"}, calls=cs)).build())
    assert canonical_bytes(receipt) == _reference_bytes(receipt)


def test_canonical_bytes_equal_the_python_walk_on_the_golden_receipts():
    import glob
    import os

    from seamscope.model.guard_table import compact

    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "golden", "*.receipt.json")))
    assert files
    for path in files:
        with open(path, "rb") as f:
            receipt = parse_receipt(f.read())
        assert canonical_bytes(receipt) == _reference_bytes(receipt)
        assert canonical_bytes(compact(receipt)) == _reference_bytes(compact(receipt))


@settings(max_examples=examples(300), deadline=None)
@given(_json, st.integers(0, 5))
def test_streamed_hash_equals_the_hash_of_the_canonical_bytes(value, depth):
    """The hashes are taken piece by piece (``sha256_canonical``): the same as hashing the whole
    canonical text, at any depth, floats rounded or (``rounded``) rounded already."""
    import hashlib

    from seamscope.model.canonical import canonical_value, sha256_canonical

    want = hashlib.sha256(_reference_bytes(value)).hexdigest()
    assert sha256_canonical(value, depth) == want
    assert sha256_canonical(canonical_value(value), depth, rounded=True) == want


def _refs_one_by_one(ids: list[int]) -> list:
    """Runs of consecutive indices taken greedily, one index at a time: what encode_refs must give."""
    out: list = []
    i = 0
    while i < len(ids):
        j = i + 1
        step = ids[j] - ids[i] if j < len(ids) else 0
        if step in (1, -1):
            while j + 1 < len(ids) and ids[j + 1] - ids[j] == step:
                j += 1
            out.append([ids[i], ids[j]])
            i = j + 1
        else:
            out.append(ids[i])
            i += 1
    return out


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.integers(0, 6), max_size=30))
def test_guard_refs_equal_the_one_by_one_encoding(ids):
    from seamscope.model.guard_table import decode_refs, encode_refs

    assert encode_refs(ids) == _refs_one_by_one(ids)
    assert decode_refs(encode_refs(ids), 7, "x") == ids


@settings(max_examples=examples(40), deadline=None)
@given(calls)
def test_receipt_hash_equals_the_hash_of_the_expanded_bytes(cs):
    """receipt_sha256 is taken over the compact form expanded in plain data: the hash of the
    whole expanded receipt's canonical bytes, guards and all."""
    import hashlib

    from seamscope.model.hashing import receipt_sha256

    receipt = make_receipt(play(FakeProgram(breaks={"0/0": "x"}, calls=cs)).build())
    unhashed = msgspec.structs.replace(receipt, receipt_sha256="")
    assert receipt_sha256(receipt) == hashlib.sha256(_reference_bytes(unhashed)).hexdigest()


def test_receipt_hashes_of_real_logs_equal_the_hash_of_the_whole_bytes():
    """The same on imported logs, whose recompiles carry failed guards (the compact path)."""
    import glob
    import hashlib
    import os

    from seamscope.ingest.torch_trace import import_torch_trace
    from seamscope.model.hashing import structure_view

    logs = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "inputs", "torch_trace", "*", "*.log")))
    with_guards = 0
    for path in logs:
        receipt = make_receipt(import_torch_trace(path).ledger)
        with_guards += any(c.failed_guards for c in receipt.ledger.compilations)
        unhashed = msgspec.structs.replace(receipt, receipt_sha256="")
        assert receipt.receipt_sha256 == hashlib.sha256(_reference_bytes(unhashed)).hexdigest()
        view = structure_view(receipt.ledger, receipt.summary)
        assert receipt.structure_sha256 == hashlib.sha256(_reference_bytes(view)).hexdigest()
    assert with_guards >= 2


_guard_texts = st.sampled_from(["0/0: x", "0/1: tensor 'x' size mismatch", 'quote " and \\ slash',
                                "é\u2028\x00\x1b[2J", "🙂", "two\nlines", "0/2: L['x'] == 3"])


def _receipt_with_guards(guard_lists: list[list[str]]):
    """A receipt whose compilations 0/0, 0/1, ... fail the given guards (its recompile summaries
    the same, as a real log's), made and hashed as ``seamscope import`` does."""
    ledger = play(FakeProgram(calls=[FakeCall([FakeStep("compile", 10, "0/0")])])).build()
    (first,) = ledger.compilations
    comps = [msgspec.structs.replace(first, compile_id=f"0/{k}", failed_guards=g) for k, g in enumerate(guard_lists)]
    return make_receipt(msgspec.structs.replace(ledger, compilations=comps))


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(_guard_texts, max_size=12), min_size=1, max_size=8))
def test_expanded_bytes_fed_from_the_table_equal_the_expanded_receipts(guard_lists):
    """receipt_sha256 feeds the expanded bytes from the compact form's table (runs as slices of
    the texts encoded in a row, forwards or backwards; shared references made once): byte for
    byte the canonical bytes of the expanded receipt, and the receipt written from the data made
    for the hash is the one written from scratch."""
    import hashlib

    from seamscope.model import guard_table, hashing
    from seamscope.model.canonical import canonical_value
    from seamscope.render.receipt_json import ReceiptJsonRenderer

    receipt = _receipt_with_guards(guard_lists)
    unhashed = msgspec.structs.replace(receipt, receipt_sha256="")
    want = _reference_bytes(unhashed)
    assert receipt.receipt_sha256 == hashlib.sha256(want).hexdigest()
    packed = guard_table.compact(unhashed)
    assert packed.guard_table is not None or not any(guard_lists)
    if packed.guard_table is not None:
        fed: list[bytes] = []
        assert guard_table.feed_expanded(fed.append, canonical_value(packed), packed.guard_table)
        assert b"".join(fed) == want
    assert hashing.receipt_sha256(receipt) == receipt.receipt_sha256  # and leaves it for the writer
    written = ReceiptJsonRenderer().render(receipt)
    assert hashing._last_hashed is None  # taken once (or, without guards, never kept)
    guard_table._LAST.clear()
    assert written == ReceiptJsonRenderer().render(receipt) == pretty_bytes(guard_table.compact(receipt))


def test_expanded_bytes_fed_keep_guards_the_plain_data_already_holds():
    """Plain data whose items hold failed guards besides the table's (as ``expand`` reads a
    hand-made table): fed as ``expand_builtins`` makes them, the item's own first."""
    from seamscope.model import guard_table
    from seamscope.model.canonical import canonical_bytes, canonical_value

    receipt = _receipt_with_guards([[], ["a", "b"], ["c", "b", "a"], ["a"]])
    packed = guard_table.compact(receipt)
    raw = canonical_value(packed)
    raw["ledger"]["compilations"][0]["failed_guards"] = ["own", "b"]
    raw["summary"]["recompiles"][2]["failed_guards"] = ["x"]
    fed: list[bytes] = []
    assert guard_table.feed_expanded(fed.append, raw, packed.guard_table)
    assert raw["guard_table"] is not None  # left as it is
    assert b"".join(fed) == canonical_bytes(guard_table.expand_builtins(raw))
    raw["ledger"]["compilations"].pop()  # a table that does not fit: nothing fed
    assert not guard_table.feed_expanded(fed.append, raw, packed.guard_table)


def test_a_receipt_changed_after_hashing_is_written_from_its_own_data():
    from seamscope.model import guard_table, hashing
    from seamscope.render.receipt_json import ReceiptJsonRenderer

    receipt = _receipt_with_guards([["a"], ["b", "a"]])
    other = msgspec.structs.replace(receipt, findings=None)
    assert hashing.compact_canonical_bytes(other) is None
    guard_table._LAST.clear()
    assert ReceiptJsonRenderer().render(other) == pretty_bytes(guard_table.compact(other))


def test_a_flat_dict_is_hashed_as_its_sorted_encoding_and_only_a_flat_one():
    """sha256_canonical encodes a dict of strings, integers, None and lists of those at once (each
    compilation of the structure hash); a float, a non-string key or nesting takes the walk."""
    import hashlib

    from seamscope.model.canonical import _flat, sha256_canonical

    flat = {"b": [1, "x", None, True], "a": "é", "c": 1 << 70, "d": ()}
    assert _flat(flat)
    for other in ({"a": 1.5}, {1: "a"}, {"a": [[1]]}, {"a": {"b": 1}}, {"a": [0.1]}):
        assert not _flat(other)
    for value in (flat, {"a": 1.0000001, "b": [1.23456789]}, {2: "x", 10: "y"}, {"n": {"m": [0.5, {"k": 1}]}}):
        assert sha256_canonical(value) == hashlib.sha256(_reference_bytes(value)).hexdigest()
