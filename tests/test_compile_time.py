"""The compile-time ledger without torch: the stage split, cache outcomes, the four compile-time
findings and their place in the list ranked across axes, from fake ledgers (GIVEN a ledger,
WHEN its findings are derived, THEN ...)."""

from __future__ import annotations

import json

import msgspec

from seamscope.analyze.compile_time import analyze_compile_time, stages_of
from seamscope.analyze.findings import analyze_findings
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view import build_compile_time, build_view
from seamscope.ingest.compile_events import PAYLOAD, CompileEventAssembler, needed
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import Compilation, CompileCacheState, Ledger, ModuleRepeat
from seamscope.render.markdown import MarkdownRenderer
from seamscope.render.terminal import TerminalRenderer

MS = 1_000_000


def _ledger(calls: list[list[FakeStep]], **changes: dict[str, object]) -> Ledger:
    """A fake run; ``changes`` maps a compile id (``0/0`` → ``c0_0``) to fields of its Compilation."""
    led = play(FakeProgram(calls=[FakeCall(steps=s) for s in calls])).build()
    comps = []
    for c in led.compilations:
        comps.append(msgspec.structs.replace(c, **changes.get("c" + c.compile_id.replace("/", "_"), {})))
    return msgspec.structs.replace(led, compilations=comps)


def _steady(cid: str = "0/0") -> list[FakeStep]:
    return [FakeStep("region", 1 * MS, cid), FakeStep("island", 1 * MS)]


def _compile(cid: str, ms: int) -> list[FakeStep]:
    return [FakeStep("compile", ms * MS, cid), FakeStep("region", 1 * MS, cid)]


def test_stages_are_exclusive_and_add_up_to_the_duration():
    c = Compilation(compile_id="0/0", frame_name="f", file="m.py", line=1, status="ok", duration_ns=100,
                    dynamo_ns=100, aot_ns=40, backend_compile_ns=40, inductor_ns=30, autotune_ns=5)
    st = stages_of(c)
    assert (st["dynamo"], st["aot_autograd"], st["inductor"], st["autotune"]) == (60, 10, 25, 5)
    assert sum(v or 0 for v in st.values()) == 100
    # a ledger written before the split fields: aot_ns is the backend call, backend_ns Inductor's
    old = Compilation(compile_id="0/0", frame_name="f", file="m.py", line=1, status="ok", duration_ns=100,
                      dynamo_ns=100, aot_ns=40, backend_ns=30)
    assert stages_of(old)["dynamo"] == 60 and stages_of(old)["inductor"] == 30
    # no stage fields at all: the time is kept, unsplit
    bare = Compilation(compile_id="0/0", frame_name="f", file="m.py", line=1, status="ok", duration_ns=100)
    assert stages_of(bare)["unsplit"] == 100 and stages_of(bare)["dynamo"] is None


def test_the_run_split_names_the_dominant_stage_in_the_headline():
    # GIVEN one compilation whose backend call (AOTAutograd + Inductor) is most of its 10 ms
    led = _ledger([_compile("0/0", 10), _steady()], c0_0={
        "dynamo_ns": 10 * MS, "aot_ns": 8 * MS, "backend_compile_ns": 8 * MS, "inductor_ns": 7 * MS,
    })
    sec = analyze_findings(led)
    ct = sec.compile_time
    assert ct is not None and ct.compile_ns == 10 * MS
    assert (ct.split.dynamo_ns, ct.split.aot_autograd_ns, ct.split.inductor_ns) == (2 * MS, 1 * MS, 7 * MS)
    assert ct.dominant_stage == "inductor"
    assert "Inductor code generation dominates compile time (7 ms, 70%); then " in sec.headline.sentence
    stages = sec.headline.sentence.split("Inductor code generation dominates")[1]
    assert stages.count("70%") == 1 and stages.count("7 ms") == 1  # each figure once
    assert ct.frames[0].split.total_ns == 10 * MS and ct.frames[0].compile_ids == ["0/0"]
    assert 0 < ct.share < 1


def test_first_compilations_are_ranked_without_counting_anything_twice():
    # GIVEN a first compilation, then a recompile in call 2 (a recompile cause claims it)
    led = _ledger([_compile("0/0", 10), _steady(), _compile("0/1", 4), _steady("0/1")],
                  c0_1={"failed_guards": ["tensor 'x' size mismatch at index 0. expected 4, actual 8"]})
    sec = analyze_findings(led)
    ct_items = [i for i in sec.ranked if i.axis == "compile_time"]
    assert ct_items, "the first compilation is attributed to a finding"
    total = sum(c.duration_ns or 0 for c in led.compilations)
    ranked_compile = sum(i.cost_ns or 0 for i in sec.ranked if i.axis in ("compile_time", "recompile_cause"))
    assert ranked_compile <= total
    cold = next(f for f in sec.compile_time.findings if f.kind == "cold_start")
    assert cold.cost_ns == 10 * MS and "0/1" not in cold.compile_ids
    assert [i.rank for i in sec.ranked] == list(range(1, len(sec.ranked) + 1))


def test_a_frame_compiled_for_one_later_call_is_found():
    # GIVEN frame 1 first compiled in call 2, run there only, and three calls after it
    calls = [_compile("0/0", 5), _steady(), [*_compile("1/0", 3), *_steady()], _steady(), _steady(), _steady()]
    led = _ledger(calls)
    led = msgspec.structs.replace(led, compilations=[
        msgspec.structs.replace(c, frame_name="rare_branch", line=7) if c.compile_id == "1/0" else c
        for c in led.compilations
    ])
    ct = analyze_compile_time(led, [])
    once = [f for f in ct.findings if f.kind == "cold_once"]
    assert [f.compile_ids for f in once] == [["1/0"]]
    assert once[0].cost_ns == 3 * MS and "call 2" in once[0].sentence and "rare_branch" in once[0].sentence
    assert once[0].remedies[0].action == "skip_rare_frame"
    # the frame compiled in call 0 and run in every call is not one
    assert all("0/0" not in f.compile_ids for f in once)


def test_a_cache_miss_on_a_warm_directory_and_a_bypass_with_its_reason():
    fx = {"dynamo_ns": 10 * MS, "aot_ns": 6 * MS, "backend_compile_ns": 6 * MS, "inductor_ns": 5 * MS}
    led = _ledger(
        [_compile("0/0", 10), _compile("1/0", 10), _compile("2/0", 10), _steady()],
        c0_0={**fx, "fx_cache": "hit"},
        c1_0={**fx, "fx_cache": "miss"},
        c2_0={**fx, "fx_cache": "bypass", "fx_bypass_reason": "Can't cache HigherOrderOperators"},
    )
    env = msgspec.structs.replace(
        led.environment, compile_cache=CompileCacheState(dir="cache", fx_entries=3, aot_entries=0)
    )
    warm = msgspec.structs.replace(led, environment=env)
    ct = analyze_compile_time(warm, [])
    (f,) = [f for f in ct.findings if f.kind == "cache_miss"]
    assert f.compile_ids == ["2/0", "1/0"] and f.total_ns == 2 * 6 * MS  # a hit skips the backend call
    assert "Can't cache HigherOrderOperators (1×)" in f.sentence and "missed on a warm cache directory" in f.sentence
    assert {r.action for r in f.remedies} == {"fix_cache_bypass", "persistent_cache"}
    fx_layer = next(c for c in ct.caches if c.layer == "fx_graph")
    assert (fx_layer.hit, fx_layer.miss, fx_layer.bypass) == (1, 1, 1)
    assert ct.cache_dir_warm is True
    # an empty directory: a miss is the first run filling it (no finding for it), a bypass still is
    cold_env = msgspec.structs.replace(env, compile_cache=CompileCacheState(dir="cache", fx_entries=0, aot_entries=0))
    ct = analyze_compile_time(msgspec.structs.replace(led, environment=cold_env), [])
    (f,) = [f for f in ct.findings if f.kind == "cache_miss"]
    assert f.compile_ids == ["2/0"] and ct.cache_dir_warm is False


def test_a_block_traced_once_per_instance_is_named_with_its_cost():
    block = ModuleRepeat(cls="Block", module="m", file="m.py", line=20, instances=4, nodes=80, nodes_min=20,
                         nodes_max=20, graph_nodes=100, first_path="L['self'].layers.0")
    led = _ledger([_compile("0/0", 100), _steady()], c0_0={"modules": [block], "dynamo_ns": 100 * MS,
                                                          "aot_ns": 0, "backend_compile_ns": 0})
    sec = analyze_findings(led)
    (f,) = [f for f in sec.compile_time.findings if f.kind == "repeated_block"]
    assert f.frame_name == "Block.forward" and f.block == block
    assert f.cost_ns == 100 * MS * 60 // 100  # the three instances after the first: 60 of 100 nodes
    assert "traced 4 times" in f.sentence and f.remedies[0].action == "regional_compile"
    assert "nested_compile_region" in f.remedies[0].text and "KV cache" not in f.remedies[0].text
    assert any(i.item_id == f.finding_id for i in sec.ranked)
    # the rest of the compilation is the cold start, not counted again
    cold = next(f for f in sec.compile_time.findings if f.kind == "cold_start")
    assert cold.cost_ns == 40 * MS
    # with the KV cache in the block, the remedy says why regional compilation would not pay
    kv = msgspec.structs.replace(block, kv_cache=True)
    led = _ledger([_compile("0/0", 100), _steady()], c0_0={"modules": [kv]})
    (f,) = [f for f in analyze_compile_time(led, []).findings if f.kind == "repeated_block"]
    assert "use_cache=False" in f.remedies[0].text and "is_initialized" in f.remedies[0].text


def test_two_instances_that_trace_different_graphs_are_no_block_traced_twice():
    """transformers' T5Stack is the encoder (114 nodes) and the decoder (165, cross-attention):
    one class, two paths. Compiled on their own each compiles its own graph, so nothing was traced
    again and no regional remedy is offered; two alike instances (a first layer with one op more)
    still are one block."""
    stacks = ModuleRepeat(cls="T5Stack", module="m", file="t5.py", line=664, instances=2, nodes=279, nodes_min=114,
                          nodes_max=165, graph_nodes=330, first_path="L['self'].encoder")
    alike = msgspec.structs.replace(stacks, cls="Block", nodes=82, nodes_min=40, nodes_max=42, graph_nodes=100)
    for block, found in ((stacks, False), (alike, True)):
        led = _ledger([_compile("0/0", 100), _steady()], c0_0={"modules": [block]})
        kinds = [f.kind for f in analyze_compile_time(led, []).findings]
        assert ("repeated_block" in kinds) is found, block.cls


def test_a_block_recompiled_per_instance_on_its_cache_state_is_said_so():
    # GIVEN one block frame compiled once per layer, each recompile on the next layer's cache state
    calls = [[*_compile("0/0", 5), *_compile("0/1", 5), *_compile("0/2", 5)], _steady()]
    guards = {f"c0_{k}": {"failed_guards": [f"L['args'][1].layers[{k}].is_initialized == False"]} for k in (1, 2)}
    led = _ledger(calls, **guards)
    sec = analyze_findings(led)
    (f,) = [f for f in sec.compile_time.findings if f.kind == "repeated_block"]
    assert "compiled 3 times" in f.sentence and "layers[i].is_initialized" in f.sentence
    assert "use_cache=False" in f.remedies[0].text
    # shape recompiles of one frame are churn, not a repeated block
    shapes = {
        f"c0_{k}": {"failed_guards": [f"tensor 'x' size mismatch at index 0. expected {k}, actual {k + 1}"]}
        for k in (1, 2)
    }
    ct = analyze_compile_time(_ledger(calls, **shapes), [])
    assert not [f for f in ct.findings if f.kind == "repeated_block"]


def test_cache_bypass_reasons_are_read_from_the_artifact():
    assert needed("artifact", "fx_graph_cache_bypass") == PAYLOAD
    assert needed("artifact", "fx_graph_cache_hit") != PAYLOAD  # a hit's payload holds the whole key
    asm = CompileEventAssembler()
    ctx = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    asm.feed({"dynamo_start": {"stack": [{"filename": "m.py", "line": 3, "name": "f"}]}, **ctx}, None)
    asm.feed({"artifact": {"name": "fx_graph_cache_bypass", "encoding": "json"}, **ctx},
             json.dumps({"cache_state": "bypass", "cache_bypass_reason": "Unsupported FX nodes"}))
    asm.feed({"compilation_metrics": {"compile_id": "0/0", "co_name": "f", "co_filename": "m.py", "duration_us": 9,
                                      "dynamo_cumulative_compile_time_us": 9}, **ctx}, None)
    (c,) = asm.compilations.values()
    assert c.fx_cache == "bypass" and c.fx_bypass_reason == "Unsupported FX nodes"
    # a record from a PyTorch without these fields says which stages it cannot tell
    assert {"aot_autograd", "autotune", "inductor"} <= set(c.metrics_absent) and "dynamo" not in c.metrics_absent
    led = _ledger([_compile("0/0", 9), _steady()], c0_0={"metrics_absent": c.metrics_absent})
    missing = analyze_compile_time(led, []).missing
    assert any(m.startswith("autotuning: this PyTorch version's compilation_metrics has no field") for m in missing)


def test_reports_show_the_compile_time_table():
    led = _ledger(
        [_compile("0/0", 10), _steady()], c0_0={"dynamo_ns": 10 * MS, "aot_ns": 4 * MS, "backend_compile_ns": 4 * MS}
    )
    r = make_receipt(led)
    view = build_view(r)
    assert view.compile_time == build_compile_time(r)
    assert view.compile_time.rows[0].frame == "all frames" and view.compile_time.rows[0].stages[:2] == ["6 ms", "4 ms"]
    md = MarkdownRenderer().render_view(view)
    assert "**Compile time by stage** (Dynamo tracing dominates)" in md and "| all frames | 1 | 6 ms | 4 ms |" in md
    text = TerminalRenderer(max_rows=5).render(r)
    assert "compile time by stage (Dynamo tracing dominates)" in text
    from seamscope.render.html import HtmlRenderer

    html = HtmlRenderer().render_view(view)
    assert 'id="compile-time-table"' in html and "<td>6 ms</td>" in html


def test_a_repeated_block_becomes_a_regional_trial_candidate():
    from seamscope.experiments.remedy_spec import code_change, spec_from_words
    from seamscope.experiments.trials.catalogue import catalogue

    block = ModuleRepeat(cls="Block", module="m", file="m.py", line=20, instances=4, nodes=80, nodes_min=20,
                         nodes_max=20, graph_nodes=100)
    led = _ledger([_compile("0/0", 100), _steady()], c0_0={"modules": [block]})
    drafts = catalogue(make_receipt(led))
    (d,) = [d for d in drafts if d.spec.regional]
    assert d.spec.regional == ("Block",) and d.spec.flags() == ["--regional", "Block"]
    assert d.origin.startswith("CT") and d.cost_ns == 60 * MS
    assert spec_from_words(["--regional", "Block"]) == d.spec
    assert code_change(d.spec) == "compile each Block instead of the whole model (block.compile())"


def test_cold_against_warm_names_what_a_restarted_worker_still_pays():
    from seamscope.analyze.warm_start import compare_warm

    stage = {"dynamo_ns": 10 * MS, "aot_ns": 8 * MS, "backend_compile_ns": 8 * MS}
    cold = make_receipt(_ledger([_compile("0/0", 10), _compile("1/0", 10), _steady()],
                                c0_0={**stage, "inductor_ns": 7 * MS, "fx_cache": "miss"},
                                c1_0={**stage, "inductor_ns": 7 * MS, "fx_cache": "miss"}))
    warm_stage = {"dynamo_ns": 3 * MS, "aot_ns": 1 * MS, "backend_compile_ns": 1 * MS}
    warm = make_receipt(_ledger([_compile("0/0", 3), _compile("1/0", 10), _steady()],
                                c0_0={**warm_stage, "fx_cache": "hit"},
                                c1_0={**stage, "inductor_ns": 7 * MS, "fx_cache": "bypass",
                                      "fx_bypass_reason": "Unsupported FX nodes"}))
    ws = compare_warm(cold, warm, "cache", "cold/receipt.json", "warm/receipt.json")
    assert (ws.cold_compile_ns, ws.warm_compile_ns) == (20 * MS, 13 * MS)
    by = {s.stage: s for s in ws.stages}
    assert (by["dynamo"].cold_ns, by["dynamo"].warm_ns) == (4 * MS, 4 * MS)
    assert (by["inductor"].cold_ns, by["inductor"].warm_ns) == (14 * MS, 7 * MS)
    assert ws.still_missed == ["1/0 forward (model.py:1): FX graph cache bypass (Unsupported FX nodes)"]
    assert "13 ms instead of 20 ms" in ws.sentence and "1 cache lookup(s) still missed" in ws.sentence
    fx_cold, fx_warm = ws.cold_caches[0], ws.warm_caches[0]
    assert (fx_cold.miss, fx_warm.hit, fx_warm.bypass) == (2, 1, 1)


def test_a_fresh_worker_from_the_cold_runs_cache_artifacts_is_compared_too():
    """GIVEN a cold run and a run that loaded its cache artifacts into an empty directory (its
    decision note says so), WHEN compared, THEN the warm-start record holds that run's compile
    time, cache outcomes and what still missed, and the table shows it as a third column."""
    from rich.console import Console

    from seamscope.analyze.warm_start import compare_artifacts, compare_warm
    from seamscope.model.receipt import Decision
    from seamscope.render.compile_time_table import print_warm_start

    stage = {"dynamo_ns": 10 * MS, "aot_ns": 8 * MS, "backend_compile_ns": 8 * MS, "inductor_ns": 7 * MS}
    cold = make_receipt(_ledger([_compile("0/0", 10), _steady()], c0_0={**stage, "fx_cache": "miss"}))
    warm = make_receipt(_ledger([_compile("0/0", 3), _steady()], c0_0={"dynamo_ns": 3 * MS, "fx_cache": "hit"}))
    shipped = make_receipt(_ledger([_compile("0/0", 4), _steady()], c0_0={"dynamo_ns": 4 * MS, "fx_cache": "hit"}))
    shipped = msgspec.structs.replace(shipped, decision=Decision(
        note="cache artifacts: loaded 1,200 bytes (inductor 1) in 2 ms before the script"))
    art = compare_artifacts(cold, shipped, "a.bin", 1200, "warm-artifacts/receipt.json")
    assert art.compile_ns == 4 * MS and art.caches[0].hit == 1 and art.still_missed == []
    assert art.load_note == "cache artifacts: loaded 1,200 bytes (inductor 1) in 2 ms before the script"
    ws = compare_warm(cold, warm, "cache", "c", "w", artifacts=art, artifacts_note="cache artifacts: saved 1,200 bytes")
    assert ws.artifacts == art and "a fresh worker compiled for 4 ms" in ws.sentence
    console = Console(record=True, width=160)
    print_warm_start(console, ws)
    text = console.export_text()
    assert "from artifacts" in text and "loaded 1,200 bytes" in text
    alone = compare_warm(cold, warm, "cache", "c", "w", artifacts_note="cache artifacts: none saved: ...")
    console = Console(record=True, width=160)
    print_warm_start(console, alone)
    assert "no run from artifacts: cache artifacts: none saved" in console.export_text()


def test_a_first_compilation_in_a_directory_of_other_programs_entries_is_a_cold_start():
    # GIVEN a directory holding 7 entries of other programs and a run in which nothing hit
    fx = {"dynamo_ns": 10 * MS, "aot_ns": 6 * MS, "backend_compile_ns": 6 * MS, "inductor_ns": 5 * MS}
    led = _ledger([_compile("0/0", 10), _steady()], c0_0={**fx, "fx_cache": "miss", "aot_cache": "miss"})
    env = msgspec.structs.replace(
        led.environment, compile_cache=CompileCacheState(dir="cache", fx_entries=5, aot_entries=2)
    )
    sec = analyze_findings(msgspec.structs.replace(led, environment=env))
    ct = sec.compile_time
    # THEN no miss is reported (no entry of this program could have hit): it is a cold start
    assert not [f for f in ct.findings if f.kind == "cache_miss"]
    assert "missed" not in sec.headline.sentence and "a hit would have skipped" not in sec.headline.sentence
    (cold,) = [f for f in ct.findings if f.kind == "cold_start"]
    assert cold.compile_ids == ["0/0"]
    assert "held 7 entries" in cold.sentence and "none of them this program's" in cold.sentence
    assert "none of them this program's" in ct.cache_dir_basis


def test_counted_nouns_agree_with_their_numbers():
    from seamscope.commands._common import progress_words

    assert progress_words(1, 1) == "1 call · 1 compile" and progress_words(3, 2) == "3 calls · 2 compiles"
    # one compilation that bypassed the cache, one first compilation
    fx = {"dynamo_ns": 10 * MS, "aot_ns": 6 * MS, "backend_compile_ns": 6 * MS, "inductor_ns": 5 * MS}
    led = _ledger([_compile("0/0", 10), _steady()], c0_0={**fx, "fx_cache": "bypass", "fx_bypass_reason": "r"})
    ct = analyze_compile_time(led, [])
    (f,) = [f for f in ct.findings if f.kind == "cache_miss"]
    assert "of 1 compilation 0 hit" in f.sentence
    (cold,) = [f for f in ct.findings if f.kind == "cold_start"]
    assert "of 1 frame is" in cold.sentence and "(s)" not in cold.sentence


def test_a_recompile_cause_behind_a_library_wrapper_is_shown_at_the_users_frame():
    from seamscope.analyze.report_view.findings import ranked_rows, top_findings
    from seamscope.model.ledger import Frame

    # GIVEN a frame compiled as transformers' wrapper (generic.py) around the user's forward
    wrap = {"file": "site-packages/transformers/utils/generic.py", "line": 1110, "frame_name": "wrapper",
            "user_frame": Frame(file="models/gpt.py", line=42, function="forward")}
    led = _ledger([_compile("0/0", 10), _steady(), _compile("0/1", 4), _steady("0/1")], c0_0=wrap,
                  c0_1={**wrap, "failed_guards": ["tensor 'input_ids' size mismatch at index 1. expected 4, actual 8"]})
    r = make_receipt(led)
    assert r.findings.causes
    rows = [row for row in ranked_rows(r, ".") if row.kind == "recompiles"]
    # THEN the snippet is the user's frame the finding names, not the wrapper
    assert rows and all(row.where == "models/gpt.py:42" for row in rows)
    axis = [row for row in top_findings(r, ".") if row.kind == "recompiles"]
    assert axis and all(row.where == "models/gpt.py:42" for row in axis)


def test_no_inductor_cache_advice_on_a_backend_inductor_caches_do_not_serve():
    # GIVEN the same run under aot_eager, eager and inductor: AOTAutograd most of the first compile,
    # and a frame compiled for one later call
    calls = [_compile("0/0", 10), _steady(), [*_compile("1/0", 3), *_steady()], _steady(), _steady(), _steady()]
    stages = {"dynamo_ns": 10 * MS, "aot_ns": 8 * MS, "backend_compile_ns": 8 * MS}
    base = _ledger(calls, c0_0=stages)
    texts = {}
    for backend in ("aot_eager", "eager", "inductor"):
        led = msgspec.structs.replace(base, environment=msgspec.structs.replace(base.environment, backend=backend))
        ct = analyze_compile_time(led, [])
        texts[backend] = " ".join(r.text for f in ct.findings for r in f.remedies)
        assert {f.kind for f in ct.findings} >= {"cold_start", "cold_once"}
    # THEN only the inductor run is told of a persistent cache
    for backend in ("aot_eager", "eager"):
        for advice in ("warm persistent cache", "TORCHINDUCTOR_CACHE_DIR", "save_cache_artifacts"):
            assert advice not in texts[backend], texts[backend]
        assert "no persistent cache serves the " + backend in texts[backend]
    assert "persistent cache" in texts["inductor"]
