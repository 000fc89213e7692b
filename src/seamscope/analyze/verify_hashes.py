"""Canonical bytes and the two receipt hashes, re-implemented for ``seamscope verify``.

Part of the independent oracle (``analyze.verify``): a plain encoder over raw JSON (dicts and
lists) with sorted keys, compact separators and floats at 6 significant digits, and the receipt
and structure hashes over it. It imports none of the accounting it checks (``model.canonical``,
``model.hashing``), so a bug in the receipts' own encoder cannot hide on both sides.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def _float6(x: float) -> str:
    if not math.isfinite(x):
        return "null"
    if x == 0.0:
        return "0.0"
    r = repr(float(f"{x:.6g}"))
    if "e" not in r:
        return r
    mant, exp = r.split("e")
    e = int(exp)
    if e == -5:  # written positionally (0.00001234), like the encoder the receipts come from
        sign = "-" if mant.startswith("-") else ""
        return sign + "0.0000" + mant.lstrip("-").replace(".", "")
    return f"{mant}e{e}"


def _encode(obj: Any, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, float):
        out.append(_float6(obj))
    elif isinstance(obj, str):
        out.append(json.dumps(obj, ensure_ascii=False))
    elif isinstance(obj, dict):
        out.append("{")
        for i, k in enumerate(sorted(obj, key=str)):
            if i:
                out.append(",")
            out.append(json.dumps(str(k), ensure_ascii=False))
            out.append(":")
            _encode(obj[k], out)
        out.append("}")
    elif isinstance(obj, list):
        out.append("[")
        for i, v in enumerate(obj):
            if i:
                out.append(",")
            _encode(v, out)
        out.append("]")
    else:
        raise TypeError(f"not JSON: {type(obj).__name__}")


def canonical(obj: Any) -> bytes:
    """Sorted keys, compact separators, floats at 6 significant digits, UTF-8."""
    out: list[str] = []
    _encode(obj, out)
    return "".join(out).encode("utf-8")


def sha(obj: Any) -> str:
    return hashlib.sha256(canonical(obj)).hexdigest()


def receipt_hash(raw: dict[str, Any], **override: Any) -> str:
    d = dict(raw)
    d.update(override)
    d["receipt_sha256"] = ""
    return sha(d)


def structure_hash(raw: dict[str, Any]) -> str:
    led, summ = raw["ledger"], raw["summary"]
    comps = [
        {
            "compile_id": c["compile_id"],
            "frame": [c["frame_name"], c["file"], c["line"]],
            "status": c["status"],
            "graphs": c["graph_count"],
            "guards": c["guard_count"],
            "failed_guards": c["failed_guards"],
            "fail_type": c["fail_type"],
            "sites": c["break_site_ids"],
        }
        for c in led["compilations"]
    ]
    sites = [
        [s["site_id"], s["file"], s["line"], s["function"], s["gb_code"], s["gb_type"], s["compile_ids"]]
        for s in led["break_sites"]
    ]
    seq_of = {"region": lambda e: e["compile_id"], "break": lambda e: "B:" + e["site_id"],
              "fallback": lambda e: "F:" + e["compile_id"]}
    calls = [
        [c["index"], c["phase"], c["outcome"], c["family"],
         [seq_of[e["type"]](e) for e in c["events"] if e["type"] in seq_of]]
        for c in led["calls"]
    ]
    keys = ("call_count", "compile_count", "recompile_count", "graph_count", "fallback_count",
            "break_site_count")
    return sha({
        "schema": led["schema_version"],
        "counts": {k: summ[k] for k in keys},
        "compilations": comps,
        "sites": sites,
        "calls": calls,
        "region_runs": [[r["compile_id"], r["runs"], r["outside_runs"]] for r in led["totals"]["regions"]],
        "site_crossings": [[s["site_id"], s["crossings"], s["calls_crossing"]] for s in led["totals"]["sites"]],
    })


def expand_guard_table(raw: dict[str, Any]) -> dict[str, Any]:
    """The receipt with its ``guard_table`` (failed guards stored once) expanded back into each
    compilation's and recompile summary's ``failed_guards``, as the hashes cover them. A receipt
    the reader already accepted (``ingest.receipt``), so every index is in the table."""
    table = raw.get("guard_table")
    if not table:
        return raw
    texts = table["texts"]

    def names(refs: list[Any]) -> list[str]:
        out = []
        for r in refs:
            a, b = (r, r) if isinstance(r, int) else r
            step = 1 if b >= a else -1
            out += [texts[i] for i in range(a, b + step, step)]
        return out

    led = dict(raw["ledger"])
    led["compilations"] = [{**c, "failed_guards": c["failed_guards"] + names(r)}
                           for c, r in zip(led["compilations"], table["compilations"], strict=True)]
    summ = dict(raw["summary"])
    summ["recompiles"] = [{**c, "failed_guards": c["failed_guards"] + names(r)}
                          for c, r in zip(summ["recompiles"], table["recompiles"], strict=True)]
    return {**raw, "ledger": led, "summary": summ, "guard_table": None}
