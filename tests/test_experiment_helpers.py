"""The helpers the probe, the ladder, the differential test, the shape study and the trials share."""

from __future__ import annotations

import subprocess
import sys
from collections import namedtuple

import pytest

from seamscope.experiments.fresh import close_server
from seamscope.experiments.workload import described, first_line


def test_first_line_and_described() -> None:
    e = ValueError("  bad shape\nsecond line\n")
    assert first_line(e) == "bad shape"
    assert described(e) == "ValueError: bad shape"
    assert first_line(RuntimeError("")) == ""
    assert first_line(RuntimeError("x" * 400)) == "x" * 300


def test_close_server_ends_a_server_that_exits_on_eof() -> None:
    code = "import sys\nfor _ in sys.stdin: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    replies = open(__file__)  # stands for the reply pipe: closed by close_server
    close_server(proc, replies)
    assert proc.returncode == 0
    assert replies.closed


def test_close_server_kills_a_server_that_ignores_eof(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.PIPE)
    real_wait = proc.wait

    def wait(timeout: float | None = None) -> int:  # no 30 s wait in a test
        if timeout is not None:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        return real_wait()

    monkeypatch.setattr(proc, "wait", wait)
    replies = open(__file__)
    close_server(proc, replies)
    assert proc.returncode is not None and proc.returncode != 0
    assert replies.closed


@pytest.mark.torch
def test_map_tensors_rebuilds_containers_and_stops_when_done() -> None:
    torch = pytest.importorskip("torch")
    from seamscope.experiments.workload import grad_mode, map_tensors

    Pair = namedtuple("Pair", "a b")
    tree = {"x": torch.ones(2), "rest": [Pair(torch.zeros(1), 3), (torch.ones(1), "s")]}
    out = map_tensors(tree, lambda t: t + 1)
    assert torch.equal(out["x"], torch.full((2,), 2.0))
    assert isinstance(out["rest"][0], Pair) and out["rest"][0].b == 3
    assert torch.equal(out["rest"][0].a, torch.ones(1))
    assert isinstance(out["rest"][1], tuple) and out["rest"][1][1] == "s"

    seen: list[object] = []

    def once(t: object) -> object:
        seen.append(t)
        return "first"

    out = map_tensors(tree, once, lambda: bool(seen))
    assert out["x"] == "first" and out["rest"] is tree["rest"] and len(seen) == 1

    class W:
        grad = True

    with grad_mode(W()):
        assert torch.is_grad_enabled()
    with grad_mode(object()):
        assert not torch.is_grad_enabled()
