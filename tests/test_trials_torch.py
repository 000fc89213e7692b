"""Remedy flags and ``seamscope try`` on real torch runs of tiny scripts (backend="eager").

The in-process tests check the receipt against PyTorch's own counters; the trials run
``seamscope try`` as a user does (its command line, in this process), one fresh process per run,
forked from the test run's one server (``fresh_server``); Ctrl-C is sent to a real ``try`` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fakes import seamscope_here
from trial_checks import load, noisy_machine

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_server")]

HERE = os.path.dirname(os.path.abspath(__file__))
W = os.path.join(HERE, "workloads", "trials")
SEAMSCOPE = [sys.executable, "-m", "seamscope"]


def cli(args, cwd):
    """``seamscope ARGS`` in this process; its fresh processes come from the session's ``fresh_server``."""
    return seamscope_here(args, cwd)


def run_in_process(script, words, out, capsys=None):
    from seamscope.capture.runner import run_target
    from seamscope.experiments.remedy_plan import prepare
    from seamscope.experiments.remedy_spec import spec_from_words

    plan = prepare(spec_from_words(words), script)
    result = run_target(script, [], out=str(out), setup=plan)
    assert result.exit_code == 0, result.message
    return result, plan


# --- the remedy flags of run ---------------------------------------------------------------------


def test_mark_dynamic_overrides_dynamic_false_and_names_the_frame(tmp_path, dynamo_reset):
    from seamscope.capture import adapter

    has, per_dim = adapter.dynamic_sources_support()
    assert has and per_dim  # torch 2.13 reads "L['x']:0"
    script = os.path.join(W, "shape_churn.py")
    result, _ = run_in_process(script, ["--mark-dynamic", "L['x']:0"], tmp_path / "m")
    r = load(tmp_path / "m" / "receipt.json")
    counters = adapter.dynamo_counters()
    assert r["summary"]["compile_count"] == 1 and r["summary"]["recompile_count"] == 0
    assert counters["stats"]["unique_graphs"] == r["summary"]["graph_count"] == 1
    note = r["decision"]["note"]
    assert "L['x']:0 marked L['x'] in step (shape_churn.py:5) [0/0]" in note
    import torch

    assert torch.compiler.config.dynamic_sources == ""  # restored after the run


def test_compile_option_dynamic_true_and_seed(tmp_path, dynamo_reset, capsys):
    from seamscope.capture import adapter

    script = os.path.join(W, "shape_churn.py")
    run_in_process(script, ["--compile-option", "dynamic=true"], tmp_path / "d")
    r = load(tmp_path / "d" / "receipt.json")
    assert r["summary"]["compile_count"] == 1
    assert adapter.dynamo_counters()["stats"]["unique_graphs"] == 1
    assert r["ledger"]["environment"]["compile_options"]["dynamic"] == "True"  # what ran, not what was written
    draws = []
    for seed in ("5", "5", "6"):
        capsys.readouterr()
        run_in_process(os.path.join(W, "seeded.py"), ["--seed", seed], tmp_path / f"s{seed}")
        draws.append([ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("draws")])
    assert draws[0] == draws[1] != draws[2]


def test_dynamo_config_set_of_callables_and_restore(tmp_path, dynamo_reset):
    import torch._dynamo.config as cfg

    before = set(cfg.reorderable_logging_functions)
    script = os.path.join(W, "disable_module.py")
    run_in_process(script, ["--dynamo-config", "reorderable_logging_functions+=builtins:print",
                            "--dynamo-config", "recompile_limit=3"], tmp_path / "r")
    r = load(tmp_path / "r" / "receipt.json")
    assert r["ledger"]["environment"]["dynamo_config"]["recompile_limit"] == "3"
    assert set(cfg.reorderable_logging_functions) == before and cfg.recompile_limit == 8


def test_disable_a_module_function_when_imported_and_a_script_function_as_defined(tmp_path, dynamo_reset):
    from seamscope.capture import adapter

    mod = os.path.join(W, "disable_module.py")
    sys.modules.pop("trials_helper", None)
    run_in_process(mod, ["--disable", "trials_helper:noisy"], tmp_path / "a")
    sites = load(tmp_path / "a" / "receipt.json")["summary"]["break_sites"]
    assert [s["gb_type"] for s in sites] == ["Skip calling `torch.compiler.disable()`d function"]
    assert adapter.dynamo_counters()["graph_break"]  # PyTorch counted the boundary too
    assert "disable" in repr(sys.modules["trials_helper"].noisy) or hasattr(
        sys.modules["trials_helper"].noisy, "_torchdynamo_disable")
    sys.modules.pop("trials_helper", None)
    adapter.dynamo_reset()
    script = os.path.join(W, "disable_script.py")
    run_in_process(script, ["--disable", "disable_script:noisy", "--disable", "__main__:Logger.noisy"],
                   tmp_path / "b")
    sites = load(tmp_path / "b" / "receipt.json")["summary"]["break_sites"]
    # one explicit boundary per disabled function: the plain function's call, and the method's
    # (Dynamo cannot resume after skipping a disabled bound method: that site keeps the inner type)
    assert sorted(s["line"] for s in sites) == [18, 19]
    assert "Skip calling `torch.compiler.disable()`d function" in [s["gb_type"] for s in sites]
    assert not any(
        "item" in t or "builtin operator" in t for t in (s["gb_type"] for s in sites)
    )  # the breaks inside are gone


def test_adapter_functions_behind_the_remedies(dynamo_reset, capfd):
    import logging

    import torch

    from seamscope.capture import adapter

    assert adapter.dynamo_setting("recompile_limit") == (True, torch._dynamo.config.recompile_limit)
    assert adapter.dynamo_setting("no_such_setting") == (False, None)
    assert {"default", "force_eager", "eager_then_compile"} <= set(adapter.stance_names())
    marks = []
    level = logging.getLogger(adapter.DYNAMIC_SOURCE_LOGGER).level
    undo = adapter.watch_dynamic_source_marks(lambda s, e, cid: marks.append((s, e, cid)))
    try:
        with adapter.dynamic_sources_patch("L['x']:0"):
            f = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
            f(torch.ones(3, 2))
            f(torch.ones(5, 2))
    finally:
        undo()
    assert marks and marks[0] == ("L['x']", "L['x']:0", "0/0")
    assert logging.getLogger(adapter.DYNAMIC_SOURCE_LOGGER).level == level
    assert "marked dynamic" not in capfd.readouterr().err  # watched, not printed
    assert adapter.dynamo_counters()["stats"]["unique_graphs"] == 1  # one graph for both lengths


def test_outputs_before_the_first_update_only(dynamo_reset):
    import torch

    from seamscope.experiments.trials.fingerprint import Recorder

    rec = Recorder()
    undo = rec.install()
    try:
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        fwd = rec.wrap(torch.compile(model, backend="eager"))
        x = torch.ones(3, 4)
        expected = model(x).detach().double().sum().item()
        for _ in range(3):
            loss = fwd(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
    finally:
        undo()
    assert rec.seen == 3 and rec.stopped_at == 1 and len(rec.calls) == 1 and not rec.calls[0].updated
    leaf = rec.calls[0].leaves[0]
    assert leaf.shape == [3, 2] and leaf.dtype == "torch.float32"
    assert leaf.sum == pytest.approx(expected, rel=1e-6)


def test_a_training_steps_first_call_is_kept_marked_updated(dynamo_reset):
    """A compiled training step takes the optimizer step inside the call: its first call's loss was
    computed on the initial weights (the same in every run) and is kept, marked; later calls not."""
    import torch

    from seamscope.experiments.trials.fingerprint import Recorder

    rec = Recorder()
    undo = rec.install()
    try:
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            loss = model(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()

        fwd = rec.wrap(torch.compile(step, backend="eager"))
        x = torch.ones(3, 4)
        expected = model(x).detach().double().sum().item()
        for _ in range(3):
            fwd(x)
    finally:
        undo()
    assert rec.seen == 3 and rec.stopped_at == 0 and len(rec.calls) == 1 and rec.calls[0].updated
    assert rec.calls[0].leaves[0].sum == pytest.approx(expected, rel=1e-6)


def cli_here(args, cwd, monkeypatch, capsys):
    """``seamscope ARGS`` in this process (what is not about the process itself): exit code, stdout,
    stderr."""
    from seamscope.cli import main

    monkeypatch.chdir(cwd)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, e.value.code, out.out, out.err)


def test_bad_input_exits_2_before_anything_runs(tmp_path, monkeypatch, capsys):
    script = os.path.join(W, "shape_churn.py")
    cases = [
        (["run", "--dynamo-config", "no_such_setting=1"], "no_such_setting"),
        (["run", "--dynamo-config", "recompile_limit=True"], "recompile_limit"),
        (["run", "--disable", "no_such_module_here:f"], "no_such_module_here"),
        (["run", "--disable", "shape_churn:missing"], "missing"),
        (["run", "--stance", "sometimes"], "--stance"),
        (["try", "--candidate", "--dynamo-config capture_scalar_output=True"], "capture_scalar_output"),
    ]
    for args, name in cases:
        p = cli_here([*args, "--out", "o", script], tmp_path, monkeypatch, capsys)
        assert p.returncode == 2, (args, p.stderr)
        assert name in p.stderr.strip().splitlines()[-1], p.stderr
        assert not (tmp_path / "o").exists(), args


# --- seamscope try ---------------------------------------------------------------------------------


@pytest.mark.timeout(1800)
def test_try_item_break_with_a_planted_change_and_a_crash(tmp_path, monkeypatch, capsys):
    """capture_scalar_outputs removes the .item() breaks (faster, outputs equal); a backend that
    scales one output by 1.01 changes outputs; a backend that kills the interpreter fails, and
    the others finish."""
    script = os.path.join(W, "item_break.py")
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "o", "--only", "capture_scalar_outputs",
             "--candidate", "--compile-option backend=planted_backends:scaled",
             "--candidate", "--compile-option backend=planted_backends:crash", script], tmp_path)
    assert p.returncode == 0, p.stderr
    t = load(tmp_path / "o" / "trials.json")
    by = {c["name"]: c for c in t["candidates"]}
    cso = by["capture-scalar-outputs"]
    assert cso["flags"] == ["--dynamo-config", "capture_scalar_outputs=True"]
    assert cso["outputs"]["status"] == "equal" and cso["outputs"]["calls_compared"] == 60
    base_breaks = next(m for m in t["baseline"]["metrics"] if m["name"] == "breaks")["median"]
    # four identical .item() statements are four break sites
    assert base_breaks == 4 and next(m for m in cso["metrics"] if m["name"] == "breaks")["median"] == 0
    if not noisy_machine(cso):
        assert cso["verdict"] == "faster" and t["chosen"] == "capture-scalar-outputs"
    assert by["user-1"]["verdict"] == "changes outputs"
    assert "sum" in by["user-1"]["outputs"]["vs_baseline"]
    assert by["user-2"]["verdict"] == "failed" and "SIGSEGV" in by["user-2"]["reason"]
    # user-1 differs from the baseline's first check: so the baseline ran again, and agreed with itself
    assert (tmp_path / "o" / "trials" / "baseline" / "check-2").is_dir()
    assert t["deterministic"] is True and t["baseline"]["outputs"]["status"] == "equal"
    assert t["baseline"]["outputs"]["vs_eager"] == "equal"
    assert t["candidates"][0]["name"] == "capture-scalar-outputs"
    # the top receipt records the decision and verifies, as do the runs' receipts
    top = load(tmp_path / "o" / "receipt.json")
    assert top["decision"]["tolerance"]
    if t["chosen"] == "capture-scalar-outputs":
        assert "capture_scalar_outputs = True" in top["decision"]["intervention"]
        assert top["decision"]["rollback_trigger"]
    else:  # a loaded machine's one repetition: nothing chosen, and the top receipt says so
        assert t["chosen"] is None and top["decision"]["intervention"] is None
        assert top["decision"]["note"].startswith("keep the script as it is")
    for rel in (".", cso["runs"][0]["receipt"].rsplit("/", 1)[0], "o/trials/baseline/rep-1"):
        path = str(tmp_path / "o" / rel) if not rel.startswith("o/") else str(tmp_path / rel)
        v = cli_here(["verify", path], tmp_path, monkeypatch, capsys)
        assert v.returncode == 0, v.stdout + v.stderr
    md = (tmp_path / "o" / "trials.md").read_text()
    # measured as its patch (a settings line after the imports): the reproducing command applies it
    assert "seamscope run --out" in md and "--patch o/trials/capture-scalar-outputs.patch" in md
    assert "+torch._dynamo.config.capture_scalar_outputs = True" in cso["diff"]


@pytest.mark.timeout(1800)
def test_try_shape_churn_and_limit_fallback(tmp_path):
    """dynamic=true or the marked source leaves one compilation; under dynamic=False the recompile
    limit's fallback is gone with the marked source."""
    churn = cli(["try", "--quiet", "--repeat", "1", "--out", "a", "--only", "dynamic=true",
                 "--only", "mark-dynamic", os.path.join(W, "shape_churn.py")], tmp_path)
    assert churn.returncode == 0, churn.stderr
    t = load(tmp_path / "a" / "trials.json")
    by = {c["name"]: c for c in t["candidates"]}
    assert set(by) >= {"dynamic-true", "mark-dynamic-x-0"}
    for name in ("dynamic-true", "mark-dynamic-x-0"):
        rec = next(m for m in by[name]["metrics"] if m["name"] == "recompiles")
        assert rec["median"] == 0 and by[name]["outputs"]["status"] == "equal"
        assert by[name]["runs"][0]["compile_ns"] > 0
    mark = by["mark-dynamic-x-0"]  # measured as its patch: one dynamic_sources line
    assert "--patch " in mark["command"] and "torch.compiler.config.dynamic_sources = \"L['x']:0\"" in mark["diff"]
    assert (tmp_path / mark["patch"]).read_text() == mark["diff"]
    assert next(m for m in t["baseline"]["metrics"] if m["name"] == "recompiles")["median"] == 5
    limit = cli(["try", "--quiet", "--repeat", "1", "--out", "b", "--only", "mark-dynamic",
                 os.path.join(W, "limit_fallback.py")], tmp_path)
    assert limit.returncode == 0, limit.stderr
    t = load(tmp_path / "b" / "trials.json")
    assert next(m for m in t["baseline"]["metrics"] if m["name"] == "fallbacks")["median"] >= 1
    (mark,) = t["candidates"]
    assert next(m for m in mark["metrics"] if m["name"] == "fallbacks")["median"] == 0
    assert next(m for m in mark["metrics"] if m["name"] == "recompiles")["median"] == 0


def test_try_baseline_failure_runs_nothing_else(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nf = torch.compile(lambda x: x + 1, backend='eager')\nf(torch.ones(2))\n"
                   "raise ValueError('planted failure')\n")
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "o", str(bad)], tmp_path)
    assert p.returncode == 1
    assert "ValueError: planted failure" in p.stderr and "fails too" in p.stderr and "nothing tried" in p.stderr
    assert sorted(os.listdir(tmp_path / "o" / "trials")) == ["baseline", "eager"]  # the eager run said whose error


def _ctrl_c_as_a_terminal_delivers_it() -> None:
    """A shell starts background jobs with SIGINT ignored, and Python then keeps it ignored: the
    suite run from a background job would test nothing. The child gets the default, as in a
    terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.timeout(1800)
def test_try_ctrl_c_writes_the_table_so_far(tmp_path):
    import signal
    import time

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(HERE), "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([*SEAMSCOPE, "try", "--quiet", "--repeat", "2", "--max-repeat", "2", "--out", "o", "--only",
                             "capture_scalar_outputs", os.path.join(W, "item_break_hold.py")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_a_terminal_delivers_it)
    # the third run (the baseline's second repetition) holds until it is killed: interrupt it there,
    # once the candidate's first repetition is in the table
    runs = tmp_path / "runs.txt"
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline and (
            not runs.exists() or len(runs.read_text().splitlines()) < 3):
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[1]
    assert (tmp_path / "o" / "trials" / "baseline" / "rep-2").exists()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    t = load(tmp_path / "o" / "trials.json")
    assert t["interrupted"] is True
    (c,) = t["candidates"]
    assert [r["label"] for r in c["runs"]] == ["rep-1"]
    assert (tmp_path / "o" / "trials.md").exists() and (tmp_path / "o" / "receipt.json").exists()


@pytest.mark.timeout(1200)
def test_try_disables_a_helper_with_several_breaks(tmp_path):
    """Two host reads inside a helper the compiled step calls: the catalogue proposes wrapping the
    helper in torch.compiler.disable, which leaves one explicit boundary, outputs unchanged."""
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "o", "--only", "disable",
             os.path.join(W, "disable_auto.py")], tmp_path)
    assert p.returncode == 0, p.stderr
    t = load(tmp_path / "o" / "trials.json")
    (dis,) = t["candidates"]
    assert dis["flags"] == ["--disable", "__main__:helper"]
    assert next(m for m in t["baseline"]["metrics"] if m["name"] == "breaks")["median"] == 2
    assert next(m for m in dis["metrics"] if m["name"] == "breaks")["median"] == 1
    assert dis["outputs"]["status"] == "equal"
    assert "@torch.compiler.disable on helper" in dis["code_change"]


# --- paired calls, noise, broken compilation, marks that match nothing (one trial each) ----------


def _metric(c, name):
    return next(m for m in c["metrics"] if m["name"] == name)


def test_mark_of_an_args_element_in_the_users_syntax(tmp_path, dynamo_reset):
    """The guard names ``args[0]``; the catalogue's ``L['args'][0]:0`` is a source PyTorch matches."""
    from seamscope.experiments.trials.catalogue import source_of_guard

    src = source_of_guard("tensor 'args[0]' size mismatch at index 0. expected 3, actual 4")
    assert src == "L['args'][0]:0"
    run_in_process(os.path.join(W, "star_args.py"), ["--mark-dynamic", src], tmp_path / "m")
    r = load(tmp_path / "m" / "receipt.json")
    assert r["summary"]["recompile_count"] == 0
    assert "matched no source" not in r["decision"]["note"] and "marked" in r["decision"]["note"]


@pytest.fixture(scope="module")
def lengths_trial(tmp_path_factory, fresh_server):
    """dynamic=False on six lengths then three repeats, the recompile limit hit; dynamic=true tried."""
    d = tmp_path_factory.mktemp("lengths")
    # three repetitions: with two, another test's load on both candidate runs (and neither baseline
    # run) read as a 16% steady effect within 3% noise
    p = cli(["try", "--quiet", "--repeat", "3", "--max-repeat", "3", "--out", "o", "--only", "dynamic=true",
             os.path.join(W, "lengths_repeats.py")], d)
    assert p.returncode == 0, p.stderr
    return load(d / "o" / "trials.json"), (d / "o" / "trials.md").read_text()


@pytest.mark.timeout(1200)
def test_dynamic_true_is_compared_on_the_calls_steady_in_both(lengths_trial):
    """The baseline's steady calls are 6 and 7 (cache hits); the candidate's are 1-8. Two medians
    over those compare different work (longer lengths on one side: about 1.8x); the steady verdict
    is the paired one, over calls 6 and 7 alone (where dynamic shapes may cost a few percent per
    call: 1.04-1.09x in every repetition of one run), and call 8's fallback-vs-compiled difference
    is named."""
    t, md = lengths_trial
    (c,) = t["candidates"]
    assert c["name"] == "dynamic-true" and c["outputs"]["status"] == "equal"
    assert c["paired"]["calls"] == 2 and c["steady_verdict"] == c["paired"]["verdict"]
    assert "paired over 2 call(s)" in md
    groups = {(g["first"], g["last"]): g for g in c["paired"]["unpaired"]}
    g8 = groups[(8, 8)]
    assert (g8["baseline_phase"], g8["phase"]) == ("fallback", "steady") and g8["ratio"] is not None
    assert groups[(1, 3)]["baseline_phase"] == "cold" and groups[(4, 5)]["baseline_phase"] == "fallback"
    assert "call 8: eager fallback in the baseline, steady here" in md
    assert c["code_change"] == "pass dynamic=True to torch.compile at lengths_repeats.py:24"
    if t["chosen"] == "dynamic-true":
        assert "pass dynamic=True to torch.compile at lengths_repeats.py:24" in t["decision"]
    assert _metric(t["baseline"], "fallbacks")["median"] == 1 and _metric(c, "recompiles")["median"] == 0


@pytest.fixture(scope="module")
def unbacked_trial(tmp_path_factory, fresh_server):
    d = tmp_path_factory.mktemp("unbacked")
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "o", "--only", "unbacked", "--only", "mark-dynamic",
             "--candidate", "--mark-dynamic \"L['nope']:0\"", os.path.join(W, "unbacked_guard.py")], d)
    assert p.returncode == 0, p.stderr
    return load(d / "o" / "trials.json"), (d / "o" / "trials.md").read_text()


@pytest.mark.timeout(1200)
def test_a_remedy_that_makes_a_frame_fail_to_compile_is_flagged_not_recommended(unbacked_trial):
    t, out = unbacked_trial
    by = {c["name"]: c for c in t["candidates"]}
    unb = by["mark-as-unbacked"]
    assert unb["flags"] == ["--dynamo-config", "automatic_dynamic_shapes_mark_as='unbacked'"]
    assert unb["broke"] and "failed" in unb["broke"][0] and "forward (unbacked_guard.py:" in unb["broke"][0]
    assert _metric(t["baseline"], "fallbacks")["median"] == 0 and _metric(unb, "fallbacks")["median"] == 1
    assert t["chosen"] != "mark-as-unbacked"
    assert "breaks compilation" in out and "never recommended" in out


@pytest.mark.timeout(1200)
def test_a_mark_that_matches_no_source_has_no_effect(unbacked_trial):
    t, out = unbacked_trial
    user = next(c for c in t["candidates"] if c["name"] == "user-1")
    assert user["verdict"] == "no effect" and user["reason"] == "the mark matched no source"
    assert t["chosen"] != "user-1"
    assert "user-1: no effect: the mark matched no source" in out


@pytest.mark.timeout(1200)
def test_a_loaded_machine_gives_noisy_or_the_right_verdict_never_slower(tmp_path):
    """A busy loop on every core, started here and stopped once the timed repetitions are done
    (when the first output check starts; each loop also stops itself after 300 s):
    capture_scalar_outputs removes four breaks, so the right verdict is faster; under the load
    the trial may say noisy, never slower."""
    import threading
    import time

    loop = "import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end:\n    pass\n"
    busy = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(os.cpu_count() or 2)]
    timed_done, stop = tmp_path / "o" / "trials" / "baseline" / "check-1", threading.Event()
    loaded = []  # whether the load was still on when the timed repetitions ended

    def unload() -> None:  # the verdict rests on the timed runs alone: the output checks run unloaded
        while not stop.wait(0.05) and not timed_done.exists():
            pass
        loaded.append(all(b.poll() is None for b in busy))
        for b in busy:
            b.kill()

    watcher = threading.Thread(target=unload, daemon=True)
    watcher.start()
    try:
        time.sleep(0.5)
        p = cli(
            [
                "try",
                "--quiet",
                "--repeat",
                "2",
                "--max-repeat",
                "2",
                "--out",
                "o",
                "--only",
                "capture_scalar_outputs",
                os.path.join(W, "item_break.py"),
            ],
            tmp_path,
        )
    finally:
        stop.set()
        watcher.join()
        for b in busy:
            b.kill()
            b.wait()
    assert p.returncode == 0, p.stderr
    assert loaded == [True]  # every timed repetition ran under the load
    t = load(tmp_path / "o" / "trials.json")
    (c,) = t["candidates"]
    assert c["verdict"] in ("faster", "noisy"), (c["verdict"], c["noise_note"])
    assert "slower" not in (c["steady_verdict"], c["total_verdict"])
    if c["verdict"] == "noisy":
        assert "the machine is busy" in c["noise_note"]


@pytest.mark.timeout(1200)
def test_a_mark_that_leaves_the_width_changing_gets_a_candidate_marking_height_and_width(unbacked_trial):
    """The guard names the height (index 2); marked, the run recompiles on the width (index 3)."""
    t, _ = unbacked_trial
    by = {c["name"]: c for c in t["candidates"]}
    one, both = by["mark-dynamic-sample-2"], by["mark-dynamic-sample-2-all"]
    assert _metric(one, "recompiles")["median"] == 1
    assert both["flags"] == ["--mark-dynamic", "L['sample']:2", "--mark-dynamic", "L['sample']:3"]
    assert _metric(both, "recompiles")["median"] == 0 and not both["broke"]


# --- compile-time remedies on the kind of script a user brings -----------------------------------


@pytest.fixture(scope="module")
def whole_model_trial(tmp_path_factory, fresh_server):
    """``seamscope try`` on a transformers Llama from a config, compiled whole (aot_eager), two
    repetitions, every candidate the catalogue proposes."""
    pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("whole")
    p = cli(["try", "--quiet", "--repeat", "2", "--max-repeat", "2", "--out", "o", os.path.join(W, "hf_whole.py")], d)
    assert p.returncode == 0, p.stderr
    return load(d / "o" / "trials.json"), d / "o", (d / "o" / "trials.md").read_text()


@pytest.mark.timeout(1800)
def test_try_recommends_regional_compilation_of_a_whole_compiled_transformers_model(whole_model_trial):
    """The held-out acceptance: the repeated decoder layer is found and named, the regional
    candidate serves the four layers with one compilation, outputs equal; and where the trial
    measured the machine quiet, the recommendation cuts the run's total time, compile included."""
    t, out, md = whole_model_trial
    by = {c["name"]: c for c in t["candidates"]}
    reg = by["regional-llamadecoderlayer"]
    assert reg["flags"] == ["--regional", "LlamaDecoderLayer"]
    # its patch: a loop over the model's modules, compiling those of the class the finding saw; its
    # runs apply it, the model's calls still the run's calls
    assert "+for block in model.modules():" in reg["diff"] and "isinstance(block, LlamaDecoderLayer)" in reg["diff"]
    assert "+compiled = model" in reg["diff"]
    assert (
        "--patch o/trials/regional-llamadecoderlayer.patch --calls-of compiled " in reg["command"]
        and "--regional" not in reg["command"] and (out / "trials" / "regional-llamadecoderlayer.patch").exists()
    )
    assert reg["outputs"]["status"] == "equal" and reg["outputs"]["calls_compared"] == 3
    base = load(out / "trials" / "baseline" / "rep-1" / "receipt.json")
    (f,) = [f for f in base["findings"]["compile_time"]["findings"] if f["kind"] == "repeated_block"]
    assert f["block"]["cls"] == "LlamaDecoderLayer" and f["block"]["instances"] == 4
    cand = load(out / reg["runs"][0]["receipt"])
    assert cand["summary"]["compile_count"] == 1 == base["summary"]["compile_count"]
    assert not [f for f in cand["findings"]["compile_time"]["findings"] if f["kind"] == "repeated_block"]
    regions = [sum(e["type"] == "region" for e in c["events"]) for c in cand["ledger"]["calls"]]
    assert regions == [4, 4, 4]  # one compilation serves the four layers, each call runs it four times
    # aot_eager uses no persistent cache and compiles no kernels: those candidates are skipped, said why
    assert any(x.startswith("warm cache: the baseline's compilations used no persistent cache") for x in t["folded"])
    assert any(x.startswith("compile threads: backend aot_eager") for x in t["folded"])
    # a saving is claimed only where the compile time's own test decided it; else its interval is given
    if _metric(reg, "compile")["verdict"] in ("faster", "slower"):
        assert reg["trade"].startswith("compile time saved ") and "per process start" in reg["trade"]
    else:
        assert reg["trade"].startswith("compile time per process start ") and "saved" not in reg["trade"]
    # the timing claim is about the total and the compile time: asserted where their own test (each
    # one's interval over the repetitions) could tell them apart; noisy says the interval reached
    # beyond ±25%, and the steady calls' noise does not bear on a compile of seconds
    from seamscope.experiments.trials.stats import RESOLUTION

    if any(_metric(reg, m)["verdict"] == "noisy" for m in ("total", "compile")):
        assert any(_metric(reg, m)["ci_low"] < 1 - RESOLUTION or _metric(reg, m)["ci_high"] > 1 + RESOLUTION
                   for m in ("total", "compile"))
        return
    assert _metric(reg, "compile")["verdict"] == "faster" and _metric(reg, "compile")["ratio_median"] < 0.7
    assert reg["total_verdict"] == "faster" and t["chosen"] == "regional-llamadecoderlayer"
    assert "the trade: compile time saved" in t["decision"]
    assert "regional-llamadecoderlayer: the trade:" in md


def test_cache_artifacts_under_eager_say_none_were_saved_and_a_bad_file_is_said_not_raised(tmp_path, dynamo_reset):
    """The eager backend records no cache entry: nothing to save, said in the decision note; a
    file that is not PyTorch's artifacts is reported as not loaded and the run goes on."""
    from seamscope.capture.cache_artifacts import WithCacheArtifacts
    from seamscope.capture.runner import run_target

    script = tmp_path / "e.py"
    script.write_text("import torch\nf = torch.compile(lambda x: x.sin() + 1, backend='eager')\nf(torch.ones(3))\n")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not artifacts")
    saved = tmp_path / "saved.bin"
    # PyTorch keeps the artifacts of every compilation in the process: forget earlier tests' ones,
    # as a fresh `seamscope run` process starts with none
    import torch.compiler._cache as torch_cache

    torch_cache.CacheArtifactManager.clear()
    result = run_target(str(script), [], out=str(tmp_path / "o"), setup=WithCacheArtifacts(None, str(bad), str(saved)))
    assert result.exit_code == 0, result.message
    note = load(tmp_path / "o" / "receipt.json")["decision"]["note"]
    assert "cache artifacts: not loaded: load_cache_artifacts found no cache entry in bad.bin" in note
    assert "cache artifacts: none saved: the compilations recorded no cache entry" in note
    assert not saved.exists()


@pytest.mark.inductor
@pytest.mark.timeout(1800)
def test_try_warm_cache_candidates_hit_the_caches_the_baseline_filled(tmp_path):
    """Under inductor: the warm-directory candidate's runs hit the FX graph and AOTAutograd caches
    the baseline's first run filled; the artifacts candidate's runs start empty, load the saved
    artifacts and hit too; outputs equal throughout. (Each cold inductor run builds its kernel: the
    compile-threads candidate, two more cold runs, is left to the torch-free trial tests.)"""
    script = tmp_path / "ind.py"
    # an extern mm: Inductor's stages and both caches, without seconds of C++ kernel build per run
    script.write_text("import torch\n\ng = torch.compile(lambda x: torch.mm(x, x.t()))\n"
                      "x = torch.randn(8, 16)\nfor _ in range(3):\n    g(x)\n")
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "o", "--only", "warm", str(script)], tmp_path)
    assert p.returncode == 0, p.stderr
    t = load(tmp_path / "o" / "trials.json")
    by = {c["name"]: c for c in t["candidates"]}
    assert set(by) == {"warm-cache-dir", "warm-cache-artifacts"}
    base = load(tmp_path / "o" / "trials" / "baseline" / "rep-1" / "receipt.json")
    assert "cache artifacts: saved" in base["decision"]["note"]
    for name in ("warm-cache-dir", "warm-cache-artifacts"):
        c = by[name]
        assert c["start"] == name and c["outputs"]["status"] == "equal", c["outputs"]
        r = load(tmp_path / "o" / c["runs"][0]["receipt"])
        caches = {x["layer"]: x for x in r["findings"]["compile_time"]["caches"]}
        assert caches["fx_graph"]["hit"] == 1 and caches["fx_graph"]["miss"] == 0, (name, caches)
        assert caches["aot_autograd"]["hit"] == 1, (name, caches)
    art = load(tmp_path / "o" / by["warm-cache-artifacts"]["runs"][0]["receipt"])
    assert "cache artifacts: loaded" in art["decision"]["note"]
    assert by["warm-cache-dir"]["command"].startswith("TORCHINDUCTOR_CACHE_DIR=")
    warm = by["warm-cache-dir"]
    if not noisy_machine(warm):
        assert _metric(warm, "compile")["verdict"] == "faster"
        assert "pays off from the first restart" in warm["trade"]


@pytest.mark.timeout(600)
def test_a_forked_run_takes_compile_threads_from_its_environment(tmp_path):
    """The fork server imported Inductor's config (and decided compile_threads) before the fork:
    a child given TORCHINDUCTOR_COMPILE_THREADS decides again, as a new interpreter would."""
    from seamscope.experiments.fresh import FreshProcesses, Job
    from seamscope.experiments.trials.runs import PRELOAD

    script = tmp_path / "threads.py"
    script.write_text("import os\nimport torch._inductor.config as c\n"
                      "open(os.environ['THREADS_OUT'], 'w').write(str(c.compile_threads))\n")
    got = []
    with FreshProcesses(preload=(*PRELOAD, "torch._inductor.config"), mode="fork") as fp:
        for i, extra in enumerate(({"TORCHINDUCTOR_COMPILE_THREADS": "1"}, {"TORCHINDUCTOR_COMPILE_THREADS": "3"})):
            out = tmp_path / f"t{i}.txt"
            job = Job(entry="seamscope.cli:main", arg=["run", "--quiet", "--no-html", "--out", str(tmp_path / f"o{i}"),
                                                      str(script)],
                      env={**extra, "THREADS_OUT": str(out)}, log=str(tmp_path / "err.txt"))
            ended = fp.run(job, 300)
            assert ended.exit_code == 0, (tmp_path / "err.txt").read_text()
            got.append(out.read_text())
    assert got == ["1", "3"]


@pytest.mark.timeout(300)
def test_a_forked_runs_first_compilation_imports_nothing_the_server_could_have(tmp_path, fresh_server):
    """The preloads name what a first compilation imports (the backend registry's backends,
    AOTAutograd, export's passes): a forked run's first ``torch.compile`` call imports none of it
    again."""
    from seamscope.capture.adapter import compile_imports
    from seamscope.experiments.fresh import Job

    assert not compile_imports.missing
    out, err = tmp_path / "new.json", tmp_path / "err.txt"
    ended = fresh_server.run(Job(entry="fakes:first_compile_imports", arg=str(out), log=str(err)), 120)
    assert ended.exit_code == 0, err.read_text()
    new = json.loads(out.read_text())
    assert not [m for m in new if m.startswith(("torch.", "networkx", "functorch"))], new


@pytest.mark.timeout(1200)
def test_a_guard_filter_that_drops_a_needed_recompile_is_caught_by_the_check_run(tmp_path):
    """The module's forward reads ``self.scale``, set from 1.0 to 2.0 halfway: PyTorch guards on it
    and recompiles. ``skip_guard_on_all_nn_modules_unsafe`` drops that guard (no recompile: the
    second half runs the first graph), after the calls the output check compares. The check run
    changes ``scale`` again on purpose: the baseline recompiles, the candidate keeps its stale
    graph; the row says so and it is never recommended."""
    name = "skip-guard-on-all-nn-modules-unsafe"
    p = cli(["try", "--quiet", "--repeat", "1", "--out", "g", "--only", "skip_guard_on_all_nn_modules_unsafe",
             os.path.join(W, "guard_scale.py")], tmp_path)
    assert p.returncode == 0, p.stderr
    t = load(tmp_path / "g" / "trials.json")
    (c,) = t["candidates"]
    assert c["name"] == name and c["unsafe"] is True and t["chosen"] is None
    g = c["guard_check"]
    assert g["status"] == "broke a recompile" and g["broke"] == "kept a stale graph when Scaled.scale changed 2.0 → 4.0"
    probes = {r["label"]: r["outcome"] for r in g["probes"]}
    assert probes["Scaled.scale: 2.0 → 4.0"] == "stale" and probes["dim 0 of x: 4 → 5"] == "recompiled"
    assert g["broke"] in c["broke"]
    # the script's own change of scale: PyTorch recompiled for it in the baseline, not under the filter
    assert next(m for m in t["baseline"]["metrics"] if m["name"] == "recompiles")["median"] == 1
    assert next(m for m in c["metrics"] if m["name"] == "recompiles")["median"] == 0
    assert c["outputs"]["status"] == "equal"  # the calls it fingerprints came before the change: the check run sees it
    rep = load(tmp_path / "g" / c["runs"][0]["receipt"])  # the receipt records the setting the run had
    assert rep["ledger"]["environment"]["compile_options"]["options"] == (
        "{'guard_filter_fn': torch.compiler.skip_guard_on_all_nn_modules_unsafe}")
    table = (tmp_path / "g" / "trials.md").read_text()
    assert "unsafe · breaks a needed recompile" in table and "kept a stale graph when Scaled.scale changed" in table
