"""``seamscope run --warm`` without torch: each run a job of the fresh-process service (a fake one
here), and how the command ends when a run does not succeed (GIVEN how a run's process ended, WHEN
the command handles it, THEN its exit code and what it prints). The real runs, under Inductor, are
in ``test_compile_time_torch.py``."""

from __future__ import annotations

import os
import re

import pytest

from seamscope.commands import run as run_cmd
from seamscope.commands.run import _run_warm
from seamscope.experiments import warm_start
from seamscope.experiments.fresh import Ended, Job


class FakeService:
    """Answers each job with the next of ``results`` (an :class:`Ended`, or ``"ctrl-c"``), after
    writing ``lines`` lines to the job's log as the run's output."""

    def __init__(self, *results: object, lines: int = 2) -> None:
        self.results = list(results)
        self.lines = lines
        self.jobs: list[tuple[Job, str]] = []
        self.closed = False

    def run(self, job: Job, timeout: float | None = None, *, label: str = "job", **_: object) -> Ended:
        self.jobs.append((job, label))
        with open(job.log, "a", encoding="utf-8") as f:
            f.writelines(f"{label}: line {i}\n" for i in range(self.lines))
        r = self.results.pop(0)
        if r == "ctrl-c":
            raise KeyboardInterrupt
        assert isinstance(r, Ended)
        return r

    def close(self) -> None:
        self.closed = True


def _warm(monkeypatch, tmp_path, service: FakeService) -> int:
    monkeypatch.setattr(warm_start, "fresh_processes", lambda: service)
    monkeypatch.chdir(tmp_path)
    return _run_warm("train.py", ["--steps", "2"], False, str(tmp_path / "out"), True, {})


def test_each_run_is_a_seamscope_run_job_with_its_own_cache_directory_and_log(monkeypatch, tmp_path, capsys):
    fake = FakeService(Ended(exit_code=0), Ended(exit_code=-11, signal="SIGSEGV"))
    rc = _warm(monkeypatch, tmp_path, fake)
    out = str(tmp_path / "out")
    (cold, label), (warm, _) = fake.jobs
    cache = os.path.join(out, "compile-cache")
    assert label == "the cold run" and cold.entry == warm.entry == "seamscope.cli:main"
    assert cold.arg == ["run", "--quiet", "--out", os.path.join(out, "cold"), "--save-cache-artifacts",
                        os.path.join(out, "cache-artifacts.bin"), "train.py", "--", "--steps", "2"]
    assert warm.arg == ["run", "--quiet", "--out", os.path.join(out, "warm"), "train.py", "--", "--steps", "2"]
    for job in (cold, warm):  # the cold run fills the directory the warm run reads
        assert job.env == {"TORCHINDUCTOR_CACHE_DIR": cache, "TRITON_CACHE_DIR": os.path.join(cache, "triton")}
        assert job.stdout and job.cwd == str(tmp_path)
    assert (cold.log, warm.log) == (os.path.join(out, "cold.log"), os.path.join(out, "warm.log"))
    # THEN a run killed by a signal: one line, 128 + the signal, the service closed
    assert rc == 128 + 11 and fake.closed
    assert capsys.readouterr().err == f"seamscope: the warm run ended: signal SIGSEGV; its output: {warm.log}\n"


def test_a_failed_run_gives_its_exit_code_and_its_last_twenty_lines(monkeypatch, tmp_path, capsys):
    rc = _warm(monkeypatch, tmp_path, FakeService(Ended(exit_code=3), lines=30))
    err = capsys.readouterr().err.splitlines()
    log = tmp_path / "out" / "cold.log"
    assert rc == 3
    assert err[0] == f"seamscope: the cold run failed (exit code 3); its last lines (all of it in {log}):"
    assert err[1:] == [f"  the cold run: line {i}" for i in range(10, 30)]


def test_a_failed_runs_lines_are_shown_without_their_control_characters(monkeypatch, tmp_path, capsys):
    class Coloured(FakeService):
        def run(self, job: Job, timeout: float | None = None, **kw: object) -> Ended:
            with open(job.log, "a", encoding="utf-8") as f:
                f.write("\x1b[2J\x1b[31mred\n")
            return super().run(job, timeout, **kw)

    assert _warm(monkeypatch, tmp_path, Coloured(Ended(exit_code=1))) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "red" in err.splitlines()[1]


def test_a_log_left_by_an_earlier_command_is_replaced(monkeypatch, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "cold.log").write_text("an earlier command's output\n")
    _warm(monkeypatch, tmp_path, FakeService(Ended(exit_code=1)))
    assert (tmp_path / "out" / "cold.log").read_text() == "the cold run: line 0\nthe cold run: line 1\n"


@pytest.mark.parametrize(("ended", "said"), [
    (Ended(exit_code=None), "killed after the timeout"),
    (Ended(exit_code=None, lost="the fork server died"), "the fork server died"),
])
def test_a_run_timed_out_or_lost_with_its_server_is_one_line_and_exit_1(monkeypatch, tmp_path, capsys, ended, said):
    rc = _warm(monkeypatch, tmp_path, FakeService(Ended(exit_code=0), ended))
    assert rc == 1
    log = tmp_path / "out" / "warm.log"
    assert capsys.readouterr().err == f"seamscope: the warm run ended: {said}; its output: {log}\n"


def test_ctrl_c_during_a_run_exits_130_and_keeps_the_runs_that_finished(monkeypatch, tmp_path, capsys):
    fake = FakeService(Ended(exit_code=0), "ctrl-c")
    rc = _warm(monkeypatch, tmp_path, fake)
    out = tmp_path / "out"
    assert rc == 130 and fake.closed and len(fake.jobs) == 2
    assert capsys.readouterr().err == f"seamscope: interrupted during the warm run; {out}/cold kept\n"
    assert (out / "compile-cache").is_dir() and not (out / "warm-start.json").exists()


def test_the_runs_are_new_interpreters_when_the_setting_says_process(monkeypatch):
    monkeypatch.setenv("SEAMSCOPE_WARM_ISOLATION", "process")
    fp = warm_start.fresh_processes()
    try:
        assert fp.mode == "process" and not fp.alive()
    finally:
        fp.close()


def test_each_run_is_announced_with_its_log_and_a_long_one_every_heartbeat(monkeypatch, tmp_path, capsys):
    """A run's own output goes to its log, not the terminal: the command says which run is going
    and where its output is, and the service's heartbeat says a long run still runs."""

    class Slow(FakeService):
        def run(self, job: Job, timeout: float | None = None, *, label: str = "job", **kw: object) -> Ended:
            progress = kw["progress"]
            assert callable(progress) and kw["heartbeat_s"] == 30.0
            progress(f"{label}: still running after 30 s")
            return super().run(job, timeout, label=label)

    monkeypatch.setattr(warm_start, "fresh_processes", lambda: Slow(Ended(exit_code=0), Ended(exit_code=1)))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert _run_warm("train.py", [], False, str(out), False, {}) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[:4] == [f"seamscope: the cold run: its output goes to {out / 'cold.log'}",
                       "seamscope: the cold run: still running after 30 s",
                       f"seamscope: the warm run: its output goes to {out / 'warm.log'}",
                       "seamscope: the warm run: still running after 30 s"]
    # AND --quiet says none of it (only how the command ended)
    monkeypatch.setattr(warm_start, "fresh_processes", lambda: FakeService(Ended(exit_code=1)))
    assert _run_warm("train.py", [], False, str(out), True, {}) == 1
    assert capsys.readouterr().err.startswith("seamscope: the cold run failed")


def test_an_out_folder_with_control_characters_is_shown_escaped_and_whole(monkeypatch, tmp_path, capsys):
    """``--out`` is the user's text: its escapes print visibly, never raw, and a long one is not cut."""
    monkeypatch.setattr(warm_start, "fresh_processes", lambda: FakeService(Ended(exit_code=-9, signal="SIGKILL")))
    monkeypatch.setattr("click.utils.should_strip_ansi", lambda *a, **k: False)  # as on a terminal
    monkeypatch.chdir(tmp_path)
    deep = "/".join(["x" * 100] * 3)
    out = "o\x1b[31m/" + deep
    assert _run_warm("train.py", [], False, out, False, {}) == 128 + 9
    err = capsys.readouterr().err
    assert "\x1b" not in err and "o\\x1b[31m/" in err and deep + "/cold.log" in err



def test_the_comparison_is_written_by_the_command_atomically_as_canonical_json(monkeypatch, tmp_path, capsys):
    from fakes import fake_receipt

    from seamscope.model.canonical import pretty_bytes
    from seamscope.render import files
    from seamscope.render.receipt_json import write_receipt_files

    class Succeeds(FakeService):  # each run writes a receipt where its --out says
        def run(self, job: Job, timeout: float | None = None, **kw: object) -> Ended:
            write_receipt_files(fake_receipt(), job.arg[job.arg.index("--out") + 1])
            return super().run(job, timeout, **kw)

    written: list[str] = []
    real_write, real_runs = files.write_atomic, warm_start.run_warm
    monkeypatch.setattr(files, "write_atomic", lambda path, data: written.append(path) or real_write(path, data))
    returned: list[warm_start.WarmRuns] = []
    monkeypatch.setattr(warm_start, "run_warm", lambda *a, **k: returned.append(real_runs(*a, **k)) or returned[-1])
    monkeypatch.setattr(warm_start, "fresh_processes", lambda: Succeeds(Ended(exit_code=0), Ended(exit_code=0)))
    monkeypatch.chdir(tmp_path)
    # GIVEN runs that all succeed  WHEN run --warm ends  THEN warm-start.json, written atomically, is
    # the canonical JSON of the comparison the experiment returned
    out = tmp_path / "out"
    assert _run_warm("train.py", [], False, str(out), True, {}) == 0
    assert str(out / "warm-start.json") in written
    assert returned[0].comparison is not None
    assert (out / "warm-start.json").read_bytes() == pretty_bytes(returned[0].comparison)


def test_the_help_of_warm_names_every_run_it_makes(monkeypatch, tmp_path, capsys):
    # GIVEN a cold run that saved cache artifacts and a warm run that succeeded
    class Saving(FakeService):
        def run(self, job: Job, timeout: float | None = None, **kw: object) -> Ended:
            if "--save-cache-artifacts" in job.arg:
                with open(job.arg[job.arg.index("--save-cache-artifacts") + 1], "wb") as f:
                    f.write(b"x")
            return super().run(job, timeout, **kw)  # type: ignore[arg-type]

    fake = Saving(Ended(exit_code=0), Ended(exit_code=0), Ended(exit_code=1))
    # WHEN --warm runs  THEN its --help names each run it made, as OUT/NAME
    assert _warm(monkeypatch, tmp_path, fake) == 1
    made = [os.path.basename(job.arg[job.arg.index("--out") + 1]) for job, _ in fake.jobs]
    text = next(p.help for p in run_cmd.command.params if p.name == "warm") or ""
    assert made == ["cold", "warm", "warm-artifacts"]
    assert set(made) <= set(re.findall(r"OUT/([a-z-]+)", text)) and "twice" not in text, text
