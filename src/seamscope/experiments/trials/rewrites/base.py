"""What a rewrite is and what it hands back (torch-free): the :class:`Rewrite` protocol, the
:class:`Edit` record, and :func:`draft`, the one way an edit becomes a candidate."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

from ....model.normalize import project_root
from ....model.receipt import Receipt
from ...remedy_spec import RemedySpec
from ...source_file import rel_path
from ...unified_diff import make
from ..draft import Draft
from .syntax import Source


@dataclass(frozen=True)
class Edit:
    """One code change a rewrite found: the script's text before and after, and what to say of it."""

    name: str
    """The candidate's name (``guard-logging``, ``tensor-scalar-scale``)."""
    path: str
    """The script, relative to the project root (the diff's path)."""
    before: str
    after: str
    origin: str
    """The finding it answers (its id), or ``code change``."""
    targets: str
    change: str
    """The change in words (no flag says it)."""
    review: str
    """Why to read the patch before applying it."""
    cost_ns: int = 0
    """What the causes it targets cost the baseline."""


class Rewrite(Protocol):
    """A code change read from the baseline's evidence in the user's script. ``find`` reads the
    receipt and the script's :class:`.Source` (shared: it edits a copy of its own) and returns an
    :class:`Edit` per change it can make, none where the evidence or the code does not allow one."""

    name: str

    def find(self, receipt: Receipt, script: str, source: Source) -> list[Edit]: ...


def draft(edit: Edit) -> Draft:
    """The candidate of an edit: no flags, its diff from the project root."""
    return Draft(name=edit.name[:48], spec=RemedySpec(), origin=edit.origin, targets=edit.targets,
                 cost_ns=edit.cost_ns, diff=make(edit.before, edit.after, edit.path), change=edit.change,
                 review=edit.review)


def is_script_file(file: str, script: str) -> bool:
    """Whether a receipt's file is the script (named relative to the project root or the
    script's folder, or in full): a script in a subfolder of a repository is still found."""
    mine = os.path.abspath(script)
    if os.path.isabs(file):
        return os.path.abspath(file) == mine
    here = os.path.dirname(mine)
    return mine in (os.path.abspath(os.path.join(project_root(here), file)), os.path.abspath(os.path.join(here, file)))


def break_lines(receipt: Receipt, script: str) -> set[int]:
    """The script's lines where the baseline broke the graph."""
    return {s.line for s in receipt.ledger.break_sites if is_script_file(s.file, script)}


def site_edit(name: str, receipt: Receipt, script: str, source: Source, after: str, lines: list[int],
              targets: str, change: str, review: str) -> Edit:
    """The edit of a rewrite at break sites (``lines``): ``N targets (FILE:LINE, ...)``, ``{where}``
    in ``change`` filled in, its cost the summed cost of those sites' findings; its origin the
    break's finding where it answers one (``try`` then checks its runs for that break), else
    ``code change``."""
    where = ", ".join(f"{os.path.basename(script)}:{n}" for n in lines)
    findings = receipt.findings.findings if receipt.findings else []
    cost = {f.site_id: (f.cost_ns or 0) for f in findings if f.site_id}
    sites = [s.site_id for s in receipt.ledger.break_sites if is_script_file(s.file, script) and s.line in lines]
    answered = {f.finding_id for f in findings if f.site_id and f.site_id in sites}
    origin = answered.pop() if len(answered) == 1 else "code change"
    return Edit(name=name, path=rel_path(script), before=source.text, after=after, origin=origin,
                targets=f"{len(lines)} {targets} ({where})", change=change.format(where=where), review=review,
                cost_ns=sum(cost.get(i, 0) for i in sites))


def churn_edit(name: str, cause: Any, targets: str, script: str, source: Source, after: str, change: str,
               review: str) -> Edit:
    """The edit of a rewrite for the recompile ``cause`` (a churn finding, or None: ``targets``
    then says what it targets), its cost the cause's."""
    return Edit(name=name, path=rel_path(script), before=source.text, after=after,
                origin=cause.finding_id if cause else "code change", targets=cause.sentence if cause else targets,
                change=change, review=review,
                cost_ns=(cause.churn.compile_ns if cause and cause.churn else 0) or 0)
