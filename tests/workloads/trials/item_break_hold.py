"""item_break.py that holds its third and later runs: each run adds a line to runs.txt in the
working folder, and from the third on it sleeps, so that a test can interrupt a trial while a
run is in progress, whatever the machine's speed."""
import os
import time

import torch

with open("runs.txt", "a") as log:
    log.write(f"{os.getpid()}\n")
with open("runs.txt") as log:
    if len(log.read().splitlines()) >= 3:
        time.sleep(600)


def step(x):
    x = torch.sin(x) * x.abs().max().item()
    x = torch.sin(x) * x.abs().max().item()
    return x


f = torch.compile(step, backend="eager")
x = torch.randn(64)
for _ in range(10):
    f(x)
