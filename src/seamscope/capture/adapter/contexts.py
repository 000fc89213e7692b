"""A hook on every call of a callable compiled before capture started, and what Dynamo holds
compiled already.

Internals used:
- ``torch._dynamo.eval_frame.OptimizeContext.enter_exit_hooks``: the functions every call of a
  callable compiled by ``torch.compile`` runs on entry (each returns the cleanup the call runs on
  exit, in a ``finally``). Appending one to every live context observes callables compiled
  before capture started: at import, ``model.compile()``, in another module. A context's
  ``callback`` names its backend.
- ``OptimizeContext.__new__``: wrapped (once per process, see :func:`track_compile_contexts`) to
  keep a weak reference to every context made, so that finding the live ones is not a ``gc`` scan
  of every object each time (a fork server's child inherits the set: its scan would also copy
  every page of the server's heap).
- ``torch._dynamo.convert_frame.input_codes`` (weak references to every code object Dynamo
  converted) and ``torch._dynamo.eval_frame._debug_get_cache_entry_list``: the live cache entries,
  whose code names the graphs Dynamo can run now (``graphs_compiled_so_far``).
- a cache entry's ``guard_manager.global_scope["G"]`` (the compiled frame's globals) and
  ``compile_id``: the code Dynamo made for a frame loads each graph from those globals by its
  ``__compiled_fn`` name on every run, so swapping that global for a timed one (and back) times a
  graph compiled before capture started (``wrap_live_graphs``). What is stored there is the
  backend's graph inside ``torch._dynamo.disable``, as ``OutputGraph`` installs it.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from .base import AdapterProblem


def _optimize_context_type() -> type:
    try:
        from torch._dynamo.eval_frame import OptimizeContext
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(
            f"no Dynamo OptimizeContext ({e}): calls of callables compiled before the session "
            "began are not observed"
        ) from e
    return OptimizeContext  # type: ignore[no-any-return]


_made: set[weakref.ref[Any]] | None = None
"""A weak reference to every compile context made since :func:`track_compile_contexts` began (and
to those its one scan found), each dropped when its context dies; None: not begun."""


def _scan(kind: type) -> list[Any]:
    """The contexts among the objects the garbage collector tracks: about 0.1 s over 300k objects."""
    import gc

    # type(), not isinstance(): a proxy object's __class__ may run arbitrary code
    return [o for o in gc.get_objects() if issubclass(type(o), kind)]


def track_compile_contexts() -> bool:
    """Keep every compile context from now on as it is made (``OptimizeContext.__new__`` adds it to
    a weak set; one ``gc`` scan adds those made before), so :func:`live_compile_contexts` reads that
    set. Once per process (a forked child inherits it). False where the type cannot be wrapped (a
    PyTorch whose contexts take no weak reference): the lookups then scan each time."""
    global _made
    if _made is not None:
        return True
    kind = _optimize_context_type()
    made: set[weakref.ref[Any]] = set()

    def keep(obj: Any) -> None:
        made.add(weakref.ref(obj, made.discard))
    inherited = kind.__new__
    plain = inherited is object.__new__

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        obj = object.__new__(cls) if plain else inherited(cls, *args, **kwargs)
        keep(obj)
        return obj

    if not getattr(kind, "__weakrefoffset__", 0):  # no weak references to contexts
        return False
    kind.__new__ = staticmethod(__new__)  # type: ignore[assignment]
    for obj in _scan(kind):  # after the wrap: one made meanwhile (another thread) is in either
        keep(obj)
    _made = made
    return True


def live_compile_contexts() -> list[Any]:
    """Every live context ``torch.compile`` made (one per compiled callable still referenced)."""
    if _made is not None or track_compile_contexts():
        # the references copied in one step (a context made or dropped on another thread meanwhile
        # cannot change the set under an iteration), then each one's object, if it still lives
        return [o for r in list(_made or ()) if (o := r()) is not None]
    return _scan(_optimize_context_type())


def hook_compiled_calls(
    enter_for: Callable[[Any], Callable[[], Callable[[], Any]]], contexts: list[Any] | None = None
) -> Callable[[], None]:
    """Run ``enter()`` on entry to every call of a callable compiled so far, and the function it
    returns on exit (also when the call raises: ``sys.exc_info()`` then holds the exception).

    ``enter_for(context)`` makes the ``enter`` of one compile context. ``contexts``: the contexts
    to hook (default: every live one). Dynamo runs the hook only for a real call, never while
    tracing a compiled caller (it inlines the callee). Returns the function that removes every
    hook added. Raises :class:`AdapterProblem` when the contexts carry no hook list.
    """
    found = live_compile_contexts() if contexts is None else contexts
    hooked: list[tuple[list[Any], Any]] = []
    for ctx in found:
        hooks = getattr(ctx, "enter_exit_hooks", None)
        if not isinstance(hooks, list):
            if not hooked:
                raise AdapterProblem(
                    "Dynamo's compile contexts have no enter_exit_hooks list: calls of callables "
                    "compiled before the session began are not observed"
                )
            continue
        enter = enter_for(ctx)
        enter.seamscope_hook = True  # type: ignore[attr-defined]
        hooks.append(enter)
        hooked.append((hooks, enter))

    def undo() -> None:
        for hooks, enter in hooked:
            for i in range(len(hooks) - 1, -1, -1):
                if hooks[i] is enter:
                    del hooks[i]
        hooked.clear()

    return undo


def hooked_contexts() -> int:
    """How many live compile contexts carry a seamscope hook (tests: none may be left behind)."""
    return sum(
        1 for ctx in live_compile_contexts()
        if any(getattr(h, "seamscope_hook", False) for h in getattr(ctx, "enter_exit_hooks", ()))
    )


COMPILED_FN_PREFIX = "__compiled_fn"
"""Dynamo installs each compiled graph as a global of the compiled frame's module under a name
with this prefix; the code it makes for a frame calls the graph by that name."""


def graphs_compiled_so_far() -> int:
    """How many compiled graphs Dynamo can run now: the graphs called by the code of the live
    cache entries of every frame Dynamo converted.

    Graphs compiled before capture began are not wrapped, so their runs cannot be timed as
    regions; capture says how many there are. The ``__compiled_fn`` globals themselves are no
    measure: ``torch._dynamo.reset()`` drops the cache entries but leaves some of those globals
    behind, so they pile up over compiles and resets. Raises :class:`AdapterProblem` when the
    code tracker or the cache-entry list is missing.
    """
    try:
        from torch._dynamo.convert_frame import input_codes
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(f"no Dynamo cache entries to read ({e}): graphs compiled before "
                             "the session began are not counted") from e
    seen = getattr(input_codes, "seen", None)
    if not isinstance(seen, list):  # pragma: no cover - depends on torch version
        raise AdapterProblem("Dynamo's code tracker changed: graphs compiled before the session "
                             "began are not counted")
    names: set[str] = set()
    for ref in list(seen):
        code = ref()
        if code is None:
            continue
        for entry in _debug_get_cache_entry_list(code):
            _graph_names(getattr(entry, "code", None), names)
    return len(names)


def _live_entries() -> list[Any]:
    try:
        from torch._dynamo.convert_frame import input_codes
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:  # pragma: no cover - depends on torch version
        raise AdapterProblem(f"no Dynamo cache entries to read ({e})") from e
    seen = getattr(input_codes, "seen", None)
    if not isinstance(seen, list):  # pragma: no cover - depends on torch version
        raise AdapterProblem("Dynamo's code tracker changed")
    entries: list[Any] = []
    for ref in list(seen):
        code = ref()
        if code is not None:
            entries.extend(_debug_get_cache_entry_list(code))
    return entries


class LiveGraphs:
    """What :func:`wrap_live_graphs` did: how many graphs it wrapped, how many it could not (and
    why), and the function that puts the originals back."""

    def __init__(self) -> None:
        self.wrapped = 0
        self.unwrapped = 0
        self.why_not: str | None = None
        self._swapped: list[tuple[dict[str, Any], str, Any, Any]] = []

    def undo(self) -> None:
        """Put back every graph swapped, unless Dynamo dropped it meanwhile (its cache entry
        freed) or something else replaced it."""
        for scope, name, original, timed in reversed(self._swapped):
            if scope.get(name) is timed:
                scope[name] = original
        self._swapped.clear()


def wrap_live_graphs(wrap: Callable[[Callable[..., Any], str], Callable[..., Any]]) -> LiveGraphs:
    """Make ``wrap(compiled_fn, compile_id)`` see every run of the graphs Dynamo can run now
    (compiled before capture started): each one's global is swapped for ``wrap``'s result inside
    ``torch._dynamo.disable``, as Dynamo installs its own. ``LiveGraphs.undo`` swaps them back.

    A graph seamscope wrapped in an earlier session is unwrapped first (one timer per run). A
    graph that cannot be swapped (its global missing, not inside Dynamo's ``disable``) is counted
    in ``unwrapped``: its runs are not timed. Raises :class:`AdapterProblem` when the cache entries
    cannot be read at all.
    """
    from torch._dynamo import disable

    from .graphs import strip_disable

    done = LiveGraphs()
    seen: set[tuple[int, str]] = set()
    for entry in _live_entries():
        names: set[str] = set()
        _graph_names(getattr(entry, "code", None), names)
        if not names:
            continue
        scope = getattr(getattr(entry, "guard_manager", None), "global_scope", None)
        scope = scope.get("G") if isinstance(scope, dict) else None
        cid = str(getattr(entry, "compile_id", None) or "?")
        for name in sorted(names, key=_graph_number):
            key = (id(scope), name)
            if key in seen:
                continue
            seen.add(key)
            original = scope.get(name) if isinstance(scope, dict) else None
            if (not isinstance(scope, dict) or original is None
                    or getattr(original, "_torchdynamo_disable", False) is not True):
                done.unwrapped += 1
                done.why_not = done.why_not or (
                    "a cache entry's frame globals are not readable" if not isinstance(scope, dict)
                    else f"{name} is not Dynamo's disabled graph")
                continue
            graph = strip_disable(original)
            while getattr(graph, "seamscope_region", False) is True:  # an earlier session's timer
                graph = graph.__wrapped__
            timed = disable(wrap(graph, cid), reason="do not trace Dynamo-compiled graph")
            scope[name] = timed
            done._swapped.append((scope, name, original, timed))
            done.wrapped += 1
    return done


def _graph_number(name: str) -> tuple[int, str]:
    """``__compiled_fn_12_<uuid>``: in the order Dynamo compiled them."""
    part = name[len(COMPILED_FN_PREFIX):].lstrip("_").split("_", 1)[0]
    return (int(part) if part.isdigit() else 0, name)


def _graph_names(code: Any, into: set[str]) -> None:
    """The compiled graphs a piece of Dynamo's code calls (nested code objects included)."""
    if not isinstance(code, types.CodeType):
        return
    into.update(n for n in code.co_names if n.startswith(COMPILED_FN_PREFIX))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _graph_names(const, into)


def context_backend_name(ctx: Any) -> str | None:
    """The name of the backend a compile context compiles with (``"eager"``, ``"inductor"``)."""
    fn = getattr(ctx, "callback", None)
    for _ in range(16):
        inner = getattr(fn, "_torchdynamo_orig_backend", None)
        if inner is None:
            break
        fn = inner
    if fn is None or fn is False:
        return None
    name = getattr(fn, "compiler_name", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else None


if "torch._dynamo.eval_frame" in sys.modules:  # torch is loaded (a fork server's preload): keep them from now on
    try:
        track_compile_contexts()
    except AdapterProblem:  # pragma: no cover - depends on torch version
        pass
