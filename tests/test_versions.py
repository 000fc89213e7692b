"""PyTorch versions, torch-free: the tested range follows the compatibility table, the warning
names what was not checked, the per-callable recompile limit is a compile option and a ``try``
candidate, and PyTorch's graph-break hint classes are read from reasons and the shipped table."""

from __future__ import annotations

import os
import re

import pytest

from seamscope.analyze.findings_hints import class_clause, earlier_site, hint_remedies
from seamscope.capture.adapter import base
from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_spec import compile_override, per_callable_limit, spec_from_words
from seamscope.ingest.break_reasons import parse_break_reason
from seamscope.ingest.hints import (
    CHAIN_SEPARATOR,
    CLASS_ORDER,
    MEANING,
    break_chain,
    hint_classes,
    shipped_table,
)
from seamscope.model.ledger import BreakSite, ChainedBreak

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "compatibility.md")


def _table_rows() -> dict[str, str]:
    rows = {}
    with open(DOC, encoding="utf-8") as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and re.fullmatch(r"\d+\.\d+\.\d+", cells[0]):
                rows[cells[0]] = cells[1]
    return rows


# --- the tested range ------------------------------------------------------------------------------


def test_the_compatibility_table_and_the_code_name_the_same_releases():
    rows = _table_rows()
    assert set(rows) == set(base.LANE_PASSED)
    assert all(r.startswith("passed") and re.search(r"\d+ passed, 0 failed", r) for r in rows.values()), rows
    lo, hi = base.TESTED_VERSIONS
    with open(DOC, encoding="utf-8") as f:
        assert f"{lo[0]}.{lo[1]}–{hi[0]}.{hi[1]}" in f.read()


def test_the_pyproject_floor_is_the_oldest_release_the_adapter_reads():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        m = re.search(r'torch = \["torch>=(\d+)\.(\d+)"\]', f.read())
    assert m is not None
    floor = (int(m.group(1)), int(m.group(2)))
    assert floor <= base.TESTED_VERSIONS[0]
    with open(DOC, encoding="utf-8") as f:
        assert f"torch>={floor[0]}.{floor[1]}" in f.read()


@pytest.mark.parametrize("version, warned", [("2.12.1", True), ("2.13.0+cpu", False), ("2.15.0+cu132", False),
                                             ("2.16.0", True), ("junk", True)])
def test_the_warning_names_the_version_the_range_and_what_was_not_checked(monkeypatch, version, warned):
    monkeypatch.setattr(base, "torch_version", lambda: (version, base._minor(version)))
    msg = base.version_warning()
    if not warned:
        assert msg is None
        return
    assert msg is not None and f"torch {version} is outside" in msg and "2.13–2.15" in msg
    assert all(item in msg for item in base.NOT_CHECKED) and msg.endswith("capture may be incomplete")


# --- the per-callable recompile limit ---------------------------------------------------------------


def test_recompile_limit_and_isolate_recompiles_are_compile_options():
    assert compile_override("recompile_limit=16") == ("recompile_limit", 16)
    assert compile_override("recompile_limit=none") == ("recompile_limit", None)
    assert compile_override("isolate_recompiles=true") == ("isolate_recompiles", True)
    for bad in ("recompile_limit=0", "recompile_limit=true", "recompile_limit=x", "isolate_recompiles=2"):
        with pytest.raises(UnusableInput, match=bad.split("=")[0]):
            compile_override(bad)


def test_a_process_wide_limit_candidate_has_a_per_callable_twin_from_torch_2_13():
    spec = spec_from_words(["--dynamo-config", "recompile_limit=64"])
    assert per_callable_limit(spec, "2.13.0+cpu") == ["--compile-option", "recompile_limit=64"]
    assert per_callable_limit(spec, "2.15.0+cu132") == ["--compile-option", "recompile_limit=64"]
    assert per_callable_limit(spec, "2.12.1") is None and per_callable_limit(spec, None) is None
    assert per_callable_limit(spec_from_words(["--dynamo-config", "capture_scalar_outputs=True"]), "2.15.0") is None


def test_try_offers_the_per_callable_limit_where_a_frame_hit_the_limit():
    import msgspec

    from seamscope.experiments.trials.catalogue import catalogue
    from seamscope.experiments.trials.verdicts import conflict_key
    from seamscope.ingest.receipt import load_receipt

    limit = load_receipt(os.path.join(ROOT, "tests", "golden", "import-limit.receipt.json"))  # 2 fallbacks, 2.13
    flags = [d.spec.flags() for d in catalogue(limit)]
    assert ["--dynamo-config", "recompile_limit=64"] in flags and ["--compile-option", "recompile_limit=64"] in flags
    old = msgspec.structs.replace(limit.ledger.environment, torch_version="2.12.0")
    older = msgspec.structs.replace(limit, ledger=msgspec.structs.replace(limit.ledger, environment=old))
    assert ["--compile-option", "recompile_limit=64"] not in [d.spec.flags() for d in catalogue(older)]
    # the two forms set one thing: a combined candidate takes one of them
    assert conflict_key("--compile-option", "recompile_limit=64") == conflict_key(
        "--dynamo-config", "recompile_limit=64"
    )


# --- hint classes -------------------------------------------------------------------------------------

_FUND = "This graph break is fundamental - it is unlikely that Dynamo will ever be able to trace through your code. Consider finding a workaround."
_EARLY = "This graph break may have been caused by an earlier graph break. Resolving the earlier graph break may resolve this one."

LOOP_REASON = f"""Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['int'] (has_kwargs True)
  Hint: Avoid calling builtin `print` with argument types ['int']. Consider using an equivalent alternative function/method to `print`.
  Hint: Please report an issue to PyTorch.

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html

{CHAIN_SEPARATOR}

graph break in loop
  Explanation: torch.compile detected a graph break in a for/while loop.
  Hint: {_EARLY}

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb7000.html
"""


def test_the_shipped_table_holds_every_class_and_the_lane_releases():
    t = shipped_table()
    assert set(CLASS_ORDER) <= set(t.classes) and set(MEANING) == set(CLASS_ORDER)
    assert t.classes["FUNDAMENTAL"] == (_FUND,)
    assert t.codes["GB0170"] == ("FUNDAMENTAL",) and t.codes["GB7000"] == ("CAUSED_BY_EARLIER_GRAPH_BREAK",)
    assert "GB0059" not in t.codes  # print: its registry entry names no class
    assert {base._minor(v) for v in t.torch_versions} == {base._minor(v) for v in base.LANE_PASSED}


def test_a_reason_chain_gives_the_site_its_own_classes_and_the_followers_theirs():
    chain = break_chain(LOOP_REASON)
    assert [(b.gb_code, b.classes) for b in chain] == [("GB0059", ()), ("GB7000", ("CAUSED_BY_EARLIER_GRAPH_BREAK",))]
    assert hint_classes(LOOP_REASON, "GB0059") == ()
    # a hint line names the class; without one, the registry's classes of the code
    assert hint_classes(f"Data-dependent branching\n  Hint: {_FUND}\n", None) == ("FUNDAMENTAL",)
    assert hint_classes("Data-dependent branching\n  Explanation: lost hints\n", "GB0170") == ("FUNDAMENTAL",)
    assert hint_classes("something new", "GB9999") == ()


def test_an_imported_break_reason_carries_the_same_classes():
    text = ("Graph break in user code at /w/x.py:3\nGraph Break Reason: " + LOOP_REASON
            + "\nUser code traceback:\n  File \"/w/x.py\", line 3, in f\n    print(i)\n")
    site = parse_break_reason(text, cwd="/w").site
    assert site.gb_code == "GB0059" and site.hint_classes == []
    assert site.chained == [ChainedBreak(gb_code="GB7000", gb_type="graph break in loop",
                                         hint_classes=["CAUSED_BY_EARLIER_GRAPH_BREAK"])]


def _site(sid: str, line: int, cids: list[str], classes: list[str], chained=()) -> BreakSite:
    return BreakSite(site_id=sid, file="m.py", line=line, function="f", gb_code=None, gb_type=f"type {sid}",
                     reason="", user_stack=[], compile_ids=cids, hint_classes=classes, chained=list(chained))


def test_findings_say_what_each_class_means_and_name_the_earlier_break():
    first = _site("B1", 3, ["0/0"], ["FUNDAMENTAL"])
    second = _site("B2", 9, ["1/0"], ["CAUSED_BY_EARLIER_GRAPH_BREAK"])
    other = _site("B3", 20, ["2/0"], [])
    sites = [second, other, first]
    assert earlier_site(second, sites) is first and earlier_site(first, sites) is None
    (fund,) = hint_remedies(first, sites)
    assert fund.config == {"class": "FUNDAMENTAL"} and "honest boundary" in fund.text and "rewrite" in fund.text
    (early,) = hint_remedies(second, sites)
    assert "fix the earlier one first: break B1 at m.py:3 (type B1)" in early.text
    assert hint_remedies(other, sites) == [] and class_clause(other) == ""
    looped = _site("B4", 5, ["3/0"], [], [ChainedBreak(gb_code="GB7000", gb_type="graph break in loop",
                                                       hint_classes=["CAUSED_BY_EARLIER_GRAPH_BREAK"])])
    (r,) = hint_remedies(looped, [looped])
    assert "graph break in loop (GB7000)" in r.text and "Fix this break first" in r.text
    assert "follows from this one" in class_clause(looped)
    assert "SUPPORTABLE" in class_clause(_site("B5", 1, [], ["SUPPORTABLE"]))
    supp = hint_remedies(_site("B5", 1, [], ["SUPPORTABLE"]), [])[0]
    assert "report it upstream" in supp.text and "newer PyTorch" in supp.text


def test_a_break_dynamo_could_not_resume_from_says_which_frame_stopped_being_compiled():
    """transformers' warning_once inside a GPT-2 training step: PyTorch compiles the step up to the
    model's call and runs the rest eagerly ("Encountered graph break that we cannot resume from.
    Compiling up to the previous resumable state, then skipping the rest of the function"), every
    function it calls compiled on its own; its finding says so (a plain break, or a frame skipped
    whole, says nothing of the kind)."""
    from types import SimpleNamespace as NS

    from seamscope.analyze.findings_hints import resume_clause
    from seamscope.model.ledger import Frame

    wrapped = ("Encountered graph break that we cannot resume from. Compiling up to the previous resumable state, "
               "then skipping the rest of the function. Graph break encountered:")
    step = NS(compile_id="0/0", frame_name="train_step", user_frame=None)
    inner = NS(compile_id="1/0", frame_name="inner", user_frame=Frame(file="m.py", line=3, function="Net.forward"))
    ledger = NS(compilations=[step, inner])
    site = NS(gb_type=wrapped, frame_skipped=False, compile_ids=["0/0"])
    text = resume_clause(site, ledger)  # type: ignore[arg-type]
    assert text.startswith("; Dynamo could not resume after it: train_step is compiled only up to the call")
    assert "the rest of train_step runs eagerly" in text
    assert "Net.forward is compiled" in resume_clause(NS(gb_type=wrapped, frame_skipped=False,  # type: ignore[arg-type]
                                                         compile_ids=["1/0"]), ledger)
    assert resume_clause(NS(gb_type="Call to `torch._dynamo.graph_break()`", frame_skipped=False,  # type: ignore[arg-type]
                            compile_ids=["0/0"]), ledger) == ""
    assert resume_clause(NS(gb_type=wrapped, frame_skipped=True, compile_ids=["0/0"]), ledger) == ""  # type: ignore[arg-type]
