"""One way to build a record from another that holds the same fields: a summary row from a ledger
record, a view row from a summary row."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

import msgspec

R = TypeVar("R")


def carry(cls: type[R], source: object, **given: Any) -> R:
    """A ``cls`` (a msgspec Struct or a dataclass) with the ``given`` fields; every other field is
    ``source``'s field of the same name, which must exist."""
    if issubclass(cls, msgspec.Struct):
        names = [f.name for f in msgspec.structs.fields(cls)]
    else:
        names = [f.name for f in dataclasses.fields(cast(Any, cls))]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
    return cast(Any, cls)(**{n: given[n] if n in given else getattr(source, n) for n in names})
