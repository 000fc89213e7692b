"""Every option of ``seamscope run`` against every route (plain, ``--warm``, ``--nproc``): honoured
(what the route hands on — the capture's arguments, each run's or rank's command line — or what
it prints and writes, differs from the same command without the option) or refused with one line
naming the option and exit 2. The options are read from the click command, so one added later is
checked as well; nothing runs (the capture, the fresh processes and torchrun are fakes here)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from types import SimpleNamespace
from typing import Any

import click
import msgspec
import pytest
from fakes import fake_receipt

pytest.importorskip("torch")  # the remedy flags are checked against the installed torch

from seamscope.capture.runner import RunResult  # noqa: E402
from seamscope.commands import merge  # noqa: E402
from seamscope.commands import run as run_cmd  # noqa: E402
from seamscope.commands.options import NEEDS  # noqa: E402
from seamscope.experiments import warm_start  # noqa: E402
from seamscope.experiments.fresh import Ended, Job  # noqa: E402
from seamscope.render.receipt_json import write_receipt_files  # noqa: E402

pytestmark = pytest.mark.torch

ROUTES = {"plain": [], "warm": ["--warm"], "nproc": ["--nproc", "1"]}
SELECTORS = ("warm", "nproc")
"""The options that choose a route."""
VALUES = {
    "dynamo_config": "recompile_limit=9",
    "compile_option": "dynamic=true",
    "mark_dynamic": "L['x']:0",
    "stance": "force_eager",
    "disable": "helper:f",
    "regional": "Block",
    "pad": "pow2",
    "warmup": "30s",
    "metrics_port": "9464",
    "fail_after_warmup": "log",
    "patch": "given.patch",
    "calls_of": "f",
    "guard_filter": "skip_guard_on_all_nn_modules_unsafe",
    "python": "python-elsewhere",
}
"""A valid value for an option whose type does not give one (others: from their click type)."""
TARGETS = {"plain": "w.py:f", "warm": "w.py:f", "nproc": "w.py"}
"""A workload (every remedy flag but --calls-of, --pad too, applies to it); torchrun's ranks run a script."""
SCRIPT_ONLY = ("calls_of",)
"""Options that name the script's own code (a workload is refused, see below): given a script."""
WORKLOAD = "import helper\n\n\ndef f(n):\n    return helper.f(n)\n\n\nclass Block:\n    pass\n"


def _options() -> list[click.Option]:
    return [p for p in run_cmd.command.params if isinstance(p, click.Option) and p.name != "help"]


def _words(opt: click.Option) -> list[str]:
    """The option given once, with a valid value."""
    if opt.is_flag:
        return [opt.opts[0]]
    t = opt.type
    if opt.name in VALUES:
        value = VALUES[opt.name]
    elif isinstance(t, click.Path) and t.exists:
        value = "given.bin"  # the test writes it
    elif isinstance(t, (click.IntRange, click.FloatRange)) or t in (click.INT, click.FLOAT):
        value = "3"
    else:
        value = "given.out"
    return [opt.opts[0], value]


def _plain(obj: Any, depth: int = 0) -> Any:
    """A comparable description of what a fake was handed (objects by their fields)."""
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [_plain(x, depth) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _plain(v, depth) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, msgspec.Struct):
        return _plain(msgspec.to_builtins(obj), depth)
    if callable(obj) and not hasattr(obj, "__dict__"):
        return type(obj).__name__
    if depth > 4:
        return type(obj).__name__
    fields = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) and not isinstance(obj, type) else vars(obj)
    return [type(obj).__name__, _plain({k: v for k, v in fields.items() if not callable(v)}, depth + 1)]


class Fakes:
    """The routes' boundaries: the capture (plain), the fresh processes (``--warm``), torchrun
    (``--nproc``); each records what it was handed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.handed: list[Any] = []
        monkeypatch.setattr(run_cmd, "run_target", self.run_target)
        monkeypatch.setattr(warm_start, "fresh_processes", lambda: self)
        monkeypatch.setattr(merge, "run_forwarding_signals", self.torchrun)
        monkeypatch.setattr(run_cmd, "check_interpreter", lambda python, env: "9.9")

    def run_target(self, target: str, args: list[str], **kw: Any) -> RunResult:
        self.handed.append(("run_target", target, args, _plain({k: v for k, v in kw.items() if k != "launch"})))
        receipt = fake_receipt()
        path = write_receipt_files(receipt, kw["out"])
        return RunResult(path, 0, SimpleNamespace(ledger=receipt.ledger, last_receipt=receipt))

    def run(self, job: Job, timeout: float | None = None, **_: object) -> Ended:  # the fresh processes
        self.handed.append(("job", job.arg, job.env))
        return Ended(exit_code=1)  # the cold run fails: what it was handed is what counts

    def close(self) -> None:
        pass

    def torchrun(self, cmd: list[str], env: dict[str, str] | None = None) -> tuple[int, int]:
        self.handed.append(("child", cmd))  # torchrun, or `seamscope run` under --python
        return 0, 0


def _invoke(
    args: list[str], target: str, where: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """``seamscope run ARGS TARGET`` in a clean ``where``: (exit code, stderr, what it looked like)."""
    from seamscope.cli import main

    shutil.rmtree(where, ignore_errors=True)
    os.makedirs(where)
    monkeypatch.chdir(where)
    with open("w.py", "w") as f:
        f.write(WORKLOAD)
    with open("helper.py", "w") as f:
        f.write("def f(n):\n    return n\n")
    with open("given.bin", "wb") as f:
        f.write(b"x")
    with open("given.patch", "w") as f:  # --patch: the helper the workload imports, edited
        f.write("--- a/helper.py\n+++ b/helper.py\n@@ -1,2 +1,2 @@\n def f(n):\n-    return n\n+    return n + 1\n")
    fakes = Fakes(monkeypatch)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["run", *args, target])
    out = capsys.readouterr()
    files = {}
    for d, _, names in os.walk(where):
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                files[os.path.relpath(os.path.join(d, n), where)] = hashlib.sha256(f.read()).hexdigest()
    return e.value.code, out.err, (e.value.code, out.out, out.err, fakes.handed, files)


CASES = [(route, opt.name) for route in ROUTES for opt in _options()
         if not (route == "warm" and opt.name == "warm") and not (route == "nproc" and opt.name == "nproc")]


@pytest.mark.parametrize("route, name", CASES)
def test_each_option_is_honoured_or_refused_on_each_route(route, name, tmp_path, monkeypatch, capsys):
    # GIVEN a route and one option (with the option it needs, if any and if the route takes it)
    opt = next(o for o in _options() if o.name == name)
    needed = next((o for o in _options() if o.name == NEEDS.get(name)), None)
    base = [*ROUTES[route], *(_words(needed) if needed is not None else [])]
    where = str(tmp_path / "w")
    target = "w.py" if name in SCRIPT_ONLY else TARGETS[route]
    # WHEN the command runs without it and with it
    code0, _, without = _invoke(base, target, where, monkeypatch, capsys)
    if code0 == 2 and needed is not None:  # the route refuses what the option needs: the option alone
        base = ROUTES[route]
        code0, _, without = _invoke(base, target, where, monkeypatch, capsys)
    code, err, with_it = _invoke([*base, *_words(opt)], target, where, monkeypatch, capsys)
    # THEN it is refused in one line naming it, exit 2, or what the route did differs
    refused = code == 2 and err.count("\n") == 1 and opt.opts[0] in err and err.startswith("seamscope: ")
    if route == "plain" and name not in SELECTORS:
        assert code != 2 and with_it != without, f"the plain route must honour {opt.opts[0]}: {err}"
    else:
        assert refused or (code0 != 2 and with_it != without), (
            f"{' '.join(ROUTES[route])} ignores {opt.opts[0]}: neither refused nor handed on\n{err}")


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_an_option_without_the_one_it_needs_is_one_line_and_exit_2(name, tmp_path, monkeypatch, capsys):
    opt = next(o for o in _options() if o.name == name)
    code, err, _ = _invoke(_words(opt), TARGETS["plain"], str(tmp_path / "w"), monkeypatch, capsys)
    needed = next(o for o in _options() if o.name == NEEDS[name])
    assert code == 2 and err == f"seamscope: {opt.opts[0]} needs {needed.opts[0]}\n"


@pytest.mark.parametrize("name", SCRIPT_ONLY)
def test_an_option_naming_the_scripts_code_refuses_a_workload_in_one_line(name, tmp_path, monkeypatch, capsys):
    opt = next(o for o in _options() if o.name == name)
    code, err, _ = _invoke(_words(opt), TARGETS["plain"], str(tmp_path / "w"), monkeypatch, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"seamscope: {opt.opts[0]} ")


def test_nproc_refuses_a_workload_in_one_line_before_torchrun_starts(tmp_path, monkeypatch, capsys):
    # GIVEN a workload target (FILE.py:FUNC; torchrun's ranks run a script)  WHEN --nproc runs it
    code, err, (_, _, _, handed, _) = _invoke(ROUTES["nproc"], TARGETS["plain"], str(tmp_path / "w"), monkeypatch,
                                              capsys)
    # THEN one line naming both, exit 2, and nothing started
    assert code == 2 and handed == [], err
    assert err == ("seamscope: --nproc runs a script under torchrun; w.py:f is a workload (FILE.py:FUNC), which "
                   "runs in one process: run it without --nproc\n")
