"""Inputs as users keep them or get them wrong: a ``TORCH_TRACE`` log gzip'd to be kept or sent, a
receipt's guard table edited out of range, a ``--patch`` that is no diff, a setting naming a callable
a library adds only once the script imports it.

GIVEN a log compressed with gzip (whole, in its folder, or cut), WHEN it is imported, THEN it is
read as the log itself (the same summary), with a note that it was compressed, and a cut archive
is read as far as it goes, saying so.
"""

from __future__ import annotations

import copy
import gzip
import json
import types
from pathlib import Path

import pytest
from fakes import seamscope_here

from seamscope.capture.remedies import LateCallables
from seamscope.errors import UnusableInput
from seamscope.experiments.remedy_plan import prepare
from seamscope.experiments.remedy_spec import RemedySpec
from seamscope.model.guard_table import decode_refs

LOG = next((Path(__file__).parent / "inputs" / "torch_trace" / "breaks").glob("*.log"))


def _summary(folder: Path) -> dict:
    return json.loads((folder / "receipt.json").read_text())["summary"]  # type: ignore[no-any-return]


def _trace_digest(folder: Path) -> str:
    return json.loads((folder / "receipt.json").read_text())["ledger"]["run"]["input_trace_sha256"]  # type: ignore[no-any-return]


def test_a_gzipped_torch_trace_log_is_read_as_the_log(tmp_path: Path) -> None:
    logs = tmp_path / "trace"
    logs.mkdir()
    packed = logs / (LOG.name + ".gz")
    packed.write_bytes(gzip.compress(LOG.read_bytes()))
    plain = seamscope_here(["import", str(LOG), "--out", str(tmp_path / "plain")], tmp_path)
    for what, out in ((packed, "file"), (logs, "folder")):
        got = seamscope_here(["import", str(what), "--out", str(tmp_path / out)], tmp_path)
        assert got.returncode == 0, got.stderr
        assert "gzip-compressed: read decompressed" in got.stderr
        assert _summary(tmp_path / out) == _summary(tmp_path / "plain") and plain.returncode == 0
        assert _summary(tmp_path / out)["compile_count"] == 11
        # the same trace to diff and check
        assert _trace_digest(tmp_path / out) == _trace_digest(tmp_path / "plain")


def test_a_cut_gzip_archive_is_read_as_far_as_it_goes_and_says_so(tmp_path: Path) -> None:
    data = gzip.compress(LOG.read_bytes())
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    got = seamscope_here(["import", str(cut), "--out", str(tmp_path / "out")], tmp_path)
    assert got.returncode == 0, got.stderr
    assert "the compressed file is cut" in got.stderr
    assert 0 < _summary(tmp_path / "out")["compile_count"] < 11
    strict = seamscope_here(["import", str(cut), "--out", str(tmp_path / "s"), "--strict"], tmp_path)
    assert strict.returncode == 2


@pytest.mark.parametrize("run, bad", [([2, -5], -5), ([-5, 2], -5), ([2, 12], 12), ([12, 2], 12)])
def test_a_guard_table_run_with_an_end_out_of_the_table_names_that_end(run: list[int], bad: int) -> None:
    with pytest.raises(ValueError, match=rf"^x: guard text {bad} is not in the table of 10$"):
        decode_refs([run], 10, "x")


def test_a_patch_that_is_no_diff_is_refused_naming_the_option_and_the_file(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("remember to try dynamic=True\n")
    (tmp_path / "s.py").write_text("print(1)\n")
    with pytest.raises(UnusableInput, match=r"^--patch notes\.txt: the patch holds no file"):
        prepare(RemedySpec(patch=("notes.txt",)), "s.py")


def test_a_callable_a_library_adds_later_is_found_when_dynamo_reads_the_setting() -> None:
    lib = types.SimpleNamespace(Logger=types.SimpleNamespace())
    late = LateCallables(["print"], [(lib, "logging", "Logger.note_once")])
    assert "logging:Logger.note_once (looked up as the script runs)" in repr(late)

    def note_once() -> None: ...

    lib.Logger.note_once = note_once  # the library is imported by the script
    assert note_once in late and late.pending == [] and set(late) == {"print", note_once}
    assert type(copy.deepcopy(late)) is set  # Dynamo copies its settings to log them
