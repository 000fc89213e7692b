"""Compile skew between ranks, without torch: fake per-rank ledgers in which one rank compiles in a
call where the others do not.

GIVEN per-rank receipts whose calls compile for different times, WHEN they are merged, THEN the
skew finding names the call, the ranks that compiled, the ranks that waited and the wait; it is
ranked with the other findings by that wait; a wait within half of the process group's timeout
(recorded by the ranks, else NCCL's default) is warned about, with the remedy.
"""

from __future__ import annotations

import os

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.ranks import gather, merge
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.report_view.ranks import build_ranks
from seamscope.analyze.skew import NCCL_DEFAULT_TIMEOUT_NS, SKEW_FLOOR_NS, find_skews
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ranks import RankCall, RankEntry
from seamscope.render.receipt_json import write_receipt_files

MS = 1_000_000
S = 1000 * MS


def ledger(compiles, *, rank, world, timeout_ns=None, backend=None):
    """One call per entry of ``compiles``: the call compiles ``compiles[i]`` ns (0: nothing; call 0
    compiles 0/0, later compiles are recompiles 0/i) and runs a 1 ms region."""
    calls = []
    for i, c in enumerate(compiles):
        steps = [FakeStep("compile", c, f"0/{i}")] if c else []
        steps.append(FakeStep("region", MS, "0/0"))
        calls.append(FakeCall(steps))
    led = play(FakeProgram(calls=calls)).build()
    run = msgspec.structs.replace(led.run, source="live", rank=rank, world_size=world, input_trace_sha256="a" * 64)
    if timeout_ns is not None:
        run = msgspec.structs.replace(run, pg_timeout_ns=timeout_ns, pg_backend="nccl")
    env = msgspec.structs.replace(led.environment, backend=backend) if backend else led.environment
    return msgspec.structs.replace(led, run=run, environment=env)


def write_ranks(root, per_rank, **kw):
    for r, compiles in enumerate(per_rank):
        led = ledger(compiles, rank=r, world=len(per_rank), **kw)
        write_receipt_files(make_receipt(led), os.path.join(root, f"rank-{r}"))


def test_one_rank_compiling_alone_is_named_with_the_call_and_the_wait(tmp_path):
    # Every rank compiles at call 0 (about the same); rank 2 alone compiles again at call 3 (48 ms).
    write_ranks(tmp_path, [[30 * MS, 0, 0, 0, 0], [31 * MS, 0, 0, 0, 0], [30 * MS, 0, 0, 48 * MS, 0],
                           [29 * MS, 0, 0, 0, 0]])
    receipt = merge(gather(str(tmp_path)))
    sec = receipt.ranks
    assert len(sec.skews) == 1, sec.skews
    k = sec.skews[0]
    assert (k.call_index, k.slow_ranks, k.idle_ranks, k.fast_ranks) == (3, [2], [0, 1, 3], [0, 1, 3])
    assert k.lone and k.wait_ns == k.spread_ns == 48 * MS and k.rank_wait_ns == 3 * 48 * MS
    assert k.compile_ids == ["0/3 forward"]
    assert "at call 3 rank 2 compiled for 48 ms (0/3 forward) while ranks 0, 1, 3 did not compile" in k.sentence
    assert "waited up to 48 ms at the next collective" in k.sentence
    # No timeout recorded: compared with NCCL's default, far from it: no warning.
    assert sec.pg_timeout_ns == NCCL_DEFAULT_TIMEOUT_NS and "NCCL's default" in sec.pg_timeout_source
    assert k.warning is None
    # Ranked with the other findings by its wait.
    items = [i for i in receipt.findings.ranked if i.axis == "compile_skew"]
    assert [i.item_id for i in items] == [k.skew_id] and items[0].cost_ns == 48 * MS
    costs = [i.cost_ns or 0 for i in receipt.findings.ranked]
    assert costs == sorted(costs, reverse=True)
    assert [i.rank for i in receipt.findings.ranked] == list(range(1, len(costs) + 1))


def test_a_skew_that_costs_more_than_anything_else_leads_the_headline(tmp_path):
    # rank 1 alone compiles for 400 ms at call 2, far more than any finding of the primary rank's own
    write_ranks(tmp_path, [[30 * MS, 0, 0, 0], [30 * MS, 0, 400 * MS, 0]])
    receipt = merge(gather(str(tmp_path)))
    (k,) = receipt.ranks.skews
    f = receipt.findings
    assert f.ranked[0].item_id == k.skew_id and f.headline.top_item_id == k.skew_id
    assert f.headline.top_axis == "compile_skew" and f.headline.top_cost_ns == k.wait_ns
    assert "Costliest: " + f.ranked[0].sentence in f.headline.sentence


def test_equal_compile_work_timed_with_noise_is_not_a_skew(tmp_path):
    # Both ranks compile at calls 0 and 2, 20 % apart; a 0.5 ms difference at call 1 is below the floor.
    write_ranks(tmp_path, [[50 * MS, MS // 2, 40 * MS], [60 * MS, 0, 33 * MS]])
    sec = merge(gather(str(tmp_path))).ranks
    assert sec.skews == []
    assert not any(i.axis == "compile_skew" for i in merge(gather(str(tmp_path))).findings.ranked)


def test_a_wait_within_half_the_recorded_timeout_is_warned_about_with_the_remedy(tmp_path):
    write_ranks(tmp_path, [[S, 0, 35 * S], [S, 0, 0]], timeout_ns=60 * S)
    sec = merge(gather(str(tmp_path))).ranks
    assert sec.pg_timeout_ns == 60 * S and sec.pg_timeout_source.startswith("recorded by ranks 0, 1")
    (k,) = sec.skews
    assert (k.call_index, k.slow_ranks, k.idle_ranks) == (2, [0], [1])
    assert k.timeout_share is not None and abs(k.timeout_share - 35 / 60) < 1e-6
    assert k.warning is not None and "58% of the process group's timeout (60 s)" in k.warning
    assert "barrier" in k.remedy and "warm-up" in k.remedy and "cache" in k.remedy


def test_the_remedy_advises_a_shared_cache_only_where_inductors_caches_serve_the_backend(tmp_path):
    remedies = {}
    for backend in ("inductor", "eager", "aot_eager"):
        write_ranks(tmp_path / backend, [[30 * MS, 0, 0], [30 * MS, 0, 48 * MS]], backend=backend)
        (k,) = merge(gather(str(tmp_path / backend))).ranks.skews
        remedies[backend] = k.remedy
    assert all("barrier" in r and "warm-up" in r for r in remedies.values())
    assert "TORCHINDUCTOR_CACHE_DIR" in remedies["inductor"]
    assert not any("cache" in remedies[b] for b in ("eager", "aot_eager")), remedies


def test_a_wait_under_half_the_timeout_is_not_warned_about(tmp_path):
    write_ranks(tmp_path, [[S, 0, 20 * S], [S, 0, 0]], timeout_ns=60 * S)
    (k,) = merge(gather(str(tmp_path))).ranks.skews
    assert k.warning is None and k.wait_ns == 20 * S


def test_without_a_recorded_timeout_nccls_default_decides_the_warning(tmp_path):
    write_ranks(tmp_path, [[S, 360 * S], [S, 0]])
    (k,) = merge(gather(str(tmp_path))).ranks.skews
    assert k.warning is not None and "10 min" not in k.warning  # figures are written as fmt_ns does
    assert "600 s" in k.warning


def test_merge_prints_the_skew_and_the_warning(tmp_path):
    from fakes import seamscope_here

    write_ranks(tmp_path, [[S, 0, 0], [S, 0, 400 * S]])
    r = seamscope_here(["merge", str(tmp_path), "--out", str(tmp_path / "m")], str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "compile skew: at call 2 rank 1 compiled for 400 s (0/2 forward) while rank 0 did not compile" in r.stdout
    assert "warning: the wait at call 2 (400 s) is 67% of the process group's timeout" in r.stderr
    html = (tmp_path / "m" / "index.html").read_text()
    assert 'class="skew"' in html and "skew-warning" in html


# --- the arithmetic, on any figures ---------------------------------------------------------------


def entry(rank, compiles):
    calls = [RankCall(index=i, phase="cold" if c else "steady", outcome="compiled" if c else "hit", wall_ns=c + MS,
                      region_ns=MS, island_ns=0, compile_ns=c, regions=["0/0"], sites=[])
             for i, c in enumerate(compiles)]
    return RankEntry(rank=rank, source=f"rank-{rank}/receipt.json", world_size=None, input_trace_sha256=None,
                     structure_sha256="", receipt_sha256="", has_runtime=True, call_count=len(calls),
                     compile_count=0, recompile_count=0, graph_count=0, fallback_count=0, break_site_count=0,
                     compile_ids=[], recompiles=[], sites=[], ddp_splits=[], steady_calls=0, steady_median_ns=None,
                     steady_iqr_ns=None, calls=calls)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10 * S), min_size=3, max_size=3), min_size=2, max_size=6),
       st.integers(1, 1000 * S))
def test_skew_arithmetic(per_rank, timeout):
    entries = [entry(r, c) for r, c in enumerate(per_rank)]
    skews = {k.call_index: k for k in find_skews(entries, timeout)}
    for i in range(3):
        col = {r: c[i] for r, c in enumerate(per_rank)}
        hi, lo = max(col.values()), min(col.values())
        expected = hi - lo >= SKEW_FLOOR_NS and lo < 0.5 * hi
        assert (i in skews) == expected
        if not expected:
            continue
        k = skews[i]
        assert k.spread_ns == k.wait_ns == hi - lo and (k.max_ns, k.min_ns) == (hi, lo)
        assert k.rank_wait_ns == sum(hi - c for c in col.values())
        assert sorted(k.slow_ranks + k.fast_ranks) == sorted(col) and k.fast_ranks
        assert all(col[r] > col[f] for r in k.slow_ranks for f in k.fast_ranks)
        assert k.idle_ranks == sorted(r for r, c in col.items() if c == 0)
        assert (k.warning is not None) == ((hi - lo) / timeout >= 0.5)
    waits = [k.wait_ns for k in find_skews(entries, timeout)]
    assert waits == sorted(waits, reverse=True)


def test_the_report_view_shows_each_skew(tmp_path):
    write_ranks(tmp_path, [[S, 0, 0], [S, 0, 2 * S], [S, 0, 0]])
    view = build_ranks(merge(gather(str(tmp_path))))
    assert [(s.call_index, s.slow_ranks, s.waiting_ranks) for s in view.skews] == [(2, "1", "0, 2")]
    assert "NCCL's default" in view.pg_timeout


def test_the_markdown_summary_lists_the_skews_and_the_warning(tmp_path):
    from seamscope.analyze.report_view import build_view
    from seamscope.render.markdown import MarkdownRenderer

    write_ranks(tmp_path, [[S, 0, 0], [S, 0, 400 * S]])
    md = MarkdownRenderer().render_view(build_view(merge(gather(str(tmp_path))), source_root="/nonexistent"))
    assert "**Compile skew**: 1 call(s)" in md
    assert "at call 2 rank 1 compiled for 400 s" in md and "**Warning**" in md and "barrier" in md
