"""Two workers forked from one parent (as gunicorn forks them), each watched, one metrics endpoint
in prometheus_client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR set by the caller).

argv: PORT READY_DIR CALLS_A CALLS_B. Each worker makes its calls (a new size after warm-up), writes
READY_DIR/<pid>.ready, and exits once READY_DIR/done exists."""

import os
import sys
import time

import torch

import seamscope


def model(x):
    return (x.sin() + 1).sum()


def worker(port: str, ready: str, calls: int) -> None:
    with seamscope.watch(warmup=2, metrics_port=port, sync_every=0.2):
        g = torch.compile(model, backend="eager")
        for i in range(calls):
            g(torch.ones(4 if i < calls - 1 else 16))  # the last call: a new size after warm-up
        g(torch.ones(16))
        time.sleep(0.5)  # the watch's thread pushes the counts every 0.2 s: twice meanwhile
        with open(os.path.join(ready, f"{os.getpid()}.ready"), "w") as f:
            f.write("ok")
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(ready, "done")) and time.monotonic() < deadline:
            time.sleep(0.05)


if __name__ == "__main__":
    port, ready, a, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    pids = []
    for i, calls in enumerate((a, b)):
        if i == 1:
            time.sleep(0.5)  # the first worker binds the port; the second finds it taken
        pid = os.fork()
        if pid == 0:
            try:
                worker(port, ready, calls)
            finally:
                os._exit(0)
        pids.append(pid)
    codes = [os.waitpid(p, 0)[1] for p in pids]
    sys.exit(0 if all(c == 0 for c in codes) else 1)
