"""A probe workload as a target: ``seamscope run FILE.py:FUNC`` and ``seamscope try FILE.py:FUNC``.

The torch-free part checks the catalogue's padding candidates and the bucket choice; the torch part
runs the tiny shape workload and checks its compilations against Dynamo's own counters, that a
padded run's outputs compare equal to an unpadded one's (the output view), and the bad inputs."""

from __future__ import annotations

import json
import os

import pytest
from fakes import seamscope_here

HERE = os.path.dirname(os.path.abspath(__file__))
TINY = os.path.join(HERE, "workloads", "shapes_tiny.py")
GOLDEN = os.path.join(HERE, "golden")


def _golden(name):
    from seamscope.ingest.receipt import load_receipt

    return load_receipt(os.path.join(GOLDEN, name))


# --- torch-free --------------------------------------------------------------------------------


def test_buckets_at_the_quartiles_of_the_distinct_lengths():
    from seamscope.experiments.trials.catalogue import buckets_for

    assert buckets_for([5, 7]) is None
    assert buckets_for([5, 7, 9, 12, 5]) == "buckets:7,9,12"
    spec = buckets_for(list(range(100, 200, 7)))
    assert spec is not None
    sizes = [int(s) for s in spec.removeprefix("buckets:").split(",")]
    assert sizes == sorted(sizes) and sizes[-1] == 198  # the longest length always has a bucket


def test_padding_candidates_only_for_a_workload_with_shape_churn():
    from seamscope.experiments.trials.catalogue import catalogue

    churn = _golden("import-breaks.receipt.json")  # shape churn findings
    script = [d.spec.flags() for d in catalogue(churn)]
    assert ["--compile-option", "dynamic=true"] in script
    assert not any("--pad" in f for f in script)
    workload = [d.spec.flags() for d in catalogue(churn, [5, 7, 9, 12], True)]
    assert ["--pad", "pow2"] in workload and ["--pad", "buckets:7,9,12"] in workload
    no_trace = [d.spec.flags() for d in catalogue(churn, None, True)]
    assert ["--pad", "pow2"] in no_trace and not any(f[-1].startswith("buckets:") for f in no_trace)
    quiet = _golden("fake-breaks.receipt.json")  # no shape churn: nothing to pad for
    assert not any("--pad" in d.spec.flags() for d in catalogue(quiet, [5, 7, 9], True))


def test_pad_is_a_remedy_flag_with_its_code_change():
    from seamscope.experiments.remedy_spec import code_change, spec_from_words
    from seamscope.experiments.trials.verdicts import conflict_key

    spec = spec_from_words(["--pad", "buckets:8,16"])
    assert spec.pad == "buckets:8,16" and spec.flags() == ["--pad", "buckets:8,16"]
    assert "buckets:8,16" in code_change(spec)
    assert conflict_key("--pad", "pow2") == conflict_key("--pad", "buckets:8") == "pad"


def test_workload_spec_is_a_file_and_a_name(tmp_path):
    from seamscope.experiments.workload import is_workload_spec

    assert is_workload_spec(f"{TINY}:tiny")
    assert not is_workload_spec(TINY)
    assert not is_workload_spec(str(tmp_path / "missing.py") + ":f")
    assert not is_workload_spec(f"{TINY}:not-a-name")


# --- with torch --------------------------------------------------------------------------------


def _run(tmp_path, name, words, args, fingerprint=False):
    from seamscope.capture.runner import run_target
    from seamscope.experiments.remedy_plan import prepare
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.workload_run import launcher

    spec = spec_from_words(words)
    target = f"{TINY}:tiny"
    record = str(tmp_path / f"{name}.fp.json")
    plan = prepare(spec, target, record_out=record, fingerprint=fingerprint)
    if spec.pad is not None:
        args = [*args, "--pad", spec.pad]
    result = run_target(target, args, out=str(tmp_path / name), setup=plan, launch=launcher(target, args))
    assert result.exit_code == 0, result.message
    with open(tmp_path / name / "receipt.json") as f:
        return json.load(f), record


@pytest.mark.torch
def test_run_a_workload_over_a_length_trace(tmp_path, dynamo_reset):
    """Lengths 5, 7, 9, 7: 5 compiles static, 7 recompiles with the length dynamic, the rest hit."""
    from seamscope.capture import adapter

    r, _ = _run(tmp_path, "trace", [], ["--lengths", "5,7,9,7"])
    counters = adapter.dynamo_counters()
    assert r["summary"]["call_count"] == 4
    assert r["summary"]["compile_count"] == counters["frames"]["ok"] == 2
    assert r["summary"]["recompile_count"] == 1
    assert r["ledger"]["run"]["command"][0] == f"{TINY}:tiny"


@pytest.mark.torch
def test_run_a_workload_as_the_probe_calls_it(tmp_path, dynamo_reset):
    """No trace: the cold steady call and warm_calls warm ones, labelled with their family."""
    r, _ = _run(tmp_path, "families", [], [])
    assert r["summary"]["call_count"] == 1 + 20
    assert r["summary"]["compile_count"] == 1


@pytest.mark.torch
def test_padded_outputs_compare_with_unpadded_ones(tmp_path, dynamo_reset):
    """pow2 pads 5, 6 and 7 to 8 (one compilation); the fingerprints are of the cut-back outputs,
    so they equal the unpadded run's (Tiny is causal: padding at the end leaves the rest alone)."""
    from seamscope.experiments.trials import fingerprint as fp

    plain, rec_plain = _run(tmp_path, "plain", [], ["--lengths", "5,6,7"], fingerprint=True)
    from seamscope.capture import adapter

    adapter.dynamo_reset()  # the padded run compiles from scratch, as in a fresh process
    padded, rec_pad = _run(tmp_path, "pad", ["--pad", "pow2"], ["--lengths", "5,6,7"], fingerprint=True)
    assert plain["summary"]["compile_count"] == 2 and padded["summary"]["compile_count"] == 1
    a, b = fp.load(rec_plain), fp.load(rec_pad)
    assert [c.leaves[0].shape for c in b.calls] == [[2, 5, 8], [2, 6, 8], [2, 7, 8]]
    assert fp.compare(a, b).equal


@pytest.mark.torch
@pytest.mark.parametrize("args,text", [
    (["run", "--pad", "pow2", os.path.join(HERE, "workloads", "trials", "shape_churn.py")], "workload target"),
    (["run", "--pad", "dynamic", f"{TINY}:tiny"], "--pad"),
    (["run", "--disable", "shapes_tiny:_tokens", f"{TINY}:tiny"], "workload's own file"),
    (["run", f"{TINY}:tiny", "--", "--lengths", "0,x"], "length"),
    (["try", "missing.py:f"], "no such workload file"),
], ids=["pad-a-script", "pad-policy", "disable-own-file", "lengths", "missing-file"])
def test_workload_bad_input_exits_2(args, text, tmp_path, monkeypatch, capsys):
    """Refused before anything runs: in-process (what is tested is the validation, not a process)."""
    from seamscope.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main([*args[:1], "--out", "o", *args[1:]])
    err = capsys.readouterr().err
    assert e.value.code == 2, (args, err)
    assert text in err.strip().splitlines()[-1], (args, err)
    assert not (tmp_path / "o").exists(), args


@pytest.mark.torch
@pytest.mark.timeout(1200)
def test_try_a_workload_with_its_padding_policies(tmp_path, fresh_server):
    """The baseline recompiles on the length; the pow2 candidate compiles once, its outputs equal
    (the command in this process, its runs forked from the test run's one server)."""
    p = seamscope_here(["try", "--quiet", "--repeat", "1", "--out", "o", "--only", "pad-pow2", f"{TINY}:tiny",
                        "--", "--lengths", "5,6,7,5,6,7"], tmp_path)
    assert p.returncode == 0, p.stderr
    with open(tmp_path / "o" / "trials.json") as f:
        t = json.load(f)
    (pad,) = t["candidates"]
    assert pad["flags"] == ["--pad", "pow2"]
    assert pad["outputs"]["status"] == "equal"
    assert next(m for m in t["baseline"]["metrics"] if m["name"] == "recompiles")["median"] == 1
    assert next(m for m in pad["metrics"] if m["name"] == "recompiles")["median"] == 0
    assert "--pad pow2" in pad["command"] and f"{TINY}:tiny -- --lengths 5,6,7,5,6,7" in pad["command"]
    # the report of the chosen run (here the baseline: one repetition decides nothing) opens with the table
    page = (tmp_path / "o" / "index.html").read_text()
    assert 0 < page.index('<section id="trials">') < page.index('id="overview"')
    assert "pad-pow2" in page
