"""Watch mode on a real server: ``seamscope run --watch --metrics-port`` around a small HTTP server
with a compiled model, scraped by a real Prometheus (Debian's ``prometheus``; ``make prometheus``
installs it; a missing server fails, never skips); and two forked workers sharing one endpoint
in prometheus_client's multiprocess mode."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from fakes import Forked, script_forked

pytestmark = pytest.mark.torch
pytest.importorskip("prometheus_client", reason="prometheus_client (the watch extra) is not installed")

WORKLOADS = Path(__file__).parent / "workloads"
PROMETHEUS = "/usr/bin/prometheus"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5.0, headers: dict[str, str] | None = None) -> bytes:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - loopback only
        return r.read()  # type: ignore[no-any-return]


def _until(what: str, fn, timeout: float, every: float = 0.2):
    """``fn()`` until it returns something truthy (exceptions count as not yet), for ``timeout`` s."""
    end = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < end:
        try:
            got = fn()
            if got:
                return got
        except Exception as e:  # noqa: BLE001 - not up yet
            last = e
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def _start_prometheus(tmp: Path, target_port: int) -> tuple[subprocess.Popen, int]:
    exe = shutil.which("prometheus") or PROMETHEUS
    if not (os.path.exists(exe) and os.access(exe, os.X_OK)):
        raise AssertionError(f"{exe} is missing: run `make prometheus` (apt-get install prometheus)")
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: seamscope\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n")
    port = _free_port()
    log = open(tmp / "prometheus.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [exe, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    proc.log.close()  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    """One Prometheus for the module, scraping one port (``target``) every second."""
    tmp = tmp_path_factory.mktemp("prometheus")
    target = _free_port()
    proc, port = _start_prometheus(tmp, target)
    yield SimpleNamespace(port=port, target=target)
    _stop(proc)


ALERT = 'sum(increase(seamscope_watch_events_total{kind=~"recompile|fallback"}[5m])) > 0'
"""The alert of docs/watch.md, as written there."""


def _query(prom: SimpleNamespace, expr: str, at: float | None = None) -> list[dict]:
    args = {"query": expr, **({"time": repr(at)} if at is not None else {})}
    body = json.loads(_get(f"http://127.0.0.1:{prom.port}/api/v1/query?{urllib.parse.urlencode(args)}"))
    assert body["status"] == "success", body
    return body["data"]["result"]  # type: ignore[no-any-return]


def _scrapes_after(prom: SimpleNamespace, t: float, n: int) -> list[float] | None:
    """The times of the first ``n`` scrapes of the target that began after ``t`` (None: not yet)."""
    got = _query(prom, 'up{job="seamscope"}[2m]')
    times = sorted(float(ts) for r in got for ts, _v in r["values"] if float(ts) > t)
    return times[:n] if len(times) >= n else None


def test_prometheus_alerts_from_the_first_recompile_after_warmup_and_counts_every_call(
        tmp_path, fresh_server, prometheus) -> None:
    """After warm-up the alert's series exist at 0; one recompile makes the documented alert and
    ``increase()`` non-zero by the second scrape after it; the first scrape after the last request
    counts every call the run served; the ``frame`` label is the qualified name."""
    app = _free_port()
    events = tmp_path / "events.jsonl"
    out = tmp_path / "out"
    server = Forked(fresh_server, ["run", "--watch", "--warmup", "3", "--metrics-port", str(prometheus.target),
                                   "--events", str(events), "--out", str(out), "--checkpoint-every", "1",
                                   str(WORKLOADS / "watch_server.py"), "--", str(app)],
                    tmp_path, stdout=tmp_path / "server.out", stderr=tmp_path / "server.err")
    try:
        base = f"http://127.0.0.1:{app}/infer"
        _until("the server answers", lambda: _get(f"{base}?n=2", timeout=60), 180)
        for _ in range(3):  # calls 1-3: call 3 is the first after warm-up
            _get(f"{base}?n=2")
        warm = time.time()

        def zeros() -> bool:  # two scrapes after warm-up hold each recompile series of the frame at 0
            got = _query(prometheus, 'seamscope_watch_events_total{kind="recompile"}[2m]')
            after = [[float(v) for ts, v in r["values"] if float(ts) > warm] for r in got]
            return bool(after) and all(len(vs) >= 2 and not any(vs) for vs in after)

        _until("the alert's series at 0 after warm-up", zeros, 60)
        assert _query(prometheus, ALERT) == []
        got = json.loads(_get(f"{base}?n=5", timeout=60, headers={"X-Request-Id": "req-new"}))
        assert got["rows"] == 5
        recompiled = time.time()
        second = _until("two scrapes after the recompile", lambda: _scrapes_after(prometheus, recompiled, 2), 60)[1]
        alert = _query(prometheus, ALERT, at=second)
        assert len(alert) == 1 and float(alert[0]["value"][1]) > 0, alert
        increase = _query(prometheus, 'sum(increase(seamscope_recompiles_total{stage="serving"}[5m]))', at=second)
        assert increase and float(increase[0]["value"][1]) > 0, increase
        labels = [r["metric"] for r in _query(prometheus, 'seamscope_recompiles_total{stage="serving"} > 0')]
        assert labels and all(m["cause"] == "size" and m["job"] == "seamscope" for m in labels), labels
        assert {m["frame"] for m in labels} == {"tests.workloads.watch_server.Net.forward"}, labels
        info = _query(prometheus, 'seamscope_frame_info{frame="tests.workloads.watch_server.Net.forward"}')
        assert info and info[0]["metric"]["file"] == "tests/workloads/watch_server.py", info
        for _ in range(3):
            _get(f"{base}?n=2")
        last = time.time()
        first = _until("a scrape after the last request", lambda: _scrapes_after(prometheus, last, 1), 60)[0]
        served = _query(prometheus, "sum(seamscope_calls_total)", at=first)
        _get(f"http://127.0.0.1:{app}/quit")
        assert server.wait(120) == 0, (tmp_path / "server.err").read_text()
    finally:
        if server.running():
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    receipt = json.loads((out / "receipt.json").read_text())
    assert receipt["ledger"]["run"]["status"]["state"] == "completed"
    assert float(served[0]["value"][1]) == receipt["summary"]["call_count"] >= 8, (served, receipt["summary"])
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    assert lines and all(e["kind"] == "recompile" and e["call_index"] == 4 for e in lines), lines
    assert {e["context"]["request_id"] for e in lines} == {"req-new"}
    assert {e["qualname"] for e in lines} == {"tests.workloads.watch_server.Net.forward"}
    url = f"http://127.0.0.1:{prometheus.target}/metrics"
    assert f"seamscope: watch: metrics at {url}" in (tmp_path / "server.err").read_text()


def test_two_workers_one_endpoint_sum_in_multiprocess_mode(tmp_path, fresh_server) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    port = _free_port()
    ready = tmp_path / "ready"
    ready.mkdir()
    mp = tmp_path / "multiproc"
    mp.mkdir()
    ended: list[object] = []
    job = threading.Thread(target=lambda: ended.append(script_forked(
        fresh_server, [WORKLOADS / "watch_workers.py", port, ready, 4, 6], tmp_path,
        env={"PROMETHEUS_MULTIPROC_DIR": str(mp)}, timeout=240)), daemon=True)
    job.start()
    try:
        _until("both workers made their calls", lambda: len(list(ready.glob("*.ready"))) == 2 or (
            not job.is_alive() and pytest.fail(f"the workers ended: {ended}")), 180)
        text = _get(f"http://127.0.0.1:{port}/metrics").decode()
    finally:
        (ready / "done").write_text("")
        job.join(120)
    assert ended and ended[0].returncode == 0, ended  # type: ignore[attr-defined]
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            values[key] = values.get(key, 0.0) + s.value

    def total(name: str, **labels: str) -> float:
        return sum(
            v for (n, ls), v in values.items() if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
        )

    # 4 + 1 and 6 + 1 calls; each worker recompiled once after warm-up (the new size)
    assert total("seamscope_calls_total") == 5 + 7
    assert total("seamscope_recompiles_total", stage="serving", cause="size") == 2
    assert total("seamscope_watch_events_total", kind="recompile") == 2
