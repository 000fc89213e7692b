"""A script that draws its own progress on the terminal, as Lightning's and tqdm's bars do: an
epoch line per epoch, and a ``\\r`` bar it redraws in place, left unfinished at the end."""

import sys
import time

import torch

f = torch.compile(lambda x: x.sin() + 1, backend="eager")
x = torch.ones(4)
for epoch in range(2):
    for _ in range(6):
        f(x)
        time.sleep(0.06)  # slower than seamscope's redraw interval
    print(f"epoch {epoch} done", flush=True)
for i in range(1, 11):
    f(x)
    sys.stderr.write(f"\rstep {i}/10")
    sys.stderr.flush()
    time.sleep(0.06)
f(x)
time.sleep(0.3)
f(x)  # a call after the bar's last draw: seamscope must not draw over it
