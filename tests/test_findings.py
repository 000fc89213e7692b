"""Findings from ledgers built without torch: ranking by measured cost, the figures, churn patterns
named from real PyTorch 2.13 guard texts, and bad input."""

from __future__ import annotations

import io

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from seamscope.analyze.findings import analyze_findings, guard_pattern
from seamscope.analyze.receipt import make_receipt
from seamscope.ingest.receipt import parse_receipt
from seamscope.model.builder import LedgerBuilder
from seamscope.model.canonical import canonical_bytes, pretty_bytes
from seamscope.model.fake import (
    FakeCall,
    FakeClock,
    FakeProgram,
    FakeStep,
    fake_environment,
    fake_site,
    play,
)
from seamscope.model.ledger import (
    BreakEvent,
    BreakSite,
    Call,
    Compilation,
    Frame,
    IslandEvent,
    RegionEvent,
    RunInfo,
)
from seamscope.render.terminal import TerminalRenderer

R = lambda cid, ns: FakeStep("region", ns, cid)  # noqa: E731
ISL = lambda ns: FakeStep("island", ns)  # noqa: E731
C = lambda cid, ns: FakeStep("compile", ns, cid)  # noqa: E731


def _cheap_vs_expensive(steady: int = 20, rare_every: int = 10):
    """GIVEN a site crossed in every call with a 1 µs island, and one crossed every 10th call
    with a 1 ms island."""
    calls = [FakeCall([C("0/0", 10), R("0/0", 100), ISL(1_000), C("1/0", 10), R("1/0", 100),
                       C("2/0", 10), R("2/0", 100), ISL(1_000_000), C("3/0", 10), R("3/0", 100)])]
    for i in range(steady):
        steps = [R("0/0", 100), ISL(1_000), R("1/0", 100)]
        if i % rare_every == 0:
            steps += [R("2/0", 100), ISL(1_000_000), R("3/0", 100)]
        calls.append(FakeCall(steps))
    prog = FakeProgram(breaks={"0/0": "cheap", "2/0": "rare"}, calls=calls)
    return play(prog).build()


def test_rare_expensive_break_ranks_before_frequent_cheap_one():
    led = _cheap_vs_expensive()
    sec = analyze_findings(led)
    breaks = [f for f in sec.findings if f.axis == "fragmentation"]
    assert [f.site_id for f in breaks] == [fake_site("rare").site_id, fake_site("cheap").site_id]
    rare, cheap = breaks
    assert rare.rank == 1 and cheap.rank == 2
    # THEN the count favours the cheap one, the cost the rare one
    assert cheap.cost.crossings == 20 and rare.cost.crossings == 2
    assert rare.cost.estimated_ns == 2_000_000 > cheap.cost.estimated_ns == 20_000


def test_break_cost_figures_are_exact_on_a_fake_clock():
    led = _cheap_vs_expensive()
    sec = analyze_findings(led)
    cheap = next(f for f in sec.findings if f.site_id == fake_site("cheap").site_id)
    rare = next(f for f in sec.findings if f.site_id == fake_site("rare").site_id)
    c = cheap.cost
    assert c.basis == "steady" and c.calls == 20 and c.calls_crossing == 20
    assert c.crossings_per_call == 1.0 and c.stable and c.crossings_min == c.crossings_max == 1
    assert c.island_median_ns == c.island_p90_ns == 1_000 and c.island_ns == 20_000
    steady_wall = 18 * 1_200 + 2 * (1_200 + 1_000_200)
    assert c.share == pytest.approx(20_000 / steady_wall, rel=1e-5)
    assert c.all_calls_crossings == 21 and c.all_calls_island_ns == 21_000
    r = rare.cost
    # The rare site's frame ran only in 2 steady calls: frequency is over those, not diluted.
    assert r.calls == 2 and r.crossings_per_call == 1.0 and r.stable
    assert r.island_median_ns == 1_000_000
    assert "1× per call" in cheap.sentence and "stable over 20 steady calls" in cheap.sentence
    assert cheap.cause.break_class == "host_side_effect" or cheap.cause.gb_code == "GB0059"


def test_unstable_crossing_count_is_reported():
    """GIVEN steady calls whose events cross the site once or twice (built by hand: the figures
    read only the events)."""
    base = _cheap_vs_expensive()
    sid = fake_site("cheap").site_id

    def call(i: int, n: int) -> Call:
        ev: list = []
        t = 0
        for _ in range(n):
            ev += [RegionEvent(compile_id="0/0", graph_index=0, start_ns=t, duration_ns=100),
                   BreakEvent(site_id=sid, at_ns=t + 100),
                   IslandEvent(start_ns=t + 100, duration_ns=500, after_site_id=sid),
                   RegionEvent(compile_id="1/0", graph_index=0, start_ns=t + 600, duration_ns=100)]
            t += 700
        return Call(index=i, phase="steady", outcome="hit", wall_ns=t, overhead_ns=0, events=ev)

    calls = [call(i, 1 + i % 2) for i in range(6)]
    led = msgspec.structs.replace(base, calls=calls)
    cost = next(f for f in analyze_findings(led).findings if f.site_id == sid).cost
    assert not cost.stable and (cost.crossings_min, cost.crossings_max) == (1, 2)
    assert cost.crossings == 9 and cost.crossings_per_call == 1.5 and cost.island_ns == 4500
    assert cost.share == pytest.approx(4500 / (9 * 700), rel=1e-5)


def test_seam_traffic_is_the_region_before_the_crossing():
    clock = FakeClock()
    b = LedgerBuilder(RunInfo(source="fake"), fake_environment(), clock=clock)
    site = fake_site("seam")
    b.set_break_site(site)
    b.set_compilation(Compilation(compile_id="0/0", frame_name="f", file="m.py", line=1, status="ok",
                                  graph_count=1, own_break_site_id=site.site_id,
                                  break_site_ids=[site.site_id]))
    b.set_compilation(Compilation(compile_id="1/0", frame_name="f", file="m.py", line=1, status="ok", graph_count=1))
    for _ in range(3):
        b.begin_call(clock())
        t0 = clock()
        b.region("0/0", 0, t0, clock.advance(100), out_tensors=3, out_bytes=4096)
        clock.advance(700)
        t1 = clock()
        b.region("1/0", 0, t1, clock.advance(100), out_tensors=1, out_bytes=8)
        b.end_call(clock())
    f = analyze_findings(b.build()).findings[0]
    assert f.cost.out_tensors_median == 3 and f.cost.out_bytes_median == 4096
    assert f.cost.island_median_ns == 700
    assert "3 tensors (4 KB) cross the seam" in f.sentence


def test_library_site_is_labelled_and_the_user_frame_named():
    site = BreakSite(
        site_id="Bdeadbeef",
        file="site-packages/transformers/models/x/modeling_x.py",
        line=271,
        function="forward",
        gb_code="GB0124",
        gb_type="Unsupported Tensor.item() call with capture_scalar_outputs=False",
        reason="Unsupported Tensor.item() call with capture_scalar_outputs=False\n  Explanation: x",
        user_stack=[
            Frame(file="tests/test_x.py", line=9, function="run_model"),
            Frame(file="site-packages/torch/nn/modules/module.py", line=1789, function="_call_impl"),
            Frame(file="site-packages/transformers/models/x/modeling_x.py", line=271, function="forward"),
        ],
        compile_ids=["0/0"],
    )
    led = msgspec.structs.replace(_cheap_vs_expensive(), break_sites=[site])
    f = analyze_findings(led).findings[0]
    assert f.where.package == "transformers"
    assert f.where.user_frame == Frame(file="tests/test_x.py", line=9, function="run_model")
    assert f.sentence.startswith("break Bdeadbeef at transformers/models/x/modeling_x.py:271 (Tensor.item(), ")
    assert "; in transformers, reached from tests/test_x.py:9 (run_model))" in f.sentence
    assert f.cause.host_read and f.cause.break_class == "data_dependent_control_flow"


def test_imported_ledger_ranks_by_what_is_known_and_says_what_is_missing():
    led = _cheap_vs_expensive()
    cheap, rare = fake_site("cheap"), fake_site("rare")
    sites = [msgspec.structs.replace(cheap, compile_ids=["0/0"]),
             msgspec.structs.replace(rare, compile_ids=["2/0", "5/0", "7/0"])]
    led = msgspec.structs.replace(
        led, break_sites=sites, calls=[],
        run=RunInfo(source="torch_trace", has_runtime=False, absent=["which regions ran in which call"]),
    )
    sec = analyze_findings(led)
    assert [f.site_id for f in sec.findings if f.axis == "fragmentation"] == [rare.site_id, cheap.site_id]
    assert all(f.cost is None for f in sec.findings if f.axis == "fragmentation")
    assert any("no runtime data" in m for m in sec.missing)
    assert "which regions ran in which call" in sec.missing
    assert all("cost is unknown" in f.sentence for f in sec.findings if f.axis == "fragmentation")
    assert sec.fragmentation.basis == "none"


def test_empty_ledger_gives_no_findings_and_says_why():
    led = play(FakeProgram()).build()
    sec = analyze_findings(led)
    assert sec.findings == [] and any("no compiled calls" in m for m in sec.missing)
    assert sec.churn.compiles == 0 and sec.fragmentation.calls == 0


def test_unknown_gb_code_is_other_with_its_text_never_dropped():
    odd = msgspec.structs.replace(
        fake_site("odd"), gb_code="GB9999", gb_type=None,
        reason="Some future reason\n  Explanation: something torch 2.20 says\n  Hint: do a thing",
    )
    led = msgspec.structs.replace(_cheap_vs_expensive(), break_sites=[odd])
    f = analyze_findings(led).findings[0]
    assert f.cause.break_class == "other" and f.cause.gb_code == "GB9999"
    assert f.cause.explanation == "something torch 2.20 says"
    assert f.cause.label == "Some future reason"
    assert f.remedies[0].torch_hints == ["do a thing"]


def test_analysis_does_not_edit_the_ledger():
    led = _cheap_vs_expensive()
    before = canonical_bytes(led)
    analyze_findings(led)
    assert canonical_bytes(led) == before


# --- churn, from guard texts PyTorch 2.13 wrote (recompile_reasons artifacts) --------------------

REAL_GUARDS = {
    "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8": ("shape", "x[0]", "size 4"),
    "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1": ("stride", "x[0]", None),
    "0/0: tensor 'x' dtype mismatch. expected Float, actual Double": ("dtype_device", "x.dtype", None),
    '0/0: f == True                                                # def flag(x, f): return x.sin() if f else x.cos()  # mp/rec.py:19 in flag\nUser stack trace:\n  File "/tmp/rec.py", line 19, in flag': (
        "flag",
        "f",
        "== True",
    ),
    "0/0: m is None                                                # def none(x, m): ...  # mp/rec.py:21 in none": (
        "flag",
        "m",
        "is None",
    ),
    "1/0: ___stack0 == 1.1819342374801636                          # if y.sum().item()>0: return y.cos()  # mp/rec.py:28 in torch_dynamo_resume_in_val_at_28": (
        "value",
        "___stack0",
        "1.1819342374801636",
    ),
    "0/0: s == 1.5                                                 # def sc(x, s): return x*s  # mp/rec.py:31 in sc": (
        "value",
        "s",
        "1.5",
    ),
    # a tensor on the first call, None now (an optional argument left out), or a float now
    "0/0: expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>": ("flag", "mask", "is not None"),
    "0/0: expected type of 'mask' to be a tensor type, ' but found <class 'float'>": ("type", "mask", "Tensor"),
    # torch 2.14.1's text
    "0/0: expected type of 'mask' to be <class 'torch.Tensor'>, but found <class 'NoneType'>": ("flag", "mask",
                                                                                              "is not None"),
}


@pytest.mark.parametrize("guard", list(REAL_GUARDS))
def test_guard_patterns_from_real_guard_texts(guard):
    assert guard_pattern(guard) == REAL_GUARDS[guard]


_SOURCES = st.one_of(st.from_regex(r"[A-Za-z_][A-Za-z_0-9]{0,20}", fullmatch=True),
                     st.from_regex(r"kwargs\['[a-z_]{1,12}'\]", fullmatch=True))


@settings(max_examples=200, deadline=None)
@given(source=_SOURCES, entry=st.one_of(st.none(), st.tuples(st.integers(0, 99), st.integers(0, 99))),
       found=st.sampled_from(["NoneType", "float", "int", "list", "str"]),
       tail=st.sampled_from(["", "\nUser stack trace:\n  File \"s.py\", line 3, in f"]))
def test_a_tensor_guard_that_met_no_tensor_is_a_flag_on_none_or_a_type_change(source, entry, found, tail):
    """PyTorch's ``expected type of 'X' to be a tensor type, ' but found <class 'T'>`` (a tensor's
    guard met a T), under any cache-entry prefix and with a stack below: None is the optional
    argument left out (a flag, the mirror of ``X is None``), another class a type change."""
    prefix = f"{entry[0]}/{entry[1]}: " if entry else ""
    g = f"{prefix}expected type of '{source}' to be a tensor type, ' but found <class '{found}'>{tail}"
    assert guard_pattern(g) == (("flag", source, "is not None") if found == "NoneType" else ("type", source, "Tensor"))


def _churn_ledger(guards: list[str], *, frame: str = "f", fallback: bool = False, durations: int = 1000):
    led = play(FakeProgram(calls=[FakeCall([C("0/0", 10), R("0/0", 100)])])).build()
    comps = [Compilation(compile_id="0/0", frame_name=frame, file="m.py", line=3, status="ok",
                         duration_ns=durations, call_index=0)]
    for i, g in enumerate(guards, 1):
        comps.append(Compilation(compile_id=f"0/{i}", frame_name=frame, file="m.py", line=3, status="ok",
                                 duration_ns=durations, call_index=i, failed_guards=[g]))
    if fallback:
        comps.append(Compilation(compile_id=f"0/{len(guards) + 1}", frame_name=frame, file="m.py", line=3,
                                 status="fallback", call_index=len(guards) + 1, fail_reason="recompile limit"))
    return msgspec.structs.replace(led, compilations=comps)


@pytest.mark.parametrize(
    "guards,pattern",
    [
        (["0/0: tensor 'x' size mismatch at index 1. expected 128, actual 129",
          "0/1: tensor 'x' size mismatch at index 1. expected 129, actual 256"], "shape"),
        (["0/0: ___stack0 == 1.25  # if y.sum().item() > 0:  # m.py:8 in f",
          "0/1: ___stack0 == -3.5  # if y.sum().item() > 0:  # m.py:8 in f"], "value"),
        (["0/0: training == True  # ...", "0/1: training == False  # ..."], "flag"),
        (["0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1"], "stride"),
    ],
)
def test_churn_pattern_named_and_remedy_tied_to_it(guards, pattern):
    sec = analyze_findings(_churn_ledger(guards))
    (f,) = [f for f in sec.findings if f.axis == "churn"]
    assert f.churn.pattern == pattern and f.churn.recompiles == len(guards)
    assert f.churn.variants == len(guards) + 1 and f.churn.compile_ns == 1000 * len(guards)
    assert f.churn.calls == list(range(1, len(guards) + 1))
    action = {"shape": "mark_dynamic_or_bucket", "value": "capture_scalar_outputs",
              "flag": "split_by_flag", "stride": "make_contiguous"}[pattern]
    assert f.remedies[0].action == action
    if pattern == "shape":
        assert "seamscope shapes" in f.remedies[0].try_with
    if pattern == "value":
        assert f.remedies[0].config == {"capture_scalar_outputs": "True"}
        assert "--dynamo-config capture_scalar_outputs=True" in f.remedies[0].try_with


def test_recompile_limit_fallback_is_its_own_finding():
    guards = [f"0/{i}: ___stack0 == {i}.5  # x" for i in range(8)]
    sec = analyze_findings(_churn_ledger(guards, fallback=True))
    pats = {f.churn.pattern: f for f in sec.findings if f.axis == "churn"}
    assert set(pats) == {"value", "recompile_limit"}
    assert pats["recompile_limit"].churn.fallback and "recompile limit" in pats["recompile_limit"].sentence
    assert sec.churn.fallbacks == 1 and sec.churn.recompiles == 8 and sec.churn.variants_max == 9


def test_churn_ids_ignore_values_and_line_numbers():
    a = analyze_findings(_churn_ledger(["0/0: ___stack0 == 1.25  # m.py:8 in f"])).findings[0]
    b = analyze_findings(_churn_ledger(["0/0: ___stack0 == -7.0  # m.py:11 in f"])).findings[0]
    c = analyze_findings(_churn_ledger(["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"])).findings[0]
    assert a.finding_id == b.finding_id != c.finding_id
    assert a.finding_id.startswith("FR") and len(a.finding_id) == 10


def test_an_empty_guard_text_from_a_hand_made_receipt_is_not_listed_and_does_not_crash():
    led = _churn_ledger(["", "0/1: tensor 'x' size mismatch at index 1. expected 129, actual 256"])
    churn = [f for f in analyze_findings(led).findings if f.axis == "churn"]
    assert sum(f.churn.recompiles for f in churn) == 2
    assert [g for f in churn for g in f.churn.guards] == [
        "tensor 'x' size mismatch at index 1. expected 129, actual 256"
    ]


def test_churn_ranked_by_compile_time_not_count():
    led = _churn_ledger(["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"] * 3, durations=10)
    slow = Compilation(compile_id="1/0", frame_name="g", file="m.py", line=9, status="ok", duration_ns=5)
    slow1 = Compilation(compile_id="1/1", frame_name="g", file="m.py", line=9, status="ok", duration_ns=10_000,
                        failed_guards=["1/0: flag == True  # x"])
    led = msgspec.structs.replace(led, compilations=[*led.compilations, slow, slow1])
    churn = [f for f in analyze_findings(led).findings if f.axis == "churn"]
    assert [f.churn.frame_name for f in churn] == ["g", "f"] and [f.rank for f in churn] == [1, 2]


# --- receipt and terminal ------------------------------------------------------------------------


def test_findings_travel_in_the_receipt_and_render(tmp_path):
    led = _cheap_vs_expensive()
    sec = analyze_findings(led)
    rec = make_receipt(led, findings=sec)
    back = parse_receipt(pretty_bytes(rec))
    assert back.findings == sec and back.receipt_sha256 == rec.receipt_sha256
    assert make_receipt(led, findings=None).receipt_sha256 != rec.receipt_sha256
    assert make_receipt(led) == rec  # findings are derived by default
    buf = io.StringIO()
    TerminalRenderer(Console(file=buf, width=200, highlight=False)).print(back)
    out = buf.getvalue()
    assert "breaks by measured cost" in out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith(("1. break", "2. break"))]
    assert fake_site("rare").site_id in lines[0] and fake_site("cheap").site_id in lines[1]


def test_a_break_in_code_that_runs_outside_the_calls_is_not_said_to_be_crossed_zero_times():
    """A compiled optimizer step runs outside the observed calls: its break fires every step, and
    seamscope sees the step's regions but no call to count the crossings in."""
    from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, fake_site, play
    from seamscope.model.ledger import Compilation

    ms = 1_000_000
    prog = FakeProgram(calls=[FakeCall(steps=[FakeStep("compile", 5 * ms, "0/0"), FakeStep("region", ms, "0/0")])]
                       + [FakeCall(steps=[FakeStep("region", ms, "0/0"), FakeStep("island", ms)]) for _ in range(4)])
    b = play(prog)
    site = fake_site("step")
    b.set_break_site(site)
    b.set_compilation(Compilation(compile_id="1/0", frame_name="step", file="train.py", line=30, status="ok",
                                  duration_ns=3 * ms, graph_count=1, own_break_site_id=site.site_id,
                                  own_break_depth=0, break_site_ids=[site.site_id]))
    for _ in range(5):
        b.outside_region("1/0", "forward", ms, None)
    led = b.build()
    sec = analyze_findings(led)
    (f,) = [f for f in sec.findings if f.finding_id == site.site_id]
    assert "crossed in 0" not in f.sentence and "not crossed" not in f.sentence
    assert "outside the observed calls" in f.sentence and "5×" in f.sentence
    # the terminal's table does not count it as crossed 0 times either
    buf = io.StringIO()
    TerminalRenderer(Console(file=buf, width=200, color_system=None)).print(make_receipt(led))
    row = next(ln for ln in buf.getvalue().splitlines() if site.site_id in ln and "│" in ln)
    assert "outside calls" in row and "│ 0 " not in row


def test_a_frame_dynamo_crashed_on_leads_the_headline():
    from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
    from seamscope.model.ledger import Compilation

    ms = 1_000_000
    prog = FakeProgram(calls=[FakeCall(steps=[FakeStep("compile", 50 * ms, "0/0"), FakeStep("region", ms, "0/0")])]
                       + [FakeCall(steps=[FakeStep("region", ms, "0/0"), FakeStep("island", ms)]) for _ in range(3)])
    b = play(prog)
    b.set_compilation(
        Compilation(
            compile_id="1/0",
            frame_name="log",
            file="site-packages/lightning/core/module.py",
            line=400,
            status="failed",
            duration_ns=2 * ms,
            call_index=0,
            fail_type="InternalTorchDynamoError",
            fail_reason="AttributeError: 'NoneType' has no x\nmore",
        )
    )
    hl = analyze_findings(b.build()).headline
    assert hl.sentence.startswith("Dynamo crashed compiling log (lightning/core/module.py:400)")
    assert "InternalTorchDynamoError: AttributeError: 'NoneType' has no x." in hl.sentence  # its first line


def test_a_crash_outside_any_call_does_not_claim_where_the_run_went():
    from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
    from seamscope.model.ledger import Compilation

    b = play(FakeProgram(calls=[FakeCall(steps=[FakeStep("compile", 1_000_000, "0/0"), FakeStep("region", 1000, "0/0")])]))
    b.set_compilation(Compilation(compile_id="1/0", frame_name="step", file="train.py", line=7, status="failed",
                                  fail_type="BackendCompilerFailed", fail_reason="backend='x' raised:\nKeyError: 3"))
    hl = analyze_findings(b.build()).headline
    assert hl.sentence.startswith("Dynamo raised compiling step (train.py:7): BackendCompilerFailed: "
                                  "backend='x' raised: KeyError: 3; whether the run ended there is not recorded.")
    assert "runs eagerly instead" not in hl.sentence and "`seamscope probe`" in hl.sentence
