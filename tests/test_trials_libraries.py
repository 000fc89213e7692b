"""A trial's fork server imports the libraries its script imports, once, and never the user's own
modules; where what it imported makes forking unsafe, each run starts a new interpreter."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from seamscope.experiments.fresh import FreshProcesses, Job
from seamscope.experiments.trials.libraries import imports_of, library_imports, script_of

SCRIPT = textwrap.dedent('''\
    from __future__ import annotations
    import wave, xml.dom.minidom
    from email.mime import text
    from os.path import *
    from . import sibling
    import helper
    try:
        import csv
    except ImportError:
        csv = None

    def later():
        import mailbox
    ''')
def _script(tmp_path):
    (tmp_path / "helper.py").write_text(f"open({str(tmp_path / 'helper-was-imported')!r}, 'w').close()\n")
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    return path


def test_the_module_level_imports_are_found_and_the_users_modules_left_out(tmp_path):
    assert imports_of(SCRIPT) == [("wave", None), ("xml.dom.minidom", None), ("email.mime", "text"),
                                  ("helper", None), ("csv", None)]
    assert library_imports(SCRIPT, str(_script(tmp_path).parent)) == [
        ("wave", None), ("xml.dom.minidom", None), ("email.mime", "text"), ("csv", None)]
    assert imports_of("def broken(:\n") == []


def test_the_script_of_a_target(tmp_path):
    path = _script(tmp_path)
    assert script_of(str(path)) == script_of(f"{path}:workload") == str(path)
    assert script_of("package.module") is None and script_of(str(tmp_path / "missing.py")) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.usefixtures("outside_the_shared_server")
def test_a_script_in_another_encoding_is_read_as_python_reads_it(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\nimport wave\n")
    out = tmp_path / "m.json"
    with FreshProcesses(warm=("seamscope.experiments.trials.libraries:import_libraries", str(path)), mode="fork") as fp:
        assert fp.run(Job(entry="fresh_jobs:modules", arg={"path": str(out), "names": ["wave"]})).ok
    assert json.loads(out.read_text()) == {"wave": True}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.usefixtures("outside_the_shared_server")
def test_forked_runs_start_with_the_libraries_imported_and_not_the_users_module(tmp_path):
    path = _script(tmp_path)
    names = ["wave", "xml.dom.minidom", "email.mime.text", "csv", "helper", "mailbox"]
    got = {}
    for mode in ("fork", "process"):
        warm = ("seamscope.experiments.trials.libraries:import_libraries", str(path))
        with FreshProcesses(warm=warm, mode=mode) as fp:
            out = tmp_path / f"{mode}.json"
            assert fp.run(Job(entry="fresh_jobs:modules", arg={"path": str(out), "names": names},
                              cwd=str(tmp_path))).ok
        got[mode] = json.loads(out.read_text())
    assert [n for n in names if got["fork"][n]] == ["wave", "xml.dom.minidom", "email.mime.text", "csv"]
    assert not any(got["process"][n] for n in ("wave", "helper", "mailbox"))
    assert not (tmp_path / "helper-was-imported").exists()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
@pytest.mark.usefixtures("outside_the_shared_server")
@pytest.mark.parametrize(("warm", "said"), [("start_a_thread", "started a thread (left-running)"),
                                            ("cuda_initialized", "initialized CUDA")])
def test_a_server_whose_imports_made_forking_unsafe_starts_each_job_anew(tmp_path, warm, said):
    log = tmp_path / "server.log"
    with FreshProcesses(warm=(f"fresh_jobs:{warm}", None), mode="fork", log=str(log)) as fp:
        for i in range(2):
            out = tmp_path / f"r{i}.json"
            assert fp.run(Job(entry="fresh_jobs:report", arg={"path": str(out)})).ok
            assert json.loads(out.read_text())["ppid"] == os.getpid()  # a new interpreter of the caller's
        assert not fp.alive() and said in fp.refused
    assert f"{said}: each job starts a new interpreter" in log.read_text()


class _Refused:
    """A process source whose server refused to fork (as a real one does after a thread started:
    above), its jobs forked from the test run's server so the trial stays cheap."""

    def __init__(self) -> None:
        self.inner = FreshProcesses(mode="fork")
        self.refused: str | None = None

    def run(self, job, timeout=None, **kw):  # type: ignore[no-untyped-def]
        self.refused = "a module it imported started a thread (left-running)"
        return self.inner.run(job, timeout, **kw)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
def test_try_says_once_why_each_run_starts_a_new_interpreter(monkeypatch, tmp_path):
    pytest.importorskip("torch")
    from fakes import seamscope_here

    from seamscope.experiments.trials import runs

    monkeypatch.setattr(runs, "fresh_processes", lambda python, target: _Refused())
    (tmp_path / "tiny.py").write_text("import torch\n\nf = torch.compile(lambda x: x.sin(), backend='eager')\n"
                                      "for _ in range(3):\n    f(torch.ones(4))\n")
    # said after the baseline's first run, before anything else: a trial that ends there (an --only
    # that matches nothing) is the cheapest that says it
    p = seamscope_here(["try", "--repeat", "1", "--out", "o", "--only", "nothing-by-this-name", "tiny.py"], tmp_path)
    assert p.returncode == 2 and "nothing-by-this-name" in p.stderr, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "each run starts a new interpreter" in ln]
    assert len(said) == 1 and "unsafe (a module it imported started a thread (left-running))" in said[0], p.stderr


def test_a_trials_server_is_warmed_with_its_scripts_libraries(monkeypatch, tmp_path):
    from seamscope.experiments.trials import runs

    made = []
    monkeypatch.setattr(runs, "FreshProcesses", lambda **kw: made.append(kw))
    monkeypatch.delenv("SEAMSCOPE_TRIALS_ISOLATION", raising=False)
    runs.fresh_processes("python3", "train.py:workload")
    assert made[0]["warm"] == ("seamscope.experiments.trials.libraries:import_libraries", "train.py:workload")
    assert made[0]["preload"] == runs.PRELOAD and made[0]["python"] == "python3"
