"""A shape policy's figures from raw records, without torch.

GIVEN a ledger played on the fake clock (call i is request i) and the loop's own call records,
WHEN the policy result is derived, THEN phases come from the ledger, per-length steady medians and
the expected warm cost from the loop's latencies, and padding from the element counts.
"""

from __future__ import annotations

from seamscope.analyze.shapes import CallRecord, PolicyRecords, policy_result
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play

R = lambda cid, ns: FakeStep("region", ns, cid)  # noqa: E731
C = lambda cid, ns: FakeStep("compile", ns, cid)  # noqa: E731


def _records(status: str = "ok") -> PolicyRecords:
    # requests: 8 (compiles), 8, 8, 16 (recompiles), 16
    ledger = play(FakeProgram(calls=[
        FakeCall([C("0/0", 1_000), R("0/0", 10)]), FakeCall([R("0/0", 10)]), FakeCall([R("0/0", 10)]),
        FakeCall([C("0/1", 2_000), R("0/1", 10)]), FakeCall([R("0/1", 10)]),
    ])).build()
    lat = [5_000, 100, 300, 7_000, 200]
    trace = [8, 8, 8, 16, 16]
    calls = [CallRecord(length=n, padded_length=16, latency_ns=t, numel_padded=16, numel_real=n, compiled_variants=1)
             for n, t in zip(trace, lat, strict=True)]
    return PolicyRecords(policy="pow2", kind="pow2", compile_options={"dynamic": False}, status=status, error=None,
                         trace=trace, calls=calls, ledger=ledger, frames_ok=2, frames_total=2, unique_graphs=2)


def test_phases_and_per_length_figures_follow_the_records() -> None:
    res = policy_result(_records())
    assert [c.phase for c in res.calls] == ["cold", "steady", "steady", "cold", "steady"]
    assert [c.compile_ns for c in res.calls] == [1_000, 0, 0, 2_000, 0]
    by = {s.length: s for s in res.lengths}
    # nearest-rank median of the warm calls of 8 (100, 300) is 100
    assert by[8].steady_calls == 2 and by[8].steady_median_ns == 100 and by[8].first_ns == 5_000
    assert by[16].steady_calls == 1 and by[16].steady_median_ns == 200
    assert res.total_ns == 12_600 and res.cold_ns == 12_000
    # each request at its length's steady median: (3 x 100 + 2 x 200) / 5
    assert res.steady_per_call_ns == 140 and res.one_time_ns == 12_600 - 700
    assert res.padding_fraction == (80 - 56) / 80
    assert res.compile_count == 2 and res.recompile_count == 1 and res.compile_ns == 3_000
    assert [c.length for c in res.compilations] == [8, 16]
    assert res.compile_options == {"dynamic": "False"}


def test_no_warm_estimate_unless_the_run_finished() -> None:
    res = policy_result(_records(status="failed"))
    assert res.steady_per_call_ns is None and res.one_time_ns is None and res.status == "failed"
