"""Recompiles grouped by cause, the list ranked across axes and the headline, on ledgers built
without torch. The guard texts are PyTorch 2.13's, as a long-sequence transformers model
(Longformer, lengths 20 → 28 → 36, the global attention mask on in call 1) wrote them."""

from __future__ import annotations

import io

import msgspec
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from seamscope.analyze.causes import describe, parse_change, recompile_causes
from seamscope.analyze.findings import analyze_findings
from seamscope.analyze.headline import NO_STEADY_NOTE
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import build_view
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, fake_site, play
from seamscope.model.ledger import Compilation, Ledger, RunInfo
from seamscope.render.markdown import MarkdownRenderer
from seamscope.render.terminal import TerminalRenderer

R = lambda cid, ns: FakeStep("region", ns, cid)  # noqa: E731
ISL = lambda ns: FakeStep("island", ns)  # noqa: E731
C = lambda cid, ns: FakeStep("compile", ns, cid)  # noqa: E731

LF = "/venv/lib/python3.11/site-packages/transformers/models/longformer/modeling_longformer.py"


def comp(cid: str, frame: str, call: int | None, ns: int, guards: tuple[str, ...] = (), *, line: int = 1,
         status: str = "ok", start: int | None = None) -> Compilation:
    return Compilation(compile_id=cid, frame_name=frame, file=LF, line=line, status=status,  # type: ignore[arg-type]
                       call_index=call, duration_ns=ns, failed_guards=list(guards),
                       start_ns=start)


def sweep_compilations() -> list[Compilation]:
    """What Dynamo compiled over five calls: call 0 compiles, call 1 turns the global mask on,
    call 2 changes the length 20 → 28 (padded 24 → 32 inside), call 3 36 (frames first compiled
    in call 2 recompile), call 4 hits the cache. Durations in µs."""
    return [
        msgspec.structs.replace(c, duration_ns=c.duration_ns * 1_000)
        for c in [
            comp("0/0", "forward", 0, 500, line=1384),
            comp("1/0", "_pad_to_window_size", 0, 80),
            comp("3/0", "torch_dynamo_resume_in_forward_at_1473", 0, 570),
            comp("5/0", "forward", 0, 1_400),
            # call 1: global_attention_mask given; the .item() result behind it flips a resume's flag
            comp(
                "0/1",
                "forward",
                1,
                300,
                ("0/0: global_attention_mask is None  # if global_attention_mask is not None:",),
                line=1384,
            ),
            comp("5/1", "forward", 1, 570, ("5/0: ___stack0 == False  # if is_global_attn:",), status="failed"),
            comp("7/0", "forward_with_checkpointing", 1, 400),
            # call 2: one length change, named differently in every frame it reached
            comp(
                "0/2",
                "forward",
                2,
                350,
                (
                    "0/1: tensor 'input_ids' size mismatch at index 1. expected 20, actual 28",
                    "0/0: tensor 'input_ids' size mismatch at index 1. expected 20, actual 28",
                ),
                line=1384,
            ),
            comp(
                "1/1",
                "_pad_to_window_size",
                2,
                150,
                ("1/0: tensor 'input_ids' size mismatch at index 1. expected 20, actual 28",),
            ),
            comp(
                "3/1",
                "torch_dynamo_resume_in_forward_at_1473",
                2,
                1_800,
                ("3/0: tensor '___stack0[1]' size mismatch at index 1. expected 24, actual 32",),
            ),
            comp(
                "7/1",
                "forward_with_checkpointing",
                2,
                410,
                ("7/0: tensor 'args[0]' size mismatch at index 1. expected 24, actual 32",),
            ),
            comp("27/0", "forward", 2, 470),
            comp("26/0", "_sliding_chunks_query_key_matmul", 2, 340),
            # call 3: the next length reaches the frames first compiled in call 2
            comp(
                "26/1",
                "_sliding_chunks_query_key_matmul",
                3,
                520,
                ("26/0: tensor 'key' size mismatch at index 1. expected 32, actual 40",),
            ),
            comp("27/1", "forward", 3, 550, ("27/0: seq_len == 32  # assert list(attn_scores.size()) == [",)),
        ]
    ]


def sweep_ledger(steady_calls: int = 0, *, cold: int = 3) -> Ledger:
    calls = [FakeCall([C("0/0", 10), R("0/0", 100), ISL(1_000), C("5/0", 10), R("5/0", 100)])]
    calls += [FakeCall([R("0/0", 100), ISL(1_000), C("0/1", 10), R("5/0", 100)]) for _ in range(cold)]
    calls += [FakeCall([R("0/0", 100), ISL(1_000 if i == 0 else 100_000), R("5/0", 100)])
              for i in range(max(0, 4 - cold) + steady_calls)]
    led = play(FakeProgram(breaks={"0/0": "item"}, calls=calls)).build()
    return msgspec.structs.replace(led, compilations=sweep_compilations())


def test_a_wrappers_positional_slot_is_said_as_the_calls_argument():
    """``torch.compile(module)`` runs a frame that takes ``*args``: its guard names ``args[0]``, which
    the user never wrote; the remedy says which argument of the call it is and never tells them to
    write ``mark_dynamic(args[0], 1)``."""
    from seamscope.analyze.causes import _passed

    assert _passed("args[0]") == ("the call's first positional argument (args[0])",
                                  "<the tensor passed as the call's first positional argument>")
    assert _passed("args[5]")[0] == "the call's positional argument 6 (args[5])"
    assert _passed("input_ids") == ("input_ids", "input_ids")


def test_guard_changes_in_the_users_words():
    # a global state change (autocast, grad mode): the tensor checks failing beside it name nothing new
    gs = parse_change(["0/0: GLOBAL_STATE changed: grad_mode ; check_tensor(L['x'], Tensor, DispatchKeySet(CPU, "
                       "BackendSelect), torch.float32, device=None, requires_grad=False, size=[4], stride=[1])"])
    assert (gs.family, describe(gs)) == ("flag", "global state grad_mode changed between calls")
    assert describe(parse_change(["0/1: tensor 'input_ids' size mismatch at index 1. expected 100, actual 128"])) == (
        "input_ids dim 1: 100 → 128")
    assert describe(parse_change(["0/0: global_attention_mask is None  # if ..."])) == (
        "global_attention_mask was None, now given")
    assert describe(parse_change(["0/0: attention_mask is not None  # ..."])) == "attention_mask was given, now None"
    met_none = "0/0: expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>"
    assert describe(parse_change([met_none])) == "mask was given, now None"
    assert describe(parse_change(["0/0: training == True  # ..."])) == "training: True → False"
    assert describe(parse_change(["0/0: ___stack0 == -115.92  # if x.sum().item() > 0:"])) == (
        "___stack0: -115.92 → another value")
    assert describe(parse_change(["0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1"])) == (
        "x stride 0: 4 → 1")
    assert describe(parse_change([], "fallback")) == "the frame hit the recompile limit"
    # names that hold quotes or an index stay whole
    assert describe(
        parse_change(["0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12"])
    ) == ("input_ids dim 1: 8 → 12")
    assert describe(parse_change(["3/0: tensor '___stack0[1]' size mismatch at index 1. expected 24, actual 32"])) == (
        "___stack0[1] dim 1: 24 → 32")
    # an optional argument given or left out
    ch = parse_change(["0/0: len(kwargs) == 1  # in forward"])
    assert ch.family == "flag" and describe(ch) == (
        "kwargs: 1 → another count (an optional argument given or left out)")


def test_the_change_is_named_against_the_first_variant():
    # after a call that passed an extra argument (variant 0/1), a new length fails 0/1 on the
    # argument and 0/0 on the length: the length is what is new
    ch = parse_change(["0/1: len(kwargs) == 2  # in forward",
                       "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 8, actual 12"])
    assert (ch.family, ch.subject, ch.dim) == ("size", "input_ids", 1)


def test_a_length_sweep_groups_into_one_cause_per_changed_input_property():
    led = sweep_ledger()
    causes = recompile_causes(led)
    assert [(c.family, c.change) for c in causes] == [
        ("size", "input_ids dim 1: 20 → 28"),
        ("flag", "global_attention_mask was None, now given"),
    ]
    size, flag = causes
    # THEN the length change is one finding over the calls in which it recurs, every frame it
    # reached included (a resume function, frames first compiled on its first occurrence)
    assert size.calls == [2, 3] and [o.call_index for o in size.occurrences] == [2, 3]
    assert size.compile_ids == ["0/2", "1/1", "3/1", "7/1", "26/1", "27/1"]
    assert size.recompiles == 6 and len(size.frames) == 6
    assert size.compile_ns == (350 + 150 + 1_800 + 410 + 520 + 550) * 1_000
    assert size.new_frame_ids == ["27/0", "26/0"] and size.new_frame_ns == (470 + 340) * 1_000
    assert size.cost_ns == size.compile_ns + size.new_frame_ns
    assert size.remedy is not None and size.remedy.action == "mark_dynamic_or_bucket"
    assert "mark_dynamic(input_ids, 1)" in size.remedy.text
    assert "recurs 2×" in size.sentence and "input_ids dim 1: 20 → 28" in size.sentence
    # the mask: the top frame's None check and the resume function's flag are one change
    assert flag.compile_ids == ["0/1", "5/1"] and flag.calls == [1] and flag.remedy.action == "split_by_flag"
    assert flag.new_frame_ids == ["7/0"]
    # AND every recompile is in exactly one cause: the compile times add up exactly
    recompiles = [c for c in led.compilations if c.is_recompile]
    assert sorted(i for c in causes for i in c.compile_ids) == sorted(c.compile_id for c in recompiles)
    assert sum(c.compile_ns for c in causes) == sum(c.duration_ns for c in recompiles)
    assert [c.rank for c in causes] == [1, 2]


def test_another_property_of_the_same_frame_is_another_cause():
    led = sweep_ledger()
    comps = [*led.compilations, comp("0/3", "forward", 4, 900, (
        "0/2: tensor 'input_ids' size mismatch at index 0. expected 1, actual 2",), line=1384)]
    causes = recompile_causes(msgspec.structs.replace(led, compilations=comps))
    assert sorted(c.change for c in causes) == [
        "global_attention_mask was None, now given", "input_ids dim 0: 1 → 2", "input_ids dim 1: 20 → 28"]


def test_an_optional_argument_given_then_left_out_is_one_cause_naming_both_ways():
    """Given in call 1, left out again in call 3 (PyTorch's tensor guard meets None): one cause,
    the mask's, whose change names both ways, not the first occurrence's alone."""
    led = sweep_ledger()
    met_none = "0/1: expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>"
    comps = [comp("0/0", "f", 0, 100), comp("0/1", "f", 1, 50, ("0/0: mask is None  # if mask is None:",)),
             comp("0/2", "f", 3, 50, (met_none,))]
    (cause,) = recompile_causes(msgspec.structs.replace(led, compilations=comps))
    assert cause.family == "flag" and cause.calls == [1, 3] and cause.recompiles == 2
    assert [o.change for o in cause.occurrences] == ["mask was None, now given", "mask was given, now None"]
    assert cause.change == "mask was None, now given; mask was given, now None"
    assert cause.change in cause.sentence


def test_a_value_that_changes_every_call_is_one_cause_with_its_count():
    led = sweep_ledger()
    comps = [comp("0/0", "f", 0, 100)] + [
        comp(f"1/{i}", "torch_dynamo_resume_in_f_at_9", i, 50, (f"1/{i - 1}: ___stack0 == {i}.5  # if y.item() > 0:",))
        for i in range(1, 5)
    ]
    (cause,) = recompile_causes(msgspec.structs.replace(led, compilations=comps))
    assert cause.family == "value" and cause.calls == [1, 2, 3, 4] and cause.recompiles == 4
    assert cause.compile_ns == 200 and "recurs 4×" in cause.sentence
    assert cause.remedy.action == "capture_scalar_outputs"


def test_an_int_that_becomes_a_tensor_is_a_type_cause_not_the_value_cause():
    """Timesteps 999, 800 (ints: a value recompile), then a tensor: its recompile fails the int
    variant's type check and, against the first variant, ``t == 999``; the type is what changed,
    and its remedy is never the value cause's "pass it as a 0-d tensor"."""
    led = sweep_ledger()
    comps = [comp("0/0", "f", 0, 100), comp("0/1", "f", 1, 80, ("0/0: t == 999  # return x * t",)),
             comp("0/2", "f", 2, 90, ("0/1: ___check_type_id(t, 139851257445600), type=<class 'int'>  # return x * t",
                                      "0/0: t == 999  # return x * t"))]
    causes = {c.family: c for c in recompile_causes(msgspec.structs.replace(led, compilations=comps))}
    assert set(causes) == {"value", "type"}
    assert causes["value"].compile_ids == ["0/1"] and causes["type"].compile_ids == ["0/2"]
    assert causes["type"].change == "t: int → another type"
    assert causes["type"].remedy.action == "keep_type" and "0-d tensor" not in causes["type"].remedy.text
    assert causes["value"].remedy.action == "pass_as_tensor"


def test_cause_ids_ignore_values_and_lines():
    a = recompile_causes(sweep_ledger())
    shifted = [
        msgspec.structs.replace(c, line=c.line + 7, failed_guards=[g.replace("28", "64") for g in c.failed_guards])
        for c in sweep_compilations()
    ]
    b = recompile_causes(msgspec.structs.replace(sweep_ledger(), compilations=shifted))
    assert [c.cause_id for c in a] == [c.cause_id for c in b]
    assert all(c.cause_id.startswith("RC") and len(c.cause_id) == 10 for c in a)


GUARDS = [
    "tensor 'x' size mismatch at index 0. expected 4, actual 8",
    "tensor 'y' size mismatch at index 1. expected 8, actual 16",
    "n == 8  # assert",
    "flag == True  # if flag:",
    "opt is None  # if opt is not None:",
    "___stack0 == 1.5  # if v.item() > 0:",
    "tensor 'x' dtype mismatch. expected Float, actual Half",
    "something unusual",
    "",
]


@st.composite
def compilations(draw):
    n_frames = draw(st.integers(1, 6))
    out = []
    for x in range(n_frames):
        n = draw(st.integers(1, 5))
        for y in range(n):
            call = draw(st.one_of(st.none(), st.integers(0, 6)))
            guards = (f"{x}/{y - 1}: {draw(st.sampled_from(GUARDS))}",) if y else ()
            status = draw(st.sampled_from(["ok", "ok", "ok", "failed", "fallback"])) if y else "ok"
            out.append(comp(f"{x}/{y}", draw(st.sampled_from(["f", "g", "torch_dynamo_resume_in_f_at_3"])), call,
                            draw(st.integers(0, 10**9)), guards, status=status,
                            start=draw(st.one_of(st.none(), st.integers(0, 10**6)))))
    return out


@settings(max_examples=examples(100))
@given(compilations())
def test_every_recompile_lands_in_exactly_one_cause(comps):
    led = msgspec.structs.replace(sweep_ledger(), compilations=comps)
    causes = recompile_causes(led)
    recompiles = [c for c in comps if c.is_recompile]
    assert sorted(i for c in causes for i in c.compile_ids) == sorted(c.compile_id for c in recompiles)
    assert sum(c.compile_ns for c in causes) == sum(c.duration_ns for c in recompiles)
    assert len({c.cause_id for c in causes}) == len(causes)
    assert [c.cost_ns for c in causes] == sorted((c.cost_ns for c in causes), reverse=True)
    firsts = [i for c in causes for i in c.new_frame_ids]
    assert len(firsts) == len(set(firsts)) and all(i.endswith("/0") for i in firsts)


# --- one list across axes and the headline ---------------------------------------------------------


def test_recompiles_costing_more_than_a_break_come_first_and_lead_the_headline():
    led = sweep_ledger(cold=4)  # every call compiles
    sec = analyze_findings(led)
    assert [i.axis for i in sec.ranked if i.axis != "compile_time"] == [
        "recompile_cause",
        "recompile_cause",
        "fragmentation",
    ]
    # the first compilations no cause reached are ranked too (compile time), not dropped
    assert [i.item_id for i in sec.ranked if i.axis == "compile_time"] == [
        f.finding_id for f in sec.compile_time.findings if f.kind == "cold_start"
    ]
    assert [i.cost_ns for i in sec.ranked] == sorted((i.cost_ns for i in sec.ranked), reverse=True)
    hl = sec.headline
    assert hl is not None and hl.top_item_id == sec.causes[0].cause_id == sec.ranked[0].item_id
    assert hl.top_axis == "recompile_cause"
    # every call compiled: the headline says so and what that means
    assert hl.no_steady_calls and hl.notes == [NO_STEADY_NOTE] and "warm-up" in hl.sentence
    # the split adds up to the calls' wall time, in total and per phase
    for row in hl.split:
        assert row.compile_ns + row.region_ns + row.island_ns + row.overhead_ns == row.wall_ns
    assert hl.split[0].wall_ns == sum(p.wall_ns for p in led.totals.phases)


def test_with_steady_calls_an_expensive_break_comes_first():
    # GIVEN cheap recompiles and a break whose islands over 200 steady calls cost more
    led = sweep_ledger(steady_calls=200)
    sec = analyze_findings(led)
    brk = sec.ranked[0]
    assert brk.axis == "fragmentation" and brk.item_id == fake_site("item").site_id
    assert brk.cost_ns == next(t.island_after_ns for t in led.totals.sites if t.site_id == brk.item_id)
    assert brk.cost_ns > sec.causes[0].cost_ns
    assert sec.headline.top_item_id == brk.item_id and not sec.headline.no_steady_calls
    assert "Costliest: break" in sec.headline.sentence


def test_reports_lead_with_the_headline_and_the_costliest_item():
    r = make_receipt(sweep_ledger())
    view = build_view(r)
    assert view.headline is not None and view.headline.sentence == r.findings.headline.sentence
    assert view.top_findings[0].item_id == r.findings.ranked[0].item_id
    assert view.top_findings[0].kind == "recompiles" and view.top_findings[0].beneath
    assert view.axis_findings  # the per-axis views stay
    md = MarkdownRenderer().render_view(view)
    assert md.index("Of ") < md.index("| phase |") < md.index("**Top findings**")
    buf = io.StringIO()
    TerminalRenderer(Console(file=buf, width=200, highlight=False)).print(r)
    out = buf.getvalue()
    assert out.index("Of ") < out.index("calls by phase") and "findings ranked by time in this run" in out


def test_imported_ledger_findings_carry_their_basis():
    led = sweep_ledger()
    site = msgspec.structs.replace(led.break_sites[0], compile_ids=["0/0", "5/1"])
    led = msgspec.structs.replace(led, break_sites=[site], calls=[],
                                  run=RunInfo(source="torch_trace", has_runtime=False, absent=["runtime"]))
    sec = analyze_findings(led)
    (brk,) = [f for f in sec.findings if f.axis == "fragmentation"]
    assert brk.cost_ns == (500 + 570) * 1_000 and "compile time of the 2 compilations it broke in" in brk.basis
    assert "no runtime data" in brk.basis
    assert all(f.basis for f in sec.findings)
    assert all(i.basis and i.cost_ns is not None and i.share is None for i in sec.ranked)
    assert sec.headline.sentence.startswith("No runtime data")


# --- diff and check by cause -----------------------------------------------------------------------


def _without_length_change() -> Ledger:
    led = sweep_ledger()
    keep = [c for c in led.compilations if c.call_index in (0, 1)]
    return msgspec.structs.replace(led, compilations=keep)


def test_a_fix_that_removes_one_cause_is_one_removed_row_in_diff():
    from seamscope.analyze.diff import compare

    before, after = make_receipt(sweep_ledger()), make_receipt(_without_length_change())
    cmp = compare(before, after)
    size = before.findings.causes[0]
    assert [(c.change, c.cause_id) for c in cmp.causes if c.change != "kept"] == [("removed", size.cause_id)]
    (gone,) = [c for c in cmp.causes if c.change == "removed"]
    assert (gone.recompiles_before, gone.recompiles_after, gone.compile_ns_before) == (6, 0, size.compile_ns)
    assert any(v.startswith("recompile causes: 1 removed, 0 added; − " + size.cause_id) for v in cmp.verdict)
    # six recompiles of six frames are still one row
    assert sum(1 for c in cmp.causes if c.change == "removed") == 1


def test_check_budgets_name_a_cause_and_fail_on_a_new_one(tmp_path):
    from seamscope.cli import main
    from seamscope.errors import UnusableInput
    from seamscope.gates.check import Limits, check
    from seamscope.render.receipt_json import write_receipt_files

    full, fixed = make_receipt(sweep_ledger()), make_receipt(_without_length_change())
    size, flag = full.findings.causes
    assert check(full, Limits(cause_recompiles={size.cause_id: 6})).ok
    rep = check(full, Limits(cause_recompiles={size.cause_id: 5, flag.cause_id: 2}))
    assert rep.problems == [f"recompile cause {size.cause_id} set off 6 recompile(s), over its limit 5"]
    assert check(fixed, Limits(cause_recompiles={size.cause_id: 0})).ok  # absent: 0 recompiles
    # against a baseline without it, the cause is new and fails, named
    rep = check(full, Limits(), fixed)
    assert "1 new recompile cause(s), not in the baseline" in rep.problems
    assert any(size.cause_id in line and "input_ids dim 1: 20 → 28" in line for line in rep.lines)
    assert check(fixed, Limits(), full).ok  # a cause gone is reported, never failed
    with pytest.raises(UnusableInput):
        Limits(cause_recompiles={"B12345678": 0})
    # the command line: 1 over budget, 2 for a limit it cannot read
    write_receipt_files(full, str(tmp_path / "r"))
    for args, code in (([f"--max-cause-recompiles={size.cause_id}=0"], 1),
                       ([f"--max-cause-recompiles={size.cause_id}=6"], 0),
                       (["--max-cause-recompiles", "nonsense"], 2)):
        with pytest.raises(SystemExit) as e:
            main(["check", str(tmp_path / "r"), *args])
        assert e.value.code == code, args


def test_a_frame_first_reached_in_a_call_with_two_changes_is_recognised_later():
    led = sweep_ledger()
    comps = [
        comp("0/0", "forward", 0, 100),
        # call 1: two changes at once, and a new frame 4 reached
        comp("0/1", "forward", 1, 100, ("0/0: tensor 'input_ids' size mismatch at index 1. expected 8, actual 12",)),
        comp("2/0", "forward", 1, 100),
        comp("2/1", "forward", 1, 100, ("2/0: flag == True  # if flag:",)),
        comp("4/0", "inner", 1, 100),
        # call 2: the length again, seen by frame 4 under another name
        comp("4/1", "inner", 2, 100, ("4/0: tensor 'hidden' size mismatch at index 1. expected 12, actual 16",)),
    ]
    causes = recompile_causes(msgspec.structs.replace(led, compilations=comps))
    size = next(c for c in causes if c.family == "size")
    assert size.compile_ids == ["0/1", "4/1"] and size.calls == [1, 2]
    # the new frame's compile time is not split between the two changes of call 1
    assert all(c.new_frame_ids == [] for c in causes)


@pytest.mark.parametrize("subjects, grad", [
    (["L['self']._modules['drop'].training"], False),
    (["args[0]._modules['model']._modules['layers']._modules['0']._modules['self_attn'].training",
      "global state grad_mode"], True),
])
def test_a_training_flag_is_one_variant_per_mode(subjects, grad):
    from seamscope.analyze.findings_churn import train_eval_remedy, user_subject

    r = train_eval_remedy(subjects)
    assert r is not None and r.text.startswith("the modules' training flag (model.train() / model.eval())")
    assert ("and grad mode (evaluation under torch.no_grad())" in r.text) is grad
    assert train_eval_remedy(["L['self'].trainingX", "global state grad_mode"]) is None
    assert user_subject(subjects[0]) in ("L['self'].drop.training", "args[0].model.layers[0].self_attn.training")
