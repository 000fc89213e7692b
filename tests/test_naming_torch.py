"""Real compilations whose frame is a generic wrapper are named after the user's frame.

GIVEN functions and modules compiled the ways users and libraries wrap them (a
``functools.wraps`` decorator, a closure ``inner``, ``torch.compile`` of a ``torch.nn.Sequential``,
which PyTorch runs through its own ``wrap_inline`` ``inner``, and a library wrapper module whose
``forward`` calls the user's module), WHEN they run in a session, THEN each compilation keeps
Dynamo's code name (``frame_name``, which ids and hashes use) and carries the user's frame
(``user_frame``), which the report names; a user's own function called ``wrapper`` keeps its name.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys

import pytest

torch = pytest.importorskip("torch")

from rich.console import Console  # noqa: E402

from seamscope.capture.session import session  # noqa: E402
from seamscope.render.terminal import TerminalRenderer  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]

LIBRARY = '''
import torch


class Wrapper(torch.nn.Module):
    """A library's wrapper module (DDP-, Lightning- or accelerate-like)."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)
'''


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)

    return wrapper


def timed(fn):
    def inner(*a, **k):
        return fn(*a, **k)

    return inner


@logged
def step(x):
    return torch.sin(x) * 2


def double(x):
    return x.cos() + x


def wrapper(x):  # the user's own function of a wrapper's name
    return x.tanh() - 1


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.lin(x))


@pytest.fixture
def library(tmp_path, monkeypatch):
    root = tmp_path / "site-packages"
    root.mkdir()
    (root / "wraplib_for_naming.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(root))
    yield importlib.import_module("wraplib_for_naming")
    sys.modules.pop("wraplib_for_naming", None)


def _line(fn) -> int:
    return inspect.unwrap(fn).__code__.co_firstlineno


def test_wrapped_compilations_carry_the_users_frame_and_keep_their_code_name(library) -> None:
    x = torch.randn(4, 8)
    with session() as s:
        fns = [
            torch.compile(step, backend="eager"),
            torch.compile(timed(double), backend="eager"),
            torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), backend="eager"),
            torch.compile(library.Wrapper(Block()), backend="eager"),
            torch.compile(wrapper, backend="eager"),
        ]
        for _ in range(2):
            for f in fns:
                f(x)
    comps = s.ledger.compilations
    assert [c.frame_name for c in comps] == ["wrapper", "inner", "inner", "forward", "wrapper"]
    assert comps[2].file == "site-packages/torch/_dynamo/external_utils.py"
    assert comps[3].file == "site-packages/wraplib_for_naming.py"
    named = [c.user_frame for c in comps]
    here = "tests/test_naming_torch.py"
    assert [(u.function, u.file.endswith(here), u.line) for u in named[:2] if u] == [
        ("step", True, _line(step)), ("double", True, _line(double))]
    assert named[2] is not None and named[2].function == "Sequential.forward"
    assert named[2].file == "site-packages/torch/nn/modules/container.py"
    assert named[3] is not None and (named[3].function, named[3].line) == ("Block.forward", _line(Block.forward))
    assert named[4] is None
    text = TerminalRenderer(Console(width=200)).render(s.receipt())
    for shown in ("(step)", "(double)", "(Sequential.forward)", "(Block.forward)"):
        assert shown in text


def test_torchs_own_module_whose_nodes_carry_no_stack_is_named_after_the_module() -> None:
    """nn.TransformerEncoder's eval fast path: PyTorch leaves its own frames out of the nodes' stacks,
    so only F._canonical_mask's few nodes name a frame; the compilation is named after the module
    every node sits in, not after that helper."""
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    with session() as s, torch.no_grad():
        torch.compile(encoder, backend="eager")(torch.randn(1, 4, 8), src_key_padding_mask=torch.zeros(1, 4).bool())
    (comp,) = s.ledger.compilations
    assert comp.user_frame is not None and comp.user_frame.function == "TransformerEncoder.forward"
    assert comp.user_frame.file == "site-packages/torch/nn/modules/transformer.py"
