"""Every module of the package imports with only the core dependencies (torch absent), and with
torch added; optional extras (matplotlib, transformers, IPython, the dev tools) are never imported
at module level. Run in a child process where those packages cannot be imported, whether or not
they are installed here."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys

import pytest

import seamscope

OPTIONAL = ["matplotlib", "transformers", "IPython", "selenium", "jsonschema", "hypothesis",
            "tlparse", "mutmut"]
"""Never imported at module level (the pytest plugin imports pytest: pytest loads it)."""

CHILD = r"""
import importlib, importlib.abc, json, sys

blocked = set(json.loads(sys.argv[1]))

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ImportError(f"No module named {name!r} (blocked)", name=name)
        return None

sys.meta_path.insert(0, Block())
failed = {}
for name in json.loads(sys.argv[2]):
    try:
        importlib.import_module(name)
    except Exception as e:
        failed[name] = f"{type(e).__name__}: {e}"
leaked = sorted(m for m in sys.modules if m.split(".")[0] in blocked)
print(json.dumps({"failed": failed, "leaked": leaked}))
"""


def modules(skip: tuple[str, ...]) -> list[str]:
    names = []
    for info in pkgutil.walk_packages(seamscope.__path__, "seamscope."):
        if info.name.split(".")[1] in skip or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


def import_all(names: list[str], blocked: list[str]) -> dict:
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(blocked), json.dumps(names)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_every_core_module_imports_without_torch_or_extras():
    names = modules(skip=("experiments", "examples"))
    assert "seamscope.capture.session" in names and "seamscope.cli" in names and len(names) > 40
    res = import_all(names, ["torch", *OPTIONAL])
    assert res["failed"] == {}
    assert res["leaked"] == []


@pytest.mark.torch
def test_every_module_imports_with_torch_and_no_extras():
    pytest.importorskip("torch")
    names = modules(skip=())
    assert "seamscope.experiments.shapes" in names and "seamscope.examples.decoder" in names
    res = import_all(names, OPTIONAL)
    assert res["failed"] == {}
    assert res["leaked"] == []


def test_import_command_loads_only_what_it_uses(tmp_path):
    """``seamscope import`` starts in a fraction of its run: it prints no rich markup and reads no
    seamscope trace, so rich and the trace records' typed decoder are never loaded or built."""
    log = tmp_path / "dedicated_log_torch_trace_1.log"
    log.write_text('V1201 11:39:51.289000 17110 x.py:1] {"str": ["a", 0]}\n')
    child = (
        "import sys; sys.argv = ['seamscope', 'import', sys.argv[1], '--out', sys.argv[2]]\n"
        "from seamscope.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "from seamscope.ingest import seamscope_trace\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}), seamscope_trace._records.cache_info().currsize)\n"
    )
    r = subprocess.run([sys.executable, "-c", child, str(log), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "receipt.json").exists()
    loaded, decoders = r.stdout.splitlines()[-1].rsplit(" ", 1)
    assert "'rich'" not in loaded and "'secrets'" not in loaded and "'seamscope'" in loaded
    assert decoders == "0"
