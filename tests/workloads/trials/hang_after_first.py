"""Compiles, then hangs from its second run on: each run adds its pid to runs.txt in the working
folder, and every run after the first sleeps for good once it has compiled (a hung training job),
so that a test can stop a trial, by a signal or by its budget, while a run is in progress."""
import os
import time

import torch

with open("runs.txt", "a") as log:
    log.write(f"{os.getpid()}\n")
with open("runs.txt") as log:
    hang = len(log.read().splitlines()) >= int(os.environ.get("HANG_FROM", "2"))

f = torch.compile(lambda x: torch.sin(x) + 1, backend="eager")
for _ in range(3):
    f(torch.randn(8))
while hang:
    time.sleep(3600)
