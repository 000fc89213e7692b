"""Prints draws of every seeded generator."""
import random

import numpy as np
import torch

print("draws", random.random(), float(np.random.rand()), float(torch.rand(1)))
f = torch.compile(lambda x: x + 1, backend="eager")
f(torch.rand(3))
