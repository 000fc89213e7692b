"""Every guard that failed at a recompile, not only the first.

A recompile's reason names, per cached variant of the frame, the first guard that failed on it
(``tensor 'input_ids' size mismatch at index 1``); ``TORCH_LOGS=recompiles_verbose`` lists more
only for guards written as Python lambdas. An input of the same padded length
(``attention_mask``) or a flag the program set on its first call fails too, and nothing says so.
While capture runs, each reason gets the other guards that failed on that variant appended, in
the format PyTorch itself uses for several reasons (``0/0: first; second; third``), so the
structured trace's ``recompile_reasons``, the compilation metrics and ``TORCH_LOGS`` carry them.

Internals used (read in torch 2.13's ``torch/_dynamo/guards.py``):

- ``torch._dynamo.guards.get_guard_fail_reason_helper(guard_manager, f_locals, compile_id,
  backend)``: the reason of one cached variant, looked up as a module global by
  ``get_guard_fail_reason`` (so replacing the module attribute reaches every caller);
- the guard tree of ``guard_manager.root``: ``get_child_managers()``, and for a dict's manager
  (``DictGuardManager``: a module's ``_modules``, a ``kwargs`` dict) ``get_key_value_managers()``,
  ``{index: (key manager, value manager)}``, which ``get_child_managers()`` does not list (the
  guards on a submodule's attributes sit below them); ``get_source()`` (a
  Python expression over ``L`` and the guard's globals), ``get_leaf_guards()``; a leaf guard is
  callable on the value its manager guards (relational guards are not, and are skipped) and has
  ``verbose_code_parts()``. A tensor guard's code part is ``check_tensor(SOURCE, Tensor, KEYS,
  DTYPE, device=..., requires_grad=..., size=[...], stride=[...])``; its reason is written here
  as PyTorch's own (``tensor 'x' size mismatch at index 1. expected 8, actual 12``).

It runs only when a cached variant failed (a recompile), never on a cache hit.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem

MAX_NODES = 20_000
"""Guard managers visited per variant at most (a large model has a few thousand)."""
MAX_EXTRA = 12
"""Further failed guards reported per variant at most."""

_LOCAL = re.compile(r"L\[\s*['\"](.*?)['\"]\s*\]")
_LIST = re.compile(r"(size|stride)=\[([^\]]*)\]")
_DTYPE = re.compile(r"Tensor, DispatchKeySet\(.*?\), (torch\.\w+),")
_GRAD = re.compile(r"requires_grad=(True|False)")
_NAMED = re.compile(r"(?:tensor|type of) '(.+?)' ")


def _strip_local(text: str) -> str:
    """``L['x']`` → ``x``, as PyTorch writes recompile reasons (``strip_local_scope``)."""
    return _LOCAL.sub(r"\1", text)


def _dims(text: str) -> list[int | None]:
    return [None if p.strip() == "None" else int(p) for p in text.split(",") if p.strip()]


def tensor_reason(source: str, code: str, value: Any) -> str:
    """Why a tensor guard fails on ``value``, in PyTorch's words: the first size index that
    differs, else the first stride, dtype or requires_grad; else the guard's code."""
    name = f"tensor '{_strip_local(source)}'"
    lists = {m.group(1): _dims(m.group(2)) for m in _LIST.finditer(code)}
    try:
        actual = {"size": list(value.shape), "stride": list(value.stride())}
    except Exception:  # not a tensor at all: PyTorch's words for it
        return f"expected type of '{_strip_local(source)}' to be a tensor type, ' but found {type(value)}"
    for what in ("size", "stride"):
        want = lists.get(what)
        if want is None:
            continue
        if len(want) != len(actual[what]):
            return f"{name} rank mismatch. expected {len(want)}, actual {len(actual[what])}"
        for i, (w, a) in enumerate(zip(want, actual[what], strict=True)):
            if w is not None and w != a:
                return f"{name} {what} mismatch at index {i}. expected {w}, actual {a}"
    m = _DTYPE.search(code)
    if m and str(getattr(value, "dtype", "")) != m.group(1):
        return f"{name} dtype mismatch. expected {m.group(1)}, actual {value.dtype}"
    m = _GRAD.search(code)
    if m and bool(getattr(value, "requires_grad", False)) != (m.group(1) == "True"):
        return f"{name} requires_grad mismatch. expected requires_grad={int(m.group(1) == 'True')}"
    return _strip_local(code.split("  #", 1)[0].strip())


@functools.lru_cache(maxsize=65536)
def _code(source: str) -> Any:
    """A guard source compiled once (each recompile evaluates every manager's source again)."""
    return compile(source, "<guard source>", "eval")


def failed_guards(guard_manager: Any, f_locals: dict[str, Any]) -> list[str]:
    """Every leaf guard of ``guard_manager``'s tree that fails on ``f_locals``, each as a reason
    text (tensor guards in PyTorch's words, the others as their code). A manager whose value
    cannot be read (a source this scope cannot evaluate) is skipped with its subtree."""
    scope: dict[str, Any] = {"L": f_locals, "G": guard_manager.global_scope["G"]}
    scope.update(guard_manager.closure_vars or {})
    glob = dict(guard_manager.global_scope)
    out: list[str] = []
    stack = [guard_manager.root]
    seen = 0
    while stack and seen < MAX_NODES and len(out) <= MAX_EXTRA:
        node = stack.pop()
        children = list(node.get_child_managers())
        pairs = node.get_key_value_managers() if hasattr(node, "get_key_value_managers") else {}
        children += [m for pair in pairs.values() for m in pair if m is not None]
        seen += len(children)
        for child in children:
            source = child.get_source()
            try:
                value = eval(_code(source), glob, scope)  # noqa: S307 - PyTorch's own source expression
            except Exception:
                continue
            for leaf in child.get_leaf_guards():
                try:
                    ok = leaf(value)
                except Exception:  # a relational guard (aliasing) is not callable on one value
                    continue
                if ok:
                    continue
                parts = leaf.verbose_code_parts()
                code = parts[0] if parts else type(leaf).__name__
                if type(leaf).__name__ == "TENSOR_MATCH":
                    text = tensor_reason(source, code, value)
                else:
                    text = _strip_local(code.split("  #", 1)[0].strip())
                if text and text not in out:
                    out.append(text)
            stack.append(child)
    return out[:MAX_EXTRA]


def with_every_failed_guard(reason: str, extra: list[str]) -> str:
    """PyTorch's reason for one variant (``0/0: first`` and maybe a user stack on the lines after)
    with the ``extra`` guards not in it appended, ``; `` between them."""
    head, nl, tail = reason.partition("\n")
    have = {p.strip() for p in head.split(": ", 1)[-1].split("; ")}
    named = set(_NAMED.findall(head))  # a tensor PyTorch's reason names already: its first failure is said
    new = [e for e in extra if e not in have and not (set(_NAMED.findall(e)) & named)]
    if not new:
        return reason
    return head + "; " + "; ".join(new) + nl + tail


def report_every_failed_guard() -> Callable[[], None]:
    """Install the fuller reason (see the module's docstring); returns the function that removes it."""
    try:
        from torch._dynamo import guards
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(f"no torch._dynamo.guards ({e}): recompiles name their first failed guard only") from e
    original = getattr(guards, "get_guard_fail_reason_helper", None)
    if original is None or getattr(original, "seamscope_every_guard", False):
        if original is None:
            raise AdapterProblem("torch._dynamo.guards.get_guard_fail_reason_helper is missing: "
                                 "recompiles name their first failed guard only")
        return lambda: None

    def get_guard_fail_reason_helper(guard_manager: Any, f_locals: Any, *args: Any, **kwargs: Any) -> str:
        reason = original(guard_manager, f_locals, *args, **kwargs)
        try:
            extra = failed_guards(guard_manager, f_locals)
        except Exception:  # never break the user's compile: the first guard is still there
            return reason
        return with_every_failed_guard(reason, extra)

    get_guard_fail_reason_helper.seamscope_every_guard = True  # type: ignore[attr-defined]
    get_guard_fail_reason_helper.__wrapped__ = original  # type: ignore[attr-defined]
    guards.get_guard_fail_reason_helper = get_guard_fail_reason_helper

    def undo() -> None:
        if guards.get_guard_fail_reason_helper is get_guard_fail_reason_helper:
            guards.get_guard_fail_reason_helper = original

    return undo
