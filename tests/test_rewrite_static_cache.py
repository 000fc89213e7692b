"""``static-cache``: a tiny GPT-2 from a config (``tests/workloads/trials/hf_generate.py``) under
``generate``, its compiled forward recompiling as the KV cache grows, gets transformers' static
cache (``cache_implementation="static"`` on the ``generate`` call). Torch-free on the script's text
and the guards a real run recorded (torch 2.13, transformers 5); then one real run of the patched
script: fewer graphs than tokens, the tokens of an eager generation."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from seamscope.experiments.trials.rewrites.static_cache import StaticCache
from seamscope.experiments.trials.rewrites.syntax import Source

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads", "trials", "hf_generate.py")
with open(SCRIPT) as _f:
    TEXT = _f.read()
# the guards of a real run of that script, as its churn finding keeps them
GUARDS = ["tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 1",
          "tensor 'kwargs['cache'].layers[0].keys' size mismatch at index 2. expected 6, actual 7"]


def _receipt(guards=GUARDS):
    churn = SimpleNamespace(file="transformers/models/gpt2/modeling_gpt2.py", frame_name="forward",
                            guards=list(guards), compile_ns=7)
    finding = SimpleNamespace(churn=churn, finding_id="FR1", sentence="GPT2LMHeadModel.forward recompiled")
    return SimpleNamespace(findings=SimpleNamespace(findings=[finding]))


def _find(text=TEXT, receipt=None):
    return StaticCache().find(receipt or _receipt(), SCRIPT, Source(text))  # type: ignore[arg-type]


def test_a_generate_recompiling_on_its_cache_gets_the_static_cache():
    (e,) = _find()
    assert e.name == "static-cache" and e.origin == "FR1" and e.cost_ns == 7 and "review" in e.change
    assert 'do_sample=False, pad_token_id=0, cache_implementation="static")\n' in e.after
    assert e.after.count("cache_implementation") == 1
    (bare,) = _find("import transformers\nout = model.generate()\n")
    assert 'model.generate(cache_implementation="static")' in bare.after


@pytest.mark.parametrize("text,receipt", [
    (TEXT, _receipt([GUARDS[0]])),  # a recompile on the prompt's length alone: not the cache
    (TEXT.replace("pad_token_id=0)", "pad_token_id=0, cache_implementation='dynamic')"), None),  # chosen already
    (TEXT.replace("pad_token_id=0)", "pad_token_id=0, past_key_values=cache)"), None),
    (TEXT.replace("pad_token_id=0)", "pad_token_id=0, **opts)"), None),
    ("import torch\nout = model.generate(ids)\n", None),  # no transformers model
])
def test_no_static_cache_where_the_cause_or_the_call_does_not_fit(text, receipt):
    assert _find(text, receipt) == []


@pytest.mark.torch
def test_the_patched_script_compiles_fewer_graphs_and_generates_the_same_tokens(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from fakes import dynamo_settings_kept
    from torch._dynamo.utils import counters

    (e,) = _find()
    tokens = 4
    monkeypatch.setenv("TRIAL_TOKENS", str(tokens))
    ns = {"__name__": "__main__"}
    with dynamo_settings_kept():
        torch._dynamo.reset()
        counters.clear()
        exec(compile(e.after.replace("    model.generate(", "    OUT = model.generate("), SCRIPT, "exec"), ns)  # noqa: S102
        graphs = counters["stats"]["unique_graphs"]
        torch._dynamo.reset()
    assert 1 <= graphs < tokens  # the script as it is: one graph per token (prompt, then each cache length)
    model, ids = ns["model"], ns["ids"]
    model.forward = model.forward._torchdynamo_orig_callable  # eager, the default (dynamic) cache
    with torch.no_grad():
        eager = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                               min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    assert torch.equal(ns["OUT"], eager)
