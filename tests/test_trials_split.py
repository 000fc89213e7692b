"""``seamscope try`` where the baseline fails: the eager run splits the program's own error from the
compiler's, and a compiled-only failure gets ``torch.compiler.disable`` on the smallest function
that lets the rest compile, checked by a run and measured against the script run eagerly.

The torch trials run ``try`` as a user does (in this process, its runs forked from the test
run's ``fresh_server``), one repetition each: the assertions are about what ran, not timings.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap

import pytest
from fakes import seamscope_here

HERE = os.path.dirname(os.path.abspath(__file__))
W = os.path.join(HERE, "workloads", "trials")


def test_the_functions_around_a_failure_come_smallest_first(tmp_path):
    from seamscope.experiments.trials.split import disable_targets

    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""\
        import torch

        def helper(x):
            return x.erf()

        def other(x):
            return x

        class Net(torch.nn.Module):
            def forward(self, x):
                return self.tail(other(helper(x)))

            def tail(self, x):
                return x
        """))
    told = (f'torch._dynamo.exc.Unsupported: no\n\nfrom user code:\n   File "{script}", line 11, in forward\n'
            f'    return self.tail(other(helper(x)))\n  File "{script}", line 4, in helper\n    return x.erf()\n')
    assert disable_targets(None, told, str(script)) == ["__main__:helper", "__main__:Net.forward"]
    # a frame named by the receipt alone: what it calls of the same file, in source order, then itself
    from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
    from seamscope.model.ledger import Compilation
    from seamscope.model.receipt import Receipt  # noqa: F401 - the type the function reads

    led = play(FakeProgram(calls=[FakeCall([FakeStep("compile", 10, "0/0")])])).build()
    import msgspec

    led = msgspec.structs.replace(led, compilations=[Compilation(
        compile_id="0/0", frame_name="forward", file=str(script), line=10, status="failed")])

    class R:
        ledger = led

    assert disable_targets(R, "", str(script)) == [  # type: ignore[arg-type]
        "__main__:helper", "__main__:other", "__main__:Net.tail", "__main__:Net.forward"]


@pytest.fixture(scope="module")
def compile_only(tmp_path_factory, fresh_server):
    d = tmp_path_factory.mktemp("compile_only")
    shutil.copy(os.path.join(W, "compile_fails.py"), d / "compile_fails.py")
    p = seamscope_here(["try", "--quiet", "--repeat", "1", "--out", "o", "compile_fails.py"], d)
    with open(d / "o" / "trials.json") as f:
        return p, json.load(f), d


@pytest.mark.torch
@pytest.mark.timeout(600)
def test_a_compiled_only_failure_gets_the_disable_candidate_and_a_completed_run(compile_only):
    p, t, d = compile_only
    assert p.returncode == 0, p.stderr
    (c,) = t["candidates"]
    assert c["name"] == t["chosen"] == "disable-squash" and c["origin"] == "baseline failed"
    (run,) = c["runs"]
    assert run["ok"] and run["breaks"] == 1 and run["compile_ns"] > 0  # compiled, around the disabled function
    assert c["outputs"]["vs_eager"] == "equal"
    assert "+@torch.compiler.disable\n def squash(x):" in c["diff"]
    assert t["baseline"]["flags"] == ["--stance", "force_eager"]  # what works today
    assert t["decision"].startswith("the script fails compiled and runs eagerly: disable-squash")
    checked = sorted(os.listdir(d / "o" / "trials" / "split"))
    assert checked == ["1"]  # squash, the smallest function, was the first checked


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
def test_a_program_that_fails_eagerly_too_is_told_so_with_no_candidate(tmp_path):
    p = seamscope_here(["try", "--quiet", "--repeat", "1", "--out", "o", os.path.join(W, "eager_fails.py")], tmp_path)
    assert p.returncode == 1
    assert "fails too" in p.stderr and "the program's own error, not the compiler's; nothing tried" in p.stderr
    assert not (tmp_path / "o" / "trials.json").exists() and not (tmp_path / "o" / "trials" / "split").exists()
