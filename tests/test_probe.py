"""The compile probe on small real workloads (CPU, backend eager/aot_eager, custom backends).

GIVEN a workload file, WHEN ``seamscope probe FILE:FUNC`` runs, THEN the receipt's ``probe``
section names what happened: phases paired, the differential classes, the ladder's first failing
layer, the evidence table; bad input exits 2 (1 when the model itself fails) and still writes.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from seamscope.cli import main  # noqa: E402

pytestmark = pytest.mark.torch

HEADER = """
import os
import torch
import torch.fx
from seamscope.experiments.workload import Workload


def perturb(gm, example_inputs):
    # A planted wrong result: the compiled graph's outputs are shifted by 1.
    def run(*args):
        out = gm(*args)
        return [o + 1.0 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out]
    return run


def reorder_sums(gm, example_inputs):
    # Only the summation order differs: every sum runs over its elements reversed.
    class I(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            if target in (torch.sum, torch.Tensor.sum) and args and isinstance(args[0], torch.Tensor):
                dim = kwargs.get("dim", args[1] if len(args) > 1 else -1)
                return torch.sum(args[0].flip(dim), *args[1:], **kwargs)
            return super().call_function(target, args, kwargs)
        def call_method(self, target, args, kwargs):
            if target == "sum":
                return self.call_function(torch.sum, args, kwargs)
            return super().call_method(target, args, kwargs)
    return lambda *a: I(gm).run(*a)


def aborts(gm, example_inputs):
    os.abort()
"""


@pytest.fixture(autouse=True)
def _reset_dynamo() -> Any:
    import torch._dynamo

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _workload_file(tmp_path: Path, body: str, name: str = "wl.py") -> Path:
    p = tmp_path / name
    p.write_text(HEADER + textwrap.dedent(body))
    return p


def _probe(args: list[str], capsys: Any) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ex:
        main(["probe", *args])
    cap = capsys.readouterr()
    return int(ex.value.code or 0), cap.out + cap.err


def _receipt(out: Path) -> dict[str, Any]:
    return json.loads((out / "receipt.json").read_text())  # type: ignore[no-any-return]


SIN = """
def sin_workload(ladder=("eager", "aot_eager")):
    torch.manual_seed(0)
    return Workload(lambda x: torch.sin(x) * 2, inputs={"steady": [torch.randn(4, 8)], "changed": [torch.randn(5, 8)]},
                    backend="eager", compile_options={"dynamic": False}, warm_calls=3, ladder=ladder)
"""


def test_phases_are_paired_and_counted(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, SIN)
    code, text = _probe([f"{wl}:sin_workload", "--out", str(tmp_path / "o"), "--warm", "4"], capsys)
    assert code == 0, text
    p = _receipt(tmp_path / "o")["probe"]
    pairs = {x["phase"]: x for x in p["pairs"]}
    assert [len(pairs[ph]["baseline"]["samples_ns"]) for ph in ("cold", "warm", "changed")] == [1, 4, 1]
    assert all(len(x["baseline"]["samples_ns"]) == len(x["candidate"]["samples_ns"]) for x in p["pairs"])
    rows = {r["configuration"]: r for r in p["evidence"]}
    # A new shape with dynamic=False: one recompile, two frame compilations.
    assert rows["compile eager"]["recompiles"] == 1 and rows["compile eager"]["compiles"] == 2
    assert rows["eager"]["recompiles"] == 0
    assert [m["compiled_variants"] for m in p["memory"] if m["configuration"] == "compile eager"] == [1, 2]
    assert p["verdict"] == "ok"
    assert [lr["verdict"] for lr in p["ladder"]["layers"]] == ["ok", "ok"]
    assert "compiler evidence" in text and "first call" in text
    led = _receipt(tmp_path / "o")["ledger"]
    assert [c["phase"] for c in led["calls"]] == ["cold"] + ["steady"] * 4 + ["cold"]
    assert _receipt(tmp_path / "o")["summary"]["recompile_count"] == 1


PLANTED = """
def planted():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    return Workload(m, inputs={"steady": [torch.randn(2, 8)]}, backend="eager", warm_calls=2,
                    ladder=("eager", perturb, "aot_eager"))
"""


def test_planted_wrong_result_is_the_first_failing_layer_and_a_boundary_bug(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, PLANTED)
    code, text = _probe([f"{wl}:planted", "--out", str(tmp_path / "o"), "--fail-on-divergence"], capsys)
    p = _receipt(tmp_path / "o")["probe"]
    lad = p["ladder"]
    assert lad["first_failing"] == "perturb"
    layers = {lr["backend"]: lr for lr in lad["layers"]}
    assert layers["perturb"]["verdict"] == "mismatch" and layers["perturb"]["compiled"] and layers["perturb"]["ran"]
    assert layers["perturb"]["worst"]["klass"] == "boundary_bug"
    assert layers["aot_eager"]["verdict"] == "ok"
    assert p["verdict"] == "boundary_bug"
    assert code == 1  # --fail-on-divergence: the answer is no


def test_candidate_backend_perturbing_is_a_boundary_bug_in_the_differential(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, PLANTED.replace('backend="eager"', "backend=perturb"))
    code, _ = _probe([f"{wl}:planted", "--out", str(tmp_path / "o"), "--backends", "none"], capsys)
    assert code == 0
    p = _receipt(tmp_path / "o")["probe"]
    assert p["differential"][0]["klass"] == "boundary_bug"
    assert p["differential"][0]["worst"]["path"] == "out"
    assert p["verdict"] == "boundary_bug" and p["ladder"] is None


SUMS = """
def sums():
    torch.manual_seed(0)
    x = torch.randn(4, 200_000)
    return Workload(lambda x: x.sum(dim=-1), inputs={"steady": [x]}, backend=reorder_sums, warm_calls=2,
                    ladder=("eager",))
"""


def test_summation_order_alone_is_not_called_a_bug(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, SUMS)
    code, _ = _probe([f"{wl}:sums", "--out", str(tmp_path / "o")], capsys)
    assert code == 0
    p = _receipt(tmp_path / "o")["probe"]
    leaf = p["differential"][0]["worst"]
    assert leaf["max_ulp"] > 0  # the order really changed the bits
    assert leaf["large_reduction"] is True and leaf["reduction_length"] == 200_000
    assert leaf["klass"] != "boundary_bug" and p["verdict"] in ("ok", "suspect")


ABORT = """
def abort_wl():
    torch.manual_seed(0)
    return Workload(lambda x: x.cos() + 1, inputs={"steady": [torch.randn(3, 3)]}, backend="eager", warm_calls=1)
"""


def test_abort_in_a_backend_under_isolate_is_reported_and_the_ladder_goes_on(tmp_path: Path, capsys: Any,
                                                                          fresh_server: Any) -> None:
    wl = _workload_file(tmp_path, ABORT)
    backends = f"{wl}:aborts,eager"
    code, text = _probe([f"{wl}:abort_wl", "--out", str(tmp_path / "o"), "--isolate", "--timeout", "120",
                         "--backends", backends], capsys)
    assert code == 0, text
    lad = _receipt(tmp_path / "o")["probe"]["ladder"]
    verdicts = [(lr["verdict"], lr["isolated"]) for lr in lad["layers"]]
    assert verdicts == [("crashed", True), ("ok", True)]
    assert lad["layers"][0]["signal"] == "SIGABRT"
    assert lad["first_failing"] == f"{wl}:aborts"


TRANSFORMER = """
def bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=37, max_position_embeddings=64)
    m = BertModel(cfg).eval()
    ids = lambda n: torch.randint(0, 100, (2, n), generator=torch.Generator().manual_seed(n))
    return Workload(m, inputs={"steady": [{"input_ids": ids(8)}], "changed": [{"input_ids": ids(12)}]},
                    backend="eager", warm_calls=2, ladder=())
"""


def test_transformers_model_from_a_config(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("transformers", reason="transformers (extra models) is not installed")
    wl = _workload_file(tmp_path, TRANSFORMER)
    code, text = _probe([f"{wl}:bert", "--out", str(tmp_path / "o")], capsys)
    assert code == 0, text
    p = _receipt(tmp_path / "o")["probe"]
    paths = {lf["path"] for d in p["differential"] for lf in d["leaves"]}
    assert {"out.last_hidden_state", "out.pooler_output"} <= paths
    assert [d["signature"] for d in p["differential"]] == ["(2x8:int64)", "(2x12:int64)"]
    assert p["verdict"] in ("ok", "suspect")
    assert [r["configuration"] for r in p["evidence"]] == ["eager", "compile eager"]


MUTATES = """
def mutates():
    torch.manual_seed(0)
    m = torch.nn.BatchNorm1d(4).train()
    return Workload(m, inputs={"steady": [torch.randn(8, 4)]}, backend="eager", warm_calls=1, ladder=())
"""


def test_buffer_mutations_are_compared(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, MUTATES)
    code, _ = _probe([f"{wl}:mutates", "--out", str(tmp_path / "o")], capsys)
    assert code == 0
    leaves = {lf["path"]: lf for lf in _receipt(tmp_path / "o")["probe"]["differential"][0]["leaves"]}
    assert leaves["module.running_mean"]["reason"].startswith("mutated in place")
    assert leaves["module.running_mean"]["klass"] == "within_tolerance"


BAD = """
def not_a_workload():
    return 42


def raises_in_eager():
    def f(x):
        raise ValueError("shape mismatch in my model")
    return Workload(f, inputs={"steady": [torch.ones(2)]}, backend="eager")
"""


@pytest.mark.parametrize(
    "spec, code, words",
    [
        ("missing.py:f", 2, "workload file not found"),
        ("{wl}:nope", 2, "no function 'nope'"),
        ("{wl}:not_a_workload", 2, "returned int, expected seamscope.Workload"),
        ("{wl}", 2, "expected FILE.py:FUNC"),
        ("{wl}:raises_in_eager", 1, "fails eager → fix the model first: ValueError: shape mismatch"),
    ],
)
def test_bad_input_says_which_in_one_line(tmp_path: Path, capsys: Any, spec: str, code: int, words: str) -> None:
    wl = _workload_file(tmp_path, BAD)
    got, text = _probe([spec.format(wl=wl), "--out", str(tmp_path / "o")], capsys)
    assert got == code
    assert words in text
    if code == 1:  # what was measured before the failure is still written
        p = _receipt(tmp_path / "o")["probe"]
        assert p["verdict"] == "fails_eager" and "fix the model first" in p["error"]
    else:
        assert not (tmp_path / "o").exists()


def test_bundled_example_has_a_workload() -> None:
    from seamscope.examples.decoder import workload
    from seamscope.experiments.workload import Workload

    wl = workload()
    assert isinstance(wl, Workload) and wl.backend == "eager" and len(wl.inputs["changed"]) == 2


@pytest.mark.inductor
def test_inductor_layer_matches_eager(tmp_path: Path, capsys: Any) -> None:
    wl = _workload_file(tmp_path, SIN)
    code, text = _probe([f"{wl}:sin_workload", "--out", str(tmp_path / "o"), "--backends", "inductor", "--warm", "2"],
                        capsys)
    assert code == 0, text
    lad = _receipt(tmp_path / "o")["probe"]["ladder"]
    assert lad["layers"][0]["verdict"] in ("ok", "suspect") and lad["first_failing"] is None


def test_receipt_loads_back(tmp_path: Path, capsys: Any) -> None:
    from seamscope.ingest.receipt import load_receipt

    wl = _workload_file(tmp_path, SIN)
    code, _ = _probe([f"{wl}:sin_workload", "--out", str(tmp_path / "o"), "--backends", "none", "--warm", "1"], capsys)
    assert code == 0
    r = load_receipt(str(tmp_path / "o" / "receipt.json"))
    assert r.probe is not None and r.probe.spec.warm_calls == 1


ITEM = """
def item_break():
    def f(x):
        s = x.sum().item()
        return x * s
    return Workload(f, inputs={"steady": [torch.ones(4)]}, backend="eager", warm_calls=2, ladder=())
"""


def test_dynamo_config_option_tries_a_configuration_remedy(tmp_path: Path, capsys: Any) -> None:
    # The findings suggest `seamscope probe ... --dynamo-config capture_scalar_outputs=True`.
    wl = _workload_file(tmp_path, ITEM)
    got, _ = _probe([f"{wl}:item_break", "--out", str(tmp_path / "a")], capsys)
    assert got == 0
    before = _receipt(tmp_path / "a")["summary"]
    got, _ = _probe([f"{wl}:item_break", "--out", str(tmp_path / "b"),
                     "--dynamo-config", "capture_scalar_outputs=True"], capsys)
    assert got == 0
    after = _receipt(tmp_path / "b")["summary"]
    assert before["break_site_count"] == 1 and after["break_site_count"] == 0
    got, text = _probe([f"{wl}:item_break", "--dynamo-config", "no_such_thing=1"], capsys)
    assert got == 2 and "no setting no_such_thing" in text
    got, text = _probe([f"{wl}:item_break", "--dynamo-config", "capture_scalar_outputs"], capsys)
    assert got == 2 and "expected NAME=VALUE" in text
