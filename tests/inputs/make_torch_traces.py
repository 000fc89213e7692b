"""Writes the ``TORCH_TRACE`` logs under ``torch_trace/`` that the golden-receipt tests import.

Run from the repository root: ``.venv/bin/python tests/inputs/make_torch_traces.py [NAME ...]``
(torch 2.13.0, CPU; no names: every workload). ``--python PY`` runs the workloads with another
interpreter (another torch) and writes ``torch_trace/NAME-torch-VERSION`` (always shrunk), e.g.
``--python .venv-torch-2.15.0/bin/python breaks``. Each workload runs in its own process with
``TORCH_TRACE`` pointing at ``torch_trace/NAME``.
The logs are committed, so the golden tests need no torch; regenerate them only on purpose (a new
torch release), then regenerate the golden receipts (``SEAMSCOPE_REGEN_GOLDEN=1``) in the same commit.

The logs of :data:`SHRUNK` workloads are kept small: records of the kinds in :data:`DROP` (and their
payloads) are removed after the run; every other line is PyTorch's, byte for byte. The import
tests compare seamscope with ``tlparse`` on these same files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    # A print break, a .item() branch, a break inside an inlined helper, and shape recompiles.
    "breaks": r'''
import torch

def helper(x):
    print("inner")
    return x * 2

def f(x):
    y = x.sin()
    print("hi")
    y = y + 1
    if y.sum().item() > -1e9:
        y = y * 3
    y = helper(y)
    return y.cos()

g = torch.compile(f, backend="eager")
for n in (4, 4, 8, 8, 16):
    g(torch.ones(n))
''',
    # A frame that hits the recompile limit (2) on sizes A, B, C, A, and a break Dynamo cannot
    # resume from (inside a loop over a tensor), with aot_eager.
    "limit": r'''
import torch
import torch._dynamo

torch._dynamo.config.recompile_limit = 2

def h(x):
    return x.relu() * 2

def loop(x):
    acc = x
    for i in range(2):
        print("step", i)
        acc = acc + i
    return acc

gh = torch.compile(h, backend="aot_eager", dynamic=False)
for n in (3, 5, 7, 3):
    gh(torch.ones(n))
gl = torch.compile(loop, backend="eager")
gl(torch.ones(4))
gl(torch.ones(4))
''',
    # Compiled autograd: the backward of each call is compiled by Dynamo under compile ids
    # ``!N/x/y`` (one compiled-autograd graph per backward here).
    "autograd": r'''
import torch
from torch._dynamo import compiled_autograd

def f(x):
    return (x.sin() * 2).sum()

x = torch.randn(4, requires_grad=True)
cf = torch.compile(f, backend="eager")
with compiled_autograd._enable(torch.compile(backend="eager")):
    for _ in range(2):
        cf(x).backward()
''',
    # Three rounds of two functions with ``torch._dynamo.reset()`` between: ids 0/0 and 1/0 reused.
    "reset": r'''
import torch
import torch._dynamo

def f(x):
    return x.sin() + 1

def g(x):
    return x.cos() * 2

for _ in range(3):
    torch.compile(f, backend="eager")(torch.ones(3))
    torch.compile(g, backend="eager")(torch.ones(3))
    torch._dynamo.reset()
''',
    # A backend that raises (BackendCompilerFailed, suppressed: the frame runs eagerly), then a
    # function with a backward under aot_eager (bwd_compilation_metrics).
    "failure": r'''
import torch
import torch._dynamo

torch._dynamo.config.suppress_errors = True

def broken_backend(gm, example_inputs):
    raise RuntimeError("boom: this backend always fails")

def f(x):
    return x.sin() + 1

torch.compile(f, backend=broken_backend)(torch.ones(3))

def h(x):
    return (x.cos() * 2).sum()

x = torch.ones(3, requires_grad=True)
torch.compile(h, backend="aot_eager")(x).backward()
''',
}

#: Workloads whose logs are shrunk (:func:`shrink`).
SHRUNK = ("autograd", "reset", "failure")
#: Record kinds removed from shrunk logs: none of them is read by seamscope or counted by tlparse's
#: compile directory.
DROP = frozenset({
    b"chromium_event", b"describe_tensor", b"describe_storage", b"describe_source", b"create_symbol",
    b"symbolic_shape_specialization", b"guard_added_fast", b"dump_file", b"dynamo_cpp_guards_str",
})


def _blank_configs(line: bytes, start: int) -> bytes:
    """A metrics record with its configuration snapshots (``dynamo_config``, ``inductor_config``,
    ...: 30 KB each, read by nobody here) emptied; PyTorch's own JSON layout (``json.dumps``)."""
    rec = json.loads(line[start:])
    body = next(iter(rec.values()))
    for k, v in body.items():
        if k.endswith("_config") and isinstance(v, str):
            body[k] = ""
    return line[:start] + json.dumps(rec).encode() + b"\n"


def shrink(path: str) -> None:
    """Remove the records of :data:`DROP` kinds with their payload lines, and empty the
    configuration snapshots of metrics records, in place."""
    out: list[bytes] = []
    dropping = False
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b"\t"):
                if not dropping:
                    out.append(line)
                continue
            j = line.find(b"] {\"")
            key = line[j + 4 : line.find(b'"', j + 4)] if j >= 0 else b""
            dropping = key in DROP
            if key in (b"compilation_metrics", b"bwd_compilation_metrics"):
                line = _blank_configs(line, j + 2)
            if not dropping:
                out.append(line)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def main(names: list[str], python: str | None = None) -> None:
    suffix = ""
    if python is not None:
        version = subprocess.run([python, "-c", "import torch; print(torch.__version__.split('+')[0])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        suffix = f"-torch-{version}"
    for name, code in WORKLOADS.items():
        if names and name not in names:
            continue
        out = os.path.join(HERE, "torch_trace", name + suffix)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, TORCH_TRACE=out, PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="")
        subprocess.run([python or sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
        for f in os.listdir(out):
            if name in SHRUNK or suffix:
                shrink(os.path.join(out, f))
            print(name, f, os.path.getsize(os.path.join(out, f)))


if __name__ == "__main__":
    args = sys.argv[1:]
    py = None
    if args[:1] == ["--python"]:
        py, args = args[1], args[2:]
    main(args, py)
