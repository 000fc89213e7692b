"""What a session holds while it observes: its settings, the builder and the C lane it feeds, and
the one open-call slot its hooks share. ``Session`` (``session.py``) runs it; the call hooks
(``calls.py``) and the region hooks (``regions.py``) read and update it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from .. import _native
from ..ingest.compile_events import CompileEventAssembler
from ..ingest.naming import FrameNamer
from ..model.builder import DEFAULT_CALL_CAP, DEFAULT_FIRST_CALLS, LedgerBuilder
from ..model.ledger import Ledger, RunStatus
from ..model.receipt import Decision, Receipt
from .persist import DEFAULT_CHECKPOINT_EVERY


class SessionState:
    """A session's fields, and how its call hooks take the one open call."""

    def __init__(
        self,
        out: str | os.PathLike[str] | None = None,
        *,
        command: list[str] | None = None,
        input_trace_sha256: str | None = None,
        first_calls: int = DEFAULT_FIRST_CALLS,
        call_cap: int = DEFAULT_CALL_CAP,
        decision: Decision | None = None,
        cwd: str | None = None,
        write_html: bool = True,
        device: str = "auto",
        checkpoint_every: float = DEFAULT_CHECKPOINT_EVERY,
    ) -> None:
        self.out = os.fspath(out) if out is not None else None
        self.checkpoint_every = checkpoint_every
        """With ``out``: seconds between checkpoints of the receipt (0: none; docs/reliability.md)."""
        self.status: RunStatus | None = None
        """How the run ended, recorded in the receipt (set before ``stop()``)."""
        self._outer: Any = None
        """The session this one was opened inside (paused until this one stops), or None."""
        self._run: Any = None
        """While ``with`` is open: its ``lifecycle.ObservedRun`` (whose process alone writes at exit)."""
        self._host: Any = None
        """The session this one joined: the one open around it that holds its very ``out`` folder."""
        self.output: Any = None
        """With ``out``: the folder's lock and checkpoints while active (``persist.RunOutput``)."""
        self.tracks_blocks = True
        """Whether what ``nn.Module.compile`` compiles (a block's ``_call_impl``) is tracked, its
        calls the run's calls where not nested in one; False where the run observes a model's calls
        and its blocks are compiled one by one (``--calls-of``, ``--regional``)."""
        self.command = command or []
        self.input_trace_sha256 = input_trace_sha256
        self.first_calls = first_calls
        self.call_cap = call_cap
        self.decision = decision
        self.cwd = cwd or os.getcwd()
        self.write_html = write_html
        if device not in ("auto", "off"):
            raise ValueError("device is 'auto' (time calls on CUDA where the model runs there) or 'off'")
        self.device_mode = "off" if os.environ.get("SEAMSCOPE_NO_DEVICE", "") not in ("", "0") else device
        self._device_probe = False
        """Whether region runs are still checked for CUDA inputs (then the device is attached)."""
        self._device_source: Any = None
        self.trace_filter = os.environ.get("SEAMSCOPE_FULL_TRACE") != "1"
        """Ask PyTorch only for the structured-trace records capture reads (set it to False before
        ``start()``, or ``SEAMSCOPE_FULL_TRACE=1``, to have PyTorch build every record)."""
        self.clock: Callable[[], int] = time.perf_counter_ns
        self.active = False
        self._interrupted = False
        self._live: LedgerBuilder | None = None
        """The builder while active, else None: the one attribute the region wrapper reads."""
        self.native = _native.NATIVE
        """The C hot path (``_speedups``), or None: Python wrappers, same figures. Set it to None
        before ``start()`` to compare."""
        self._lane: Any = None
        """The C lane while active: calls open and close there (those of a family excepted), and
        region timers record into its open call."""
        self.warnings: list[str] = []
        self.ledger: Ledger | None = None
        self.receipt_path: str | None = None
        self.last_receipt: Receipt | None = None
        self.on_call_end: list[Callable[[Any], None]] = []
        """Called with the ``Session`` after every call it closes. Append to this list, do not
        replace it: the C lane holds this very list."""
        self._undo: list[Callable[[], None]] = []
        self._family: str | None = None
        self._depth = 0
        self._call_thread = 0
        """The thread of the call the Python path opened (``_depth`` 1)."""
        self._foreign_calls = 0
        """Calls made on another thread while one was open: run, not observed (see ``build``)."""
        self.foreign_exit: Callable[[], None] | None = None
        """Called after each such call returned (watch mode raises there what it compiled); set it
        with ``set_foreign_exit``, which tells the C lane too."""
        self.outside_graph_runs = 0
        """Graph runs while no call was open (a compiled backward excepted): calls not observed."""
        self.graphs_before = 0
        """Graphs compiled before the session began (Dynamo can run them): timed where they could be
        swapped for a timed one, but their compilations and break sites are not in the ledger."""
        self.compiled_before: set[tuple[str, int]] = set()
        """Those graphs timed, each by its compile id and graph index (``RegionEvent``'s): a call
        that ran only these made no break it could name. The id alone does not tell them from a
        graph compiled after ``torch.compiler.reset()``, which numbers compile ids from 0/0 again."""
        self.untimed_graphs: int | None = 0
        """Graphs compiled before the session began that could not be timed (None: an unknown
        number); their runs are in no region, so the calls' split into regions and islands is unknown."""
        self._slot = [True]
        """The pure-Python path's open-call slot (``_claim``): a list, as its pop is atomic."""
        self._graph_index: dict[str, int] = {}
        self._backward_kinds: dict[type, bool] = {}
        """Autograd node classes seen on region outputs: whether their backward is timed."""
        self._backward_timers: list[Any] = []
        """C's timers of compiled backwards (``_speedups.BackwardTimer``): what each counted is
        added to the builder when the ledger is built (``_take_backward``)."""
        self._compile_start: dict[str, int] = {}
        self._census: dict[str, list[dict[str, Any]]] = {}
        """compile id → the module classes its graphs traced instance by instance."""
        self._namer = FrameNamer(self.cwd)
        """Where each compilation's graphs' nodes were traced (``adapter.graph_origin``), and the
        frame each frame id was named after."""
        self._compile_options: dict[str, str] = {}
        self._backend: str | None = None
        self.builder: LedgerBuilder | None = None
        self.assembler: CompileEventAssembler | None = None

    @property
    def interrupted(self) -> bool:
        """Set by ``seamscope run``'s Ctrl-C handler. Library code can swallow the first
        KeyboardInterrupt (a ``__del__``, a weakref callback); the next call then raises it."""
        return self._interrupted

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self._interrupted = value
        self._sync_lane()

    def _sync_lane(self) -> None:
        """Whether C may open calls: only in an active session, outside a family label, not
        interrupted (the Python path raises then)."""
        if self._lane is not None:
            self._lane.ready = (
                self.active and self.builder is not None and self._family is None and not self._interrupted
            )

    @property
    def foreign_calls(self) -> int:
        """Calls made on another thread while one was open (run, not observed), on either path."""
        return self._foreign_calls + (self._lane.foreign_calls if self._lane is not None else 0)

    def set_foreign_exit(self, fn: Callable[[], None] | None) -> None:
        self.foreign_exit = fn
        if self._lane is not None and hasattr(self._lane, "foreign_exit"):
            self._lane.foreign_exit = fn

    def _claim(self) -> bool:
        """Take the one open-call slot for this thread, atomically under the GIL (a check then a
        set in Python would let two threads open calls at once)."""
        if self._lane is not None:
            return bool(self._lane.claim())
        try:
            self._slot.pop()
        except IndexError:
            return False
        return True

    def _release(self) -> None:
        if self._lane is not None:
            self._lane.release()
        elif not self._slot:
            self._slot.append(True)
