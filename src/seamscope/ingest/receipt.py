"""Reading a receipt back, strictly: any problem is one line naming the file, and exit 2."""

from __future__ import annotations

import os

import msgspec

from .._version import __version__
from ..errors import UnusableInput
from ..model.guard_table import expand
from ..model.ledger import SCHEMA_VERSIONS_READ
from ..model.receipt import Receipt
from .limits import decode_json


def read_receipt_bytes(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """A receipt's bytes and the name to report it by (a folder means its ``receipt.json``)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "receipt.json")
    try:
        with open(p, "rb") as f:
            return f.read(), p
    except FileNotFoundError:
        raise UnusableInput(f"{p}: no such file") from None
    except OSError as e:
        raise UnusableInput(f"{p}: cannot read: {e.strerror}") from None


def load_receipt(path: str | os.PathLike[str]) -> Receipt:
    """The receipt at ``path`` (a ``receipt.json``, or the folder holding one), checked for its
    kind and schema version; ``UnusableInput`` with one line saying why it cannot be read."""
    data, name = read_receipt_bytes(path)
    return parse_receipt(data, name)


def _newer_writer(raw: dict[str, object], error: str) -> str:
    """Within a schema version fields are only ever added (optional, with defaults), so a field
    this reader does not know means a newer seamscope wrote the receipt: say which, and what to do."""
    if "unknown field" not in error:
        return ""
    ledger = raw.get("ledger")
    env = ledger.get("environment") if isinstance(ledger, dict) else None
    wrote = env.get("seamscope_version") if isinstance(env, dict) else None
    by = f"seamscope {wrote}" if isinstance(wrote, str) else "a newer seamscope"
    return f" (written by {by}; this is seamscope {__version__}: upgrade to read it)"


def parse_receipt(data: bytes, name: str = "<receipt>") -> Receipt:
    raw = decode_json(data, name)
    if not isinstance(raw, dict) or raw.get("kind") != "seamscope.receipt":
        raise UnusableInput(f"{name}: not a seamscope receipt (no \"kind\": \"seamscope.receipt\")")
    version = raw.get("schema_version")
    if version not in SCHEMA_VERSIONS_READ:
        raise UnusableInput(
            f"{name}: receipt schema version {version!r} is not supported "
            f"(this seamscope reads versions 1 to {max(SCHEMA_VERSIONS_READ)})"
        )
    try:
        receipt = msgspec.convert(raw, type=Receipt)
    except msgspec.ValidationError as e:
        raise UnusableInput(f"{name}: does not match the receipt schema: {e}{_newer_writer(raw, str(e))}") from None
    try:
        receipt = expand(receipt)
    except ValueError as e:
        raise UnusableInput(f"{name}: {e}") from None
    if receipt.ledger.schema_version not in SCHEMA_VERSIONS_READ:
        raise UnusableInput(
            f"{name}: ledger schema version {receipt.ledger.schema_version!r} is not supported "
            f"(this seamscope reads versions 1 to {max(SCHEMA_VERSIONS_READ)})"
        )
    return receipt
