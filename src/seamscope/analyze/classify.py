"""Why a graph break happened: the four classes of break causes, from ``gb_code``, ``gb_type`` and reason text.

A table in code, not torch: the analysis must run on receipts without torch installed. The codes
and names are copied from ``torch/_dynamo/graph_break_registry.json`` (torch 2.13, 517 codes);
``tests/test_findings_classify.py`` checks every registry entry against this table. Three tiers,
most specific first: a code table for the codes users meet, keyword rules over the registry name
(``gb_type``) for the rest, and patterns over the reason text for reasons that carry neither
(``generic_jump TensorVariable()`` from ``explain``, older torch). Anything else is ``other``, with
its text kept.
"""

from __future__ import annotations

import re

from ..model.findings import BreakClass, Cause
from ..model.normalize import normalize_text

DD: BreakClass = "data_dependent_control_flow"
HOST: BreakClass = "host_side_effect"
UNSUP: BreakClass = "unsupported_op"
MUT: BreakClass = "python_state_mutation"
EXPL: BreakClass = "explicit_boundary"
OTHER: BreakClass = "other"

# code → (class, label, reads a tensor value on the host)
CODE_TABLE: dict[str, tuple[BreakClass, str, bool]] = {
    # data-dependent control flow: Python needs a value that only exists at run time
    "GB0124": (DD, "Tensor.item()", True),  # Unsupported Tensor.item() call with capture_scalar_outputs=False
    "GB0109": (DD, "Tensor.tolist()", True),  # Tensor.tolist() with non-integer tensor
    "GB0170": (DD, "branch on a tensor value", True),  # Data-dependent branching
    "GB0035": (DD, "branch on an object's truth value", False),  # ... non-constant __bool__
    "GB0033": (DD, "data-dependent operator", True),  # Data dependent operator
    "GB0036": (DD, "dynamic-shape operator", False),  # Dynamic shape operator
    "GB0037": (DD, "dynamic-shape operator (no meta kernel)", False),
    "GB0038": (DD, "slicing with tensor bounds", True),  # Dynamic slicing with Tensor arguments
    "GB0070": (DD, "list indexed by a tensor", True),  # Indexing list with non-scalar tensor
    "GB7596": (DD, "torch.Size indexed by a tensor", True),
    "GB0218": (DD, "index(Tensor)", True),  # unsupported index(Tensor)
    "GB0246": (DD, "one_hot with data-dependent size", False),
    "GB0360": (DD, "branch on guard_scalar", False),
    "GB0048": (DD, "real value needed while tracing", True),  # Error getting associated real value
    "GB2922": (DD, "real value needed while tracing", True),
    # host side effects: printing, logging, profiling markers, asserting on contents
    "GB0291": (HOST, "logging", False),  # logging.Logger method not supported for non-export cases
    "GB0296": (HOST, "debugging function", False),
    "GB0569": (HOST, "repr(tensor)", True),  # repr() on tensor
    "GB0034": (HOST, "assert on a tensor value", True),  # Data-dependent assertion failed
    "GB0212": (HOST, "profiler object", False),
    "GB0370": (HOST, "record_function", False),
    "GB0146": (HOST, "device event method", False),  # Unsupported event method
    # explicit boundaries the user (or a library) asked for
    "GB0098": (EXPL, "torch.compiler.disable", False),  # Skip calling `torch.compiler.disable()`d function
    "GB0099": (EXPL, "torch.compiler.disable", False),  # Skip inlining ...
    "GB0025": (EXPL, "torch._dynamo.graph_break()", False),
    "GB4297": (EXPL, "torch._dynamo.skip_frame()", False),
    "GB4636": (EXPL, "torch._dynamo.step_unsupported()", False),
    "GB0269": (EXPL, "leaf function", False),  # Forced graph break on leaf function
    "GB0030": (EXPL, "comptime graph break", False),
    # mutation of Python state the compiled region closed over
    "GB0096": (MUT, "attribute store (STORE_ATTR)", False),
    "GB0004": (MUT, "super().__delattr__", False),
    "GB0097": (MUT, "deque mutation", False),
    "GB0169": (MUT, "write to a closure cell", False),
    "GB0189": (MUT, "getattr on a mutated module", False),
    "GB0271": (MUT, "class attribute mutation", False),
    "GB0358": (MUT, "optimizer parameter mutation", False),
    "GB0056": (MUT, "tensor .data mutation", False),
    "GB0220": (MUT, "tensor .data dtype mutation", False),
    "GB0058": (MUT, "tensor attribute set", False),
    "GB0131": (MUT, "__setitem__/__setattr__", False),
    "GB0067": (MUT, "side effect inside a higher-order op", False),
    "GB4413": (MUT, "side effect inside a higher-order op", False),
    "GB1177": (MUT, "nn.Module mutation in a higher-order op", False),
    "GB0041": (MUT, "input mutation in a higher-order op", False),
    "GB0100": (MUT, "hook handle stored in globals", False),
    "GB0101": (MUT, "hook handle stored in globals", False),
    "GB4271": (MUT, "__class__ assignment", False),
    "GB3697": (MUT, "setattr on an object", False),
    "GB0467": (MUT, "setattr on an unsupported type", False),
    "GB0254": (MUT, "setattr with a computed name", False),
    "GB0206": (MUT, "setattr on Tensor.requires_grad", False),
    "GB8335": (MUT, "mutated generator", False),
    "GB0198": (MUT, "mapping proxy after dict mutation", False),
    # unsupported operations and extensions
    "GB0059": (UNSUP, "builtin operator", False),  # refined below: print is a host side effect
    "GB0043": (UNSUP, "non-PT2-compliant op", False),
    "GB0090": (UNSUP, "op without fake-tensor support", False),
    "GB0087": (UNSUP, "op without fake-tensor support", False),
    "GB0007": (UNSUP, "function marked as skipped", False),
    "GB0008": (UNSUP, "function marked as skipped", False),
    "GB0009": (UNSUP, "function marked as skipped", False),
    "GB0147": (UNSUP, "unsupported function call", False),
    "GB0148": (UNSUP, "unsupported function call", False),
    "GB0156": (UNSUP, "unsupported method call", False),
    "GB0177": (UNSUP, "function not implemented in Python", False),
    "GB0014": (UNSUP, "RNN/GRU/LSTM", False),
    "GB0142": (UNSUP, "unsupported context manager", False),
    "GB0105": (UNSUP, "Tensor.numpy()", True),
    "GB0106": (UNSUP, "Tensor.numpy()", True),
    "GB0231": (UNSUP, "torch.from_numpy", False),
    "GB0293": (UNSUP, "numpy function", False),
    "GB0294": (UNSUP, "numpy function", False),
    "GB0123": (UNSUP, "Tensor.backward()", False),
    "GB0361": (UNSUP, "triton kernel feature", False),
    "GB0306": (UNSUP, "higher-order operator", False),
    "GB0307": (UNSUP, "higher-order operator", False),
    "GB0102": (UNSUP, "op banned in strict mode", False),
    # other: not a property of the user's program line
    "GB0039": (OTHER, "recompile limit exceeded", False),
    "GB0052": (OTHER, "too many restarts", False),
    "GB0219": (OTHER, "backend compiler exception", False),
    "GB0064": (OTHER, "fake tensor propagation error", False),
    "GB0111": (OTHER, "TypeError from user code", False),
    "GB0088": (OTHER, "exception raised in traced code", False),
    "GB0089": (OTHER, "exception raised in traced code", False),
}

# Keyword rules over the registry name, in order; the first match decides.
GB_TYPE_RULES: list[tuple[re.Pattern[str], BreakClass, bool]] = [
    (re.compile(r"data[- ]dependent|dynamic shape operator|\.item\(\)|tolist"), DD, True),
    (
        re.compile(r"logging|\bprint\b|profiler|record_function|debugging function|repr\(\) on tensor|^assert with"),
        HOST,
        False,
    ),
    (re.compile(r"disable\(\)|graph_break\(\)|skip_frame|step_unsupported|forced graph break"), EXPL, False),
    (
        re.compile(
            r"mutat|setattr|__setitem__|__delattr__|store_attr|side effect|__class__ assignment"
            r"|write to immutable|materialized|hook handle in globals|\bsetitem\b|inplace op on input"
        ),
        MUT,
        False,
    ),
    # Breaks about other breaks (in a loop, in an inlined function): the cause is the inner one.
    (re.compile(r"^graph break (in|under)|comprehension graph break|recompile limit"), OTHER, False),
    (
        re.compile(
            r"unsupported|not supported|not implemented|unimplemented|missing|cannot|can't|untraceable"
            r"|skipped|attempted to|non-pt2|fake tensor|numpy|triton|c/c\+\+|opaque|failed to trace"
            r"|unhandled|invalid|improper|banned|strict mode|not available|escaped"
            # constructs the tracer does not model: Python features, torch APIs, higher-order ops
            r"|fail|error|\bbad\b|non-const|unexpected|requires compiled autograd|mismatch|limitation"
            r"|disabled|uninitiali[sz]ed|not a python constant|weird|\bhop\b|autograd|torch\.|repr\(\)"
            r"|reconstruct|comprehension|generator|__getattr|hash|richcompare|nn\.module|subclass"
            r"|exception|without (a )?source|dataclass|namedtuple|typeddict|functools|itertools|deque"
            r"|weakref|\bsuper\b|bytecode|unpack|import|variadic|constant|descriptor|backward\(\)"
            r"|\.random_|\.uniform_|retain_grad|grad_fn|fsdp|p2p|distributed|collective|ndarray"
        ),
        UNSUP,
        False,
    ),
]

# Patterns over the reason text, for reasons without a code (explain's short form, older torch).
REASON_RULES: list[tuple[re.Pattern[str], BreakClass, str, bool]] = [
    (re.compile(r"generic_jump\s+TensorVariable|data-dependent branching"), DD, "branch on a tensor value", True),
    (re.compile(r"Tensor\.item\(\)|call_method TensorVariable\(\) item\b"), DD, "Tensor.item()", True),
    (re.compile(r"tolist\(\)|\bto_list\b"), DD, "Tensor.tolist()", True),
    (re.compile(r"_local_scalar_dense|data dependent operator", re.I), DD, "data-dependent operator", True),
    (re.compile(r"dynamic shape operator", re.I), DD, "dynamic-shape operator", False),
    (re.compile(r"torch\.compiler\.disable|disable\(\)d function"), EXPL, "torch.compiler.disable", False),
    (re.compile(r"torch\._dynamo\.graph_break\(\)"), EXPL, "torch._dynamo.graph_break()", False),
    (re.compile(r"builtin operator `print`|\bprint\b"), HOST, "print", False),
    (re.compile(r"logging\.Logger|\blogger\b|\blogging\b", re.I), HOST, "logging", False),
    (re.compile(r"STORE_ATTR|mutation|setattr", re.I), MUT, "attribute store", False),
    (re.compile(r"unsupported|not supported|not implemented", re.I), UNSUP, "unsupported operation", False),
]

# Names that make a generic "could not trace this call" a host side effect.
_SIDE_EFFECT_CALLS = re.compile(
    r"`(?:builtins\.)?(print|open|input)`|`(?:[\w.]*\.)?(warn|warning|info|debug|error|critical|exception)`"
    r"|`(?:time\.)?(sleep)`|sys\.std(?:out|err)|`logging\b|\bLogger\b"
)
_GENERIC_CALL_CODES = {"GB0059", "GB0147", "GB0148", "GB0007", "GB0008", "GB0009", "GB0156", "GB0177"}

_JUMP_WITH = re.compile(r"attempted to jump with (\w*?)Variable\b")
#: The label of a branch on a host-side value (a NumPy or Python value computed from sizes).
HOST_VALUE_BRANCH = "branch on a host-side NumPy/Python value"

_GB_LINK = re.compile(r"gb/gb(\d{4})\.html", re.I)
_BACKTICK = re.compile(r"`([^`]{1,80})`")


def gb_code_from_text(text: str) -> str | None:
    """The code is not a field in PyTorch's records; it sits in the documentation link."""
    m = _GB_LINK.search(text or "")
    return f"GB{m.group(1)}" if m else None


def explanation_of(reason: str) -> str:
    for ln in (reason or "").splitlines():
        s = ln.strip()
        if s.startswith("Explanation:"):
            return s[len("Explanation:") :].strip()
    return first_line(reason)


def first_line(reason: str) -> str:
    for ln in (reason or "").splitlines():
        s = ln.strip()
        if s and not s.startswith(("Graph break in user code", "Graph Break Reason:")):
            return s
    return ""


def gb_type_of(reason: str) -> str | None:
    """The registry name is the line just above ``Explanation:`` in PyTorch's reason text."""
    lines = [ln.strip() for ln in (reason or "").splitlines()]
    for i, s in enumerate(lines):
        if s.startswith("Explanation:") and i > 0:
            for j in range(i - 1, -1, -1):
                if lines[j]:
                    return lines[j]
    return None


def torch_hints(reason: str) -> list[str]:
    return [ln.strip()[len("Hint:") :].strip() for ln in (reason or "").splitlines() if ln.strip().startswith("Hint:")]


def classify(gb_code: str | None, gb_type: str | None, reason: str) -> Cause:
    """Classify one break. Never raises, never drops: an unknown code is ``other`` with its text."""
    reason = normalize_text(reason or "")
    code = (gb_code or gb_code_from_text(reason) or "").upper() or None
    gtype = gb_type or gb_type_of(reason)
    expl = explanation_of(reason)
    cls: BreakClass = OTHER
    label = gtype or first_line(reason) or (code or "unknown")
    host_read = False
    matched: str = "none"
    if code and code in CODE_TABLE:
        cls, label, host_read = CODE_TABLE[code]
        matched = "gb_code"
    elif gtype:
        low = gtype.lower()
        for pat, c, hr in GB_TYPE_RULES:
            if pat.search(low):
                cls, host_read, matched = c, hr if c == DD else False, "gb_type"
                break
    if matched == "none":
        for rpat, c, lab, hr in REASON_RULES:
            if rpat.search(reason):
                cls, label, host_read, matched = c, lab, hr, "reason"
                break
    if code in _GENERIC_CALL_CODES or (matched != "gb_code" and cls == UNSUP):
        named = _BACKTICK.search(expl)
        side = _SIDE_EFFECT_CALLS.search(expl)
        if side:
            cls = HOST
            label = next(g for g in side.groups() if g) if any(side.groups()) else "logging"
        elif named and code in _GENERIC_CALL_CODES:
            label = f"{label}: {named.group(1)}"
    if code in ("GB0098", "GB0099"):
        m = re.search(r"<function ([\w.<>]+)", expl)
        if m:
            label = f"torch.compiler.disable ({m.group(1)})"
    if code == "GB0170":
        m = _JUMP_WITH.search(reason)
        if m and m.group(1) != "Tensor":
            # the condition is a value Dynamo traces as NumPy (or Python) computed from sizes or
            # constants (``np.lcm(...)``), not a tensor read back from the device
            label = HOST_VALUE_BRANCH
            host_read = False
    if code == "GB0291":
        m = re.search(r"method: <Logger [^>]*>\.(\w+)", reason)
        if m:
            label = f"logging ({m.group(1)})"
    return Cause(
        break_class=cls,
        label=label,
        host_read=host_read,
        gb_code=code,
        gb_type=gtype,
        explanation=expl,
        matched_by=matched,  # type: ignore[arg-type]
    )
