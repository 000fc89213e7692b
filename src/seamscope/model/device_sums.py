"""What the builder adds up of the calls' device timelines (``model/device.py``): per phase, per
region and per break site, as each call's timeline resolves, in any order after the call ended.
Only calls timed on a device get here; on CPU nothing does."""

from __future__ import annotations

from typing import Any

from .ledger import (
    PHASES,
    DevicePhaseTotal,
    DeviceRegionTotal,
    DeviceSiteTotal,
    DeviceTimeline,
    DeviceTotals,
    Phase,
    compile_frame_index,
)


class DeviceSums:
    """The running sums of the device timelines, and the timelines of the calls kept in detail."""

    def __init__(self) -> None:
        self.phase: dict[Phase, list[int]] = {}
        """Per phase: calls, span, region time, seam gaps, host waits, syncs, host wall."""
        self.regions: dict[str, list[int]] = {}
        """Per compile id: runs, device time."""
        self.sites: dict[tuple[Phase, str], list[int]] = {}
        """Per phase and break site: seam gaps after it, host waits, syncs, calls crossing it."""
        self.timelines: dict[int, DeviceTimeline] = {}
        """The timelines of the calls kept, by call index."""
        self.incomplete = 0
        self.foreign = 0

    def done(self, index: int, timeline: DeviceTimeline, ctx: Any, foreign: bool) -> None:
        """A call's device timeline, resolved (in any order, after the call ended)."""
        phase, sites, wall, retained = ctx
        if foreign:
            self.foreign += 1
        if retained:
            self.timelines[index] = timeline
        if not timeline.complete:
            self.incomplete += 1
            return
        acc = self.phase.setdefault(phase, [0] * 7)
        gaps = sum(s.gap_ns for s in timeline.seams)
        waits = sum(s.host_wait_ns or 0 for s in timeline.seams)
        syncs = sum(s.syncs or 0 for s in timeline.seams)
        for i, v in enumerate((1, timeline.span_ns, timeline.span_ns - gaps, gaps, waits, syncs, wall)):
            acc[i] += v
        for r in timeline.regions:
            racc = self.regions.setdefault(r.compile_id, [0, 0])
            racc[0] += 1
            racc[1] += r.duration_ns
        if sites is not None and len(sites) == len(timeline.seams):
            crossed: set[str] = set()
            for site, seam in zip(sites, timeline.seams, strict=True):
                if site is None:
                    continue
                sacc = self.sites.setdefault((phase, site), [0, 0, 0, 0])
                sacc[0] += seam.gap_ns
                sacc[1] += seam.host_wait_ns or 0
                sacc[2] += seam.syncs or 0
                if site not in crossed:
                    crossed.add(site)
                    sacc[3] += 1

    def totals(self, tracker: Any) -> DeviceTotals:
        phases = []
        for p in PHASES:
            a = self.phase.get(p)
            if a is None:
                continue
            calls, span, region, gap, wait, syncs, wall = a
            phases.append(
                DevicePhaseTotal(
                    phase=p, calls=calls, span_ns=span, region_ns=region, gap_ns=gap, host_wait_ns=wait,
                    syncs=syncs, wall_ns=wall,
                )
            )
        regions = [
            DeviceRegionTotal(compile_id=cid, runs=a[0], total_ns=a[1])
            for cid, a in sorted(self.regions.items(), key=lambda kv: (compile_frame_index(kv[0]), kv[0]))
        ]
        sites = [
            DeviceSiteTotal(phase=key[0], site_id=key[1], gap_ns=a[0], host_wait_ns=a[1], syncs=a[2], calls=a[3])
            for key, a in sorted(self.sites.items(), key=lambda kv: (PHASES.index(kv[0][0]), kv[0][1]))
        ]
        return DeviceTotals(
            source=str(getattr(tracker.source, "name", "device")),
            phases=phases,
            regions=regions,
            sites=sites,
            incomplete=self.incomplete,
            syncs_counted=bool(getattr(tracker.source, "syncs_counted", True)),
        )

    def warnings(self, tracker: Any) -> list[str]:
        out = []
        if self.foreign:
            out.append(
                f"{self.foreign} call(s) timed on the device ran a region while another stream than the "
                "call's was current: work on other streams is not attributed to regions or seams"
            )
        skipped = tracker.capture_skipped
        if skipped:
            out.append(
                f"{skipped} call(s) made while a CUDA graph was being captured (at their start or end) were not "
                "timed on the device"
            )
        if self.incomplete:
            out.append(
                f"{self.incomplete} call(s) timed on the device have an incomplete device timeline "
                "(an event never completed: a hung kernel, an interrupted run, or a CUDA graph capture "
                "begun during the call)"
            )
        if not getattr(tracker.source, "syncs_counted", True):
            out.append(
                "device-to-host syncs were not counted: a sync debug mode was already set (left as it was)"
            )
        return out
