from collections.abc import Callable
from typing import Any

SPAN_LAYOUT: dict[str, int]

def clock_ns() -> int: ...
def set_ticks(on: bool, /) -> bool: ...
def nothing() -> None: ...

class Lane:
    spans: list[tuple[Any, ...]] | None
    plans: dict[tuple[str, ...], PlanSums] | None
    slow_end: Callable[[list[tuple[Any, ...]], int, int, str | None], object] | None
    start: int
    budget: int
    fast_calls: int
    call_base: int
    label_nodes: bool
    keep_detail: bool
    tensor_type: type | None
    ready: bool
    owner: object
    callbacks: list[Callable[[Any], object]] | None
    error_text: Callable[[BaseException], str] | None
    foreign_calls: int
    outside_run: Callable[[str, int], object] | None
    @property
    def detail(self) -> bool: ...
    @property
    def open(self) -> bool: ...
    @property
    def here(self) -> bool: ...
    def enter(self) -> bool: ...
    def exit(self, error: str | None, /) -> object: ...
    def adopt(self) -> list[tuple[Any, ...]] | None: ...
    def claim(self) -> bool: ...
    def release(self) -> None: ...

class RegionTimer:
    __wrapped__: Callable[..., Any]
    compile_id: str
    def __init__(
        self,
        fn: Callable[..., Any],
        lane: Lane,
        compile_id: str,
        graph_index: int,
        slow: Callable[..., Any],
        after: Callable[[Any], object] | None,
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class CallTracker:
    __wrapped__: Callable[..., Any]
    def __init__(self, inner: Callable[..., Any], lane: Lane, slow: Callable[..., Any]) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class PlanSums:
    calls: int
    def __init__(self, kinds: str) -> None: ...
    def add(self, spans: list[tuple[Any, ...]], start: int, end: int, /) -> bool: ...
    def take(self) -> tuple[int, int, int, int, list[int], list[int], list[int], list[int]]: ...

class BackwardTimer:
    __wrapped__: Callable[..., Any]
    compile_id: str
    def __init__(
        self, backward: Callable[..., Any], compile_id: str, sink: Callable[[str, int, int | None], bool]
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    @property
    def keeping(self) -> bool: ...
    def take(self) -> tuple[int, int]: ...

class ContextEnter:
    __wrapped__: Callable[[], Callable[[], object]]
    def __init__(
        self, lane: Lane, slow: Callable[[], Callable[[], object]], nothing: Callable[[], object]
    ) -> None: ...
    def __call__(self) -> Callable[[], object]: ...
