"""Helpers shared by the break and churn findings: stable ids, the suggested-command placeholder,
and small text formatting."""

from __future__ import annotations

import hashlib
import re
import shlex

import msgspec

from ..model.findings import Finding
from ..model.ledger import Compilation, Frame, RunInfo
from ..model.normalize import normalize_text, short_path
from ..model.remedy import Remedy, RemedyAction

PROBE = "seamscope probe FILE.py:FUNC"
"""Placeholder for the user's workload in suggested commands; :func:`retarget` turns it into the
command that fits what was run (``seamscope run FLAGS SCRIPT`` for a script)."""
SCRIPT = "SCRIPT"
"""Placeholder for the user's script in suggested commands (where the ledger does not name it)."""


def run_target(run: RunInfo) -> str:
    """What ``seamscope run`` is given to run again what this ledger recorded: the script (or
    ``-m MODULE``, or the workload) and its arguments, quoted for a shell; :data:`SCRIPT` where the
    ledger does not say (a session inside a program, an imported log)."""
    if run.source != "live" or not run.command:
        return SCRIPT
    first, *args = run.command
    head = ["-m", first[3:]] if first.startswith("-m ") else [first]
    return shlex.join([*head, *args])


def retarget(remedy: Remedy, run: RunInfo) -> Remedy:
    """``remedy`` with its suggested command fitting what was run: a probe's workload keeps
    ``seamscope probe FILE.py:FUNC FLAGS``; a script gets ``seamscope run FLAGS SCRIPT`` (every
    flag a probe takes for a remedy, ``run`` takes too), with the script named where it is known."""
    cmd = remedy.try_with
    if cmd is None or run.source == "probe":
        return remedy
    if cmd.startswith(PROBE + " "):
        cmd = f"seamscope run {cmd[len(PROBE) + 1:]} {SCRIPT}"
    if cmd.startswith("seamscope run ") and cmd.endswith(" " + SCRIPT):
        cmd = cmd[: -len(SCRIPT)] + run_target(run)
    return remedy if cmd == remedy.try_with else msgspec.structs.replace(remedy, try_with=cmd)


def config_remedy(
    action: RemedyAction, text: str, key: str, value: str, *, add: bool = False, hints: list[str] | None = None
) -> Remedy:
    """A remedy that is one ``torch._dynamo.config`` change (``add``: one more entry in a list
    setting), with the probe command that tries it."""
    return Remedy(
        action=action,
        text=text,
        config={key: f"add {value}" if add else value},
        try_with=f"{PROBE} --dynamo-config {key}{'+=' if add else '='}{value}",
        torch_hints=hints or [],
    )


# --- ids -----------------------------------------------------------------------------------------

_LINE_NO = re.compile(r"(_at_|line |:)\d+")


def stable_text(text: str) -> str:
    """Reason text with everything that moves between runs or with edits above the site removed."""
    return _LINE_NO.sub(r"\1#", normalize_text(text)).strip()


def hash_id(prefix: str, *parts: object) -> str:
    return prefix + hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:8]




def replaced(f: Finding, **changes: object) -> Finding:
    return msgspec.structs.replace(f, **changes)


def frame_label(name: str, file: str, line: int, user_frame: Frame | None = None) -> str:
    """``forward (transformers/models/x.py:12)``: a frame as findings and causes name it; the
    user's frame instead when the compiled one is a wrapper (``Compilation.user_frame``)."""
    if user_frame is not None:
        name, file, line = user_frame.function, user_frame.file, user_frame.line
    return f"{name} ({short_path(file)}:{line})"


def compilation_label(c: Compilation) -> str:
    """A compilation's frame as reports name it (:func:`frame_label`)."""
    return frame_label(c.frame_name, c.file, c.line, c.user_frame)


RESUME_FRAME = re.compile(r"torch_dynamo_resume_in_(\w+?)_at_(\d+)$")
"""A resume function's name: the function it resumes and the line of the break before it."""


def stable_frame(name: str) -> str:
    """A frame's name without the line a resume function's name carries (edits above keep it)."""
    return RESUME_FRAME.sub(lambda m: f"torch_dynamo_resume_in_{m.group(1)}", name)
