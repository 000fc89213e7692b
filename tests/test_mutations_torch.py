"""The five mutations on real ``torch.compile`` runs (backend ``eager``): a baseline with a graph
break that recompiles for every new length, a candidate without the break and with dynamic shapes
(so its cold and steady counts differ from the baseline's), the same inputs fed to both."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import MUTATION_CODES, MUTATIONS, apply_mutations

torch = pytest.importorskip("torch")

from seamscope.analyze.diff import attach_comparison  # noqa: E402
from seamscope.analyze.inputs import InputTrace  # noqa: E402
from seamscope.analyze.verify import load_raw, verify  # noqa: E402
from seamscope.capture.session import Session  # noqa: E402
from seamscope.render.receipt_json import write_receipt_files  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _reset() -> None:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _inputs() -> list[tuple[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    warm = [("warm", torch.randn(4, 8, generator=g)) for _ in range(6)]
    changed = [("changed", torch.randn(n, 8, generator=g)) for n in (5, 6, 7)]
    return warm + changed


def _baseline(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 2
    torch._dynamo.graph_break()
    return torch.cos(y) + y.sum()


def _candidate(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 2
    return torch.cos(y) + y.sum()


def _run(fn: object, inputs: list[tuple[str, torch.Tensor]], dynamic: bool) -> object:
    trace = InputTrace()
    for fam, x in inputs:
        trace.add((x,), family=fam)
    torch._dynamo.reset()
    with Session(input_trace_sha256=trace.hexdigest(), write_html=False) as s:
        f = torch.compile(fn, backend="eager", dynamic=dynamic)
        for fam, x in inputs:
            with s.family(fam):
                f(x)
    return s.receipt()


def _pair(tmp: Path) -> tuple[Path, Path]:
    inputs = _inputs()
    base = _run(_baseline, inputs, dynamic=False)  # recompiles for every new length
    cand = attach_comparison(base, _run(_candidate, inputs, dynamic=True))  # type: ignore[arg-type]
    return (Path(write_receipt_files(base, tmp / "before")),  # type: ignore[arg-type]
            Path(write_receipt_files(cand, tmp / "after")))


def test_real_runs_verify_and_each_mutation_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b, c = _pair(tmp_path / "clean")
    base_raw = load_raw(b)
    assert base_raw["summary"]["break_site_count"] >= 1 and base_raw["summary"]["recompile_count"] >= 1
    cand_raw = load_raw(c)
    assert cand_raw["summary"]["calls_by_phase"]["cold"] < base_raw["summary"]["calls_by_phase"]["cold"]
    v = verify(load_raw(c), base_raw)
    assert v.ok, v.lines()
    clean_hash = load_raw(c)["receipt_sha256"]
    for name in MUTATIONS:
        with monkeypatch.context() as mp:
            apply_mutations(mp, name)
            mb, mc = _pair(tmp_path / name)
        raw = load_raw(mc)
        assert raw["receipt_sha256"] != clean_hash, name
        codes = verify(raw, load_raw(mb)).codes
        assert MUTATION_CODES[name] in codes, (name, codes)
        assert not codes & (set(MUTATION_CODES.values()) - {MUTATION_CODES[name]}), (name, codes)
