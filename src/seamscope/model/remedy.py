"""A remedy: one thing to try for a finding or a recompile cause, tied to its evidence.

Its own module because both the findings section and the headline hold remedies.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct

RemedyAction = Literal[
    "tensor_ops_or_cond",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "allow_unspec_int_on_nn_module",
    "custom_op",
    "keep_boundary",
    "remove_boundary",
    "move_out_of_hot_path",
    "reorder_logging",
    "move_state_out",
    "mark_dynamic_or_bucket",
    "size_oblivious",
    "drop_dynamic_false",
    "pass_argument_always",
    "host_value_as_python",
    "make_contiguous",
    "cast_inputs",
    "keep_type",
    "pass_as_tensor",
    "split_by_flag",
    "warm_first_call",
    "fix_churn_or_raise_limit",
    "report_upstream",
    "read_hints",
    "regional_compile",
    "persistent_cache",
    "fix_cache_bypass",
    "skip_rare_frame",
    "pytorch_hint_class",
    "fewer_cache_entries",
    "guard_settings",
]


class Remedy(Struct, frozen=True):
    """One thing to try, tied to the finding's evidence."""

    action: RemedyAction
    text: str
    config: dict[str, str] = {}
    """A configuration change to try (``torch._dynamo.config`` key → value), if the remedy is one."""
    try_with: str | None = None
    """How to try and measure it: a ``seamscope`` command line."""
    torch_hints: list[str] = []
    """PyTorch's own hints for this break, as the reason text gave them."""
