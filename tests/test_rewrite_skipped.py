"""A frame Dynamo traces and then gives up on (a model whose ``forward`` loops over its blocks with
an early exit on a tensor's value: "graph break in loop", the frame run eagerly, its tracing paid
for nothing) gets both remedies as candidates: ``skipped-frame-net-forward``
(``@torch.compiler.disable(recursive=False)`` above ``Net.forward``) and ``regional Block`` (the
blocks it calls compiled instead of the model). Torch-free on the script's text and a receipt
holding what a real run (torch 2.13, ``backend="eager"``) recorded; then one real run of each
patched script, applied with ``git apply``: no frame given up on, outputs equal."""

from __future__ import annotations

import os
import shutil
import subprocess
from types import SimpleNamespace

import pytest
from fakes import dynamo_settings_kept

from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials.catalogue import catalogue
from seamscope.experiments.trials.patches import attach, spec_patch
from seamscope.experiments.trials.rewrites import draft
from seamscope.experiments.trials.rewrites.skipped_frame import SkippedFrame, called_classes
from seamscope.experiments.trials.rewrites.syntax import Source

SCRIPT = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return torch.relu(self.lin(x)) + x


class Net(nn.Module):
    def __init__(self, d=16, n=4, threshold=1e9):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 1)
        self.threshold = threshold

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
            confidence = self.head(x).sigmoid().mean()
            if confidence > self.threshold:
                break
        return x


torch.manual_seed(0)
model = Net().eval()
compiled = torch.compile(model, backend="eager")
with torch.no_grad():
    for _ in range(3):
        RESULT = compiled(torch.randn(8, 16))
'''


def _receipt(skipped: bool = True, block_ok: bool = True):
    """What the real run recorded: ``Net.forward`` (line 21) traced, broken at line 25 and given
    up on (compilation 0/0, failed); ``Block.forward`` (line 10) compiled on its own (1/0)."""
    site = SimpleNamespace(site_id="B1", file="early.py", line=25, function="forward", scope="Net.forward",
                           frame_skipped=skipped, compile_ids=["0/0"])
    comps = [SimpleNamespace(compile_id="0/0", frame_name="forward", file="early.py", line=21, status="failed",
                             start_ns=1, duration_ns=796_675_000),
             SimpleNamespace(compile_id="1/0", frame_name="forward", file="early.py", line=10,
                             status="ok" if block_ok else "failed", start_ns=2, duration_ns=221_985_000)]
    where = SimpleNamespace(frame_skipped=skipped, line=25)
    finding = SimpleNamespace(finding_id="B1", site_id="B1", where=where, cost=None, cost_ns=None, churn=None,
                              remedies=[], sentence="break B1 at early.py:25 (branch on a tensor value)")
    return SimpleNamespace(
        ledger=SimpleNamespace(break_sites=[site], compilations=comps,
                               environment=SimpleNamespace(torch_version="2.13.0")),
        findings=SimpleNamespace(findings=[finding], compile_time=None),
        summary=SimpleNamespace(fallback_count=1, fallbacks=[SimpleNamespace(status="failed")],
                                graph_count=1 if block_ok else 0))


@pytest.fixture()
def script(tmp_path):
    path = tmp_path / "early.py"
    path.write_text(SCRIPT)
    return str(path)


def test_the_frame_given_up_on_gets_both_candidates(script):
    (e,) = SkippedFrame().find(_receipt(), script, Source(SCRIPT))  # type: ignore[arg-type]
    assert e.name == "skipped-frame-net-forward" and e.cost_ns == 796_675_000
    assert "    @torch.compiler.disable(recursive=False)\n    def forward(self, x):\n        for blk" in e.after
    assert e.after.count("@torch.compiler") == 1 and "Net.forward" in e.targets and "early.py:25" in e.change
    assert called_classes(_receipt(), script, Source(SCRIPT).tree) == ["Block"]  # type: ignore[arg-type]
    drafts = catalogue(_receipt(), script=script)  # type: ignore[arg-type]
    regional = next(d for d in drafts if d.spec.regional)
    assert regional.name == "regional-block" and regional.origin == "B1" and regional.cost_ns == 796_675_000
    p = spec_patch(regional.spec, script, _receipt())
    assert p is not None and p.calls_of == "compiled"
    assert "+    if isinstance(block, Block):\n+        block.compile(backend=\"eager\")\n+compiled = model\n" in p.diff


@pytest.mark.parametrize("receipt,text", [
    (_receipt(skipped=False), SCRIPT),  # a break Dynamo resumed after: a seam, not a frame traced for nothing
    (_receipt(), SCRIPT.replace("    def forward(self, x):\n        for",
                                "    @torch.compiler.disable\n    def forward(self, x):\n        for")),
])
def test_no_disable_candidate_without_a_frame_given_up_on_or_one_disabled_already(script, receipt, text):
    assert SkippedFrame().find(receipt, script, Source(text)) == []


def test_no_regional_candidate_without_blocks_compiled_on_their_own(script):
    assert not any(d.spec.regional for d in catalogue(_receipt(block_ok=False), script=script))  # type: ignore
    assert not any(d.spec.regional for d in catalogue(_receipt(skipped=False), script=script))  # type: ignore
    why: list[str] = []
    assert spec_patch(spec_from_words(["--regional", "Block"]), script, _receipt(skipped=False), why) is None
    assert "nor a frame it gave up on" in why[0]


def _run(path: str):
    """Run a script in this process on a fresh Dynamo: (its result, PyTorch's frame counters)."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    ns = {"__name__": "__main__"}
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)  # noqa: S102 (the test's own script)
    seen = {k: dict(v) for k, v in counters.items()}
    torch._dynamo.reset()
    return ns["RESULT"], seen


@pytest.mark.torch
@pytest.mark.skipif(shutil.which("git") is None, reason="git applies the patch")
def test_each_patch_applies_and_runs_with_no_frame_given_up_on(tmp_path, script):
    torch = pytest.importorskip("torch")

    edits = SkippedFrame().find(_receipt(), script, Source(SCRIPT))  # type: ignore[arg-type]
    drafts = catalogue(_receipt(), script=script) + [draft(e) for e in edits]  # type: ignore[arg-type]
    attach(drafts, str(tmp_path / "out"), script, _receipt())
    chosen = [d for d in drafts if d.spec.regional or d.name.startswith("skipped-frame")]
    assert len(chosen) == 2 and all(d.patch for d in chosen)
    with dynamo_settings_kept():
        before, seen = _run(script)
        assert seen["frames"]["total"] > seen["frames"].get("ok", 0) and seen.get("unimplemented")  # given up on
        for d in chosen:
            repo = tmp_path / d.name
            repo.mkdir()
            shutil.copy(script, repo / "early.py")
            subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True)
            subprocess.run(["git", "apply", str(d.patch)], cwd=repo, check=True)
            after, seen = _run(os.path.join(repo, "early.py"))
            assert seen["frames"]["total"] == seen["frames"]["ok"] >= 1 and not seen.get("unimplemented"), d.name
            assert torch.equal(after, before), d.name
