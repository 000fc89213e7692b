"""Every renderer in ``seamscope.render`` satisfies the one ``Renderer`` protocol, and the file it
writes is what its extension says."""

from __future__ import annotations

import csv
import importlib
import inspect
import io
import json
import pkgutil
import typing
from pathlib import Path

import pytest
from fakes import fake_ledger, fake_probe, fake_trials, shape_policy, shape_study

import seamscope.render
from seamscope.analyze.receipt import make_receipt
from seamscope.model.receipt import Receipt
from seamscope.model.trials import Trials
from seamscope.render import Renderer, file_name, write_rendered


def renderer_classes() -> list[type]:
    """Every class named ``...Renderer`` defined in a module of ``seamscope.render``."""
    found = []
    for info in pkgutil.iter_modules(seamscope.render.__path__):
        mod = importlib.import_module(f"seamscope.render.{info.name}")
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and name.endswith("Renderer") and obj.__module__ == mod.__name__:
                found.append(obj)
    return sorted(found, key=lambda c: c.__name__)


RENDERERS = renderer_classes()


def subject_type(cls: type) -> type:
    hints = typing.get_type_hints(cls.render)
    params = [p for p in inspect.signature(cls.render).parameters.values() if p.name != "self"]
    return hints[params[0].name]


def a_subject(cls: type) -> Receipt | Trials:
    t = subject_type(cls)
    if t is Trials:
        return fake_trials()
    return make_receipt(fake_ledger(), probe=fake_probe(),
                        shapes=shape_study(shape_policy("auto", "auto"), shape_policy("pow2", "pow2", pad=True)))


def read_as(ext: str, data: bytes) -> None:
    """Fails unless ``data`` is a file of the kind ``ext`` names."""
    if ext == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        return
    text = data.decode("utf-8")
    if ext == ".html":
        assert text.lower().startswith("<!doctype html>") and text.rstrip().endswith("</html>")
    elif ext == ".json":
        assert isinstance(json.loads(text), dict)
    elif ext.endswith(".jsonl"):
        lines = text.splitlines()
        assert lines and all(isinstance(json.loads(ln), dict) for ln in lines)
    elif ext == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert len(rows) > 1 and len({len(r) for r in rows}) == 1
    elif ext == ".md":
        assert text.startswith("### ")
    elif ext == ".txt":
        assert text.strip() and "\x1b[" not in text  # plain text: no terminal colour codes
    else:
        raise AssertionError(f"no check for extension {ext!r}")


def test_every_renderer_module_is_found():
    names = {c.__name__ for c in RENDERERS}
    assert {"HtmlRenderer", "MarkdownRenderer", "PerfettoRenderer", "ReceiptJsonRenderer", "CallsCsvRenderer",
            "TraceRenderer", "ShapePlotRenderer", "TerminalRenderer", "ProbeTableRenderer",
            "TrialsTerminalRenderer", "TrialsMarkdownRenderer", "TrialsHtmlRenderer"} <= names


@pytest.mark.parametrize("cls", RENDERERS, ids=lambda c: c.__name__)
def test_renderer_satisfies_the_protocol(cls: type):
    r = cls()
    assert isinstance(r, Renderer)
    assert isinstance(r.extension, str) and r.extension.startswith(".") and len(r.extension) > 1
    required = [p for p in inspect.signature(r.render).parameters.values()
                if p.default is inspect.Parameter.empty and p.kind is not inspect.Parameter.VAR_KEYWORD]
    assert len(required) == 1, "render takes one subject; options go to the constructor or have defaults"
    assert subject_type(cls) in (Receipt, Trials)
    assert typing.get_type_hints(cls.render)["return"] in (str, bytes, str | bytes)


@pytest.mark.parametrize("cls", RENDERERS, ids=lambda c: c.__name__)
def test_renderer_writes_what_its_extension_says(cls: type, tmp_path: Path):
    if cls.__name__ == "ShapePlotRenderer":
        pytest.importorskip("matplotlib")
    r = cls()
    path = Path(write_rendered(r, a_subject(cls), tmp_path, "out"))
    assert path.name == file_name(r, "out") == "out" + r.extension
    read_as(r.extension, path.read_bytes())


def test_a_receipt_without_the_section_a_renderer_needs_is_refused():
    from seamscope.render.probe_table import ProbeTableRenderer
    from seamscope.render.shape_plots import ShapePlotRenderer

    bare = make_receipt(fake_ledger())
    for r in (ProbeTableRenderer(), ShapePlotRenderer()):
        with pytest.raises(ValueError, match="holds no"):
            r.render(bare)
