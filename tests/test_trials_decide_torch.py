"""``seamscope try`` decides, on real torch runs of small transformers models from configs: an A/A
trial, a planted slowdown, stacked remedies, a KV cache's family of sources (backend "eager").

Each trial runs once per module (its runs are fresh processes forked from the session's server).
Timing claims are asserted where the trial measured the machine not busy (its own load figures,
``load.busy``); on a busy machine only what the verdict procedure promises there: never the wrong
direction, and the note says the measured load."""

from __future__ import annotations

import json
import os

import pytest
from fakes import seamscope_here
from trial_checks import noisy_machine

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_server")]

W = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "trials")


def _trial(d, words):
    p = seamscope_here(["try", "--quiet", "--out", "o", *words], d)
    assert p.returncode == 0, p.stderr
    with open(d / "o" / "trials.json") as f:
        return json.load(f)


def _metric(c, name):
    return next(m for m in c["metrics"] if m["name"] == name)


def _busy(t, c):
    """What the trial measured of the load over the baseline's and this candidate's timed runs."""
    import msgspec

    from seamscope.experiments.trials.load import busy
    from seamscope.model.trials import RunFigures

    runs = [msgspec.convert(r, RunFigures) for r in t["baseline"]["runs"] + c["runs"]]
    return busy(runs)


@pytest.fixture(scope="module")
def aa_trial(tmp_path_factory, fresh_server):
    """GPT-2 of one layer from a config, one length, 30 calls; two candidates of the user's: the baseline's
    own setting (recompile_limit=8 is the default: an A/A), and a backend that sleeps 0.4× of
    what compiling and each call took."""
    d = tmp_path_factory.mktemp("aa")
    return _trial(d, ["--repeat", "3", "--max-repeat", "3", "--only", "no-catalogue-candidate",
                      "--candidate", "--dynamo-config recompile_limit=8",
                      "--candidate", "--compile-option backend=planted_backends:slow",
                      os.path.join(W, "hf_steady.py")])


@pytest.mark.timeout(1800)
def test_the_baseline_against_itself_is_no_measurable_change(aa_trial):
    aa = next(c for c in aa_trial["candidates"] if c["name"] == "user-1")
    total = _metric(aa, "total")
    assert aa["repetitions"] == 3 and total["ci_low"] is not None
    assert aa["total_verdict"] not in ("faster", "slower"), total
    busy = _busy(aa_trial, aa)
    if busy is None and not noisy_machine(aa):  # the run measured the machine quiet: the A/A is decided
        assert aa["verdict"] == "no measurable change", (total, aa["noise_note"])
    elif aa["verdict"] == "noisy" and busy is not None:
        assert "the machine is busy" in aa["noise_note"] and busy in aa["noise_note"]
    elif aa["verdict"] == "noisy":  # fresh processes varied with no load to blame: said so, not a verdict
        assert "not from load" in aa["noise_note"], aa["noise_note"]
    assert aa_trial["chosen"] != "user-1" or aa["verdict"] == "faster"


@pytest.mark.timeout(1800)
def test_a_candidate_made_slower_by_a_planted_sleep_is_called_slower(aa_trial):
    slow = next(c for c in aa_trial["candidates"] if c["name"] == "user-2")
    assert slow["outputs"]["status"] == "equal"
    assert "faster" not in (slow["verdict"], slow["total_verdict"], slow["steady_verdict"])
    if _busy(aa_trial, slow) is None and not noisy_machine(slow):
        assert slow["total_verdict"] == "slower", _metric(slow, "total")
    assert aa_trial["chosen"] != "user-2"


@pytest.mark.timeout(1800)
def test_a_kv_cache_under_generate_gets_one_mark_for_every_layer(tmp_path):
    """The guard names layer 0's keys; the candidate's one regex marks every layer's keys and
    values, and the cache-length recompiles are gone (what remains is the prompt → one token)."""
    t = _trial(tmp_path, ["--repeat", "1", "--only", "mark-dynamic", os.path.join(W, "hf_generate.py")])
    (mark,) = [c for c in t["candidates"] if any(f == "--mark-dynamic" for f in c["flags"])]
    family = [v for f, v in zip(mark["flags"][::2], mark["flags"][1::2], strict=True) if "layers" in v]
    assert family and family[0].endswith(r"\.(keys|values)\Z:2") and r"layers\[\d+\]" in family[0]
    # three tokens: the prompt's compilation, a recompile for the first new token, one for the cache's
    # next length (a mark on layer 0's cache alone would leave layer 1's recompile: two)
    assert _metric(t["baseline"], "recompiles")["median"] >= 2
    assert _metric(mark, "recompiles")["median"] <= 1
    assert not any("cache" in g for r in mark["runs"] for g in r["size_guards"])
    assert mark["code_change"].count("dynamic_sources =") == 1 and mark["outputs"]["status"] == "equal"


@pytest.mark.timeout(1800)
def test_two_remedies_on_different_things_are_stacked(tmp_path):
    """Regional compilation of the repeated layer and dynamic=true on its length churn: where both
    win alone, their stack is tried (one layer compiled once), outputs checked, and recommended
    over either where the machine was not measured busy."""
    # one repetition: each verdict rests on the 3% floor (the remedies here cut the total by half and more), so
    # the stack is tried on every run, loaded or not; the recommendation is asserted where no load was measured
    t = _trial(tmp_path, ["--repeat", "1", "--only", "regional", "--only", "dynamic=true",
                          os.path.join(W, "hf_stack.py")])
    by = {c["name"]: c for c in t["candidates"]}
    reg, dyn = by["regional-llamadecoderlayer"], by["dynamic-true"]
    assert _metric(t["baseline"], "recompiles")["median"] == 2 and _metric(dyn, "recompiles")["median"] == 0
    stacked = by.get("combined") or by.get("regional-llamadecoderlayer+dynamic-true")
    if reg["verdict"] == dyn["verdict"] == "faster" or stacked is not None:
        assert stacked is not None
        assert {("--regional", "LlamaDecoderLayer"), ("--compile-option", "dynamic=true")} <= set(
            zip(stacked["flags"][::2], stacked["flags"][1::2], strict=True))
        assert stacked["outputs"]["status"] == "equal" and _metric(stacked, "recompiles")["median"] == 0
        if _busy(t, stacked) is None and stacked["verdict"] == "faster":  # chosen, or said why not (within noise)
            assert (t["chosen"] == stacked["name"] and "stacked remedies" in t["decision"]) or (
                f"{stacked['name']} (" in t["decision"] and "was not measurably faster than" in t["decision"])
    if t["chosen"] is not None:  # the top receipt is the recommendation's first run, with its change
        chosen = by[t["chosen"]]
        with open(tmp_path / "o" / "receipt.json") as f:
            top = json.load(f)
        run = next(r for r in chosen["runs"] if r["ok"])
        assert top["summary"]["compile_ns"] == run["compile_ns"] > 0
        steady = next(p for p in top["summary"]["phases"] if p["phase"] == "steady")
        assert steady["median_ns"] == run["steady_median_ns"] is not None
        assert top["decision"]["intervention"].startswith(chosen["code_change"])
