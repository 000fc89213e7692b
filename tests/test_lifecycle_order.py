"""One run lifecycle for ``seamscope.session()``, ``seamscope run`` and ``%%seamscope``: a failure
planted at each step (prepare, start, begin, the body, the write) gives each of them the same order
of operations, the folder unlocked, and a write failure naming the folder as the user gave it.
Torch-free: the session's start, stop and write are recorders (the real ones are exercised by
``test_lifecycle_run.py``); the lock is the real one."""

from __future__ import annotations

import os
import sys
import types

import pytest

from seamscope.capture import persist
from seamscope.capture.persist import LOCK_NAME, RunOutput
from seamscope.capture.session import Session
from seamscope.errors import UnusableInput

STEPS = ("prepare", "start", "begin", "body", "write")
BEGUN = ["prepare", "start", "begin"]
ORDER = {
    "prepare": ["prepare"],
    "start": ["prepare", "start", "stop", "close"],  # a session that did not start writes nothing
    "begin": [*BEGUN, "stop", "close"],
    "body": [*BEGUN, "stop", "write", "close"],
    "write": [*BEGUN, "stop", "write", "close"],
    None: [*BEGUN, "stop", "write", "close"],
}
RUN_ORDER = {**ORDER, "begin": [*BEGUN, "stop", "write", "close"]}
"""``run`` records a marker it could not write in the receipt it writes at the end (exit 2)."""


class Planted(Exception):
    pass


@pytest.fixture
def steps(monkeypatch, tmp_path):
    """The operations in the order they happen; ``steps.fail`` names the one that fails."""
    done: list[str] = []
    rec = types.SimpleNamespace(done=done, fail=None)
    real_prepare, real_close = RunOutput.prepare, RunOutput.close

    def prepare(self):
        done.append("prepare")
        if rec.fail == "prepare":
            raise UnusableInput(f"{self.shown}: planted")
        real_prepare(self)

    def begin(self):  # the real one writes the marker from a started session's ledger
        done.append("begin")
        if rec.fail == "begin":
            raise UnusableInput(f"{self.shown}: could not write receipt.json (planted)")

    def close(self):
        if self.lock.held:
            done.append("close")
        real_close(self)

    def start(self):
        done.append("start")
        if rec.fail == "start":
            raise Planted("start")
        self.builder = object()

    def stop(self):
        done.append("stop")

    def write(self, out):
        done.append("write")
        assert os.path.isabs(out)  # the folder resolved before the user's code ran
        if rec.fail == "write":
            raise UnusableInput(f"{out}: could not write receipt.json (No space left on device)")
        return os.path.join(out, "receipt.json")

    monkeypatch.setattr(RunOutput, "prepare", prepare)
    monkeypatch.setattr(RunOutput, "begin", begin)
    monkeypatch.setattr(RunOutput, "close", close)
    monkeypatch.setattr(Session, "start", start)
    monkeypatch.setattr(Session, "stop", stop)
    monkeypatch.setattr(Session, "write", write)
    monkeypatch.chdir(tmp_path)
    yield rec
    held = set(persist._HELD)
    persist._HELD.clear()  # a lock leaked here fails this test only
    assert not (tmp_path / "o" / LOCK_NAME).exists()
    assert not held


def _raised_as_expected(e: BaseException, step: str | None) -> None:
    if step == "write":
        assert isinstance(e, UnusableInput) and str(e).startswith("o: could not write receipt.json"), e
    elif step == "start":
        assert isinstance(e, Planted)
    elif step == "body":
        assert isinstance(e, ValueError)
        assert not any("could not be written" in n for n in getattr(e, "__notes__", []))
    else:
        assert isinstance(e, UnusableInput) and str(e).startswith("o: "), e


@pytest.mark.parametrize("step", [*STEPS, None])
def test_a_session_ends_in_the_one_order_whatever_fails(steps, step):
    steps.fail = step
    s = Session("o", checkpoint_every=0)
    try:
        with s:
            assert s.output is not None and s.output.lock.held
            if step == "body":
                raise ValueError("the user's")
    except Exception as e:
        _raised_as_expected(e, step)
    else:
        assert step is None
    assert steps.done == ORDER[step]
    assert s.output is None
    if "write" in steps.done:
        assert s.status is not None and s.status.state == ("raised" if step == "body" else "completed")


def test_a_session_whose_body_raised_keeps_its_exception_when_the_receipt_cannot_be_written(steps, capsys):
    steps.fail = "write"
    with pytest.raises(ValueError, match="the user's") as e:
        with Session("o", checkpoint_every=0):
            raise ValueError("the user's")
    assert steps.done == ORDER["write"]
    note = "seamscope: the receipt could not be written: o: could not write receipt.json"
    if sys.version_info >= (3, 11):  # add_note: the note rides on the user's exception
        assert [n for n in getattr(e.value, "__notes__", []) if n.startswith(note)], "the exception carries no note"
    assert note in capsys.readouterr().err


@pytest.mark.parametrize("step", [*STEPS, None])
def test_run_ends_in_the_one_order_whatever_fails(steps, step, tmp_path, capsys):
    from seamscope.capture.runner import run_target

    script = tmp_path / "train.py"
    script.write_text("raise ValueError('the script\\'s')\n" if step == "body" else "x = 1\n")
    steps.fail = step
    try:
        res = run_target(str(script), [], out="o", checkpoint_every=0)
    except Exception as e:
        _raised_as_expected(e, step)
        assert step in ("prepare", "begin", "write")
        if step == "begin":  # seamscope's own failure: recorded in the receipt written at the end
            assert "write" in steps.done
    else:
        assert step in ("start", "body", None)
        assert res.exit_code == (0 if step is None else 1)
        assert res.receipt_path == (None if step == "start" else str(tmp_path / "o" / "receipt.json"))
        assert res.session.status.state == ("completed" if step is None else "raised")
    assert steps.done == RUN_ORDER[step]


class _Shell:
    def __init__(self, step: str | None) -> None:
        self.step = step
        self.user_ns: dict[str, object] = {}

    def run_cell(self, cell: str) -> object:
        if self.step == "body":  # what IPython does not catch (a KeyboardInterrupt between cells)
            raise ValueError("the cell's")
        return types.SimpleNamespace(error_in_exec=None, error_before_exec=None)


@pytest.mark.parametrize("step", [*STEPS, None])
def test_the_cell_magic_ends_in_the_one_order_whatever_fails(steps, step):
    pytest.importorskip("IPython")
    from IPython.core.error import UsageError

    from seamscope.magics import run_cell

    steps.fail = step
    try:
        s = run_cell(_Shell(step), "--out o --quiet --checkpoint-every 0", "x = 1")
    except UsageError as e:
        assert step == "prepare" and str(e).startswith("o: planted")
    except Exception as e:
        _raised_as_expected(e, step)
    else:
        assert step is None and s.status.state == "completed"
    assert steps.done == ORDER[step]
