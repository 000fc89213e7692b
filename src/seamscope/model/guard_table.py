"""Failed-guard texts stored once in ``receipt.json``, however often they recur.

When a frame recompiles, Dynamo names the guard that failed for *every* cache entry it already
holds, so the ``k``-th recompile of a frame repeats the ``k - 1`` texts before it: held in each
compilation and again in its recompile summary, a run of 300 recompiles wrote 45,000 copies
(7.5 MB). On disk the receipt instead holds each distinct text once (``guard_table.texts``) and
every compilation and recompile summary names its texts by index; a run of consecutive indices
is one ``[first, last]`` pair (either direction), so the common case costs one pair per
recompile and the file grows linearly with recompiles.

In memory nothing changes: readers expand the table back into ``failed_guards`` (and drop it),
writers build it; hashes are over the expanded content. A receipt written without a table (an
older one) is read as it is.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from .ledger import Struct

if TYPE_CHECKING:
    from .receipt import Receipt

#: Most failed-guard entries a table may expand to (a hostile file could name one run of the
#: whole table millions of times); 300 recompiles of one frame expand to 45,000.
MAX_EXPANDED = 5_000_000

Refs = list[int | list[int]]


class GuardTable(Struct, frozen=True):
    """Each distinct failed-guard text once; who refers to which (by position)."""

    texts: list[str]
    compilations: list[Refs]
    """Per ``ledger.compilations`` entry, in order: its ``failed_guards`` as indices into
    ``texts`` (an integer, or ``[first, last]`` for a run of consecutive indices)."""
    recompiles: list[Refs]
    """Per ``summary.recompiles`` entry, in order, the same."""


def encode_refs(ids: list[int]) -> Refs:
    """``[5, 4, 3, 2, 9]`` → ``[[5, 2], 9]``: runs of consecutive indices as pairs, taken greedily
    from the left. The steps between neighbours are found in C (``map``, ``groupby``), so a long
    run costs one step in Python, not one per index."""
    n = len(ids)
    if n < 2:
        return list(ids)
    runs: list[tuple[int, int]] = []  # [start, stop) of each stretch of equal steps of ±1
    pos = 0
    for step, same in itertools.groupby(map(operator.sub, ids[1:], ids[:-1])):
        k = len(list(same))
        if step == 1 or step == -1:
            runs.append((pos, pos + k))
        pos += k
    out: Refs = []
    i = g = 0
    while i < n:
        while g < len(runs) and runs[g][1] <= i:
            g += 1
        if g < len(runs) and runs[g][0] <= i:  # ids[i], ids[i + 1], ... step by ±1 to runs[g]'s end
            j = runs[g][1]
            out.append([ids[i], ids[j]])
            i = j + 1
        else:
            nxt = runs[g][0] if g < len(runs) else n
            out.extend(ids[i:nxt])
            i = nxt
    return out


def decode_refs(refs: Refs, n_texts: int, where: str) -> list[int]:
    """The indices ``refs`` names; ValueError naming ``where`` for one the table lacks."""
    out: list[int] = []
    for r in refs:
        if isinstance(r, int):
            lo = hi = r
        elif len(r) == 2:
            lo, hi = r
        else:
            raise ValueError(f"{where}: a run of guard texts is [first, last], not {len(r)} numbers")
        bad = next((i for i in (lo, hi) if not 0 <= i < n_texts), None)
        if bad is not None:  # the end that is out of the table, not the other one
            raise ValueError(f"{where}: guard text {bad} is not in the table of {n_texts}")
        out.extend(range(lo, hi + 1) if lo <= hi else range(lo, hi - 1, -1))
    return out


def compact(receipt: Receipt) -> Receipt:
    """The receipt as written: failed guards moved into one table (unchanged when there are none)."""
    led, summ = receipt.ledger, receipt.summary
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is led and last[1] is summ:  # hashed, now written: made once
        return msgspec.structs.replace(receipt, ledger=last[2], summary=last[3], guard_table=last[4])
    if not any(c.failed_guards for c in led.compilations) and not any(r.failed_guards for r in summ.recompiles):
        return receipt
    index: dict[str, int] = {}
    done: dict[tuple[str, ...], Refs] = {}  # a recompile summary repeats its compilation's texts

    def refs(texts: list[str]) -> Refs:
        key = tuple(texts)
        out = done.get(key)
        if out is None:
            fresh = [t for t in dict.fromkeys(texts) if t not in index]  # new texts, first seen first
            index.update(zip(fresh, range(len(index), len(index) + len(fresh)), strict=True))
            out = done[key] = encode_refs(list(map(index.__getitem__, texts)))
        return out

    comp_refs = [refs(c.failed_guards) for c in led.compilations]
    rec_refs = [refs(r.failed_guards) for r in summ.recompiles]
    table = GuardTable(texts=list(index), compilations=comp_refs, recompiles=rec_refs)
    rep = msgspec.structs.replace
    led = rep(led, compilations=[rep(c, failed_guards=[]) for c in led.compilations])
    packed_summ = rep(summ, recompiles=[rep(r, failed_guards=[]) for r in summ.recompiles])
    _LAST[:] = [(receipt.ledger, summ, led, packed_summ, table)]
    return rep(receipt, ledger=led, summary=packed_summ, guard_table=table)


#: The last receipt parts :func:`compact` packed, and what it made of them: a receipt is packed
#: for its hash and again, with the hash, to be written; ledgers and summaries are frozen.
_LAST: list[tuple[Any, Any, Any, Any, GuardTable]] = []


def expand(receipt: Receipt) -> Receipt:
    """The receipt as every analysis reads it: ``failed_guards`` whole, no table.

    Raises ValueError (naming the field) for a table that does not fit the receipt."""
    table = receipt.guard_table
    if table is None:
        return receipt
    led, summ = receipt.ledger, receipt.summary
    n = len(table.texts)
    total = sum(hi - lo + 1 if lo <= hi else lo - hi + 1
                for refs in (*table.compilations, *table.recompiles)
                for lo, hi in ((r, r) if isinstance(r, int) else (r[0], r[-1]) if r else (0, -1) for r in refs))
    if total > MAX_EXPANDED:
        raise ValueError(f"guard_table names {total} failed guards, over the {MAX_EXPANDED} a receipt may hold")
    for what, refs, items in (("compilations", table.compilations, led.compilations),
                              ("recompiles", table.recompiles, summ.recompiles)):
        if len(refs) != len(items):
            raise ValueError(f"guard_table.{what}: {len(refs)} entries for {len(items)} {what}")

    def texts(old: list[str], refs: Refs, where: str) -> list[str]:
        return [*old, *(table.texts[i] for i in decode_refs(refs, n, where))]

    rep = msgspec.structs.replace
    comps = [rep(c, failed_guards=texts(c.failed_guards, r, f"guard_table.compilations[{i}]"))
             for i, (c, r) in enumerate(zip(led.compilations, table.compilations, strict=True))]
    recs = [rep(c, failed_guards=texts(c.failed_guards, r, f"guard_table.recompiles[{i}]"))
            for i, (c, r) in enumerate(zip(summ.recompiles, table.recompiles, strict=True))]
    return rep(receipt, ledger=rep(led, compilations=comps), summary=rep(summ, recompiles=recs), guard_table=None)


def expand_builtins(raw: dict[str, Any]) -> dict[str, Any]:
    """:func:`expand` on a compacted receipt's plain data (``canonical.canonical_value`` of
    ``compact(receipt)``): the same data as the expanded receipt's, each text shared from the
    table, not copied. The receipt's hash is taken over it (:func:`hashing.receipt_sha256`)."""
    table = raw.get("guard_table")
    if table is None:
        return raw
    texts = table["texts"]
    for part, items in ((raw["ledger"], "compilations"), (raw["summary"], "recompiles")):
        for item, refs in zip(part[items], table[items], strict=True):
            out = item["failed_guards"]
            for r in refs:  # a table compact() made: every index is in it
                if type(r) is int:
                    out.append(texts[r])
                else:
                    lo, hi = r
                    out += texts[lo : hi + 1] if lo <= hi else texts[hi : lo + 1][::-1]
    raw["guard_table"] = None
    return raw


_encode = msgspec.json.Encoder().encode
_sorted = msgspec.json.Encoder(order="sorted").encode
_GUARDS = "failed_guards"


def feed_expanded(out: Callable[[bytes], object], raw: dict[str, Any], table: GuardTable) -> bool:
    """Write the canonical bytes of ``expand_builtins(raw)`` to ``out`` (``hashlib``'s
    ``update``) without expanding: ``raw`` is the plain data of a receipt :func:`compact` made
    and ``table`` its table. Each distinct text is encoded once, and a run of consecutive indices
    is one slice of the texts encoded in a row (forwards or backwards); a compilation and its
    recompile summary share their references (``compact``), whose bytes are made once. So the
    37 MB of a receipt of 1,550 recompiles are fed from 2,700 texts' bytes. ``raw`` is left as
    it is. False, with nothing written, for plain data of another shape (the caller expands)."""
    parts: dict[str, tuple[str, list[Refs]]] = {
        "ledger": ("compilations", table.compilations), "summary": ("recompiles", table.recompiles)}
    for key, (items, named) in parts.items():
        part = raw.get(key)
        got = part.get(items) if type(part) is dict else None
        if type(got) is not list or len(got) != len(named):
            return False
        if not all(type(d) is dict and type(d.get(_GUARDS)) is list for d in got):
            return False
    encs = list(map(_encode, table.texts))
    n = len(encs)
    fwd, back = memoryview(b",".join(encs)), memoryview(b",".join(reversed(encs)))
    at = list(itertools.accumulate((len(e) + 1 for e in encs), initial=0))  # where each starts in fwd
    back_at = list(itertools.accumulate((len(e) + 1 for e in reversed(encs)), initial=0))
    made: dict[int, bytes] = {}  # id of a table's references (alive in it) -> their list's bytes

    def guards(old: list[str], refs: Refs) -> bytes:
        if not old and id(refs) in made:
            return made[id(refs)]
        pieces: list[bytes | memoryview] = [
            encs[r] if isinstance(r, int)
            else fwd[at[r[0]] : at[r[1] + 1] - 1] if r[0] <= r[1]
            else back[back_at[n - 1 - r[0]] : back_at[n - r[1]] - 1]  # texts lo, lo - 1, ..., hi
            for r in refs
        ]
        if old:
            pieces.insert(0, _sorted(old)[1:-1])
        text = b"[" + b",".join(pieces) + b"]"
        if not old:
            made[id(refs)] = text
        return text

    def item(d: dict[str, Any], refs: Refs) -> None:
        # sorted keys: those before "failed_guards", the expanded list, those after
        head = _sorted({k: v for k, v in d.items() if k < _GUARDS})
        tail = _sorted({k: v for k, v in d.items() if k > _GUARDS})
        out(head[:-1] + b',"failed_guards":' if len(head) > 2 else b'{"failed_guards":')
        out(guards(d[_GUARDS], refs))
        out(b"," + tail[1:] if len(tail) > 2 else b"}")

    sep = b"{"
    for key in sorted(raw):
        out(sep + _encode(key) + b":")
        sep = b","
        if key == "guard_table":
            out(b"null")
        elif key not in parts:
            out(_sorted(raw[key]))
        else:
            items, all_refs = parts[key]
            part = raw[key]
            inner = b"{"
            for k in sorted(part):
                out(inner + _encode(k) + b":")
                inner = b","
                if k != items:
                    out(_sorted(part[k]))
                    continue
                lead = b"["
                for d, refs in zip(part[k], all_refs, strict=True):
                    out(lead)
                    item(d, refs)
                    lead = b","
                out(b"]" if lead == b"," else b"[]")
            out(b"}" if inner == b"," else b"{}")
    out(b"}" if sep == b"," else b"{}")
    return True


__all__ = ["GuardTable", "Refs", "encode_refs", "decode_refs", "compact", "expand", "expand_builtins", "feed_expanded"]
