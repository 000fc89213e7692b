"""A workload with one break of each kind, used by the capture tests and `seamscope run` tests."""

import sys
import time

import torch


def helper(x):
    print("helper saw", tuple(x.shape))  # a break inside an inlined helper
    return x * 2


@torch.compiler.disable
def slow(x):
    time.sleep(0.002)  # an explicit eager boundary that costs 2 ms
    return x


def f(x):
    y = x.sin()
    y = helper(y)
    y = slow(y)
    if y.sum().item() > -1e9:  # data-dependent branch on a host read
        y = y + 1
    return y.cos()


def main(n_calls=6, sizes=(8, 16)):
    g = torch.compile(f, backend="eager")
    for size in sizes:
        for _ in range(n_calls):
            g(torch.ones(size))


if __name__ == "__main__":
    if "--raise" in sys.argv:
        g = torch.compile(f, backend="eager")
        g(torch.ones(4))
        raise ValueError("the user's own error")
    if "--sleep" in sys.argv:
        g = torch.compile(f, backend="eager")
        while True:
            g(torch.ones(4))
    main()
