"""What the trial and patch tests read from a trial's or a run's output: a metric's median, whether
the machine was too noisy for a timing verdict (:func:`noisy_machine`), and a script run under a
remedy in this process (``test_trials_torch.py``, ``test_patches_torch.py``,
``test_rewrite_scalar_torch.py``, ``test_catalogue_torch.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil

from fakes import dynamo_settings_kept


def noisy_machine(c):
    """Whether the trial could not show the machine quiet enough to tell timings apart: it measured
    its noise beyond the limit (another process stalled PyTorch's threads), or it measured none.
    With one repetition no call is timed twice: the total's noise reads 0 and the paired noise is
    missing, and the verdict rests on the 3% floor alone, which a loaded machine crosses either
    way. Then a timing verdict is the machine's, not the remedy's, and a test asserts only what
    the counts and outputs say; where this is False the timing claim holds."""
    from seamscope.experiments.trials.verdicts import NOISE_LIMIT

    total = next(m for m in c["metrics"] if m["name"] == "total")
    if len(total["ratios"]) < 2:  # one repetition: no noise measured, "not noisy" would be unfounded
        return True
    if "noisy" in (c["verdict"], c["total_verdict"]):  # its interval reached beyond ±25%: the test could not tell
        return True
    noises = [(c.get("paired") or {}).get("noise"), total.get("baseline_spread")]
    return any(n is not None and n > NOISE_LIMIT for n in noises)


def load(path):
    with open(path) as f:
        return json.load(f)


def metric_median(c, name):
    return next(m for m in c["metrics"] if m["name"] == name)["median"]


@contextlib.contextmanager
def inside(folder):
    """The current folder is ``folder`` for the block (a copied script, its patches and runs)."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        yield folder
    finally:
        os.chdir(cwd)


def run_here(script, args, out):
    """``script`` run in this process under capture, on a fresh Dynamo and with its settings put
    back after: its receipt (as JSON) and PyTorch's count of the graphs it compiled."""
    import torch

    from seamscope.capture.runner import run_target

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with dynamo_settings_kept():
        result = run_target(str(script), list(args), out=str(out))
    assert result.exit_code == 0, result.message
    return load(os.path.join(out, "receipt.json")), torch._dynamo.utils.counters["stats"]["unique_graphs"]


def catalogued(tmp_path_factory, script):
    """``script`` copied into a folder of its own and run there in this process (:func:`run_here`),
    with ``try``'s catalogue for its receipt: (the folder, the receipt as JSON, PyTorch's count of
    graphs, the receipt, the drafts). The caller runs what else it needs there ``inside`` it."""
    from seamscope.experiments.trials.catalogue import catalogue
    from seamscope.ingest.receipt import load_receipt

    name = os.path.basename(script)
    d = tmp_path_factory.mktemp(name.removesuffix(".py"))
    shutil.copy(script, d / name)
    with inside(d):
        raw, graphs = run_here(name, [], d / "base")
        receipt = load_receipt(str(d / "base" / "receipt.json"))
    return d, raw, graphs, receipt, catalogue(receipt, script=str(d / name))


def run_patched(script, words, out):
    import torch

    from seamscope.capture import adapter
    from seamscope.capture.runner import run_target
    from seamscope.experiments.remedy_plan import prepare
    from seamscope.experiments.remedy_spec import spec_from_words

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    with dynamo_settings_kept():
        result = run_target(str(script), [], out=str(out), setup=prepare(spec_from_words(words), str(script)))
    assert result.exit_code == 0, result.message
    r = load(os.path.join(out, "receipt.json"))["summary"]
    return (r["compile_count"], r["recompile_count"], r["break_site_count"],
            adapter.dynamo_counters().get("stats", {}).get("unique_graphs", 0))  # no "stats" where nothing compiled
