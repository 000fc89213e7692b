"""``seamscope try``'s faults, each as a user met it.

GIVEN a real ``try`` process (forked from the test run's server: its own pid, signals and exit
code) whose script compiles, then hangs from a chosen run on, WHEN it gets SIGTERM or SIGHUP,
THEN it ends as ``run`` does: what the finished runs measured is written, the hung run and the
trial's fork server are gone, the run's cache folder is removed, exit 143 / 129. WHEN its
``--budget`` ends during the hung run, THEN the run is killed there and the trial ends, saying so.

GIVEN an ``--out`` another trial holds, or one that cannot be written, THEN ``try`` refuses in one
line (exit 2), naming the holder, and leaves the other trial's warm cache alone. GIVEN ``--only``
that matches no candidate, THEN exit 2 listing the candidates. GIVEN a script with CRLF line
endings, a UTF-8 byte-order mark, a latin-1 coding line, or reached through a symbolic link, THEN
its patches are made on the file as it is and ``git apply``, ``patch -p1`` and ``run --patch``'s own
applier apply them alike; a file no patch can be made of says why in one line (torch-free).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest
from fakes import Forked, seamscope_here

HERE = os.path.dirname(os.path.abspath(__file__))
HANG = os.path.join(HERE, "workloads", "trials", "hang_after_first.py")


def _state(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a live process; None once it is gone (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] in ("Z", "X") else (fields[0], int(fields[1]))


def _gone(pid: int, within: float = 60.0) -> bool:
    end = time.monotonic() + within
    while _state(pid) is not None and time.monotonic() < end:
        time.sleep(0.1)
    return _state(pid) is None


def _cache_of(pid: int) -> str:
    """The run's own temporary folder: its stderr goes to ``stderr.txt`` there."""
    return os.path.dirname(os.readlink(f"/proc/{pid}/fd/2"))


def _start(server, tmp_path, args: list[str], hang_from: int) -> Forked:
    return Forked(server, ["try", "--quiet", "--repeat", "1", "--out", "o", *args, HANG], tmp_path,
                  stdout=tmp_path / "stdout", stderr=tmp_path / "stderr", env={"HANG_FROM": str(hang_from)})


def _hung_run(proc: Forked, tmp_path, nth: int) -> int:
    """The pid of the ``nth`` run, once it has started (each run writes its pid to runs.txt)."""
    runs = tmp_path / "runs.txt"
    end = time.monotonic() + 300
    while not runs.exists() or len(runs.read_text().split()) < nth:
        assert proc.running(), (tmp_path / "stderr").read_text()
        assert time.monotonic() < end, "the run never started"
        time.sleep(0.1)
    return int(runs.read_text().split()[nth - 1])


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("sig", "code", "hang_from"), [(signal.SIGTERM, 143, 2), (signal.SIGHUP, 129, 1)],
                         ids=["sigterm-after-a-finished-run", "sighup-in-the-first-run"])
def test_a_signal_ends_a_try_like_a_run(fresh_server, tmp_path, sig, code, hang_from):
    proc = _start(fresh_server, tmp_path, ["--timeout", "600"], hang_from)
    pid = _hung_run(proc, tmp_path, hang_from)
    time.sleep(0.5)  # inside the run: it has its environment and is compiling or asleep
    cache, (_, server) = _cache_of(pid), _state(pid)  # type: ignore[misc]
    assert os.path.isdir(cache) and os.path.basename(cache).startswith("seamscope-try-cache-")
    proc.send_signal(sig)
    rc = proc.wait(180)
    err = (tmp_path / "stderr").read_text()
    assert rc == code, err
    assert "Traceback" not in err, err
    assert _gone(pid), "the run in progress outlived the trial"
    assert _gone(server), "the trial's fork server outlived the trial"
    assert not os.path.exists(cache), "the run's cache folder was left behind"
    trials = tmp_path / "o" / "trials.json"
    if hang_from == 1:  # nothing finished: nothing to write
        assert not trials.exists() and signal.Signals(sig).name in err
    else:
        t = json.loads(trials.read_text())
        assert t["interrupted"] is True
        assert [r["label"] for r in t["baseline"]["runs"]] == ["rep-1"]  # the run that finished
        assert (tmp_path / "o" / "trials.md").exists() and (tmp_path / "o" / "receipt.json").exists()


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
@pytest.mark.timeout(600)
def test_the_budget_bounds_a_run_that_hangs(fresh_server, tmp_path):
    # the budget is all this test waits for: short, but long enough for the run to start and write its pid
    proc = _start(fresh_server, tmp_path, ["--budget", "5s"], 1)
    pid = _hung_run(proc, tmp_path, 1)
    rc = proc.wait(300)  # the run hangs for good: only the budget ends it
    err = (tmp_path / "stderr").read_text()
    assert rc == 1, err  # the baseline could not be measured, as for a baseline that hangs past --timeout
    assert "the budget ended during trials/baseline/rep-1" in err and "--budget 5s" in err, err
    assert _gone(pid)


# --- the output folder: locked as run's, writable -------------------------------------------------

SCRIPT = ('import torch\n\n\ndef step(x):\n    return x.sum()\n\n\n'
          'f = torch.compile(step, backend="eager")  # café\nf(torch.ones(3))\n')


@pytest.fixture
def holder():
    """A live process other than this one, named by a lock as ``run`` writes it."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _hold(out, pid: int) -> None:
    import socket

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, ".seamscope.lock"), "w", encoding="utf-8") as f:
        json.dump({"pid": pid, "host": socket.gethostname(), "started": "2026-12-02 10:00:00 UTC",
                   "command": "seamscope try other.py", "token": "0123456789abcdef"}, f)


def _warm(out) -> str:
    kept = os.path.join(out, "trials", "warm-cache", "compile-cache", "kernel.bin")
    os.makedirs(os.path.dirname(kept))
    with open(kept, "wb") as f:
        f.write(b"the other trial's")
    return kept


def test_the_warm_cache_of_a_trial_still_running_is_never_removed(tmp_path, holder):
    from seamscope.errors import UnusableInput
    from seamscope.experiments.trials.cache import drop_warm, prime_extra

    out = str(tmp_path / "o")
    _hold(out, holder)
    kept = _warm(out)
    drop_warm(out)
    with pytest.raises(UnusableInput, match=rf"in use by another seamscope run \(pid {holder} "):
        prime_extra(out)
    assert os.path.exists(kept)
    os.unlink(os.path.join(out, ".seamscope.lock"))  # that trial ended: its folder is free again
    prime_extra(out)
    assert not os.path.exists(kept)


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
def test_a_try_into_a_folder_another_holds_is_refused_naming_it(tmp_path, holder):
    (tmp_path / "s.py").write_text(SCRIPT, encoding="utf-8")
    _hold(str(tmp_path / "o"), holder)
    kept = _warm(str(tmp_path / "o"))
    p = seamscope_here(["try", "--quiet", "--repeat", "1", "--out", "o", "s.py"], tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and f"in use by another seamscope run (pid {holder} " in p.stderr, p.stderr
    assert "`seamscope try other.py`" in p.stderr
    assert os.path.exists(kept) and not (tmp_path / "o" / "trials" / "baseline").exists()


def _read_only(folder) -> bool:
    """Make ``folder`` unwritable, even for root where the file system allows (``chattr +i``)."""
    os.chmod(folder, 0o555)
    if not os.access(folder, os.W_OK):
        return True
    chattr = shutil.which("chattr")
    return chattr is not None and subprocess.run([chattr, "+i", str(folder)], capture_output=True).returncode == 0


@pytest.mark.torch
@pytest.mark.usefixtures("fresh_server")
def test_a_try_into_a_read_only_folder_is_refused_in_one_line(tmp_path):
    (tmp_path / "s.py").write_text(SCRIPT, encoding="utf-8")
    ro = tmp_path / "ro"
    ro.mkdir()
    if not _read_only(ro):
        os.chmod(ro, 0o755)
        pytest.skip("this user can write any folder and the file system has no immutable flag")
    try:
        p = seamscope_here(["try", "--quiet", "--repeat", "1", "--out", "ro", "s.py"], tmp_path)
    finally:
        subprocess.run(["chattr", "-i", str(ro)], capture_output=True)
        os.chmod(ro, 0o755)
    assert p.returncode == 2, p.stderr
    assert p.stderr.startswith("seamscope: ro: cannot write") and p.stderr.count("\n") == 1, p.stderr


# --- --only that matches nothing --------------------------------------------------------------------


def test_only_matching_no_candidate_is_exit_2_listing_them(monkeypatch, tmp_path):
    from seamscope.errors import UnusableInput
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.trials import runs as trial_runs
    from seamscope.experiments.trials import trial as tr
    from seamscope.experiments.trials.catalogue import Draft
    from seamscope.model.trials import RunFigures

    ran = []

    def run_once(setup, flags, rel_dir, label, fingerprint=False, extra=None):
        ran.append(rel_dir)
        return trial_runs.Outcome(RunFigures(label=label, ok=True, exit_code=0, calls=3), object(), "")

    drafts = [Draft(name="dynamic-true", spec=spec_from_words(["--compile-option", "dynamic=true"]), origin="F1",
                    targets="t"),
              Draft(name="recompile-limit-64", spec=spec_from_words(["--dynamo-config", "recompile_limit=64"]),
                    origin="F2", targets="t")]
    monkeypatch.setattr(tr, "run_once", run_once)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: list(drafts))
    monkeypatch.setattr(tr, "rewrites", lambda receipt, script: [])
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=1)
    with pytest.raises(UnusableInput) as e:
        tr.run_trials(spec, [], ["dynamic=fals"], [])
    assert str(e.value) == ("--only dynamic=fals: no candidate matches; the candidates for this script: "
                            "dynamic-true, recompile-limit-64 (a name, its start, or part of its flags)")
    assert ran == [os.path.join("trials", "baseline", "rep-1")]  # only the run that found the candidates
    assert not (tmp_path / "trials" / "warm-cache").exists()


# --- patches of the file as it is: line endings, encoding, real path ------------------------------

GIT = shutil.which("git")
PATCH = shutil.which("patch")
needs_git = pytest.mark.skipif(GIT is None or PATCH is None, reason="git and patch are not installed")


def _repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


def _attach(script, out, words=("--compile-option", "dynamic=true"), notes=None):
    """The patch ``try`` writes for the candidate of ``words`` (None: none was made), as its runs get it."""
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.trials.catalogue import Draft
    from seamscope.experiments.trials.patches import attach

    d = Draft(name="cand", spec=spec_from_words(list(words)), origin="F1", targets="t")
    if notes is None:
        attach([d], str(out), str(script))
    else:
        attach([d], str(out), str(script), notes=notes)
    return d


def _applies_alike(repo, script, patch) -> bytes:
    """``run --patch``'s applier, ``git apply`` and ``patch -p1`` give one text; returns the file's bytes."""
    from seamscope.capture.remedies import Remedies
    from seamscope.experiments.remedy_plan import _patch_sources

    rem = Remedies(target=str(script))
    _patch_sources((str(patch),), str(script), False, rem)
    assert rem.source is not None and not rem.module_sources
    copy = repo.parent / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    subprocess.run(["patch", "-s", "-p1", "-i", str(patch)], cwd=copy, check=True)
    real = os.path.realpath(script)
    data = open(real, "rb").read()
    assert open(os.path.join(copy, os.path.relpath(real, repo)), "rb").read() == data
    from seamscope.experiments.source_file import read_source

    assert read_source(real).text == rem.source
    return data


@needs_git
def test_a_crlf_script_is_patched_on_its_own_line_endings(tmp_path):
    repo = _repo(tmp_path)
    script = repo / "s.py"
    script.write_bytes(SCRIPT.replace("\n", "\r\n").encode("utf-8"))
    d = _attach(script, tmp_path / "out")
    assert d.patch is not None
    data = _applies_alike(repo, script, d.patch)
    assert b'torch.compile(step, backend="eager", dynamic=True)  # caf\xc3\xa9\r\n' in data
    assert data.count(b"\r\n") == data.count(b"\n")  # every line still CRLF


@needs_git
@pytest.mark.parametrize(("head", "codec"), [("\ufeff", "utf-8"), ("# -*- coding: latin-1 -*-\n", "latin-1")],
                         ids=["utf-8-bom", "latin-1-coding-line"])
def test_a_bom_or_a_coding_line_gets_a_patch_in_the_files_encoding(tmp_path, head, codec):
    from seamscope.experiments.trials.catalogue import compile_sites

    repo = _repo(tmp_path)
    script = repo / "s.py"
    script.write_bytes((head + SCRIPT).encode(codec))
    assert compile_sites(str(script)) == [f"s.py:{8 + head.count(chr(10))}"]  # the decision's file:line
    d = _attach(script, tmp_path / "out")
    assert d.patch is not None and d.diff is not None and "dynamic=True" in d.diff
    data = _applies_alike(repo, script, d.patch)
    assert data.startswith(head.encode(codec)) and "café".encode(codec) in data
    assert 'dynamic=True)  # café'.encode(codec) in data


@needs_git
def test_a_script_reached_through_a_link_is_patched_where_it_lies(tmp_path):
    from seamscope.experiments.remedy_spec import spec_from_words
    from seamscope.experiments.trials.patches import spec_patch

    repo = _repo(tmp_path)
    (repo / "scripts").mkdir()
    real = repo / "scripts" / "train.py"
    real.write_text(SCRIPT, encoding="utf-8")
    link = repo / "run.py"
    link.symlink_to("scripts/train.py")
    p = spec_patch(spec_from_words(["--compile-option", "dynamic=true"]), str(link))
    assert p is not None and p.path == "scripts/train.py" and "a/scripts/train.py" in p.diff
    d = _attach(link, tmp_path / "out")
    _applies_alike(repo, link, d.patch)
    assert link.is_symlink() and "dynamic=True" in real.read_text(encoding="utf-8")


def test_a_file_no_patch_can_be_made_of_says_why_in_one_line(tmp_path):
    script = tmp_path / "s.py"
    mixed = SCRIPT.replace("\n", "\r\n", 3)
    script.write_bytes(mixed.encode("utf-8"))
    notes: list[str] = []
    d = _attach(script, tmp_path / "out", notes=notes)
    assert d.patch is None and d.spec.flags() == ["--compile-option", "dynamic=true"]  # its runs use the flag
    assert notes == [f"no patch: {os.path.realpath(script)}: it mixes line endings (3 CRLF, 6 LF); "
                     "no patch is made of it"]
