"""What PyTorch's hint class of a break means for the user, as remedies of its finding.

A site carries its classes (``BreakSite.hint_classes``, from ``torch._dynamo.graph_break_hints``)
and the breaks that followed from it (``BreakSite.chained``). For a break PyTorch says may be
caused by an earlier one, the earlier one is named: for a chained break, the site's own break;
for a site of its own, the nearest site broken at or before its first compilation.
"""

from __future__ import annotations

from ..ingest.hints import MEANING
from ..model.ledger import BreakSite, Ledger, compile_frame_index
from ..model.remedy import Remedy

EARLIER = "CAUSED_BY_EARLIER_GRAPH_BREAK"


def _name(site: BreakSite) -> str:
    what = site.gb_type or site.gb_code or "graph break"
    return f"break {site.site_id} at {site.file}:{site.line} ({what})"


def earlier_site(site: BreakSite, sites: list[BreakSite]) -> BreakSite | None:
    """The break met just before ``site``: the latest other site whose first compilation is not
    after ``site``'s (same compilation: the line above)."""
    if not site.compile_ids:
        return None
    mine = (compile_frame_index(site.compile_ids[0]), site.line)
    best: tuple[tuple[tuple[int, int], int], BreakSite] | None = None
    for s in sites:
        if s.site_id == site.site_id or not s.compile_ids:
            continue
        key = (compile_frame_index(s.compile_ids[0]), s.line)
        if key < mine and (best is None or key > best[0]):
            best = (key, s)
    return best[1] if best else None


def hint_remedies(site: BreakSite, sites: list[BreakSite]) -> list[Remedy]:
    """One remedy per hint class of the site's own break, then one for each chained break."""
    out: list[Remedy] = []
    for cls in site.hint_classes:
        text = MEANING.get(cls, f"PyTorch classes it {cls}")
        if cls == EARLIER:
            prev = earlier_site(site, sites)
            text += f": {_name(prev)}" if prev else " (no earlier break was recorded in this run)"
        out.append(Remedy(action="pytorch_hint_class", text=f"{cls}: {text}", config={"class": cls}))
    for ch in site.chained:
        what = f"{ch.gb_type or 'graph break'}" + (f" ({ch.gb_code})" if ch.gb_code else "")
        if EARLIER in ch.hint_classes:
            text = (f"{EARLIER}: while handling this break Dynamo met a second one, {what}, which PyTorch says "
                    "may be caused by an earlier break: this one. Fix this break first; the second goes with it")
        else:
            classes = ", ".join(ch.hint_classes) or "no class"
            text = f"while handling this break Dynamo met a second one, {what} (PyTorch: {classes})"
        out.append(Remedy(action="pytorch_hint_class", text=text,
                          config={"class": EARLIER if EARLIER in ch.hint_classes else "chained"}))
    return out


UNRESUMABLE = "Encountered graph break that we cannot resume from"


def resume_clause(site: BreakSite, ledger: Ledger) -> str:
    """For a break Dynamo could not resume from inside a function the compiled frame calls
    (PyTorch's "compiling up to the previous resumable state, then skipping the rest of the
    function"): which frame stopped being compiled there. What follows the call runs eagerly, every
    function it calls compiled as a frame of its own, so the break's cost is more than its island.
    Empty for any other break."""
    if not (site.gb_type or "").startswith(UNRESUMABLE) or site.frame_skipped:
        return ""
    comp = next((c for c in ledger.compilations if site.compile_ids and c.compile_id == site.compile_ids[0]), None)
    if comp is None:
        return "; Dynamo could not resume after it: the rest of the compiled frame runs eagerly"
    shown = comp.user_frame.function if comp.user_frame is not None else comp.frame_name
    return (f"; Dynamo could not resume after it: {shown} is compiled only up to the call that leads here, and the "
            f"rest of {shown} runs eagerly, each function it calls compiled as a frame of its own")


def class_clause(site: BreakSite) -> str:
    """``; PyTorch class FUNDAMENTAL`` for the finding's sentence (empty without a class or chain)."""
    out = f"; PyTorch class {', '.join(site.hint_classes)}" if site.hint_classes else ""
    follow = [c.gb_type or c.gb_code or "graph break" for c in site.chained if EARLIER in c.hint_classes]
    if follow:
        out += f"; the break Dynamo met after it ({', '.join(follow)}) follows from this one"
    return out
