"""Any bytes, through every reader: exit 0, 1 or 2, never a traceback.

GIVEN an arbitrary byte string, or a valid receipt, seamscope trace or ``TORCH_TRACE`` log with
one value or line replaced by an arbitrary one, WHEN a command reads it (in this process, through
``seamscope.cli.main``), THEN it exits 0, 1 or 2 and raises nothing else.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from conftest import FUZZ, examples
from fakes import fake_ledger, omissible_fields, without
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt
from seamscope.cli import main
from seamscope.ingest.torch_trace import find_logs
from seamscope.render.receipt_json import ReceiptJsonRenderer
from seamscope.render.seamscope_trace import TraceRenderer

HERE = Path(__file__).parent
BASE_RECEIPT = ReceiptJsonRenderer().render(make_receipt(fake_ledger()))
BASE_TRACE = TraceRenderer().render_ledger(fake_ledger())
(LOG,) = find_logs(str(HERE / "inputs" / "torch_trace" / "limit"))
BASE_LOG = Path(LOG).read_bytes()
OMISSIBLE = omissible_fields(json.loads(BASE_RECEIPT))  # from docs/receipt.schema.json

EXITS = {0, 1, 2}

text = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["[/]", "[bold]", "\x1b[2J", "\x1b]0;T\x07", "", "\n", "cold", "steady", "0/1", "B12345678"])
ints = st.integers() | st.integers(min_value=-(2**70), max_value=2**70) | st.sampled_from([0, -1, 2**63, 2**64])
scalars = st.none() | st.booleans() | ints | st.floats() | text
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
                      max_leaves=12)


def cli(*args: str) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as e:
            assert isinstance(e.code, int), e.code
            assert "internal error" not in out.getvalue(), (args, out.getvalue())  # the CLI's backstop
            return e.code
    raise AssertionError("main returned without exiting")


def _receipt_commands(path: str, tmp: str, report: bool = False) -> None:
    """Every command that reads one receipt (``report``, the slowest, only when asked)."""
    runs = [["summary", path], ["verify", path], ["check", path, "--max-breaks", "0"], ["diff", path, path]]
    if report:
        runs.append(["report", path, "--out", os.path.join(tmp, "rep"), "--markdown", os.path.join(tmp, "s.md")])
    for args in runs:
        assert cli(*args) in EXITS, args


def _same_kind(value: Any) -> st.SearchStrategy[Any]:
    """Another value of the kind ``value`` is: what a schema-valid edit can put there."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 1])
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, str):
        return text
    if isinstance(value, list):
        return st.just([])
    return st.just(value)


def _mutate(raw: Any, data: st.DataObject) -> Any:
    """``raw`` with one value somewhere inside replaced: by an arbitrary JSON value, or (the edit
    that passes the schema check and reaches the analyses) by another of its kind."""
    if data.draw(st.booleans()):
        leaves: list[tuple[Any, Any]] = []
        stack = [raw]
        while stack:
            node = stack.pop()
            kids = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
            for k, v in kids:
                leaves.append((node, k))
                stack.append(v)
        for _ in range(data.draw(st.integers(1, 3))):
            if leaves:
                node, k = data.draw(st.sampled_from(leaves))
                node[k] = data.draw(_same_kind(node[k]))
        return raw
    node, depth = raw, data.draw(st.integers(0, 6))
    for _ in range(depth):
        kids = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        if not kids:
            break
        key, child = data.draw(st.sampled_from(kids))
        if not isinstance(child, (dict, list)) or data.draw(st.booleans()):
            node[key] = data.draw(values)
            return raw
        node = child
    if isinstance(node, dict) and node:
        node[data.draw(st.sampled_from(sorted(node)))] = data.draw(values)
    return raw


# ``make fuzz`` draws its profile's 500; ``make test`` few enough to stay quick
_fuzz = settings(max_examples=500 if FUZZ else examples(30), suppress_health_check=[HealthCheck.too_slow])
_fuzz_slow = settings(max_examples=500 if FUZZ else examples(15), suppress_health_check=[HealthCheck.too_slow])


@_fuzz
@given(st.binary(max_size=400))
def test_any_bytes_as_a_receipt(blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "receipt.json")
        Path(path).write_bytes(blob)
        _receipt_commands(path, tmp, report=True)
        assert cli("merge", tmp, "--out", os.path.join(tmp, "m.json")) in EXITS


@_fuzz_slow
@given(st.data())
def test_a_receipt_with_any_value_replaced(data: st.DataObject) -> None:
    raw = _mutate(json.loads(BASE_RECEIPT), data)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "receipt.json")
        Path(path).write_text(json.dumps(raw))
        _receipt_commands(path, tmp, report=True)


@_fuzz_slow
@given(st.lists(st.sampled_from(OMISSIBLE), min_size=1, max_size=12))
def test_a_receipt_with_any_optional_fields_left_out(fields: list) -> None:
    """Schema-valid receipts (the schema lets these fields be left out): every reader reads one.
    A field that held its default reads as it did; one that did not makes a different receipt,
    which the gates may refuse (its hashes), never crash on."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "receipt.json")
        Path(path).write_text(json.dumps(without(json.loads(BASE_RECEIPT), [p for p, _ in fields])))
        _receipt_commands(path, tmp, report=True)
        if all(default for _, default in fields):
            assert cli("verify", path) == 0 and cli("check", path, "--max-breaks", "9") == 0


@_fuzz_slow
@given(st.data(), st.binary(max_size=300))
def test_a_trace_or_a_log_with_any_line_replaced(data: st.DataObject, blob: bytes) -> None:
    for base, name in ((BASE_TRACE, "t.seamscope-trace.jsonl"), (BASE_LOG, "dedicated_log_torch_trace_x.log")):
        lines = base.splitlines(keepends=True)
        at = data.draw(st.integers(0, len(lines) - 1))
        if data.draw(st.booleans()):
            lines[at] = blob + b"\n"
        else:
            try:
                head, _, rec = lines[at].partition(b"{")
                mutated = _mutate(json.loads(b"{" + rec), data)
                lines[at] = head + json.dumps(mutated).encode() + b"\n"
            except ValueError:
                lines[at] = blob
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, name)
            Path(path).write_bytes(b"".join(lines))
            for strict in ([], ["--strict"]):
                assert cli("import", path, "--out", os.path.join(tmp, "o"), *strict) in EXITS
            # what an import wrote is a receipt like any other
            written = os.path.join(tmp, "o", "receipt.json")
            if os.path.exists(written):
                _receipt_commands(written, tmp)


@_fuzz
@given(st.binary(max_size=400))
def test_any_bytes_as_a_trace_or_a_log(blob: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("t.jsonl", "dedicated_log_torch_trace_x.log"):
            path = os.path.join(tmp, name)
            Path(path).write_bytes(blob)
            assert cli("import", path, "--out", os.path.join(tmp, "o")) in EXITS
        assert cli("import", tmp, "--out", os.path.join(tmp, "o2")) in EXITS
