"""An imported ``TORCH_TRACE`` log names wrapped frames as live capture does.

GIVEN a script whose compiled frames are a decorator's ``wrapper`` (around a module's ``forward``
that calls a helper method, and around a function), run once under ``seamscope run`` with
``TORCH_TRACE`` set, WHEN its log is imported, THEN every compilation is named by the same frame
(function, file and line) in the live receipt and in the imported one, and that frame is the
wrapped ``forward`` or function, not ``wrapper``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import seamscope_forked

from seamscope.ingest.receipt import load_receipt
from seamscope.ingest.torch_trace import find_logs, import_torch_trace
from seamscope.model.normalize import project_root

pytestmark = pytest.mark.torch
WORKLOAD = Path(__file__).parent / "workloads" / "wrapped_frames.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, fresh_server: Any) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("wrapped")
    trace = d / "trace"
    p = seamscope_forked(fresh_server, ["run", "--out", "out", "--quiet", str(WORKLOAD)], d,
                         env={"TORCH_TRACE": str(trace)})
    assert p.returncode == 0, p.stderr
    (log,) = find_logs(str(trace))
    # import from where the live receipt's paths are relative to: the script's project
    imported = import_torch_trace(log, cwd=project_root(str(WORKLOAD.parent)))
    return {"live": load_receipt(str(d / "out" / "receipt.json")), "imported": imported}


def test_imported_log_names_wrapped_frames_as_the_live_run(run: dict[str, Any]) -> None:
    live = {c.compile_id: c.shown_frame for c in run["live"].ledger.compilations}
    imported = {c.compile_id: c.shown_frame for c in run["imported"].ledger.compilations}
    assert imported == live
    src = WORKLOAD.read_text().splitlines()
    # each named at its first decorator's line, as Python's co_firstlineno
    want = [("Block.forward", src.index("    @returns_tuple") + 1), ("step", src.index("def step(x):"))]
    assert sorted((name, line) for name, _, line in live.values()) == want
    assert all(file.endswith("workloads/wrapped_frames.py") for _, file, _ in live.values())
    assert {c.frame_name for c in run["live"].ledger.compilations} == {"wrapper"}
