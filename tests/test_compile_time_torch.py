"""The compile-time ledger on real runs: transformers models built from tiny configs and compiled
whole (several identical layers: the repeated block is found and named), `run --warm` (a warm Inductor cache:
FX graph cache hits), and an imported ``TORCH_TRACE`` log made here with torch (the same
findings; fields an older PyTorch lacks are said to be absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import script_forked, seamscope_here

torch = pytest.importorskip("torch")

from seamscope.analyze.findings import analyze_findings  # noqa: E402
from seamscope.capture.session import session  # noqa: E402
from seamscope.ingest.receipt import load_receipt  # noqa: E402
from seamscope.ingest.torch_trace import find_logs, import_torch_trace  # noqa: E402

pytestmark = pytest.mark.torch


def _run_whole(model, ids, calls=2, backend="aot_eager"):
    torch._dynamo.reset()  # transformers' layers share one wrapper's code: no entries from another test
    compiled = torch.compile(model, backend=backend)
    with session(write_html=False) as s, torch.no_grad():
        outs = [compiled(ids) for _ in range(calls)]
    assert outs
    return s.ledger


def _repeated(sec):
    return [f for f in sec.compile_time.findings if f.kind == "repeated_block" and f.block is not None]


def test_gpt2_compiled_whole_names_its_repeated_block():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=64, n_positions=32, use_cache=False)
    led = _run_whole(transformers.GPT2Model(cfg).eval(), torch.randint(0, 64, (1, 8)))
    sec = analyze_findings(led)
    (f,) = _repeated(sec)
    assert f.block.cls == "GPT2Block" and f.block.instances == 3 and not f.block.kv_cache
    assert f.block.nodes_min == f.block.nodes_max  # identical layers trace the same code
    assert f.file.endswith("transformers/models/gpt2/modeling_gpt2.py") and f.frame_name == "GPT2Block.forward"
    assert 0 < f.cost_ns < sec.compile_time.compile_ns
    assert f.remedies[0].try_with == "seamscope run --regional GPT2Block SCRIPT"
    assert any(i.item_id == f.finding_id and i.axis == "compile_time" for i in sec.ranked)
    # the stage split adds up to the compile time, and the headline names the dominating stage
    split = sec.compile_time.split
    parts = [split.dynamo_ns, split.aot_autograd_ns, split.inductor_ns, split.autotune_ns]
    assert sum(p or 0 for p in parts) + split.unsplit_ns == sec.compile_time.compile_ns
    assert split.dynamo_ns and split.aot_autograd_ns  # aot_eager: both stages recorded
    assert sec.compile_time.dominant_stage in ("dynamo", "aot_autograd")
    assert " dominates compile time (" in sec.headline.sentence


def test_llama_with_its_kv_cache_says_regional_compilation_would_recompile():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    model = transformers.LlamaModel(cfg).eval()
    # eager: the block and its KV-cache updates are read from Dynamo's graph, not AOTAutograd's
    led = _run_whole(model, torch.randint(0, 64, (1, 8)), calls=1, backend="eager")
    (f,) = _repeated(analyze_findings(led))
    assert f.block.cls == "LlamaDecoderLayer" and f.block.instances == 3
    assert f.block.kv_cache, "the decoder layers update the KV cache"
    assert "use_cache=False" in f.remedies[0].text and "recompile" in f.remedies[0].text


BLOCKS = r'''
import torch

class Block(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).roll(self.k, 0)

torch.manual_seed(0)
blocks = [Block(k) for k in range(3)]
for b in blocks:
    b.compile(backend="aot_eager")   # one block at a time, each instance guarded on its own k
x = torch.randn(4, 8)
with torch.no_grad():
    for _ in range(2):
        y = x
        for b in blocks:
            y = b(y)
'''


@pytest.fixture(scope="module")
def blocks_log(tmp_path_factory, fresh_server):
    """A ``TORCH_TRACE`` log written by torch here: ``python blocks.py`` with ``TORCH_TRACE`` set, in a
    process forked from the test run's server (torch's logs set up from its environment, as in a new
    interpreter's)."""
    tmp = tmp_path_factory.mktemp("blocks")
    (tmp / "blocks.py").write_text(BLOCKS)
    proc = script_forked(fresh_server, [tmp / "blocks.py"], tmp, env={"TORCH_TRACE": str(tmp / "trace")},
                         timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (log,) = find_logs(str(tmp / "trace"))
    return tmp, Path(log)


def test_an_imported_log_gets_the_same_compile_time_findings(blocks_log):
    tmp, log = blocks_log
    sec = analyze_findings(import_torch_trace(str(log), cwd=str(tmp)).ledger)
    ct = sec.compile_time
    assert ct is not None and ct.split.compilations == 3 and ct.share is None  # no runtime data
    assert ct.split.dynamo_ns and ct.split.aot_autograd_ns and not ct.frames[0].split.unsplit_ns
    (f,) = [f for f in ct.findings if f.kind == "repeated_block"]
    assert f.frame_name == "forward" and f.file == "blocks.py" and f.compile_ids == ["0/0", "0/1", "0/2"]
    assert "compiled 3 times" in f.sentence and "self" in f.sentence
    assert any("module structure is read in live capture only" in m for m in ct.missing)
    assert not any("has no field" in m for m in ct.missing)  # torch 2.13 writes every stage field
    assert " dominates compile time (" in sec.headline.sentence


def test_a_log_without_the_stage_fields_says_what_it_cannot_tell(blocks_log, tmp_path):
    # GIVEN the same log as an older PyTorch would write it: no AOTAutograd or autotuning fields
    tmp, log = blocks_log
    old = tmp_path / "old.log"
    drop = ("aot_autograd_cumulative_compile_time_us", "backend_compile_time_s", "compile_time_autotune_time_us")
    out = []
    for line in log.read_text().splitlines(keepends=True):
        i = line.find('{"compilation_metrics"')
        if i >= 0:
            rec = json.loads(line[i:])
            for k in drop:
                rec["compilation_metrics"].pop(k, None)
            line = line[:i] + json.dumps(rec) + "\n"
        out.append(line)
    old.write_text("".join(out))
    ct = analyze_findings(import_torch_trace(str(old), cwd=str(tmp)).ledger).compile_time
    assert ct.split.aot_autograd_ns is None and ct.split.dynamo_ns is None
    assert ct.split.unsplit_ns == ct.compile_ns > 0  # kept, not guessed into a stage
    missing = " ".join(ct.missing)
    assert "AOTAutograd: this PyTorch version's compilation_metrics has no field for it (3 of 3" in missing
    assert "backend: this PyTorch version's compilation_metrics has no field" in missing
    assert "autotuning: this PyTorch version's compilation_metrics has no field" in missing


def _regional(model, cls, ids, calls, backend="aot_eager"):
    from seamscope.capture.regional import install_regional

    torch._dynamo.reset()  # transformers' layers share one wrapper's code: no entries from another test
    with session(write_html=False) as s:
        undo = install_regional((cls,), s)
        try:
            f = torch.compile(model, backend=backend)
        finally:
            undo()
        with torch.no_grad():
            outs = [f(ids) for _ in range(calls)]
    return s.ledger, outs


def test_regional_compilation_serves_every_gpt2_block_with_one_compilation_and_equal_outputs():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=3, n_embd=32, n_head=2, vocab_size=64, n_positions=32, use_cache=False)
    model = transformers.GPT2Model(cfg).eval()
    ids = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        want = model(ids).last_hidden_state
    led, outs = _regional(model, "GPT2Block", ids, calls=2)
    assert len(led.compilations) == 1  # one compilation serves the three instances
    assert led.totals.calls == 2  # the model's calls; the blocks' compiled calls are nested in them
    from seamscope.model.ledger import RegionEvent

    assert [sum(isinstance(e, RegionEvent) for e in c.events) for c in led.calls] == [3, 3]
    for out in outs:
        torch.testing.assert_close(out.last_hidden_state, want)
    assert any("--regional GPT2Block: compiled 3 instance(s)" in w for w in led.run.warnings)
    assert not _repeated(analyze_findings(led))


def test_regional_compilation_with_the_kv_cache_on_says_each_layer_recompiles():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64,
    )
    led, _ = _regional(transformers.LlamaModel(cfg).eval(), "LlamaDecoderLayer", torch.randint(0, 64, (1, 8)), 1,
                       backend="eager")
    assert len(led.compilations) == 3  # one per layer: each guards on its own cache layer
    (f,) = [f for f in analyze_findings(led).compile_time.findings if f.kind == "repeated_block"]
    assert "layers[i].is_initialized" in f.sentence and "compiled 3 times" in f.sentence
    assert "use_cache=False" in f.remedies[0].text


@pytest.fixture(scope="module")
def warm_run(tmp_path_factory, fresh_server):
    """``seamscope run --warm`` of a script compiled with Inductor, in this process: its three runs
    (cold, warm, warm from the artifacts) are forked from the test run's server, each a process of
    its own with its own cache directory."""
    tmp = tmp_path_factory.mktemp("warm")
    script = tmp / "ind.py"
    # an extern mm: Inductor's stages and both caches, without seconds of C++ kernel build per run
    script.write_text("import torch\n\ng = torch.compile(lambda x: torch.mm(x, x.t()))\n"
                      "for _ in range(2):\n    g(torch.randn(8, 16))\nprint('the script ran')\n")
    out = tmp / "out"
    return out, seamscope_here(["run", "--warm", "--out", str(out), str(script)], tmp)


@pytest.mark.inductor
def test_a_warm_inductor_cache_hits_and_is_seen_warm(warm_run):
    out, proc = warm_run
    assert proc.returncode == 0, proc.stderr
    found = [analyze_findings(load_receipt(str(out / name / "receipt.json")).ledger).compile_time
             for name in ("cold", "warm")]
    cold, warm = found
    assert cold.cache_dir_warm is False and warm.cache_dir_warm is True
    fx_cold = next(c for c in cold.caches if c.layer == "fx_graph")
    fx_warm = next(c for c in warm.caches if c.layer == "fx_graph")
    assert fx_cold.miss == 1 and fx_cold.hit == 0
    assert fx_warm.hit == 1 and fx_warm.miss == 0
    assert not [x for x in warm.findings if x.kind == "cache_miss"]
    assert cold.split.inductor_ns and cold.split.inductor_ns > 0  # Inductor's own stage recorded


@pytest.mark.inductor
def test_run_warm_reads_the_cache_the_cold_run_filled(warm_run):
    out, proc = warm_run
    assert proc.returncode == 0, proc.stderr
    ws = json.loads((out / "warm-start.json").read_text())
    cold_fx, warm_fx = ws["cold_caches"][0], ws["warm_caches"][0]
    assert cold_fx["layer"] == "fx_graph" and cold_fx["miss"] == 1 and warm_fx["hit"] == 1
    assert ws["still_missed"] == [] and "every cache lookup hit" in ws["sentence"]
    assert "compile time, cold → warm" in proc.stdout
    assert (out / "cold" / "receipt.json").exists() and (out / "warm" / "receipt.json").exists()
    # the cold run's cache artifacts, loaded by a third run into an empty directory, hit as well
    art = ws["artifacts"]
    assert art is not None and art["artifacts_bytes"] > 0 and "cache artifacts: loaded" in art["load_note"]
    assert art["caches"][0]["layer"] == "fx_graph" and art["caches"][0]["hit"] == 1
    assert "from artifacts" in proc.stdout and (out / "warm-artifacts" / "receipt.json").exists()
    # each run's output is in its own file, not on the terminal
    for name in ("cold", "warm", "warm-artifacts"):
        assert "the script ran" in (out / f"{name}.log").read_text()
    assert "the script ran" not in proc.stdout + proc.stderr and "NAME.log" in proc.stderr


def test_a_failing_run_under_warm_exits_with_its_code_and_shows_its_last_lines(tmp_path, fresh_server):
    # GIVEN a script that fails (no compilation: the cold run ends before anything is cached)
    script = tmp_path / "bad.py"
    script.write_text("print('about to fail')\nraise ValueError('the bad script failed')\n")
    out = tmp_path / "out"
    proc = seamscope_here(["run", "--warm", "--out", str(out), str(script)], tmp_path)
    # THEN the command exits as the cold run did, names its log and shows its last lines
    assert proc.returncode == 1, proc.stderr
    log = out / "cold.log"
    assert f"seamscope: the cold run failed (exit code 1); its last lines (all of it in {log}):" in proc.stderr
    assert "ValueError: the bad script failed" in proc.stderr and "about to fail" in log.read_text()
    assert not (out / "warm").exists() and not (out / "warm-start.json").exists()


def test_a_run_killed_by_a_signal_under_warm_is_one_line_and_128_plus_the_signal(tmp_path, fresh_server):
    script = tmp_path / "killed.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    out = tmp_path / "out"
    proc = seamscope_here(["run", "--warm", "--out", str(out), str(script)], tmp_path)
    assert proc.returncode == 128 + 9, proc.stderr
    assert proc.stderr.splitlines() == [
        f"seamscope: the cold run: its output goes to {out / 'cold.log'}",
        f"seamscope: the cold run ended: signal SIGKILL; its output: {out / 'cold.log'}",
    ]


def test_run_warm_refuses_cache_artifacts_flags_of_its_own(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('never run')\n")
    proc = seamscope_here(["run", "--warm", "--save-cache-artifacts", "a.bin", "--out", "o", str(script)], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ("seamscope: --warm does not take --save-cache-artifacts: it saves the cold run's "
                           "cache artifacts and loads them itself\n") and not (tmp_path / "o").exists()
