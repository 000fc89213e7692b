"""Where users compile: a diffusers UNet in a denoising loop and a Lightning ``Trainer``, each
under ``seamscope run`` (in process: ``run_target``), counted against PyTorch's own records.

GIVEN ``tests/workloads/unet_denoise.py`` (a ``UNet2DConditionModel`` from a tiny config, 6 steps,
the timestep a Python int) and ``tests/workloads/lightning_fit.py`` (a compiled
``LightningModule``, one epoch of 3 batches, the last one short, ``aot_eager``), WHEN each runs
under ``run_target``, THEN the receipt's calls are the user's steps, its compile, recompile and
graph counts equal PyTorch's (``get_compilation_metrics()``, ``counters["stats"]``), which capture
does not read, the ledger passes its self-check, the cause of the one recompile is named, and the
frame the report names is the user's (the UNet's ``forward``, not diffusers' decorator ``wrapper``).
Each package is an extra (``ecosystems``): its test is skipped, saying so, where it is missing.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")

from rich.console import Console  # noqa: E402

from seamscope.analyze.verify import check_receipt, load_raw  # noqa: E402
from seamscope.capture.runner import run_target  # noqa: E402
from seamscope.model.ledger import compile_frame_index  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402
from seamscope.render.terminal import TerminalRenderer  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset"), pytest.mark.timeout(600)]

WORKLOADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")


def _pytorch_counts() -> dict[str, int]:
    """PyTorch's own records of the run: compile ids that produced code, recompiles, graphs."""
    metrics = torch._dynamo.utils.get_compilation_metrics()
    # distinct ids: a compiled backward, compiled at the first backward, adds a record of its id
    ids = {m.compile_id for m in metrics if m.compile_id}
    return {
        "compile_count": len({m.compile_id for m in metrics if m.compile_id and not m.fail_type}),
        "recompile_count": sum(1 for cid in ids if compile_frame_index(cid)[1] > 0),
        "graph_count": torch._dynamo.utils.counters["stats"]["unique_graphs"],
    }


def _run(script: str, tmp_path, monkeypatch):
    torch._dynamo.utils.clear_compilation_metrics()
    monkeypatch.chdir(tmp_path)
    result = run_target(os.path.join(WORKLOADS, script), [], out=str(tmp_path / "out"), checkpoint_every=0)
    assert result.exit_code == 0, result.message
    assert result.receipt_path is not None
    assert check_receipt(load_raw(result.receipt_path)).ok
    receipt = result.session.last_receipt or result.session.receipt()
    self_check(receipt.ledger)
    return receipt


@pytest.mark.diffusers
def test_a_unet_denoising_loop_is_counted_as_pytorch_counts_it(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("diffusers", reason="diffusers (the ecosystems extra) is not installed")
    r = _run("unet_denoise.py", tmp_path, monkeypatch)
    assert "done (1, 4, 8, 8)" in capsys.readouterr().out
    s = r.summary
    assert s.call_count == 6  # the loop's steps
    assert {k: getattr(s, k) for k in ("compile_count", "recompile_count", "graph_count")} == _pytorch_counts()
    assert (s.compile_count, s.recompile_count, s.fallback_count) == (2, 1, 0)
    assert [c.phase for c in r.ledger.calls] == ["cold", "cold", "steady", "steady", "steady", "steady"]
    (rc,) = s.recompiles
    assert any("args[1] == 6 " in g for g in rc.failed_guards)  # the int timestep, specialised
    # diffusers wraps forward in a decorator (``apply_lora_scale``): the user knows the UNet
    for c in r.ledger.compilations:
        assert c.user_frame is not None and c.user_frame.function == "UNet2DConditionModel.forward"
        assert c.user_frame.file.startswith("site-packages/diffusers/")
    text = TerminalRenderer(Console(width=200)).render(r)
    assert "UNet2DConditionModel.forward" in text


@pytest.mark.lightning
def test_a_lightning_trainer_over_a_compiled_module_is_counted_as_pytorch_counts_it(
    tmp_path, monkeypatch, capsys
) -> None:
    pytest.importorskip("lightning", reason="lightning (the ecosystems extra) is not installed")
    r = _run("lightning_fit.py", tmp_path, monkeypatch)
    steps = math.ceil(18 / 8)
    assert f"fit done {steps}" in capsys.readouterr().out
    s = r.summary
    assert s.call_count == steps  # one observed call per training step
    assert {k: getattr(s, k) for k in ("compile_count", "recompile_count", "graph_count")} == _pytorch_counts()
    assert (s.compile_count, s.recompile_count) == (2, 1)
    (rc,) = s.recompiles
    assert rc.frame_name == "training_step" and rc.call_index == steps - 1  # the short last batch
    assert any("size mismatch at index 0" in g for g in rc.failed_guards)
    # each step's compiled backward (loss.backward() in Lightning's closure) is the step's
    backward = [o for o in r.ledger.outside if o.kind == "backward"]
    assert [o.attributed_call for o in backward] == list(range(steps))
