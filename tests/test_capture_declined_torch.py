"""Frames Dynamo declines before it gives them a compile id: counted by PyTorch in
``counters["frames"]["total"]`` and never in ``ok``, absent from the structured trace. A generator
run from eager code under a compiled call (here from a frame skipped for a break in a loop, as in a
mixture-of-experts router) is one: ``fallback_count`` leaves it out, and the difference is exactly
the ``Attempt to trace generator`` records (gb0003) of ``counters["unimplemented"]``."""

from __future__ import annotations

import contextlib
import os
import re

import pytest

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def tokens(x):
    for i in range(2):
        yield x + i


def route(x):
    out = x
    for i in range(2):
        torch._dynamo.graph_break()  # a break in a loop: Dynamo skips this frame, which runs eagerly
        out = out + i
    return sum(tokens(out))  # the generator's frame reaches Dynamo from that eager code


def model(x):
    return route(x * 2) + 1


def declined(counts: dict) -> int:
    """PyTorch's own record of the frames it declined as generators (gb0003)."""
    return sum(n for reason, n in counts.items() if re.search(r"\bgb0003\b", reason))


def test_a_declined_generator_frame_is_in_frames_total_and_not_a_fallback():
    cf = torch.compile(model, backend="eager")
    with contextlib.redirect_stdout(open(os.devnull, "w")), session() as s:  # noqa: SIM115
        for _ in range(2):
            assert torch.equal(cf(torch.ones(3)), model(torch.ones(3)))
    c = adapter.dynamo_counters()
    sm = s.receipt().summary
    gens = declined(c["unimplemented"])
    assert gens == 1  # declined once: Dynamo then leaves the generator's code alone
    assert sm.fallback_count == 1  # the skipped frame (a break in a loop) is the one compile failure
    assert c["frames"]["total"] - c["frames"]["ok"] == sm.fallback_count + gens
    # every compile id the trace holds is a compilation of the receipt; the generator has none
    ids = {comp.compile_id for comp in s.ledger.compilations}
    assert len(ids) == sm.compile_count + sm.fallback_count
    assert not any(comp.frame_name == "tokens" for comp in s.ledger.compilations)
