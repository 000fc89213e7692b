"""One way to build a record from another that holds the same fields: a summary row from a ledger
record, a view row from a summary row."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar, cast

import msgspec

R = TypeVar("R")


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The field names of a Struct or dataclass (looked up once per class: it reads annotations)."""
    if issubclass(cls, msgspec.Struct):
        return tuple(f.name for f in msgspec.structs.fields(cls))
    return tuple(f.name for f in dataclasses.fields(cast(Any, cls)))


def carry(cls: type[R], source: object, **given: Any) -> R:
    """A ``cls`` (a msgspec Struct or a dataclass) with the ``given`` fields; every other field is
    ``source``'s field of the same name, which must exist."""
    names = _field_names(cast(Any, cls))
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
    return cast(Any, cls)(**{n: given[n] if n in given else getattr(source, n) for n in names})
