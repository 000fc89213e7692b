"""A compiled optimizer step under an LR scheduler: the learning rate, a Python float in the
optimizer's param_groups, takes a new value every step (Dynamo guards the step on it). The final
weights are saved beside the script, for a test to compare."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(8, 8)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)


@torch.compile(backend="eager")
def opt_step():
    opt.step()


x = torch.randn(4, 8)
for _ in range(4):
    model(x).square().sum().backward()
    opt_step()
    opt.zero_grad()
    sched.step()
torch.save(model.state_dict(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights.pt"))
