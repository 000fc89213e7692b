"""Renderers: they format what a receipt already holds and compute no figure.

Every file renderer satisfies one protocol, :class:`Renderer`: an ``extension`` (how the file's
name ends, leading dot included: ``".html"``, ``".seamscope-trace.jsonl"``) and one method,
``render(subject)``, returning the file's text or bytes. The subject is a
:class:`~seamscope.model.receipt.Receipt` for every renderer but the remedy trials' tables,
which render a :class:`~seamscope.model.trials.Trials`. A renderer may take options in its
constructor and may offer a narrower method beside ``render`` (``render_view``,
``render_ledger``, ``render_study``); terminal renderers also have ``print``. Only the command
line and the ``write_*`` helpers write files; :func:`write_rendered` is the one way they do.
"""

from __future__ import annotations

import os
from typing import Protocol, TypeVar, runtime_checkable

S = TypeVar("S", contravariant=True)
T = TypeVar("T")


@runtime_checkable
class Renderer(Protocol[S]):
    """Renders one subject (a receipt, unless named otherwise) into one file's content."""

    extension: str
    """How the file's name ends, with its leading dot."""

    def render(self, subject: S, /) -> str | bytes:
        """The whole file: text (written as UTF-8) or bytes."""
        ...




def file_name(renderer: Renderer[T], stem: str) -> str:
    """``stem`` with the renderer's extension: ``file_name(HtmlRenderer(), "index") == "index.html"``."""
    return stem + renderer.extension


def write_rendered(renderer: Renderer[T], subject: T, folder: str | os.PathLike[str], stem: str) -> str:
    """Render ``subject`` and write it atomically as ``folder/stem + extension``; return the path."""
    from .files import write_atomic

    return write_atomic(os.path.join(os.fspath(folder), file_name(renderer, stem)), renderer.render(subject))
