"""What reaches a user's terminal, what a gate trusts, what a reader refuses, what a receipt weighs.

GIVEN hostile strings (rich markup, ``ESC[2J``, an OSC 0 title, an OSC 8 hyperlink, C1 and
bidi controls) in a receipt's names and reasons, WHEN every command prints it, THEN nothing but
visible text comes out. GIVEN a receipt whose derived figures were edited, THEN the gates refuse it.
GIVEN integers beyond 64 bits, deep nesting or numbers beyond a float, THEN every reader exits 2
with one line naming the field. GIVEN many recompiles, THEN the receipt grows linearly.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest
from fakes import fake_ledger, plant
from hostile import HOSTILE, OSC8, assert_inert, churn_ledger, cli, hostile_receipt
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.causes import cause_sentence
from seamscope.analyze.display import cut, markup, shown, visible
from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.units import number_ranges
from seamscope.ingest.receipt import load_receipt
from seamscope.model.canonical import pretty_bytes
from seamscope.model.guard_table import decode_refs, encode_refs
from seamscope.render.receipt_json import write_receipt_files

# --- the terminal prints only what seamscope wrote -------------------------------------------------


def test_control_characters_become_visible_escapes() -> None:
    assert visible("a\x1b[2Jb\tc\nd\x7f\x9b\u202e") == "a\\x1b[2Jb\tc\nd\\x7f\\x9b\\u202e"
    assert visible(OSC8) == "\\x1b]8;;http://evil.example/\\x1b\\link\\x1b]8;;\\x1b\\"
    assert cut("x" * 10, 4) == "xxxx…(+6 chars)" and cut("xy", 4) == "xy"
    assert shown("é" * 500).endswith("…(+200 chars)") and shown("é" * 500, None) == "é" * 500
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, color_system=None, emoji=False, width=200).print(f"[bold]{markup(HOSTILE)}[/bold]")
    assert buf.getvalue().startswith("[/][bold]x[/bold]\\x1b[2J")


def _printed(text: str) -> str:
    buf = io.StringIO()
    from rich.console import Console

    Console(file=buf, color_system=None, emoji=False, highlight=False, width=400).print(text)
    return buf.getvalue()[:-1]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="\\[]/ab x", max_size=12), st.sampled_from(["", "[/dim]", "[/dim] z"]))
def test_a_user_string_prints_as_written_whatever_markup_follows_it(text: str, after: str) -> None:
    # GIVEN backslashes and brackets (a path ending in \, a regex L\['x'\], a tag-like [x])
    # WHEN inside markup, at its end or before the caller's own tag  THEN exactly the string
    assert _printed(f"[dim]{markup(text)}{after}") == text + after.replace("[/dim]", "")


def test_a_string_ending_in_a_backslash_prints_as_written_in_every_command(tmp_path: Path) -> None:
    reason, file = "bad [x] reason ends C:\\tmp\\", "C:\\src\\[x]\\"
    led = plant(fake_ledger(), reason, file)
    path = write_receipt_files(make_receipt(led), tmp_path / "r")
    for args, want in ((["summary", path], 0), (["check", path, "--max-recompiles", "0"], 1),
                       (["diff", path, path], 0)):
        code, out = cli(*args)
        assert code == want, (args, out)
        assert reason in out and "\\\\" not in out, (args, out)
    assert file in cli("summary", path)[1]


def test_hostile_names_and_reasons_print_as_text_in_every_command(tmp_path: Path) -> None:
    path = hostile_receipt(tmp_path)
    for args, want in ((["summary", path], 0), (["check", path, "--max-breaks", "0", "--max-recompiles", "0"], 1),
                       (["diff", path, path], 0), (["verify", path], 0),
                       (["report", path, "--markdown", str(tmp_path / "s.md")], 0)):
        code, out = cli(*args)
        assert code == want, (args, out)
        assert_inert(out)
        if args[0] in ("summary", "check"):
            assert "[/][bold]x[/bold]" in out and "\\x1b[2J" in out, out
    md = (tmp_path / "s.md").read_text()
    assert_inert(md)
    assert "\\x1b" in md and "\\[/\\]" in md


def test_long_strings_are_cut_in_the_terminal_and_kept_in_the_receipt(tmp_path: Path) -> None:
    long = "r" * 5000
    led = plant(fake_ledger(), long, "m.py")
    path = write_receipt_files(make_receipt(led), tmp_path / "r")
    code, out = cli("check", path, "--max-recompiles", "0")
    assert code == 1 and "chars)" in out and long not in out
    assert load_receipt(path).ledger.break_sites[0].reason == long


@pytest.mark.torch
def test_a_real_script_with_hostile_file_and_function_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")

    script = tmp_path / f"ev[/]il[bold]\x1b[2J\x1b]0;TITLE\x07{OSC8}.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "import torch\n"
        "def helper(x):\n"
        "    print('hi')\n"
        "    return x + 1\n"
        "helper.__code__ = helper.__code__.replace(co_name='h[/]elp\\x1b]0;T\\x07er[bold]')\n"
        "@torch.compile(backend='eager')\n"
        "def f(x):\n"
        "    return helper(x * 2) - 1\n"
        "for n in (3, 3, 4):\n"
        "    f(torch.ones(n))\n"
    )
    monkeypatch.chdir(tmp_path)
    torch._dynamo.reset()  # seamscope run in this process: a fresh Dynamo, as in a new one
    try:
        code, text = cli("run", "--out", "o", str(script))
    finally:
        torch._dynamo.reset()
    assert code == 0, text
    assert_inert(text)
    assert "h[/]elp\\x1b]0;T\\x07er[bold]" in text
    code, out = cli("summary", str(tmp_path / "o"))
    assert code == 0 and "h[/]elp" in out
    assert_inert(out)


# --- gates trust no derived figure -----------------------------------------------------------------


def test_gates_refuse_a_receipt_whose_derived_counts_were_edited(tmp_path: Path) -> None:
    path = write_receipt_files(make_receipt(fake_ledger()), tmp_path / "r")
    raw = json.loads(Path(path).read_text())
    raw["summary"]["break_site_count"] = 0
    raw["summary"]["break_sites"] = []
    raw["summary"]["recompile_count"] = 0
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(raw))
    code, out = cli("check", str(edited), "--max-breaks", "0")
    assert code == 2 and "BREAK_SITE_MISMATCH" in out and "within budget" not in out, out
    code, out = cli("check", path, "--baseline", str(edited))
    assert code == 2 and "baseline:" in out and "HASH_MISMATCH" in out
    code, out = cli("diff", path, str(edited))
    assert code == 2 and "HASH_MISMATCH" in out
    assert cli("check", path, "--max-breaks", "0")[0] == 1  # the true count is judged


def test_a_rehashed_edit_of_the_summary_is_still_caught(tmp_path: Path) -> None:
    from seamscope.analyze.verify_hashes import receipt_hash, structure_hash

    path = write_receipt_files(make_receipt(fake_ledger()), tmp_path / "r")
    raw = json.loads(Path(path).read_text())
    raw["summary"]["break_site_count"] = 0
    raw["structure_sha256"] = structure_hash(raw)
    raw["receipt_sha256"] = receipt_hash(raw)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(raw))
    code, out = cli("check", str(edited), "--max-breaks", "0")
    assert code == 2 and "BREAK_SITE_MISMATCH" in out


# --- readers fail cleanly ----------------------------------------------------------------------------


def _edited(tmp: Path, edit, name: str) -> str:
    path = write_receipt_files(make_receipt(fake_ledger()), tmp / "base")
    text = edit(Path(path).read_text())
    out = tmp / name
    out.write_text(text)
    return str(out)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda t: t.replace('"wall_ns": ', '"wall_ns": 1' + "0" * 400 + ', "x": ', 1), "integer beyond 64 bits at $."),
        (
            lambda t: t.replace('"call_count": ', '"call_count": 18446744073709551616, "y": ', 1),
            "integer beyond 64 bits at $.summary.call_count",
        ),
        (lambda t: t.replace('"note": null', '"note": 1e400', 1), "NaN or Infinity at $.decision.note"),
        (lambda t: "[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
        (
            lambda t: t.replace('"note": null', '"note": ' + "[" * 70 + "]" * 70, 1),
            "nested deeper than 64 levels at $.decision.note",
        ),
        (lambda t: t.replace('"note": null', '"note": NaN', 1), "NaN or Infinity at $.decision.note"),
        (lambda t: t.replace('"note": null', '"note": -Infinity', 1), "NaN or Infinity at $.decision.note"),
    ],
)
def test_every_reader_refuses_huge_numbers_and_deep_nesting_naming_the_field(tmp_path: Path, edit, says) -> None:
    path = _edited(tmp_path, edit, "bad.json")
    folder = tmp_path / "m" / "rank-0"
    folder.mkdir(parents=True)
    (folder / "receipt.json").write_text(Path(path).read_text())
    for args in (["summary", path], ["verify", path], ["check", path, "--max-breaks", "9"], ["diff", path, path],
                 ["report", path, "--out", str(tmp_path / "rep")], ["merge", str(tmp_path / "m")]):
        code, out = cli(*args)
        assert code == 2, (args, out)
        assert says in out and len(out.strip().splitlines()) <= 2, (args, out)


def test_a_trace_line_with_a_huge_integer_is_skipped_and_strict_refuses(tmp_path: Path) -> None:
    from seamscope.render.seamscope_trace import write_trace

    trace = tmp_path / "t.seamscope-trace.jsonl"
    write_trace(fake_ledger(), str(trace))
    lines = trace.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if i and '"wall_ns":' in line)
    lines[at] = re.sub(r'"wall_ns":\d+', '"wall_ns":1' + "0" * 30, lines[at], count=1)
    trace.write_text("".join(lines))
    code, out = cli("import", str(trace), "--out", str(tmp_path / "o"))
    assert code == 0 and "integer beyond 64 bits" in out, out
    assert cli("import", str(trace), "--out", str(tmp_path / "o2"), "--strict")[0] == 2
    header = tmp_path / "h.jsonl"
    header.write_text(
        lines[0].replace('"bounds":', '"deep":' + "[" * 80 + "]" * 80 + ',"bounds":', 1) + "".join(lines[1:])
    )
    code, out = cli("import", str(header), "--out", str(tmp_path / "o3"))
    assert code == 2 and "nested deeper than 64 levels" in out, out


def test_a_torch_trace_record_with_hostile_json_is_a_skipped_record(tmp_path: Path) -> None:
    from seamscope.ingest.torch_trace import find_logs

    here = Path(__file__).parent / "inputs" / "torch_trace" / "limit"
    (log,) = find_logs(str(here))
    text = Path(log).read_text()
    first = text.splitlines()[0]
    prefix = first[: first.index("] {") + 2]
    bad = (f'{prefix}{{"compilation_metrics": {{"duration_us": 1{"0" * 400}}}}}\n'
           f'{prefix}{{"compilation_metrics": {"[" * 5000}{"]" * 5000}}}\n'
           f'{prefix}{{"compilation_metrics": {{"x": {"[" * 70}{"]" * 70}}}}}\n')
    target = tmp_path / "dedicated_log_torch_trace_x.log"
    target.write_text(bad + text)
    code, out = cli("import", str(target), "--out", str(tmp_path / "o"))
    assert code == 0 and "Traceback" not in out and "integer beyond 64 bits" in out, out
    assert "nested deeper than 64 levels" in out, out  # deeper than seamscope reads, within msgspec's limit


# --- size: each failed guard once; call ranges ---------------------------------------------------------


def test_failed_guards_are_stored_once_and_read_back_whole(tmp_path: Path) -> None:
    sizes = {}
    for n in (100, 200):
        led = churn_ledger(n)
        r = make_receipt(led)
        path = write_receipt_files(r, tmp_path / str(n))
        sizes[n] = os.path.getsize(path)
        back = load_receipt(path)
        assert [c.failed_guards for c in back.ledger.compilations] == [c.failed_guards for c in led.compilations]
        assert back.summary == r.summary and back.receipt_sha256 == r.receipt_sha256
        assert cli("verify", path)[0] == 0
        raw = json.loads(Path(path).read_text())
        assert len(raw["guard_table"]["texts"]) == n
        assert all(c["failed_guards"] == [] for c in raw["ledger"]["compilations"])
    # linear: twice the recompiles, about twice the bytes (stored per recompile, it was four times)
    assert sizes[200] < 2.3 * sizes[100], sizes
    # written the old way (every text inline, no table), a receipt still reads and verifies
    old = tmp_path / "old.json"
    old.write_bytes(pretty_bytes(make_receipt(churn_ledger(20))))
    assert "guard_table" in old.read_text() and json.loads(old.read_text())["guard_table"] is None
    assert cli("verify", str(old))[0] == 0


def _plain_guards(raw: dict) -> tuple[list[list[str]], list[list[str]]]:
    """What a reader of the plain JSON does, as docs/import-formats.md says: each entry's own
    failed_guards, then the texts its references in guard_table name (an index, or [first, last])."""
    table = raw.get("guard_table") or {}
    texts = table.get("texts", [])

    def names(refs: list) -> list[str]:
        out = []
        for r in refs:
            a, b = (r, r) if isinstance(r, int) else r
            out += [texts[i] for i in (range(a, b + 1) if a <= b else range(a, b - 1, -1))]
        return out

    comps = raw["ledger"]["compilations"]
    recs = raw["summary"]["recompiles"]
    crefs = table.get("compilations") or [[] for _ in comps]
    rrefs = table.get("recompiles") or [[] for _ in recs]
    return ([c["failed_guards"] + names(r) for c, r in zip(comps, crefs, strict=True)],
            [c["failed_guards"] + names(r) for c, r in zip(recs, rrefs, strict=True)])


def test_the_guard_table_layout_has_its_own_schema_version_and_plain_json_reads_the_same_texts(tmp_path: Path) -> None:
    # GIVEN a receipt with recompiles, written
    path = write_receipt_files(make_receipt(churn_ledger(6)), tmp_path / "r")
    raw = json.loads(Path(path).read_text())
    # THEN its version says the failed guards are in the table (summary texts empty in the file)
    assert raw["schema_version"] == 3 and raw["ledger"]["schema_version"] == 1
    assert raw["guard_table"]["texts"] and all(r["failed_guards"] == [] for r in raw["summary"]["recompiles"])
    # and the documented reading of the plain JSON gives the texts load_receipt gives
    back = load_receipt(path)
    comps, recs = _plain_guards(raw)
    assert comps == [c.failed_guards for c in back.ledger.compilations]
    assert recs == [r.failed_guards for r in back.summary.recompiles] and any(recs)
    assert cli("verify", path)[0] == 0
    # a receipt without failed guards keeps its ledger's version and its texts inline
    plain = write_receipt_files(make_receipt(fake_ledger(4)), tmp_path / "p")
    assert json.loads(Path(plain).read_text())["schema_version"] == 1
    # a file of the earlier layout (version 1 holding a table) still reads, with the same texts
    old = dict(raw, schema_version=1)
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert load_receipt(str(tmp_path / "old.json")).summary.recompiles == back.summary.recompiles


def test_guard_references_are_runs_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    assert encode_refs([5, 4, 3, 2, 9, 1, 2]) == [[5, 2], 9, [1, 2]]
    assert decode_refs([[5, 2], 9, [1, 2]], 10, "x") == [5, 4, 3, 2, 9, 1, 2]
    path = write_receipt_files(make_receipt(churn_ledger(5)), tmp_path / "r")
    raw = json.loads(Path(path).read_text())
    raw["guard_table"]["compilations"][3] = [[0, 99]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    code, out = cli("summary", str(bad))
    assert code == 2 and "guard_table.compilations[3]: guard text 99 is not in the table of 5" in out


def test_a_headline_names_a_range_of_calls_and_each_figure_once() -> None:
    assert number_ranges([1, 2, 3, 5, 7, 8]) == "1–3, 5, 7, 8" and number_ranges([]) == ""
    r = make_receipt(churn_ledger(30))
    cause = r.findings.causes[0]
    assert "in calls 1–30 (recurs 30×)" in cause_sentence(cause)
    sentence = r.findings.headline.sentence
    assert "1, 2, 3" not in sentence and "calls 1–30" in sentence
    figure = sentence.split("and cost ")[1].split(" of compile time")[0]
    assert f"of compile time ({figure}" not in sentence, sentence
