"""Readers and printers against what real files and terminals hold.

GIVEN a receipt that leaves out any field the schema gives a default, an empty list the schema
allows, a FIFO, a device or an oversized file in place of a receipt or a log, names with
escape sequences, bidi overrides and NUL, rank numbers of thirty digits, an integer of 5,000
digits, an output encoding that cannot hold the text, WHEN every reading command reads it, THEN
it reads the default, renders, or says in one line why not (exit 2), and never crashes (no
traceback, never exit 1 for a crash of its own).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shutil
import sys
from pathlib import Path

import msgspec
import pytest
from fakes import (
    fake_ledger,
    fake_probe,
    omissible_fields,
    plant,
    shape_policy,
    shape_study,
    without,
)

from seamscope.analyze.receipt import make_receipt, rehash
from seamscope.cli import main
from seamscope.render.html import HtmlRenderer
from seamscope.render.receipt_json import ReceiptJsonRenderer, write_receipt_files

HERE = Path(__file__).parent
LIMIT_LOGS = HERE / "inputs" / "torch_trace" / "limit"
RAW_CONTROLS = ("\x00", "\x1b", "\x07", "\x9b", "\u202a", "\u202e", "\u2066", "\u2069")


def cli(*args: str, stdout: io.TextIOBase | None = None) -> tuple[int, str]:
    """``seamscope ARGS`` in this process: (exit code, stdout and stderr)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(stdout or out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as e:
            assert isinstance(e.code, int), e.code
            text = out.getvalue()
            assert "internal error" not in text and "Traceback" not in text, text
            return e.code, text
    raise AssertionError("main returned without exiting")


def full_receipt_raw() -> dict:
    """A receipt with every optional section (findings, a probe, a shape study, trials) as raw JSON."""
    r = make_receipt(fake_ledger())
    r = rehash(msgspec.structs.replace(r, probe=fake_probe(), shapes=shape_study(shape_policy("auto", "auto"))))
    raw = json.loads(ReceiptJsonRenderer().render(r))
    assert raw["findings"] is not None
    return raw


BASE = full_receipt_raw()
FIELDS = omissible_fields(BASE)


def _write(tmp: Path, raw: dict, name: str = "r.json") -> str:
    path = tmp / name
    path.write_text(json.dumps(raw))
    return str(path)


# --- every field the schema lets a receipt leave out ----------------------------------------------


def test_the_schema_lets_a_receipt_leave_out_many_fields() -> None:
    paths = {p for p, _ in FIELDS}
    for want in (("ledger", "run", "has_runtime"), ("ledger", "calls", 0, "family"), ("ledger", "calls", 0, "error"),
                 ("ledger", "compilations", 0, "guard_count"), ("summary", "phases", 0, "median_ns")):
        assert want in paths, want
    assert sum(default for _, default in FIELDS) >= 100


def test_a_field_left_out_reads_as_its_default_in_every_command(tmp_path: Path) -> None:
    """The file means what it would with the field written as its default: the gates pass it
    (verify 0, check 0, diff 0), as they pass the receipt it came from."""
    defaults = [p for p, default in FIELDS if default]
    path = _write(tmp_path, without(BASE, defaults), "all.json")
    for args in (["verify", path], ["check", path, "--max-breaks", "99", "--max-recompiles", "99"],
                 ["diff", path, path], ["summary", path]):
        code, out = cli(*args)
        assert code == 0, (args, out)
    for p in defaults:  # each on its own too (check: the schema check, the oracle, the gate)
        one = _write(tmp_path, without(BASE, [p]))
        code, out = cli("check", one, "--max-breaks", "99", "--max-recompiles", "99")
        assert code == 0, (p, out)


@pytest.mark.parametrize("name", ["headline-split", "every-list"])
def test_an_empty_list_the_schema_allows_renders(tmp_path: Path, name: str) -> None:
    raw = json.loads(json.dumps(BASE))
    raw["findings"]["headline"]["split"] = []
    path = _write(tmp_path, raw)
    code, out = cli("report", path, "--out", str(tmp_path / "rep"), "--markdown", str(tmp_path / "s.md"))
    assert code == 0, out
    assert "Overview" in (tmp_path / "rep" / "index.html").read_text()
    if name == "every-list":  # each non-empty list emptied in turn: a reader says why, or renders
        lists: list[tuple] = []
        stack: list[tuple[object, tuple]] = [(BASE, ())]
        while stack:
            v, p = stack.pop()
            if isinstance(v, dict):
                stack += [(x, (*p, k)) for k, x in v.items()]
            elif isinstance(v, list) and v:
                lists.append(p)
                stack.append((v[0], (*p, 0)))
        for p in lists:
            raw = json.loads(json.dumps(BASE))
            node = raw
            for k in p[:-1]:
                node = node[k]
            node[p[-1]] = []
            path = _write(tmp_path, raw)
            for args in (["summary", path], ["report", path, "--out", str(tmp_path / "rep")]):
                assert cli(*args)[0] in (0, 1, 2), (p, args)


def test_a_crash_of_seamscope_s_own_is_one_line_and_never_exit_1(tmp_path: Path, monkeypatch) -> None:
    """The backstop: an unexpected exception is not "over budget" (exit 1) but one line, exit 2."""
    from seamscope.gates import trusted

    monkeypatch.delenv("SEAMSCOPE_TRACEBACK", raising=False)  # the suite sets it (conftest)

    def broken(*_a, **_k):
        raise KeyError("has_runtime")

    monkeypatch.setattr(trusted, "check_receipt", broken)
    path = _write(tmp_path, BASE)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), pytest.raises(SystemExit) as e:
        main(["check", path, "--max-breaks", "9"])
    assert e.value.code == 2
    lines = out.getvalue().strip().splitlines()
    assert lines == ["seamscope: internal error: KeyError: 'has_runtime' (a seamscope bug; SEAMSCOPE_TRACEBACK=1 "
                     "shows the traceback)"], lines


def test_an_integer_of_thousands_of_digits_is_named_by_its_field(tmp_path: Path) -> None:
    text = json.dumps(BASE).replace('"call_count": ', '"call_count": ' + "9" * 5000 + "0 * ", 1)
    text = text.replace("0 * ", "", 1)
    path = tmp_path / "r.json"
    path.write_text(text)
    code, out = cli("summary", str(path))
    assert code == 2 and "integer beyond 64 bits at $.summary.call_count" in out, out


# --- bounded readers -------------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_fifo_a_device_and_an_oversized_file_are_one_line_each(tmp_path: Path) -> None:
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse: 300 MiB that take no disk
    cases = ((str(fifo), "a FIFO"), ("/dev/zero", "a character device"), ("/dev/null", "a character device"),
             (str(big), "larger than the 256 MiB"))
    before = 0
    for attempt in (1, 2):  # the first pass imports what the commands import; the second measures
        if attempt == 2:
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for path, says in cases[:1] if attempt == 1 else cases:
            for args in (["summary", path], ["verify", path], ["check", path], ["diff", path, path],
                         ["report", path, "--out", str(tmp_path / "rep")],
                         ["import", path, "--out", str(tmp_path / "o")]):
                code, out = cli(*args)
                assert code == 2, (args, out)
                if args[0] != "import" or path != str(big):
                    assert says in out and len(out.strip().splitlines()) == 1, (args, out)
    # KiB: the 300 MiB file was never read whole, nor /dev/zero read at all (import reads a log by
    # the MiB, and holds at most the 64 MiB of an unfinished line, twice while it grows)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 << 10


@pytest.mark.timeout(120)
def test_a_log_that_is_one_endless_line_is_refused(tmp_path: Path, monkeypatch) -> None:
    from seamscope.ingest import limits, scan, seamscope_trace

    for mod in (limits, scan, seamscope_trace):  # 64 MiB as 1 MiB: the same code, 64 times cheaper
        monkeypatch.setattr(mod, "MAX_LINE_BYTES", 1 << 20)
    for name in ("dedicated_log_torch_trace_x.log", "t.seamscope-trace.jsonl"):
        path = tmp_path / name
        with open(path, "wb") as f:
            f.truncate(3 << 20)  # no newline in it: a copy of /dev/zero
        code, out = cli("import", str(path), "--out", str(tmp_path / "o"))
        assert code == 2 and "line 1 is longer than 1 MiB" in out, out
        path.unlink()


# --- every printed name escaped --------------------------------------------------------------------


def test_import_prints_log_names_as_text(tmp_path: Path) -> None:
    (log,) = LIMIT_LOGS.glob("*.log")
    evil = tmp_path / "dedicated_log_torch_trace_evil\x1b]0;PWNED\x07.log"
    shutil.copy(log, evil)
    code, out = cli("import", str(evil), "--out", str(tmp_path / "o"))
    assert code == 0 and "note: " in out and "\\x1b]0;PWNED\\x07" in out, out
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(log, folder / log.name)
    (folder / "dedicated_log_torch_trace_\x1b[2J\u202eempty.log").write_text("not a record\n")
    code, out = cli("import", str(folder), "--out", str(tmp_path / "o2"))
    assert code == 0 and "skipped" in out and "\\x1b[2J\\u202eempty" in out, out
    for ch in RAW_CONTROLS:
        assert ch not in out


def test_index_html_shows_control_characters_and_bidi_overrides_as_text() -> None:
    hostile = "\x1b]0;T\x07 \u202e \x00 \x9b31m \u2066x\u2069 \u202a"
    led = plant(fake_ledger(), hostile, "m" + hostile + ".py")
    led = msgspec.structs.replace(led, compilations=[msgspec.structs.replace(c, frame_name="f" + hostile)
                                                     for c in led.compilations])
    html = HtmlRenderer(source_root="/nonexistent").render(make_receipt(led))
    for ch in RAW_CONTROLS:
        assert ch not in html, repr(ch)
    assert "\\x1b]0;T\\x07 \\u202e \\x00 \\x9b31m" in html


# --- ranks taken from names -----------------------------------------------------------------------


def test_an_absurd_rank_in_a_name_is_no_rank(tmp_path: Path) -> None:
    (log,) = LIMIT_LOGS.glob("*.log")
    named = tmp_path / "dedicated_log_torch_trace_rank_123456789012345678901234567890_x.log"
    shutil.copy(log, named)
    code, out = cli("import", str(named), "--out", str(tmp_path / "o"))
    assert code == 0 and "is beyond 2147483647: not read as a rank" in out, out
    assert cli("summary", str(tmp_path / "o"))[0] == 0  # what import wrote, its readers read
    job = tmp_path / "job"
    for rank in ("0", "99999999999999999999999"):
        write_receipt_files(make_receipt(fake_ledger()), job / f"rank-{rank}")
    code, out = cli("merge", str(job), "--out", str(tmp_path / "m.json"))
    assert code == 2 and "a rank number beyond 2147483647 is no rank" in out, out
    assert cli("summary", str(tmp_path / "m.json"))[0] == 0


# --- output encodings -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_summary_prints_through_an_encoding_that_cannot_hold_its_text(tmp_path: Path, encoding: str) -> None:
    path = write_receipt_files(make_receipt(plant(fake_ledger(), "réason → ·", "m.py")), tmp_path / "r")
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding=encoding, errors="strict")  # PYTHONIOENCODING=ascii
    code, out = cli("summary", path, stdout=stream)
    stream.flush()
    assert code == 0, out
    assert b"\\u2192" in raw.getvalue()  # "→", escaped


@pytest.mark.torch
def test_run_under_ascii_with_an_argument_that_is_not_utf8(tmp_path: Path, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    script = tmp_path / "brk.py"
    script.write_text("import sys, torch\n@torch.compile(backend='eager')\ndef f(x):\n    y = x * 2\n"
                      "    print('break', sys.argv[1:])\n    return y + 1\nfor _ in range(3):\n    f(torch.ones(4))\n")
    monkeypatch.chdir(tmp_path)
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict")
    torch._dynamo.reset()
    try:
        code, out = cli("run", "--out", "o", str(script), "--", os.fsdecode(b"caf\xe9"), stdout=stream)
    finally:
        torch._dynamo.reset()
    assert code == 0, out
    assert json.loads((tmp_path / "o" / "receipt.json").read_text())["ledger"]["run"]["command"][1] == "caf\\xe9"
    bad = tmp_path / os.fsdecode(b"lat\xe9in.py")
    shutil.copy(script, bad)
    code, out = cli("run", "--out", "o2", str(bad))
    assert code == 2 and "not UTF-8" in out and len(out.strip().splitlines()) == 1, out
    assert not (tmp_path / "o2").exists()


if sys.platform != "linux":  # FIFOs, /dev/zero, /proc
    pytestmark = pytest.mark.skip("POSIX devices and FIFOs")


def test_a_capped_read_holds_about_the_file_not_the_cap(tmp_path) -> None:
    """``read(n)`` allocates ``n`` bytes first: a reader that asked for its whole cap held 256 MiB
    for every receipt it read (a 256-rank merge peaked at 270 MB)."""
    import tracemalloc

    from seamscope.ingest.limits import MAX_RECEIPT_BYTES, read_capped

    p = tmp_path / "r.json"
    p.write_bytes(b"x" * 30_000)
    tracemalloc.start()
    try:
        assert read_capped(str(p), MAX_RECEIPT_BYTES, "a receipt") == b"x" * 30_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 30_000
