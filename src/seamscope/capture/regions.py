"""Capture's region hooks: every run of every compiled graph is a timed region.

Every graph any backend compiles is wrapped (``adapter.wrap_compiled_graphs``); each run of it is
recorded into the open call with the tensors and bytes it hands back (seam traffic, in the calls
kept in detail), by C (``_speedups.RegionTimer``) or by the Python ``region`` below. A run with
no call open counts as a run outside any call; a compiled backward is timed when autograd runs it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..model.builder import LedgerBuilder
from ..model.spans import REGION
from . import adapter
from .state import SessionState


class RegionHooks(SessionState):
    # --- hook 2: every run of every compiled graph is a region -----------------------------------

    def _install_graphs(self) -> Callable[[], None]:
        return adapter.wrap_compiled_graphs(self._wrap_graph, self._read_graph)

    def _read_graph(self, gm: Any, compile_id: str | None) -> None:
        """The module classes the graph traced instance by instance (``Compilation.modules``), and
        the frames and module its nodes were traced under (``Compilation.user_frame``)."""
        if compile_id is not None:
            cid = compile_id.split("_", 1)[0]
            found = adapter.module_census(gm)
            if found:
                self._census.setdefault(cid, []).extend(found)
            origin = adapter.graph_origin(gm)
            if origin is not None:
                self._namer.add_origin(cid, origin)

    def _install_live_graphs(self) -> Callable[[], None]:
        """Time the graphs Dynamo compiled before the session began (an earlier notebook cell, an
        earlier session, a warm-up): each is swapped for a timed one, and back at stop. Those
        that cannot be swapped are counted (``untimed_graphs``), and the headline says that the
        split of the calls' time between regions and islands is then unknown."""
        try:
            def wrap(fn: Callable[..., Any], cid: str) -> Callable[..., Any]:
                timed = self._wrap_graph(fn, cid, True)
                # by identity: after torch.compiler.reset() Dynamo numbers compile ids from 0/0
                # again, and a graph compiled in the session can reuse this one's id
                self.compiled_before.add((cid, self._graph_index[cid]))
                return timed

            live = adapter.wrap_live_graphs(wrap)
        except adapter.AdapterProblem as e:
            if adapter.live_compile_contexts():
                self.untimed_graphs = None  # some may exist: how many is unknown
                self.warnings.append(
                    f"{e}: graphs compiled before the session began are not counted, nor timed; the split "
                    "of calls that run them between compiled regions and eager islands is unknown")
            return _nothing
        self.graphs_before = live.wrapped + live.unwrapped
        self.untimed_graphs = live.unwrapped
        if live.wrapped:
            self.warnings.append(
                f"Dynamo holds {self.graphs_before} graph(s) compiled before the session began: "
                + ("their runs are timed as regions" if not live.unwrapped
                   else f"{live.wrapped} are timed as regions")
                + ", but their compilations and break sites are not in this receipt; call "
                "torch.compiler.reset() before the session to have them recompiled and named")
        if live.unwrapped:
            self.warnings.append(
                f"{'Dynamo holds ' if not live.wrapped else ''}{live.unwrapped} graph(s) compiled before the "
                f"session began could not be timed ({live.why_not}): the split between compiled regions "
                "and eager islands of the calls that run them is unknown; call torch.compiler.reset() "
                "before the session to have them recompiled and timed")
        return live.undo

    def _wrap_graph(
        self, compiled_fn: Callable[..., Any], compile_id: str | None, autograd: bool = True
    ) -> Callable[..., Any]:
        import torch

        cid = compile_id or "?"
        gi = self._graph_index.get(cid, -1) + 1
        self._graph_index[cid] = gi
        session = self
        clock = self.clock
        Tensor = torch.Tensor
        is_grad_enabled = torch.is_grad_enabled
        # a compiled backward to time: only from a backend that returns more than the FX graph
        # (aot_eager, inductor), for a graph compiled with autograd (checking costs ~1 µs a run)
        check_backward = autograd and adapter.may_have_compiled_backward(compiled_fn)

        kinds = self._backward_kinds

        def node_backward(node: Any) -> bool | None:
            """C's ``after``: the first output's autograd node, found by C. Returns whether the
            node type's backward is timed; C then labels the next nodes of that type itself."""
            if kinds.get(type(node)) is False:
                return False
            return session._hook_backward(node, cid) if is_grad_enabled() else None

        def find_backward(out: Any) -> None:
            if is_grad_enabled():
                for t in out if isinstance(out, (list, tuple)) else (out,):
                    node = getattr(t, "grad_fn", None)
                    if node is not None:
                        if kinds.get(type(node)) is not False:
                            session._hook_backward(node, cid)
                        break

        def region(*args: Any, **kwargs: Any) -> Any:
            b = session._live
            if b is None:
                return compiled_fn(*args, **kwargs)
            if session._device_probe:
                session._probe_device(b, args)
            dc = b.device_call
            if dc is not None and session._call_thread == threading.get_ident():
                entry = b.device.enter(dc, clock())  # timed on the device: events at entry and exit
            else:
                dc = None
            t0 = clock()
            out = compiled_fn(*args, **kwargs)
            t1 = clock()
            if dc is not None:
                b.device.exit(dc, cid, entry, t1)
            if check_backward:
                find_backward(out)
            spans = b.open_spans  # region_run, inlined: this is the per-crossing hot path
            if spans is None or (session._depth and session._call_thread != threading.get_ident()):
                if spans is None:
                    session.outside_graph_runs += 1
                b.outside_region(cid, "forward", t1 - t0, None)  # no call open, or another thread's
            elif b.detailed:
                # Seam traffic (what this region hands back to eager code), sampled: measured
                # in the calls kept in full detail, where it is reported.
                n = nbytes = 0
                if isinstance(out, (list, tuple)):
                    for t in out:
                        if isinstance(t, Tensor):
                            n += 1
                            nbytes += t.nbytes
                elif isinstance(out, Tensor):
                    n, nbytes = 1, out.nbytes
                spans.append((REGION, t0, t1, cid, gi, n, nbytes, clock()))  # model/spans.py's layout
            else:
                spans.append((REGION, t0, t1, cid, gi, None, None, clock()))
            return out

        if self.native is not None and self._lane is not None:
            # Steady calls not kept in detail: the same span, recorded by C (``_speedups.c``);
            # every other case goes to ``region`` above.
            timer = self.native.RegionTimer(
                compiled_fn, self._lane, cid, gi, region, node_backward if check_backward else None
            )
            # Dynamo's disable() wrapper asks every run for ``__name__``: a missing one costs a
            # raised and caught AttributeError per region crossing
            timer.__name__ = getattr(compiled_fn, "__name__", "compiled_graph")
            timer.__qualname__ = getattr(compiled_fn, "__qualname__", timer.__name__)
            timer.seamscope_region = True  # a later session times the graph inside, not this
            return timer  # type: ignore[no-any-return]
        region.seamscope_region = True  # type: ignore[attr-defined]
        region.__wrapped__ = compiled_fn  # type: ignore[attr-defined]
        return region

    def _probe_device(self, b: LedgerBuilder, args: Any) -> None:
        """Attach the CUDA device source once a compiled graph runs on CUDA inputs (a model on
        CPU in a CUDA process keeps the CPU path); stop looking after the first calls."""
        from .device import cuda_device, holds_cuda_tensor

        if holds_cuda_tensor(args):
            import torch

            self._device_probe = False
            source = cuda_device(torch)
            if source is not None:
                self._device_source = source
                b.attach_device(source)
        elif b.call_count >= self.first_calls:
            self._device_probe = False

    def _foreign_run(self, compile_id: str, duration_ns: int) -> None:
        """C's report of a graph run on another thread than the open call's."""
        b = self._live
        if b is not None:
            b.outside_region(compile_id, "forward", duration_ns, None)

    def _hook_backward(self, node: Any, cid: str) -> bool:
        """Have the compiled backward of this region timed when autograd runs it (outside the
        call), attributed to the call open now; whether it is. The backward of the graph's
        ``CompiledFunction`` is swapped once for a timed one (``_time_backward``); each forward
        then only labels its node with the call (a per-node hook costs about 12 µs a call to
        register). In a steady call C opened, C's region timer labels the node itself."""
        kind = type(node)
        timed = self._backward_kinds.get(kind)
        if timed is None:
            timed = self._backward_kinds[kind] = self._time_backward(node, cid)
        if timed:
            b = self.builder
            node.seamscope_call = b.current_call_index if b is not None else None
        return timed

    def _time_backward(self, node: Any, cid: str) -> bool:
        if "CompiledFunction" not in type(node).__name__ and "CompiledFunction" not in node.name():
            return False
        session = self
        clock = self.clock
        timer_type = getattr(self.native, "BackwardTimer", None) if self._lane is not None else None

        def sink(compile_id: str, ns: int, call: int | None) -> bool:
            """C's timer's first runs, listed; False once the list is full: C then sums them, and
            C's region timers stop labelling nodes with their call (no run is listed any more)."""
            b = session._live
            if b is None or b.outside_region(compile_id, "backward", ns, call):
                return True
            if session._lane is not None:
                session._lane.label_nodes = False
            return False

        def wrap(backward: Callable[..., Any]) -> Callable[..., Any]:
            if timer_type is not None:  # C: no Python frame per backward once the list is full
                timer = timer_type(backward, cid, sink)
                session._backward_timers.append(timer)
                return timer  # type: ignore[no-any-return]

            def timed_backward(ctx: Any, *grads: Any) -> Any:
                t0 = clock()
                out = backward(ctx, *grads)
                b = session._live
                if b is not None:
                    b.outside_region(cid, "backward", clock() - t0, getattr(ctx, "seamscope_call", None))
                return out

            return timed_backward

        undo = adapter.wrap_backward_of(node, wrap)
        if undo is None:
            return False
        self._undo.append(undo)
        return True

    def _take_backward(self) -> None:
        """Add what C's backward timers counted, past the builder's list of runs outside calls."""
        b = self.builder
        if b is not None:
            for timer in self._backward_timers:
                runs, ns = timer.take()
                if runs:
                    b.count_outside(timer.compile_id, runs, ns)


def _nothing() -> None:
    """Nothing to undo."""
