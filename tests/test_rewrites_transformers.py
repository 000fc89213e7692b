"""Code-change candidates on a script driving a small ``transformers`` model (a tiny BERT from a
config, no download) through the user's own compiled wrapper: the attention mask passed on some
calls and ``None`` on others (a recompile on ``mask is None``), a logger call in the compiled frame
(a break). ``try`` proposes ``always-pass-mask`` (the transformers neutral: long ones of the ids'
batch and sequence) and ``guard-logging``; each patch applies to a copy whose run, counted by its
receipt and by PyTorch's own counters, has lost the recompile or the break it targets.
"""

from __future__ import annotations

import ast
import difflib
import json
import keyword
import os
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from fakes import dynamo_settings_kept, seamscope_here
from hypothesis import given, settings
from hypothesis import strategies as st

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = "hf_encode_mask.py"
ONES = "torch.ones(ids.shape[:2], dtype=torch.long, device=ids.device)"


def always_pass(churn, script, text):
    """(argument, what the change says, the patched text) of each ``always-pass`` edit for ``churn``."""
    from seamscope.experiments.trials.rewrites.always_pass import AlwaysPass
    from seamscope.experiments.trials.rewrites.syntax import Source

    churn.compile_ns = 0
    finding = SimpleNamespace(churn=churn, finding_id="RC1", sentence="a recompile")
    receipt = SimpleNamespace(findings=SimpleNamespace(findings=[finding]))
    return [(e.name.removeprefix("always-pass-"), e.change, e.after)
            for e in AlwaysPass().find(receipt, script, Source(text))]


def _fn(src: str) -> ast.FunctionDef:
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    return fn


def test_a_mask_passed_on_as_attention_mask_gets_the_transformers_neutral():
    """``attention_mask=None`` means "attend everywhere" in transformers: long ones of the model
    input's (batch, sequence), the input read from the call (``input_ids=``, ``inputs_embeds=`` or
    its first positional argument); the arithmetic rules stay, and another keyword gets nothing."""
    from seamscope.experiments.trials.rewrites.always_pass import neutral

    enc = "def encode(ids, mask=None):\n    return model(ids, attention_mask=mask).last_hidden_state\n"
    assert neutral(_fn(enc), "mask", "ids") == ONES
    kw = "def f(cfg, tok, m=None):\n    return model(input_ids=tok, attention_mask=m)\n"
    assert neutral(_fn(kw), "m", "cfg") == "torch.ones(tok.shape[:2], dtype=torch.long, device=tok.device)"
    emb = "def f(x, e, m=None):\n    return model(inputs_embeds=e, attention_mask=m)\n"
    assert neutral(_fn(emb), "m", "x") == "torch.ones(e.shape[:2], dtype=torch.long, device=e.device)"
    other = "def f(x, m=None):\n    return model(x, head_mask=m)\n"
    assert neutral(_fn(other), "m", "x") is None
    add = "def f(x, m=None):\n    if m is not None:\n        x = x + m\n    return x\n"
    assert neutral(_fn(add), "m", "x") == "torch.zeros_like(x)"

    # the whole rewrite, from a churn finding whose guard carries the HF frame's source comment
    with open(os.path.join(HERE, "workloads", "trials", SCRIPT), encoding="utf-8") as f:
        text = f.read()
    churn = SimpleNamespace(file=SCRIPT, frame_name="encode", guards=[
        "mask is None      # recordable_keys = {  # transformers/utils/output_capturing.py:332 in wrapper"])
    here = os.getcwd()
    os.chdir(os.path.join(HERE, "workloads", "trials"))
    try:
        ((name, change, new),) = always_pass(churn, SCRIPT, text)
    finally:
        os.chdir(here)
    assert name == "mask" and " to compiled (" in change
    assert ("def compiled(ids, mask=None):\n"
            "    # always pass mask: one graph serves the calls with and without it\n"
            f"    if mask is None:\n        mask = {ONES}\n    return _encode_compiled(ids, mask)\n") in new
    ast.parse(new)


def test_a_wrapper_compiled_inside_main_is_always_passed_there():
    """The usual script shape, ``torch.compile`` inside ``def main():`` run under ``if __name__ ==
    "__main__":``: the plain function goes beside the compiled one, indented as it is; one assigned
    in a class body is left alone (a function there would be a method)."""
    text = ("import torch\nfrom transformers import BertModel\n\n\ndef encode(ids, mask=None):\n"
            "    return model(ids, attention_mask=mask).last_hidden_state\n\n\ndef main():\n"
            "    compiled = torch.compile(encode)\n    for i in range(4):\n"
            "        compiled(ids, ids if i % 2 else None)\n\n\nclass Runner:\n"
            "    run = torch.compile(encode)\n\n\nif __name__ == \"__main__\":\n    main()\n")
    churn = SimpleNamespace(file="s.py", frame_name="encode", guards=["L['mask'] is None"])
    ((name, change, new),) = always_pass(churn, "s.py", text)
    assert name == "mask" and " to compiled (" in change
    assert ("def main():\n    _encode_compiled = torch.compile(encode)\n\n    def compiled(ids, mask=None):\n"
            "        # always pass mask: one graph serves the calls with and without it\n"
            f"        if mask is None:\n            mask = {ONES}\n"
            "        return _encode_compiled(ids, mask)\n\n"
            "    for i in range(4):\n") in new
    assert "    run = torch.compile(encode)\n" in new
    ast.parse(new)


_IDENT = st.from_regex(r"[a-z][a-z_]{0,23}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in ("torch", "model", "main", "i"))


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_IDENT, min_size=4, max_size=7, unique=True), nested=st.booleans(),
       taken=st.integers(0, 2))
def test_the_plain_function_fits_in_100_columns_and_uses_no_name_of_the_script(names, nested, taken):
    """However long the script's names, the lines the rewrite adds are at most 100 columns (a long
    signature, neutral value or call one item a line), the plain function keeps the compiled
    one's name, and the compiled callable moves to a name the script does not use (after the
    compiled function's, not doubling "compiled")."""
    fn, alias, first, mask, *rest = names
    sig = ", ".join([first, f"{mask}=None", *(f"{r}=None" for r in rest)])
    used = "".join(f"_{fn}_compiled{'' if k == 0 else f'_{k + 1}'} = {k}\n" for k in range(taken))
    compile_line = f"{alias} = torch.compile({fn}, backend=\"eager\")\n"
    calls = f"{alias}({first}, {first} if i % 2 else None)\n"
    text = (f"import torch\n{used}\n\ndef {fn}({sig}):\n"
            f"    return model({first}, attention_mask={mask}).last_hidden_state\n\n\n"
            + (f"def main():\n    {compile_line}    for i in range(4):\n        {calls}\n\n"
               "if __name__ == \"__main__\":\n    main()\n" if nested
               else f"{compile_line}for i in range(4):\n    {calls}"))
    churn = SimpleNamespace(file="s.py", frame_name=fn, guards=[f"{mask} is None  # return model(  # s.py:7 in {fn}"])
    ((name, change, new),) = always_pass(churn, "s.py", text)
    assert name == mask and f" to {alias} (" in change
    tree = ast.parse(new)
    added = [ln[1:] for ln in difflib.unified_diff(text.splitlines(), new.splitlines(), lineterm="", n=0)
             if ln.startswith("+") and not ln.startswith("+++")]
    assert added and max(map(len, added)) <= 100, added
    inner = f"_{fn}_compiled" + ("" if taken == 0 else f"_{taken + 1}")
    assert re.search(rf"\b{inner}\b", text) is None and "compiled_compiled" not in new
    assert any(ln.strip() == f"{inner} = torch.compile({fn}, backend=\"eager\")" for ln in added)
    (plain,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == alias]
    (call,) = [n for n in ast.walk(plain) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id == inner]
    assert [ast.unparse(x) for x in call.args] == [first, mask, *rest]


def test_a_mask_given_first_and_left_out_later_is_always_passed_too():
    """The first call passed the tensor, a later one None: PyTorch names the tensor guard that met
    None (``expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>``), the
    mirror of ``mask is None``."""
    text = ("import torch\n\n\ndef step(x, mask=None):\n    if mask is not None:\n        x = x * mask\n"
            "    return x\n\n\nf = torch.compile(step)\nf(x, x)\nf(x, None)\n")
    churn = SimpleNamespace(file="s.py", frame_name="step", guards=[
        "expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>"])
    ((name, change, new),) = always_pass(churn, "s.py", text)
    assert name == "mask" and " to f (" in change
    assert "    if mask is None:\n        mask = torch.ones_like(x)\n    return _step_compiled(x, mask)\n" in new


def test_a_logger_breaks_candidate_names_the_callable_as_the_finding_does():
    """The finding's ``logging:Logger.info`` reaches ``--dynamo-config ignore_logging_functions+=``
    as is (a flag ``try`` checks before anything runs: a mangled target made it exit 2)."""
    from seamscope.analyze.findings import _logging_callable
    from seamscope.analyze.findings_common import config_remedy
    from seamscope.experiments.remedy_spec import parse_target
    from seamscope.experiments.trials.catalogue import catalogue

    drafts = []
    for label in ("logging (info)", "print"):
        key, target = _logging_callable(label) or ("", "")
        f = SimpleNamespace(finding_id="B1", sentence="s", site_id=None, cost=None, churn=None,
                            remedies=[config_remedy("reorder_logging", "t", key, target, add=True)])
        receipt = SimpleNamespace(findings=SimpleNamespace(findings=[f], compile_time=None),
                                  ledger=SimpleNamespace(compilations=[], break_sites=[],
                                                         environment=SimpleNamespace(torch_version="2.13.0")),
                                  summary=SimpleNamespace(fallback_count=0, fallbacks=[], graph_count=1))
        drafts += catalogue(receipt, script=SCRIPT)
    flags = [w for d in drafts for w in d.spec.flags()]
    assert "ignore_logging_functions+=logging:Logger.info" in flags
    assert "reorderable_logging_functions+=builtins:print" in flags
    for w in flags:
        if "+=" in w:
            parse_target("--dynamo-config", w.partition("+=")[2])


def _run(script, out):
    """The script run in this process: its receipt's summary and PyTorch's own counters."""
    import torch

    from seamscope.capture import adapter
    from seamscope.capture.runner import run_target

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with dynamo_settings_kept():
        result = run_target(str(script), [], out=str(out))
    assert result.exit_code == 0, result.message
    with open(os.path.join(out, "receipt.json"), encoding="utf-8") as f:
        summary = json.load(f)["summary"]
    return summary, adapter.dynamo_counters()


@pytest.fixture(scope="module")
def hf_trial(tmp_path_factory, fresh_server):
    pytest.importorskip("transformers")
    d = tmp_path_factory.mktemp("hf_mask")
    shutil.copy(os.path.join(HERE, "workloads", "trials", SCRIPT), d / SCRIPT)
    p = seamscope_here(["try", "--quiet", "--out", "o", "--repeat", "1", "--max-repeat", "1",
                        "--only", "guard-logging", "--only", "always-pass", SCRIPT], d)
    assert p.returncode == 0, p.stderr
    with open(d / "o" / "trials.json", encoding="utf-8") as f:
        return d, json.load(f)


def _metric(c, name):
    return next(m for m in c["metrics"] if m["name"] == name)["median"]


@pytest.mark.torch
@pytest.mark.timeout(1800)
def test_try_on_a_tiny_bert_wrapper_always_passes_the_mask_and_guards_the_logger(hf_trial, tmp_path, dynamo_reset):
    d, t = hf_trial
    by = {c["name"]: c for c in t["candidates"]}
    assert set(by) == {"always-pass-mask", "guard-logging"}
    mask, log = by["always-pass-mask"], by["guard-logging"]
    assert f"+    if mask is None:\n+        mask = {ONES}\n+    return _encode_compiled(ids, mask)\n" in mask["diff"]
    assert "+    if not torch.compiler.is_compiling():\n+        log.info(" in log["diff"]
    assert _metric(t["baseline"], "recompiles") == 1 and _metric(t["baseline"], "breaks") == 1
    assert (_metric(mask, "recompiles"), _metric(mask, "breaks")) == (0, 1)
    assert (_metric(log, "recompiles"), _metric(log, "breaks")) == (1, 0)
    assert mask["outputs"]["status"] == log["outputs"]["status"] == "equal"

    got = {}
    for c in (mask, log):
        cp = tmp_path / c["name"]
        cp.mkdir()
        shutil.copy(d / SCRIPT, cp / SCRIPT)
        subprocess.run(["git", "init", "-q"], cwd=cp, check=True)
        subprocess.run(["git", "apply", "--check", str(d / c["patch"])], cwd=cp, check=True)
        subprocess.run(["git", "apply", str(d / c["patch"])], cwd=cp, check=True)
        summary, counts = _run(cp / SCRIPT, cp / "r")
        run = c["runs"][0]
        assert (summary["call_count"], summary["break_site_count"], summary["recompile_count"],
                summary["fallback_count"]) == (run["calls"], run["breaks"], run["recompiles"], run["fallbacks"])
        got[c["name"]] = summary, counts
    (summary, counts), (lsummary, lcounts) = got["always-pass-mask"], got["guard-logging"]
    assert summary["recompile_count"] == 0 and summary["break_site_count"] == 1
    assert lsummary["recompile_count"] == 1 and lsummary["break_site_count"] == 0
    # PyTorch's own: the mask always passed compiles one graph fewer (no None variant), the break kept;
    # the guarded logger leaves no break, both variants kept
    assert counts["stats"]["unique_graphs"] == lcounts["stats"]["unique_graphs"] - 1
    assert sum(counts.get("graph_break", {}).values()) > 0
    assert sum(lcounts.get("graph_break", {}).values()) == 0
