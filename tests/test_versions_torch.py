"""What newer PyTorch gives, used, on real runs (backend "eager"): each break site's hint classes
from the running torch's registry (a print, ``.item()``, an unsupported builtin, a data-dependent
branch, a break caused by an earlier one), the shipped table against the live registry, and the
per-callable recompile limit recorded in the receipt and applied by ``--compile-option``."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from seamscope.analyze.findings import analyze_findings  # noqa: E402
from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402
from seamscope.ingest.hints import shipped_table  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def h_print(x):
    y = x.sin()
    print("step", file=sys.stderr)
    return y.cos()


def h_item(x):
    y = x.sin()
    if y.sum().item() > -1e9:
        return y.cos()
    return y


def h_builtin(x):
    y = x.sin()
    return y + len(memoryview(b"ab"))  # len() of a memoryview: a builtin Dynamo cannot trace


def h_branch(x):
    y = x.sin()
    if y.sum() > -1e9:
        return y.cos()
    return y


def h_loop(x):
    for i in range(2):
        x = x.sin()
        print(i, file=sys.stderr)  # a break in a loop: Dynamo then meets "graph break in loop"
    return x


def _sites(fn):
    with session() as s:
        torch.compile(fn, backend="eager")(torch.randn(4))
    assert s.ledger is not None
    return s.ledger, [b for b in s.ledger.break_sites if b.function == fn.__name__]


def test_the_live_registry_has_every_class_and_the_shipped_table_covers_it():
    live = adapter.live_hint_table()
    shipped = shipped_table()
    assert {"FUNDAMENTAL", "SUPPORTABLE", "USER_ERROR", "DYNAMO_BUG", "DIFFICULT",
            "CAUSED_BY_EARLIER_GRAPH_BREAK"} <= set(live.classes)
    for name, texts in live.classes.items():
        assert set(texts) <= set(shipped.classes.get(name, ())), f"regenerate the table: {name} changed"
    for code, classes in live.codes.items():
        assert set(classes) <= set(shipped.codes.get(code, ())), f"regenerate the table: {code}"


def test_a_print_break_carries_the_registry_class_of_its_code():
    live = adapter.live_hint_table()
    _, (site,) = _sites(h_print)
    assert site.gb_code == "GB0059" and site.hint_classes == list(live.codes.get("GB0059", ()))
    assert site.chained == []


def test_an_item_break_carries_the_registry_class_of_its_code():
    live = adapter.live_hint_table()
    _, (site,) = _sites(h_item)
    assert site.gb_code == "GB0124" and site.hint_classes == list(live.codes.get("GB0124", ()))


def test_an_unsupported_builtin_is_supportable_and_the_finding_says_report_or_upgrade():
    ledger, sites = _sites(h_builtin)
    site = next(s for s in sites if "SUPPORTABLE" in s.hint_classes)
    f = next(f for f in analyze_findings(ledger).findings if f.site_id == site.site_id)
    texts = [r.text for r in f.remedies if r.action == "pytorch_hint_class"]
    assert any("report it upstream" in t for t in texts) and "PyTorch class SUPPORTABLE" in f.sentence


def test_a_data_dependent_branch_is_fundamental_keep_a_boundary_or_rewrite():
    ledger, (site,) = _sites(h_branch)
    assert site.gb_code == "GB0170" and site.hint_classes == ["FUNDAMENTAL"]
    f = next(f for f in analyze_findings(ledger).findings if f.site_id == site.site_id)
    assert any(r.config.get("class") == "FUNDAMENTAL" and "honest boundary" in r.text for r in f.remedies)


def test_a_break_caused_by_an_earlier_one_names_it():
    ledger, (site,) = _sites(h_loop)
    assert site.frame_skipped and site.gb_code == "GB0059"
    assert [(c.gb_code, c.hint_classes) for c in site.chained] == [("GB7000", ["CAUSED_BY_EARLIER_GRAPH_BREAK"])]
    f = next(f for f in analyze_findings(ledger).findings if f.site_id == site.site_id)
    (r,) = [r for r in f.remedies if r.config.get("class") == "CAUSED_BY_EARLIER_GRAPH_BREAK"]
    assert "graph break in loop (GB7000)" in r.text and "this one" in r.text and "Fix this break first" in r.text


def test_compile_accepts_the_per_callable_knobs():
    assert adapter.compile_accepts("recompile_limit") and adapter.compile_accepts("isolate_recompiles")
    assert not adapter.compile_accepts("no_such_argument")


def test_the_receipt_records_the_per_callable_knobs():
    with session() as s:
        torch.compile(lambda x: x + 1, backend="eager", recompile_limit=16, isolate_recompiles=True)(torch.ones(2))
    assert s.ledger is not None
    opts = s.ledger.environment.compile_options
    assert opts["recompile_limit"] == "16" and opts["isolate_recompiles"] == "True"


CHURN = textwrap.dedent("""
    import torch

    @torch.compile(backend="eager", dynamic=False)
    def f(x, n):
        return x * n

    for n in range(12):  # a new constant every call: a recompile each, past the default limit of 8
        f(torch.ones(2), n)
""")


def _run(tmp_path, monkeypatch, capsys, *flags):
    """``seamscope run`` in this process (a fresh Dynamo for each run: ``dynamo_reset``)."""
    from seamscope.cli import main

    script = tmp_path / "churn.py"
    script.write_text(CHURN)
    out = tmp_path / ("out" + str(len(flags)))
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()
    with pytest.raises(SystemExit) as e:
        main(["run", "--quiet", "--no-html", "--out", str(out), *flags, str(script)])
    assert e.value.code == 0, capsys.readouterr().err
    with open(out / "receipt.json") as fh:
        return json.load(fh)


def test_compile_option_recompile_limit_lifts_the_limit_for_the_callable(tmp_path, monkeypatch, capsys, dynamo_reset):
    base = _run(tmp_path, monkeypatch, capsys)
    assert base["summary"]["fallback_count"] >= 1
    lifted = _run(tmp_path, monkeypatch, capsys, "--compile-option", "recompile_limit=16")
    assert lifted["summary"]["fallback_count"] == 0
    assert lifted["summary"]["recompile_count"] == 11
    assert lifted["ledger"]["environment"]["compile_options"]["recompile_limit"] == "16"


def test_the_shapes_spec_argument_under_the_name_this_torch_takes():
    # ``shapes_spec`` in 2.13, ``dynamic_shapes`` from 2.14: a test per name, whichever runs here
    from torch.fx.experimental.dynamic_spec import ParamsSpec, ShapesSpec, ShapeVar, TensorSpec

    name = adapter.shapes_argument()
    minor = adapter.torch_version()[1]
    assert name == ("shapes_spec" if minor < (2, 14) else "dynamic_shapes")
    spec = ShapesSpec(params=ParamsSpec({"x": TensorSpec([ShapeVar("n", min=2, max=64)])}))
    with session() as s:
        f = torch.compile(lambda x: x * 2, backend="eager", **{name: spec})
        for n in (4, 6, 9):
            f(torch.ones(n))
    assert s.ledger is not None
    assert name in s.ledger.environment.compile_options
    assert [c.compile_id for c in s.ledger.compilations] == ["0/0"]  # the size is dynamic from the first call


def test_a_release_outside_the_table_is_warned_once_and_recorded(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.99.0")
    with session() as s:
        f = torch.compile(lambda x: x + 1, backend="eager")
        f(torch.ones(2))
        f(torch.ones(2))
    assert s.ledger is not None
    warned = [w for w in s.ledger.run.warnings if "outside the versions" in w]
    assert len(warned) == 1 and "torch 2.99.0" in warned[0] and "not checked on it" in warned[0]
