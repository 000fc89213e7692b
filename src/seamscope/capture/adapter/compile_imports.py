"""What a process's first ``torch.compile`` call imports, imported now: named so that a fork
server's preload (``try``'s runs, the shape study's policies, the probe's ladder) imports them once
and its children do not each import them again in their first compilation.

Internals used: the modules themselves. Dynamo's backend registry imports every bundled backend
on the first lookup of a backend by name, and those pull in AOTAutograd, Inductor's code cache and
export's passes (with networkx): about 0.4 s per fresh process before anything is compiled, 0.2 s
imported once. Importing a module compiles nothing and fills no cache: a child stays as fresh as a
new interpreter, which would import them on its first call. A name a PyTorch release lacks is
skipped (``missing``).
"""

from __future__ import annotations

import importlib

NAMES = (
    "torch._dynamo.backends.registry",
    "torch._dynamo.backends.common",
    "torch._dynamo.backends.cudagraphs",
    "torch._dynamo.backends.debugging",
    "torch._dynamo.backends.distributed",
    "torch._dynamo.backends.inductor",
    "torch._dynamo.backends.onnxrt",
    "torch._dynamo.backends.tensorrt",
    "torch._dynamo.backends.torchxla",
    "torch._dynamo.backends.tvm",
    "torch._dynamo.repro.after_dynamo",
    "torch._dynamo.dce_extra_outputs",
    "torch._inductor.compiler_bisector",
    "torch._inductor.sizevars",
    "torch._export.db.logging",
    "torch._export.passes._node_metadata_hook",
    "torch._higher_order_ops.passes.inline_invoke_subgraph",
    "torch._subclasses.schema_check_mode",
    "torch.export._trace",
    "torch.fx.experimental.validator",
    "torch._functorch._aot_autograd.subclass_codegen",
    "torch._functorch._activation_checkpointing.remat_using_tags_for_fwd_loss_bwd_graph_pass",
)
"""The modules a first eager compilation imports, and two more a first aot_eager one adds (torch
2.13). The Inductor modules aot_eager also imports (its IR, its scheduler) take longer to import
than they save a child of an eager script; a server that preloads ``torch._inductor.compile_fx``
has them (the test suite's)."""

missing: list[str] = []
"""The names this PyTorch could not import."""

for _name in NAMES:
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001 - another release: that module is not there, or not importable alone
        missing.append(_name)
