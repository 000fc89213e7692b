"""The two hashes of every receipt (docs/conventions.md, "Hashes and determinism").

``structure_sha256`` covers what must not change between two runs of the same program: counts,
sites, compile ids, guard texts, outcomes, the order of regions in each call; never a timing.
``receipt_sha256`` covers everything in the receipt but itself.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .canonical import sha256_of
from .ledger import BreakEvent, FallbackEvent, Ledger, RegionEvent


def structure_view(ledger: Ledger, summary: Any) -> dict[str, Any]:
    comps = [
        {
            "compile_id": c.compile_id,
            "frame": [c.frame_name, c.file, c.line],
            "status": c.status,
            "graphs": c.graph_count,
            "guards": c.guard_count,
            "failed_guards": c.failed_guards,
            "fail_type": c.fail_type,
            "sites": c.break_site_ids,
        }
        for c in ledger.compilations
    ]
    sites = [
        [s.site_id, s.file, s.line, s.function, s.gb_code, s.gb_type, s.compile_ids]
        for s in ledger.break_sites
    ]
    calls = [
        [
            c.index,
            c.phase,
            c.outcome,
            c.family,
            [
                e.compile_id if isinstance(e, RegionEvent) else ("B:" + e.site_id if isinstance(e, BreakEvent) else "F:" + e.compile_id)
                for e in c.events
                if isinstance(e, (RegionEvent, BreakEvent, FallbackEvent))
            ],
        ]
        for c in ledger.calls
    ]
    counts = {
        k: getattr(summary, k)
        for k in ("call_count", "compile_count", "recompile_count", "graph_count", "fallback_count", "break_site_count")
    }
    return {
        "schema": ledger.schema_version,
        "counts": counts,
        "compilations": comps,
        "sites": sites,
        "calls": calls,
        "region_runs": [[r.compile_id, r.runs, r.outside_runs] for r in ledger.totals.regions],
        "site_crossings": [[s.site_id, s.crossings, s.calls_crossing] for s in ledger.totals.sites],
    }


def structure_sha256(ledger: Ledger, summary: Any) -> str:
    return sha256_of(structure_view(ledger, summary))


def receipt_sha256(receipt: Any) -> str:
    return sha256_of(msgspec.structs.replace(receipt, receipt_sha256=""))
