"""A small torch.distributed job for the many-ranks tests (gloo, CPU).

``--mode agree``: every rank does the same thing. ``--mode diverge``: from call ``--at`` on, rank 1
takes another Python branch inside the compiled function (a print: a graph break, and a guard on the
flag: a recompile). ``--mode ddp``: a DDP model of four Linear(512, 512) layers (4 MiB of
parameters) under ``bucket_cap_mb=1``, so DDPOptimizer splits the graph at bucket boundaries.
``--mode fsdp``: FSDP2 (``fully_shard``) over two Linear(64, 64) layers, compiled; from call ``--at``
on rank 1 feeds a batch of another size (a new shape: rank 1 compiles alone), each step ends in a
barrier, and the process group's timeout is ``--pg-timeout`` seconds.
``--crash-rank R`` makes rank R exit hard (no ledger written) after its calls. ``--linger-in DIR``
makes each rank write ``DIR/ready-RANK`` after its calls and then wait to be stopped (at most 120 s).
After its calls each rank freezes what it holds (``gc.freeze``): what seamscope recorded is unchanged,
and its exit no longer spends about a second collecting torch's objects.
"""

import argparse
import gc
import os

import torch
import torch.distributed as dist


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(512, 512) for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["agree", "diverge", "ddp", "fsdp"], default="agree")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--at", type=int, default=3)
    ap.add_argument("--crash-rank", type=int, default=-1)
    ap.add_argument("--linger-in", default=None)
    ap.add_argument("--pg-timeout", type=float, default=None)
    a = ap.parse_args()
    if a.pg_timeout is not None:
        import datetime

        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.pg_timeout))
    else:
        dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    if a.mode == "ddp":
        model = Net()
        ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
        compiled = torch.compile(ddp, backend="eager")
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x = torch.randn(8, 512)
        for _ in range(a.steps):
            opt.zero_grad()
            compiled(x).sum().backward()
            opt.step()
    elif a.mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64))
        for m in model:
            if isinstance(m, torch.nn.Linear):
                fully_shard(m)
        fully_shard(model)
        compiled = torch.compile(model, backend="eager")
        for i in range(a.steps):
            n = 16 if rank == 1 and i >= a.at else 8
            compiled(torch.randn(n, 64)).sum().backward()
            dist.barrier()
    else:

        @torch.compile(backend="eager")
        def step(x, loud):
            y = torch.sin(x) + 1
            if loud:
                print(f"rank {rank}: the other branch")
                y = y * 2
            return torch.cos(y).sum()

        x = torch.randn(64, 64)
        for i in range(a.steps):
            loud = a.mode == "diverge" and rank == 1 and i >= a.at
            step(x, loud)
            dist.barrier()
    # What the rank holds now is frozen: the interpreter's teardown then skips walking torch's objects
    # in its last collections (about 1 s of CPU per rank), work no test reads.
    gc.freeze()
    if rank == a.crash_rank:
        os._exit(3)
    if a.linger_in:
        import time

        open(os.path.join(a.linger_in, f"ready-{rank}"), "w").close()
        end = time.monotonic() + 120
        while time.monotonic() < end:
            time.sleep(0.05)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
