"""The adapter's reading of the default process group's timeout (gloo, one rank, in process)."""

from __future__ import annotations

import datetime

import pytest

pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.distributed]


def test_timeout_is_read_while_the_group_lives_and_kept_when_the_script_destroys_it(tmp_path):
    import torch.distributed as dist

    assert adapter.process_group_timeout() is None  # not initialised
    seen = []
    undo = adapter.watch_process_group(seen.append)
    try:
        dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=77))
        try:
            assert adapter.process_group_timeout() == (77 * 10**9, "gloo")
        finally:
            dist.destroy_process_group()  # what the script calls: the patched one reads first
        assert seen == [(77 * 10**9, "gloo")]
        assert adapter.process_group_timeout() is None
    finally:
        undo()
    assert not hasattr(dist.destroy_process_group, "__wrapped__")
