"""A run that goes on until stopped (``--calls N`` then ``--os-exit``: N calls, then ``os._exit(0)``).

It touches ``started`` in the working directory as it starts, so a test can tell whether it ran,
and prints one line per call."""

import os
import sys
import time

import torch


def f(x):
    return (x.sin() + 1).cos()


if __name__ == "__main__":
    open("started", "w").close()
    g = torch.compile(f, backend="eager")
    n = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else None
    i = 0
    while n is None or i < n:
        g(torch.ones(4))
        i += 1
        print("call", i, flush=True)
        time.sleep(0.01)
    if "--os-exit" in sys.argv:
        time.sleep(0.5)  # a checkpoint falls due meanwhile (the tests checkpoint every 0.2 s)
        g(torch.ones(4))  # ... and is written at this call's end
        os._exit(0)
