"""The device timeline in live capture. CI has no GPU: the device is the fake stream, attached to
a real session on a real compiled workload, so that the wrappers, the C lane's hand-over and the
sampling run as they would on CUDA; and the CPU path is checked to stay as it was. The CUDA
source's sync counting is checked on a stand-in for ``torch.cuda`` (torch-free)."""

from __future__ import annotations

import types
import warnings

import msgspec
import pytest

from seamscope.capture.device import SYNC_FILTER, SYNC_TEXT, CudaDevice, holds_cuda_tensor
from seamscope.model.device import FakeDevice
from seamscope.model.ledger import DeviceTimeline, RegionEvent


class _HostClock:
    """The fake stream on the real host clock: events complete as soon as they are recorded."""

    @property
    def now(self) -> int:
        import time

        return time.perf_counter_ns()

    @now.setter
    def now(self, value: int) -> None:
        pass


def _fake_cuda(mode: int = 0) -> types.SimpleNamespace:
    state = {"mode": mode, "set": []}

    def set_mode(m: str) -> None:
        state["set"].append(m)
        state["mode"] = {"default": 0, "warn": 1}[m]

    cuda = types.SimpleNamespace(
        Event=None, current_stream=None, is_current_stream_capturing=lambda: False, synchronize=lambda: None,
        set_sync_debug_mode=set_mode, get_sync_debug_mode=lambda: state["mode"], state=state,
    )
    return types.SimpleNamespace(cuda=cuda)


def test_cuda_syncs_are_counted_from_torchs_warnings_and_hidden():
    fake = _fake_cuda()
    dev = CudaDevice(fake)
    try:
        assert dev.syncs_counted
        dev.open_call()
        assert fake.cuda.state["mode"] == 1
        dev.take_syncs()
        for _ in range(3):
            warnings.warn(SYNC_TEXT, UserWarning, stacklevel=1)  # what torch warns at a sync
        with warnings.catch_warnings(record=True) as other:
            warnings.simplefilter("always")
            warnings.warn("something else", UserWarning, stacklevel=1)
        n, first = dev.take_syncs()  # type: ignore[misc]
        assert n == 3 and first is not None
        assert len(other) == 1
        dev.close_call()
        assert fake.cuda.state["mode"] == 0
    finally:
        dev.close()
    assert not any(f[1] is not None and f[1].pattern == SYNC_FILTER for f in warnings.filters)


def test_a_sync_debug_mode_the_user_set_is_left_alone_and_syncs_are_not_counted():
    fake = _fake_cuda(mode=2)
    dev = CudaDevice(fake)
    dev.open_call()
    dev.close_call()
    dev.close()
    assert fake.cuda.state["set"] == [] and fake.cuda.state["mode"] == 2
    assert dev.take_syncs() is None and not dev.syncs_counted


def test_only_cuda_inputs_turn_the_device_on():
    cuda_t = types.SimpleNamespace(is_cuda=True)
    cpu_t = types.SimpleNamespace(is_cuda=False)
    assert holds_cuda_tensor((cpu_t, cuda_t))
    assert holds_cuda_tensor(([cpu_t, cuda_t],))  # a boxed call
    assert not holds_cuda_tensor((cpu_t, 3, None, [cpu_t]))


@pytest.mark.torch
def test_live_capture_with_a_device_times_detail_and_sampled_calls(dynamo_reset):
    torch = pytest.importorskip("torch")
    from seamscope.analyze.receipt import make_receipt
    from seamscope.analyze.verify import check_receipt
    from seamscope.capture.session import session
    from seamscope.model.canonical import canonical_bytes

    def f(x):
        x = torch.sin(x) + 1
        torch._dynamo.graph_break()
        return torch.cos(x) * 2

    dev = FakeDevice(_HostClock())
    with session(first_calls=4, call_cap=8) as s:
        g = torch.compile(f, backend="eager")
        s.builder.attach_device(dev, every=3)
        x = torch.ones(8)
        for _ in range(30):
            g(x)
    led = s.ledger
    d = led.totals.device
    assert not isinstance(d, msgspec.UnsetType)
    timed = sum(p.calls for p in d.phases)
    detailed = [c for c in led.calls if any(isinstance(e, RegionEvent) for e in c.events)]
    # every retained call is timed; calls 0..29 at one in three are too
    assert all(isinstance(c.device, DeviceTimeline) for c in detailed)
    assert timed >= len({c.index for c in led.calls} | set(range(0, 30, 3)))
    assert timed < 30
    for c in detailed:
        t = c.device
        assert isinstance(t, DeviceTimeline)
        host_regions = [e.compile_id for e in c.events if isinstance(e, RegionEvent)]
        assert [r.compile_id for r in t.regions] == host_regions
    assert len(d.regions) == 2 and all(r.runs == timed for r in d.regions)  # both regions, once a call
    assert led.schema_version == 2
    raw = msgspec.json.decode(canonical_bytes(make_receipt(led)))
    v = check_receipt(raw)
    assert v.ok, v.lines()


@pytest.mark.torch
def test_on_cpu_the_ledger_has_no_device_fields(dynamo_reset):
    torch = pytest.importorskip("torch")
    from seamscope.capture.session import session

    with session() as s:
        g = torch.compile(lambda x: torch.sin(x) + 1, backend="eager")
        for _ in range(5):
            g(torch.ones(4))
    led = s.ledger
    assert led.schema_version == 1
    assert isinstance(led.totals.device, msgspec.UnsetType)
    assert all(isinstance(c.device, msgspec.UnsetType) for c in led.calls)
    assert s.builder.device is None
