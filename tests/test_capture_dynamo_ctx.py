"""Callables compiled with a compiled module's own context (``c = torch.compile(m);
f = c.dynamo_ctx(step)``, how PyTorch Lightning's ``from_compiled`` builds its steps) are observed,
in a session and under ``seamscope run``; counts are checked against the calls made and PyTorch's
own counters (which capture does not read)."""

from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()

    def training_step(self, x):
        return self(x).sum()


@pytest.mark.parametrize("native", [True, False], ids=["C hot path", "Python path"])
def test_a_step_made_with_dynamo_ctx_inside_a_session_is_observed(native: bool) -> None:
    net = Net()
    s = session()
    if not native:
        s.native = None
    with s:
        compiled = torch.compile(net, backend="eager")
        step = compiled.dynamo_ctx(net.training_step)
        for _ in range(4):
            step(torch.ones(2, 4)).backward()
        compiled(torch.ones(2, 4))  # the module itself: one call, not two
    led = s.ledger
    self_check(led)
    assert led.totals.calls == 5
    assert [c.outcome for c in led.calls] == ["compile", "hit", "hit", "hit", "compile"]
    assert led.totals.outside_runs == 0 and s.outside_graph_runs == 0
    assert s.receipt().summary.graph_count == adapter.dynamo_counters()["stats"]["unique_graphs"]
    assert adapter.hooked_contexts() == 0  # the hook went with the session


def test_a_step_made_with_dynamo_ctx_under_seamscope_run_is_observed(tmp_path, monkeypatch, capsys) -> None:
    from seamscope.cli import main

    out = tmp_path / "o"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:  # seamscope run in this process (a fresh Dynamo: dynamo_reset)
        main(["run", "--out", str(out), os.path.join(HERE, "workloads", "dynamo_ctx_step.py")])
    proc = capsys.readouterr()
    assert e.value.code == 0, proc.err
    assert "steps done" in proc.out
    with open(out / "receipt.json") as f:
        r = json.load(f)
    assert r["summary"]["call_count"] == 5
    assert "No runtime data" not in proc.out + proc.err
    assert "outside any observed call" not in proc.out + proc.err
