"""Every "try:" command a finding prints runs as printed: ``seamscope run`` on the script that
produced it accepts each, and the break it names is gone from the run it makes."""

from __future__ import annotations

import os
import shlex
import shutil

import msgspec
import pytest
from fakes import seamscope_forked

from seamscope.analyze.findings_common import SCRIPT, retarget, run_target
from seamscope.model.ledger import RunInfo
from seamscope.model.receipt import Receipt
from seamscope.model.remedy import Remedy

HERE = os.path.dirname(os.path.abspath(__file__))
HINTS = os.path.join(HERE, "workloads", "hints.py")


def _receipt(path: str) -> Receipt:
    from seamscope import load_receipt

    return load_receipt(path)


def _hints(r: Receipt) -> dict[str, str]:
    """Each break's label → the suggested command of its remedy."""
    assert r.findings is not None
    return {f.cause.label: rem.try_with for f in r.findings.findings if f.cause is not None
            for rem in f.remedies if rem.try_with}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, fresh_server):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("hints")
    shutil.copy(HINTS, d / "hints.py")
    p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", "base", "hints.py"], d)
    assert p.returncode == 0, p.stderr
    return d, _receipt(str(d / "base"))


@pytest.mark.torch
def test_every_hint_a_script_gets_runs_as_printed_and_removes_its_break(baseline, fresh_server):
    d, r = baseline
    hints = _hints(r)
    # GIVEN a script with a print, a Logger method, one it adds to Logger (as transformers adds
    # warning_once on import), Tensor.item() and nonzero() in compiled code
    assert set(hints) == {"print", "logging (warning)", "logging (note_once)", "Tensor.item()",
                          "dynamic-shape operator"}
    for k, (label, hint) in enumerate(sorted(hints.items())):
        argv = shlex.split(hint)
        # THEN each names run and the script, not a workload placeholder
        assert argv[:2] == ["seamscope", "run"] and argv[-1] == "hints.py", hint
        out = f"o{k}"
        p = seamscope_forked(fresh_server, ["run", "--quiet", "--out", out, *argv[2:]], d)
        assert p.returncode == 0, (hint, p.stderr)
        after = {f.cause.label for f in _receipt(str(d / out)).findings.findings if f.cause is not None}
        assert label not in after, f"{hint} left the {label} break"


def test_a_hint_fits_what_was_run():
    probe_cmd = "seamscope probe FILE.py:FUNC --dynamo-config capture_scalar_outputs=True"
    rem = Remedy(action="capture_scalar_outputs", text="t", try_with=probe_cmd)
    script = RunInfo(source="live", command=["train.py", "--epochs", "1 2"])
    assert retarget(rem, script).try_with == (
        "seamscope run --dynamo-config capture_scalar_outputs=True train.py --epochs '1 2'")
    module = RunInfo(source="live", command=["-m pkg.train"])
    assert retarget(rem, module).try_with.endswith("capture_scalar_outputs=True -m pkg.train")
    # a session inside a program or an imported log does not name the script: the placeholder
    for run in (RunInfo(source="live"), RunInfo(source="torch_trace", command=["log.txt"])):
        assert run_target(run) == SCRIPT and retarget(rem, run).try_with.endswith(" " + SCRIPT)
    # a probe's workload keeps the probe command
    assert retarget(rem, RunInfo(source="probe", command=["w.py:make"])).try_with == probe_cmd
    regional = Remedy(action="regional_compile", text="t", try_with="seamscope run --regional Block SCRIPT")
    assert retarget(regional, script).try_with == "seamscope run --regional Block train.py --epochs '1 2'"
    assert msgspec.json.decode(msgspec.json.encode(retarget(rem, script)), type=Remedy) == retarget(rem, script)
