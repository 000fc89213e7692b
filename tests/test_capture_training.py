"""Training steps under capture: a compiled forward, its compiled backward, an optimizer step.

The compiled backward is timed by C's ``BackwardTimer`` (swapped in for the backward of the
graph's ``CompiledFunction``) and each forward's autograd node is labelled with its call by C's
region timer, so that a steady training step runs no more of seamscope's Python than an inference
call does (the call shim). These tests pin that, and that the accounting stays what it was: every
backward counted and timed, the first ones listed with their call, the rest summed.
"""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

from seamscope import _native  # noqa: E402
from seamscope.capture.session import Session  # noqa: E402
from seamscope.model.selfcheck import self_check  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]
speedups = _native.NATIVE
needs_c = pytest.mark.skipif(speedups is None, reason=f"no C hot path: {_native.WHY_NOT}")
SEAMSCOPE = str(__import__("pathlib").Path(_native.__file__).parent)


def mlp_step(backend: str = "aot_eager"):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cm = torch.compile(model, backend=backend)
    x = torch.randn(4, 8)

    def step() -> None:
        cm(x).sum().backward()
        opt.step()
        opt.zero_grad()

    return step


def seamscope_frames(step, n: int) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Python frames of seamscope's own code that n steps run, by function name."""
    seen: dict[str, int] = {}

    def profile(frame, event, _arg):  # type: ignore[no-untyped-def]
        if event == "call" and frame.f_code.co_filename.startswith(SEAMSCOPE):
            seen[frame.f_code.co_name] = seen.get(frame.f_code.co_name, 0) + 1

    sys.setprofile(profile)
    try:
        for _ in range(n):
            step()
    finally:
        sys.setprofile(None)
    return seen


@needs_c
def test_a_steady_training_step_runs_only_the_call_shim_of_seamscope_python():
    """Past the calls kept in detail and the listed backward runs, a step's forward label and
    its backward's timing are C's: the only seamscope Python frame left is the call shim, once
    per step, as for an inference call."""
    s = Session(first_calls=2, call_cap=2)
    s.start()
    try:
        assert s.builder is not None
        s.builder.outside_cap = 3
        step = mlp_step()
        lane = s._lane
        assert lane is not None
        n = 0
        while n < 8 or lane.budget < 21:  # until C sums the next 20 calls: none due in detail
            step()
            n += 1
            assert n < 500
        frames = seamscope_frames(step, 20)
        labels_nodes = lane.label_nodes
    finally:
        s.stop()
    assert frames == {"call": 20}
    assert not labels_nodes  # the list of backward runs is full: no node needs its call
    led = s.ledger
    assert led is not None
    self_check(led)
    back = [o for o in led.outside if o.kind == "backward"]
    assert [o.attributed_call for o in back] == [0, 1, 2]
    assert led.totals.outside_runs == n + 20 and led.retention.outside_dropped == n + 17


@needs_c
def test_c_labels_a_steady_forward_with_its_call_while_backward_runs_are_listed():
    """While the builder still lists backward runs, C's region timer labels each steady forward's
    autograd node with its call (no Python frame for it), and each backward run is listed with
    that call."""
    s = Session(first_calls=2, call_cap=2)
    s.start()
    try:
        step = mlp_step()
        lane = s._lane
        assert lane is not None
        n = 0
        while n < 8 or lane.budget < 21:
            step()
            n += 1
            assert n < 500
        frames = seamscope_frames(step, 20)
    finally:
        s.stop()
    assert frames == {"call": 20, "sink": 20, "outside_region": 20}
    led = s.ledger
    assert led is not None
    self_check(led)
    assert [o.attributed_call for o in led.outside if o.kind == "backward"] == list(range(n + 20))


@pytest.mark.parametrize("native", [True, False], ids=["C hot path", "Python path"])
def test_backward_runs_past_the_list_are_counted_and_timed(native):  # type: ignore[no-untyped-def]
    """The first backward runs are listed, each with the call whose forward made it; the rest are
    still counted and their time summed into the region's and the run's totals, the same on both
    paths, also when the ledger is built mid-run (a checkpoint)."""
    if native and speedups is None:
        pytest.skip(f"no C hot path: {_native.WHY_NOT}")
    s = Session(first_calls=2, call_cap=4)
    if not native:
        s.native = None
    s.start()
    try:
        assert s.builder is not None
        s.builder.outside_cap = 5
        step = mlp_step()
        for _ in range(12):
            step()
        mid = s.build()
        for _ in range(18):
            step()
    finally:
        s.stop()
    led = s.ledger
    assert led is not None
    self_check(led)
    assert mid.totals.outside_runs == 12 and mid.retention.outside_dropped == 7
    assert [o.attributed_call for o in led.outside if o.kind == "backward"] == [0, 1, 2, 3, 4]
    assert led.totals.outside_runs == 30 and led.retention.outside_dropped == 25
    listed = sum(o.duration_ns for o in led.outside)
    assert led.totals.outside_ns > listed > 0
    assert sum(r.outside_ns for r in led.totals.regions) == led.totals.outside_ns
    assert sum(r.outside_runs for r in led.totals.regions) == 30
    assert led.totals.calls == 30


@needs_c
def test_backward_timer_hands_runs_to_its_sink_then_sums_them(monkeypatch):
    """BackwardTimer: each run goes to the sink with the node's call label until the sink
    declines one; later runs are counted and summed for take(). The backward's result and its
    errors pass through; a failing sink does not fail the backward."""
    assert speedups is not None
    seen: list[tuple[str, int, object]] = []
    room = [2]

    def sink(cid: str, ns: int, call: object) -> bool:
        seen.append((cid, ns, call))
        room[0] -= 1
        return room[0] >= 0

    def backward(ctx: object, *grads: object) -> tuple[object, ...]:
        if grads and grads[0] == "boom":
            raise ValueError("boom")
        return grads

    class Node:
        seamscope_call = 7

    timer = speedups.BackwardTimer(backward, "0/0", sink)
    assert timer.__wrapped__ is backward and timer.compile_id == "0/0"
    assert timer(Node(), 1, 2) == (1, 2)
    assert timer(object(), 3) == (3,)  # no label: no call known
    assert timer.keeping
    assert timer(Node()) == ()  # declined: listed nowhere, counted here from now on
    assert not timer.keeping
    for _ in range(4):
        timer(Node(), 5)
    with pytest.raises(ValueError, match="boom"):
        timer(Node(), "boom")
    assert [(c, call) for c, _ns, call in seen] == [("0/0", 7), ("0/0", None), ("0/0", 7)]
    runs, ns = timer.take()
    assert runs == 4 and ns >= 0
    assert timer.take() == (0, 0)

    def broken(cid: str, ns: int, call: object) -> bool:
        raise RuntimeError("sink")

    failing = speedups.BackwardTimer(backward, "0/0", broken)
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    assert failing(Node(), 1) == (1,)
    assert len(unraisable) == 1 and failing.keeping
