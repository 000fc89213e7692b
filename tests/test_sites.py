"""Break sites: one statement is one site, two statements are two, and ids survive line shifts.

GIVEN graph-break records as PyTorch 2.13 writes them (``dynamo_graph_break_reason`` payloads,
built here around a real source file written to a temporary directory), WHEN they are parsed and
assembled into sites, THEN the site id depends on the file, the enclosing function's qualified
name, the gb code, the statement's text and its position among identical lines of the function,
never on the line number. Torch-free.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import msgspec
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt
from seamscope.gates.check import Limits, check
from seamscope.ingest.break_reasons import legacy_site_id, parse_break_reason
from seamscope.ingest.compile_events import CompileEventAssembler
from seamscope.ingest.source_scope import statement_scope
from seamscope.ingest.torch_trace import import_torch_trace
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import SITE_ID_SCHEME

GB0025 = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0025.html"
GB4347 = "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb4347.html"

SOURCE = """\
import torch


class Encoder:
    def forward(self, x, must_pad):
        x = x + 1
        if must_pad: torch._dynamo.graph_break()
        x = x * 2
        if must_pad: torch._dynamo.graph_break()
        return x


class Decoder:
    def forward(self, x, must_pad):
        x = x + 1
        if must_pad: torch._dynamo.graph_break()
        return x
"""


def reason(path: str, line: int, function: str, code: str, *, skipped: bool = False, stack: bool = True,
           gb: bool = True, gb_type: str = "Call to `torch._dynamo.graph_break()`", link: str = GB0025) -> str:
    """A ``dynamo_graph_break_reason`` payload in PyTorch 2.13's layout."""
    inner = (
        f"{gb_type}\n  Explanation: User-inserted graph break. Message: None\n"
        "  Hint: Remove the `torch._dynamo.graph_break()` call.\n\n"
        + (f" For more details about this graph break, please visit: {link}" if gb else "")
    )
    if skipped:
        body = ("Failed to handle graph break gracefully. Skipping the function and falling back to eager. "
                f"Graph break encountered:\n\n{inner}")
    else:
        body = f"Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\n{inner}"
    text = f"Graph break in user code at {path}:{line}\nGraph Break Reason: {body}\n"
    if stack:
        text += (
            "User code traceback:\n"
            f'  File "{path}", line 40, in <module>\n    main()\n'
            f'  File "{path}", line {line}, in {function}\n    {code}\n'
        )
    text += "\nTraceback (most recent call last):\n  File \"x.py\", line 1, in y\n    raise Unsupported\n"
    return text


def sites_of(records: list[tuple[str, str]]) -> list:
    """Feed (compile id, payload) break records; the sites, in the order they were made."""
    asm = CompileEventAssembler(cwd="/")
    for cid, payload in records:
        x, y = cid.split("/")
        asm.feed({"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"},
                  "frame_id": int(x), "frame_compile_id": int(y)}, payload)
    return list(asm.sites.values())


def write(tmp_path: Path, text: str, name: str = "model.py") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def line_of(text: str, needle: str, nth: int = 0) -> int:
    hits = [i + 1 for i, ln in enumerate(text.splitlines()) if needle in ln]
    return hits[nth]


def test_two_lines_with_the_same_statement_are_two_sites(tmp_path: Path) -> None:
    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    a, b = line_of(SOURCE, stmt, 0), line_of(SOURCE, stmt, 1)
    sites = sites_of([("0/0", reason(path, a, "forward", stmt)), ("1/0", reason(path, b, "forward", stmt))])
    assert len(sites) == 2 and len({s.site_id for s in sites}) == 2
    assert [(s.line, s.scope, s.statement) for s in sites] == [
        (a, "Encoder.forward", stmt),
        (b, "Encoder.forward", stmt),
    ]
    # scheme 1 gave both the same id: that is the collapse this scheme ends
    assert len({legacy_site_id(s.file, s.function, s.gb_code, s.gb_type, s.statement) for s in sites}) == 1


def test_same_named_methods_of_two_classes_in_one_file_are_two_sites(tmp_path: Path) -> None:
    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    enc, dec = line_of(SOURCE, stmt, 0), line_of(SOURCE, stmt, 2)
    s1, s2 = sites_of([("0/0", reason(path, enc, "forward", stmt)), ("1/0", reason(path, dec, "forward", stmt))])
    assert (s1.scope, s2.scope) == ("Encoder.forward", "Decoder.forward")
    assert s1.site_id != s2.site_id and s1.function == s2.function == "forward"


def _ids(path: Path, text: str, stmt: str, count: int) -> list[str]:
    """Write ``text`` at ``path`` and return the ids of the first ``count`` copies of ``stmt``."""
    path.write_text(text)
    records = [(f"{i}/0", reason(str(path), line_of(text, stmt, i), "forward", stmt)) for i in range(count)]
    return [s.site_id for s in sites_of(records)]


STMT = "if must_pad: torch._dynamo.graph_break()"


@settings(max_examples=examples(40))
@given(above=st.integers(0, 6), inside=st.integers(0, 3), after=st.integers(0, 4))
def test_shifting_unrelated_lines_keeps_every_site_id(tmp_path_factory, above: int, inside: int, after: int) -> None:
    """Comments, blank lines and other statements added above the classes, inside a function
    before its statements, or below: every id stays (the line numbers move)."""
    path = tmp_path_factory.mktemp("shift") / "model.py"
    before = _ids(path, SOURCE, STMT, 3)
    lines = SOURCE.splitlines()
    first_def = next(i for i, ln in enumerate(lines) if "def forward" in ln)
    text = "\n".join(
        (["# a comment", "", "import os"] * 3)[:above]
        + lines[: first_def + 1]
        + ["        y = 0  # unrelated"] * inside
        + lines[first_def + 1 :]
        + ["", "def tail():", "    return 1"] * after
    ) + "\n"
    after_ids = _ids(path, text, STMT, 3)
    assert len(set(before)) == 3
    assert after_ids == before


@settings(max_examples=examples(30))
@given(copies=st.integers(1, 3), where=st.sampled_from(["below", "end"]))
def test_a_copy_of_a_statement_at_another_line_is_another_site(tmp_path_factory, copies: int, where: str) -> None:
    """Copies inserted below the existing ones (same function): each is a site of its own and the
    existing ids stay."""
    path = tmp_path_factory.mktemp("dup") / "model.py"
    before = _ids(path, SOURCE, STMT, 3)
    lines = SOURCE.splitlines()
    second = line_of(SOURCE, STMT, 1)  # Encoder.forward's second copy (1-based: insert after it)
    at = second if where == "below" else line_of(SOURCE, "return x", 0) - 1
    text = "\n".join(lines[:at] + [f"        {STMT}"] * copies + lines[at:]) + "\n"
    ids = _ids(path, text, STMT, 3 + copies)
    assert len(set(ids)) == 3 + copies
    assert [ids[0], ids[1], ids[-1]] == before  # Encoder's two, Decoder's one


def test_a_copy_inserted_above_takes_the_position_of_the_statement_below_it(tmp_path: Path) -> None:
    """The id counts identical lines above the statement in its function: a copy inserted above
    an existing statement gives that statement the next position, so its id changes (and the copy
    gets the id it had). The README states this."""
    path = tmp_path / "model.py"
    first, second, dec = _ids(path, SOURCE, STMT, 3)
    lines = SOURCE.splitlines()
    at = next(i for i, ln in enumerate(lines) if "def forward" in ln) + 1
    text = "\n".join(lines[:at] + [f"        {STMT}"] + lines[at:]) + "\n"
    new_copy, old_first, old_second, dec2 = _ids(path, text, STMT, 4)
    assert (new_copy, old_first, dec2) == (first, second, dec)
    assert old_second not in (first, second, dec)


def test_a_skipped_frame_break_keeps_the_inner_type_and_is_one_site_with_the_plain_record(tmp_path: Path) -> None:
    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    line = line_of(SOURCE, stmt, 2)
    plain = reason(path, line, "forward", stmt)
    wrapped = reason(path, line, "forward", stmt, skipped=True)
    pb = parse_break_reason(wrapped, cwd="/").site
    assert pb.frame_skipped and pb.gb_type == "Call to `torch._dynamo.graph_break()`" and pb.gb_code == "GB0025"
    assert not parse_break_reason(plain, cwd="/").site.frame_skipped
    for order in ([plain, wrapped], [wrapped, plain]):
        (site,) = sites_of([("0/0", order[0]), ("1/0", order[1])])
        assert site.gb_type == "Call to `torch._dynamo.graph_break()`" and site.frame_skipped
        assert site.compile_ids == ["0/0", "1/0"]
    # only the wrapped record seen: the real type is still the site's
    (only,) = sites_of([("2/0", reason(path, line, "forward", stmt, skipped=True, gb_type="Missing tp_iternext",
                                       link=GB4347))])
    assert (only.gb_type, only.gb_code, only.frame_skipped) == ("Missing tp_iternext", "GB4347", True)
    assert not only.reason.startswith("Failed to handle")


def test_a_record_without_user_stack_or_gb_code_stays_one_site_and_is_counted(tmp_path: Path) -> None:
    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    line = line_of(SOURCE, stmt, 0)
    full = reason(path, line, "forward", stmt)
    bare = reason(path, line, "forward", stmt, stack=False)
    (site,) = sites_of([("0/0", full), ("1/0", bare)])
    assert site.user_stack and site.compile_ids == ["0/0", "1/0"] and site.statement == stmt
    (alone,) = sites_of([("1/0", bare)])
    assert alone.site_id == site.site_id and alone.user_stack == [] and alone.scope == "Encoder.forward"
    nocode = sites_of([("3/0", reason(path, line, "forward", stmt, gb=False))])
    assert nocode[0].gb_code is None and nocode[0].gb_type == "Call to `torch._dynamo.graph_break()`"
    # in an imported log: kept, and counted in the import's stats
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    recs = []
    for i, payload in enumerate((bare, reason(path, line_of(SOURCE, stmt, 1), "forward", stmt, gb=False))):
        meta = {"artifact": {"name": "dynamo_graph_break_reason", "encoding": "string"}, "frame_id": i,
                "frame_compile_id": 0, "has_payload": _md5(payload)}
        recs.append("V1130 00:00:00.000000 1 torch/x.py:1] " + msgspec.json.encode(meta).decode() + "\n"
                    + "".join("\t" + ln + "\n" for ln in payload.splitlines()))
    log.write_text("".join(recs))
    imp = import_torch_trace(str(log), cwd="/")
    assert len(imp.ledger.break_sites) == 2
    assert imp.stats.skipped["break_without_user_stack"] == 1
    assert imp.stats.skipped["break_without_gb_code"] == 1
    assert imp.ledger.site_id_scheme == SITE_ID_SCHEME


def _md5(payload: str) -> str:
    import hashlib

    return hashlib.md5(("".join(ln + "\n" for ln in payload.splitlines())).encode()).hexdigest()


def test_scope_of_nested_functions_and_module_level_lines(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        x = 1
        x = 1

        def outer():
            def inner():
                y = 2
            y = 2
            return inner

        @decorate
        def deco():
            y = 2
    """)
    path = write(tmp_path, text)
    assert statement_scope(path, 2, "<module>").qualname == "<module>"
    assert statement_scope(path, 2, "<module>").occurrence == 1
    inner = statement_scope(path, 6, "inner")
    assert (inner.qualname, inner.occurrence) == ("outer.<locals>.inner", 0)
    outer = statement_scope(path, 7, "outer")
    assert (outer.qualname, outer.occurrence) == ("outer", 0)  # the nested def's copy does not count
    assert statement_scope(path, 12, "deco").qualname == "deco"
    assert statement_scope(path, 99, "deco") is None
    assert statement_scope(str(tmp_path / "missing.py"), 1, "f") is None


def test_unreadable_source_keeps_statements_apart_by_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "gone" / "model.py")
    stmt = "if must_pad: torch._dynamo.graph_break()"
    s1, s2 = sites_of([("0/0", reason(missing, 7, "forward", stmt)), ("1/0", reason(missing, 9, "forward", stmt))])
    assert s1.site_id != s2.site_id and s1.scope == "forward"
    # one statement is one site even when a record lacks the stack or the gb code
    (one,) = sites_of([("0/0", reason(missing, 7, "forward", stmt)),
                       ("1/0", reason(missing, 7, "forward", stmt, stack=False)),
                       ("2/0", reason(missing, 7, "forward", stmt, gb=False))])
    assert one.site_id == s1.site_id and one.compile_ids == ["0/0", "1/0", "2/0"]
    assert (one.gb_code, one.user_stack != [], one.statement) == ("GB0025", True, stmt)


# --- matching against a baseline written with scheme 1 ------------------------------------------------


def _receipt_with_sites(tmp_path: Path, scheme: int):
    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    sites = sites_of([("0/0", reason(path, line_of(SOURCE, stmt, 0), "forward", stmt)),
                      ("1/0", reason(path, line_of(SOURCE, stmt, 2), "forward", stmt))])
    b = play(FakeProgram(calls=[FakeCall([FakeStep("region", 10, "0/0")])]))
    for s in sites:
        if scheme == 1:  # what scheme 1 wrote: its own ids, no statement
            s = msgspec.structs.replace(
                s, site_id=legacy_site_id(s.file, s.function, s.gb_code, s.gb_type, s.statement), statement="", scope=""
            )
        b.set_break_site(s)
    led = b.build()
    if scheme == 1:
        led = msgspec.structs.replace(led, site_id_scheme=1)
    return make_receipt(led)


def test_check_against_a_scheme_1_baseline_matches_sites_by_statement_and_says_so(tmp_path: Path) -> None:
    old = _receipt_with_sites(tmp_path, 1)
    new = _receipt_with_sites(tmp_path, 2)
    assert old.ledger.site_id_scheme == 1 and new.ledger.site_id_scheme == SITE_ID_SCHEME
    assert {s.site_id for s in old.summary.break_sites}.isdisjoint({s.site_id for s in new.summary.break_sites})
    rep = check(new, Limits(), old)
    assert rep.ok, rep.problems
    assert any("site-id scheme 1: sites matched by (file, function, gb code, statement)" in ln for ln in rep.lines)
    same = check(new, Limits(), new)
    assert same.ok and not any("site-id scheme" in ln for ln in same.lines)


def test_two_statements_scheme_1_merged_both_match_its_one_site(tmp_path: Path) -> None:
    """Scheme 1 gave Encoder.forward's two copies one id: against such a baseline both are kept,
    neither is reported as a new break."""
    from seamscope.analyze.diff import compare

    path = write(tmp_path, SOURCE)
    stmt = "if must_pad: torch._dynamo.graph_break()"
    sites = sites_of([("0/0", reason(path, line_of(SOURCE, stmt, 0), "forward", stmt)),
                      ("1/0", reason(path, line_of(SOURCE, stmt, 1), "forward", stmt))])

    def receipt(scheme: int):
        b = play(FakeProgram(calls=[FakeCall([FakeStep("region", 10, "0/0")])]))
        for s in sites[: 1 if scheme == 1 else 2]:
            if scheme == 1:
                s = msgspec.structs.replace(
                    s, site_id=legacy_site_id(s.file, s.function, s.gb_code, s.gb_type, s.statement), statement="")
            b.set_break_site(s)
        led = b.build()
        return make_receipt(msgspec.structs.replace(led, site_id_scheme=scheme))

    old, new = receipt(1), receipt(2)
    cmp = compare(old, new, force=True)
    assert [c.change for c in cmp.sites] == ["kept", "kept"]
    assert {c.site_id for c in cmp.sites} == {s.site_id for s in sites}
    assert any("site-id scheme 1" in n for n in cmp.notes)
    assert check(new, Limits(), old).ok


def test_the_frames_that_started_the_script_are_not_the_users_stack():
    """Under ``seamscope run`` Dynamo's user traceback begins in runpy, seamscope's command and
    click; the stack shown starts at the script, and frames of the user's own between are kept."""
    import os

    import seamscope
    from seamscope.ingest.break_reasons import parse_break_reason

    pkg = os.path.dirname(os.path.abspath(seamscope.__file__))
    frames = [
        ("<frozen runpy>", 198, "_run_module_as_main"),
        (os.path.join(pkg, "__main__.py"), 3, "<module>"),
        ("/venv/lib/python3.11/site-packages/click/core.py", 911, "invoke"),
        (os.path.join(pkg, "commands", "run.py"), 151, "command"),
        (os.path.join(pkg, "capture", "runner.py"), 175, "run_target"),
        ("<frozen runpy>", 291, "run_path"),
        ("/home/u/proj/train.py", 8, "<module>"),
        ("<frozen runpy>", 88, "_run_code"),  # the user's own runpy call: kept
        ("/home/u/proj/model.py", 4, "forward"),
    ]
    text = "Graph break in user code at /home/u/proj/model.py:4\nGraph Break Reason: print\nUser code traceback:\n"
    text += "".join(f'  File "{f}", line {n}, in {fn}\n    x\n' for f, n, fn in frames)
    got = parse_break_reason(text, cwd="/home/u/proj").site.user_stack
    assert [(f.file, f.line) for f in got] == [("train.py", 8), ("<frozen runpy>", 88), ("model.py", 4)]
    alone = parse_break_reason(text.replace(pkg, "/elsewhere"), cwd="/home/u/proj").site.user_stack
    assert alone[0].file == "<frozen runpy>" and len(alone) == len(frames)  # not started by seamscope: all kept
