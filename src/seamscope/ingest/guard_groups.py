"""What a compilation's guards check, counted by group, from the guard tree PyTorch logs.

Dynamo writes each cache entry's guard tree as the payload of a ``dynamo_cpp_guards_str`` record
(live through the structured trace, and in ``TORCH_TRACE`` logs): one line per node, the checks
(leaves) as ``+- KIND: expression  # user code``, the accessors between them as
``+- GuardManager: source=...``. Each check is put in one group, the first that fits:

1. ``module``: it reads through an ``nn.Module`` (``L['self']``, ``._modules[``, ``._parameters[``,
   ``._buffers[``): module attributes, their parameters' metadata and their dict versions;
2. ``tensor``: tensor metadata of an input (``TENSOR_MATCH``: dtype, device, sizes, strides;
   dynamic-dimension markings, aliasing);
3. ``global``: a global (``G[...]``) or the process's global state (grad mode, default device,
   torch function mode stack, saved-tensor hooks);
4. ``id``: an object's or a type's identity (``ID_MATCH``, ``TYPE_MATCH``);
5. ``value``: any other Python value (``EQUALS_MATCH``, ``NONE_MATCH``, lengths, dict keys).

The checks of the tree are not what ``compilation_metrics.guard_count`` counts (the guards
Dynamo's Python side installed, before the tree was built: one guard can become several checks,
several can share one): reports give both, never one for the other. Torch-free.
"""

from __future__ import annotations

import re

GUARD_GROUPS: tuple[str, ...] = ("module", "tensor", "global", "id", "value")
"""The groups, in the order a check is tried against them."""

GROUP_WORDS = {
    "module": "check nn.Module attributes",
    "tensor": "check tensor metadata",
    "global": "check globals",
    "id": "check object ids",
    "value": "check Python values",
}

_LEAF = re.compile(r"\+- ([A-Z][A-Z0-9_]*): (.*)$")
_MODULE = ("L['self']", "._modules[", "._parameters[", "._buffers[")
_TENSOR_KINDS = ("TENSOR", "DIMENSION", "NO_TENSOR_ALIASING", "STORAGE_OVERLAPPING", "SYMBOLIC_SHAPE", "SHAPE_ENV")
_AMBIENT = frozenset({"GLOBAL_STATE", "TORCH_FUNCTION_MODE_STACK", "DEFAULT_DEVICE", "GRAD_MODE",
                      "DETERMINISTIC_ALGORITHMS", "BACKEND_MATCH", "AUTOGRAD_SAVED_TENSORS_HOOKS"})
_ID_KINDS = frozenset({"ID_MATCH", "TYPE_MATCH", "NOT_NONE_ID_MATCH", "CLOSURE_MATCH", "FUNCTION_MATCH"})


def guard_group(kind: str, expression: str) -> str:
    """The group of one check: its kind (``TENSOR_MATCH``) and its expression."""
    if any(m in expression for m in _MODULE):
        return "module"
    if kind.startswith(_TENSOR_KINDS):
        return "tensor"
    if kind in _AMBIENT or "G[" in expression or (kind == "LAMBDA_GUARD" and "L[" not in expression):
        return "global"
    if kind in _ID_KINDS or "___check_obj_id" in expression or "___check_type_id" in expression:
        return "id"
    return "value"


def group_guards(tree: str) -> dict[str, int]:
    """Checks per group in one guard tree (a ``dynamo_cpp_guards_str`` payload); groups with no
    check are left out."""
    counts: dict[str, int] = {}
    for line in tree.splitlines():
        m = _LEAF.search(line)
        if m is None:
            continue
        expression = m.group(2).split("  #", 1)[0]
        g = guard_group(m.group(1), expression)
        counts[g] = counts.get(g, 0) + 1
    return {g: counts[g] for g in GUARD_GROUPS if g in counts}
