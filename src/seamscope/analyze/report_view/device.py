"""Host and device lanes, for calls timed on a device."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ...model.ledger import Call, DeviceTimeline, IslandEvent, RegionEvent
from ...model.receipt import Receipt
from ..units import fmt_ns
from .base import ISLAND_COLOUR, MAX_TIMELINE_ROWS, PALETTE, Bar, make_bar, pick_timeline_calls

# --- host and device lanes (calls timed on a device) --------------------------------------------


@dataclass(frozen=True)
class DeviceLaneRow:
    call_index: int
    phase: str
    wall_ns: int
    span_ns: int
    """The call's device span (0 when incomplete)."""
    complete: bool
    syncs: int
    host: list[Bar]
    device: list[Bar]
    """Regions' device work, and seam gaps (kind ``gap``, or ``sync`` when the island before synced)."""


@dataclass(frozen=True)
class DeviceLanes:
    rows: list[DeviceLaneRow]
    note: str


def _host_lane(call: Call, scale: int, colours: dict[str, str]) -> list[Bar]:
    """The call's regions as launched from the host, and its eager islands."""
    host: list[Bar] = []
    for e in call.events:
        if isinstance(e, RegionEvent):
            tip = f"region {e.compile_id} on the host (launch): {fmt_ns(e.duration_ns)}"
            colour = colours.get(e.compile_id, PALETTE[0])
            host.append(make_bar("region", e.start_ns, e.duration_ns, scale, colour, e.compile_id, tip))
        elif isinstance(e, IslandEvent):
            tip = f"eager island: {fmt_ns(e.duration_ns)}"
            host.append(make_bar("island", e.start_ns, e.duration_ns, scale, ISLAND_COLOUR, "", tip))
    return host


def _device_lane(d: DeviceTimeline, scale: int, colours: dict[str, str]) -> list[Bar]:
    """The regions' device work, each preceded by its seam's gap (a sync where the island synced)."""
    device: list[Bar] = []
    cursor = 0
    for i, seam in enumerate(d.seams):
        if seam.gap_ns:
            kind = "sync" if seam.syncs else "gap"
            tip = f"device seam gap: {fmt_ns(seam.gap_ns)} (the island's kernels, or the device idle)"
            if seam.syncs:
                tip += (f"\n{seam.syncs} device-to-host sync(s) in the island; "
                        f"the host waited {fmt_ns(seam.host_wait_ns or 0)}")
            colour = SYNC_COLOUR if seam.syncs else GAP_COLOUR
            device.append(make_bar(kind, cursor, seam.gap_ns, scale, colour, "", tip))
        cursor += seam.gap_ns
        if i < len(d.regions):
            r = d.regions[i]
            tip = f"region {r.compile_id} on the device: {fmt_ns(r.duration_ns)}"
            colour = colours.get(r.compile_id, PALETTE[0])
            device.append(make_bar("region", r.start_ns, r.duration_ns, scale, colour, r.compile_id, tip))
            cursor = r.start_ns + r.duration_ns
    return device


def build_device_lanes(receipt: Receipt, colours: dict[str, str], limit: int = MAX_TIMELINE_ROWS) -> DeviceLanes | None:
    """Each call timed on the device: its host lane (regions and islands, as launched) above its
    device lane (the regions' device work and the seam gaps), both on the scale of the longer of
    its wall time and its device span. None when no call was timed on a device."""

    timed = [c for c in receipt.ledger.calls if not isinstance(c.device, msgspec.UnsetType)]
    if not timed:
        return None
    rows = []
    for call in pick_timeline_calls(timed, limit):
        d = call.device
        assert not isinstance(d, msgspec.UnsetType)
        scale = max(call.wall_ns, d.span_ns, 1)
        rows.append(
            DeviceLaneRow(
                call_index=call.index, phase=call.phase, wall_ns=call.wall_ns, span_ns=d.span_ns, complete=d.complete,
                syncs=sum(s.syncs or 0 for s in d.seams), host=_host_lane(call, scale, colours),
                device=_device_lane(d, scale, colours),
            )
        )
    note = (
        f"{len(rows)} of {len(timed)} calls timed on the device shown; each pair of lanes is scaled to the "
        "longer of the call's host wall time and its device span (a region returns to Python when its "
        "kernels are queued: the device lane shows when they ran)"
    )
    return DeviceLanes(rows=rows, note=note)


SYNC_COLOUR = "#d62728"
GAP_COLOUR = "#bbbbbb"
