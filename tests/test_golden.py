"""Golden receipts: the canonical bytes of receipts made from committed inputs never change by
accident.

GIVEN the committed ``TORCH_TRACE`` logs under ``tests/inputs/torch_trace/`` (written by
``tests/inputs/make_torch_traces.py``) and ledgers played on the fake clock, WHEN each is turned into
a receipt, THEN its bytes equal ``tests/golden/NAME.receipt.json``. A change that means to change
receipts regenerates them with ``SEAMSCOPE_REGEN_GOLDEN=1 pytest tests/test_golden.py`` in a commit of
its own that says why. No torch needed.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec
import pytest

from seamscope.analyze.receipt import make_receipt
from seamscope.ingest.torch_trace import find_logs, import_torch_trace
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import Ledger
from seamscope.render.receipt_json import ReceiptJsonRenderer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden")
TRACES = os.path.join(ROOT, "tests", "inputs", "torch_trace")
REGEN = os.environ.get("SEAMSCOPE_REGEN_GOLDEN") == "1"

R = lambda cid, ns: FakeStep("region", ns, cid)  # noqa: E731
ISL = lambda ns: FakeStep("island", ns)  # noqa: E731
C = lambda cid, ns: FakeStep("compile", ns, cid)  # noqa: E731
OH = lambda ns: FakeStep("overhead", ns)  # noqa: E731


def _imported(name: str) -> Callable[[], Ledger]:
    def make() -> Ledger:
        (log,) = find_logs(os.path.join(TRACES, name))
        led = import_torch_trace(log, cwd=ROOT).ledger
        # The importing machine's own versions are not what the log says; pin them.
        env = msgspec.structs.replace(led.environment, seamscope_version="test", python_version="3", platform="")
        return msgspec.structs.replace(led, environment=env)

    return make


def _fake_breaks() -> Ledger:
    """Two breaks (one crossed every call, one every third call), a recompile, seamscope overhead."""
    calls = [FakeCall([C("0/0", 5_000), R("0/0", 100), ISL(1_000), C("1/0", 4_000), R("1/0", 200),
                       ISL(50_000), C("2/0", 3_000), R("2/0", 300), OH(20)])]
    for i in range(12):
        steps = [R("0/0", 100 + i), ISL(1_000), R("1/0", 200)]
        if i % 3 == 0:
            steps += [ISL(50_000 + 10 * i), R("2/0", 300)]
        calls.append(FakeCall(steps + [OH(20)]))
    calls.append(FakeCall([C("0/1", 6_000), R("0/1", 150), ISL(1_000), R("1/0", 200)]))
    calls.append(FakeCall([R("0/1", 150), ISL(1_000), R("1/0", 200)], error="ValueError: boom"))
    prog = FakeProgram(breaks={"0/0": "print", "0/1": "print", "1/0": "item"}, resumes={"1/0": "print", "2/0": "item"},
                       calls=calls)
    return play(prog).build()


def _fake_fallback() -> Ledger:
    """A frame that recompiles per size until Dynamo gives up, then runs eagerly."""
    calls = [FakeCall([C(f"0/{k}", 2_000 + k), R(f"0/{k}", 100)]) for k in range(3)]
    calls.append(FakeCall([FakeStep("fallback", 10, "0/3"), ISL(400)]))
    calls += [FakeCall([R("0/1", 100)]) for _ in range(4)]
    return play(FakeProgram(calls=calls)).build()


CASES: dict[str, Callable[[], Ledger]] = {
    "import-breaks": _imported("breaks"),
    "import-limit": _imported("limit"),
    "fake-breaks": _fake_breaks,
    "fake-fallback": _fake_fallback,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_receipt_bytes_equal_the_golden_file(name: str) -> None:
    got = ReceiptJsonRenderer().render(make_receipt(CASES[name]()))
    path = os.path.join(GOLDEN, f"{name}.receipt.json")
    if REGEN:
        with open(path, "wb") as f:
            f.write(got)
    with open(path, "rb") as f:
        want = f.read()
    assert got == want, f"{name}: receipt changed; if on purpose, regenerate (see this module's docstring)"
