"""tlparse, PyTorch's reference reader of ``TORCH_TRACE`` logs, as the judge of an imported log: per
compile id, the ledger must agree with what tlparse shows (``test_import_torch_trace.py``,
``test_census_torch.py``)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from seamscope.ingest.compile_events import parse_recompile_reasons
from seamscope.ingest.torch_trace import import_torch_trace
from seamscope.model.normalize import normalize_text

TLPARSE = shutil.which("tlparse") or str(Path(sys.executable).with_name("tlparse"))


def tlparse(log: str, out: Path) -> dict:
    subprocess.run([TLPARSE, log, "-o", str(out), "--overwrite", "--no-browser"],
                   check=True, capture_output=True, timeout=120)
    return json.loads((out / "compile_directory.json").read_text())


def fold(cid: str) -> str:
    return cid.strip("[]").split("_", 1)[0]


def compare_with_tlparse(log: str, out: Path, cwd: str) -> None:
    """Per compile id: the four things tlparse shows that the ledger must agree with."""
    directory = tlparse(log, out)
    imp = import_torch_trace(log, cwd=cwd)
    comps = {c.compile_id: c for c in imp.ledger.compilations}
    sites = {s.site_id: s for s in imp.ledger.break_sites}

    # 1. the same compile ids (attempts folded; "-/-" holds records outside any compile)
    tl_ids = {fold(k) for k in directory if not k.startswith("[-") and not k.startswith("[!")}
    assert set(comps) == tl_ids

    # 2. the same restarts and failures
    page = (out / "failures_and_restarts.html").read_text()
    restarts: dict[str, list[str]] = {}
    failures: dict[str, tuple[str, str]] = {}
    # a restart row: <td> RestartAnalysis </td><td><pre>REASON</pre>; a failure row:
    # <td><pre>FAIL_TYPE</pre></td> <td><pre>FAIL_REASON</pre>
    for cid, desc in re.findall(
        r"<tr> <td> <a href='[^']*'>\[([^\]]+)\]</a>\s*</td><td> RestartAnalysis </td><td><pre>(.*?)</pre>",
        page, re.S,
    ):
        first = html.unescape(desc).strip().splitlines()[0]
        restarts.setdefault(fold(cid), []).append(normalize_text(first, cwd))
    for cid, kind, desc in re.findall(
        r"<tr> <td> <a href='[^']*'>\[([^\]]+)\]</a>\s*</td><td><pre>(.*?)</pre></td>\s*<td><pre>(.*?)</pre>",
        page, re.S,
    ):
        failures[fold(cid)] = (html.unescape(kind), html.unescape(desc).strip().splitlines()[0])
    assert len(restarts) + len(failures) > 0
    assert {k: v for k, v in ((c.compile_id, c.restart_reasons) for c in comps.values()) if v} == restarts
    assert {
        c.compile_id: (c.fail_type, (c.fail_reason or "").splitlines()[0])
        for c in comps.values() if c.status != "ok"
    } == failures

    # 3. the same break reasons and codes, per compile id
    for key, entry in directory.items():
        for art in entry["artifacts"]:
            path = out / art["url"]
            if art["name"].startswith("dynamo_graph_break_reason_"):
                text = path.read_text()
                m = re.search(r"/gb/gb(\d{4})\.html", text)
                at = re.match(r"Graph break in user code at (.*):(\d+)", text)
                assert m and at
                c = comps[fold(key)]
                found = [sites[s] for s in c.break_site_ids]
                assert any(
                    s.gb_code == f"GB{m.group(1)}" and s.line == int(at.group(2))
                    and os.path.basename(s.file) == os.path.basename(at.group(1))
                    and s.gb_type and s.gb_type in text
                    for s in found
                ), (key, text[:200], found)
            elif art["name"].startswith("recompile_reasons_"):
                # 4. the same recompile reasons (one arrives as plain text, several as a list)
                assert comps[fold(key)].failed_guards == parse_recompile_reasons(path.read_text(), cwd)
    for c in comps.values():
        assert (c.failed_guards != []) == c.is_recompile or c.status != "ok"
