"""A finding's what-if (`w` on a finding, in the findings view) and the replayed step's lanes on
the timeline (`y` there). No Textual here.

The what-if is the replay's prediction (parsers.replay through `Profile.whatif`) as lines of text:
the step measured and replayed unchanged, the step predicted with the finding's fix (its range and
the assumption the range rests on), the saving per step beside the rule's own estimate, and what
holds the step after the fix (its critical path, per holder ms per step and share of the step).

The replayed lanes are the measured timeline's GPU stream lanes and CUDA API lanes with the times
of a replay (the unchanged one, or one with a fix's edits): the same ops and calls, each where the
model puts it. Each goes right under its measured lane, titled with a `≈` (model), so the two read
side by side and a fix's lanes show where the time went.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from nsight_tui.parsers.analyses.timeline import API, GPU, Lane, Timeline
from nsight_tui.render.whatif import whatif_lines

REPLAYED_MARK = "≈"  # a lane title's mark: replayed (model), not measured
REPLAY_KEY = "replay:"  # a replayed lane's key: this, then its measured lane's key


@dataclass(frozen=True)
class WhatIf:
    """What `w` asks: a finding's fix as replay edits."""

    finding: str  # the finding's id ("" for edits typed by hand)
    edits: tuple[str, ...]
    estimate_ms: float | None = None  # the rule's own estimate (ms per step), beside the replay's

    @property
    def title(self) -> str:
        return f"{self.finding}: {' '.join(self.edits)}" if self.finding else " ".join(self.edits) or "unchanged"


@dataclass(frozen=True)
class WhatIfView:
    ask: WhatIf
    prediction: object  # parsers.replay.predict.Prediction
    lines: list[tuple[str, str]] = field(default_factory=list)  # (label, text)


def whatif_view(ask: WhatIf, p) -> WhatIfView:
    """The prediction `p` (parsers.replay.predict.Prediction) as the screen's lines (render.whatif)."""
    return WhatIfView(ask, p, whatif_lines(p, ask.estimate_ms))


# -- the replayed lanes ------------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayLanes:
    """A replay's lanes, each keyed by the measured lane it goes under."""

    label: str  # "unchanged" or the edits
    lanes: dict[str, Lane]
    step_window: tuple[int, int] | None = None  # the replay's first steady-state step (ns, replayed)


def replayed_lanes(measured: Timeline, g, tl, label: str, step_window=None) -> ReplayLanes:
    """The measured GPU stream lanes and CUDA API lanes with the replay's times: `g` the replay's
    graph (parsers.replay.graph.Graph), `tl` its timeline (simulate.Timeline). Calls the replay does
    not place (none of a thread without GPU work) are left out."""
    out: dict[str, Lane] = {}
    for lane in measured.lanes:
        if lane.kind == GPU and lane.key.startswith("gpu:"):
            ref = lane.ref
            start, end = tl.op_start_ns[ref], tl.op_end_ns[ref]
        elif lane.kind == API:
            s_pt, e_pt = g.call_start_pt[lane.ref], g.call_end_pt[lane.ref]
            placed = (s_pt >= 0) & (e_pt >= 0)
            ref = lane.ref[placed]
            start, end = tl.pt_ns[s_pt[placed]], tl.pt_ns[e_pt[placed]]
            cat = lane.cat[placed]
        else:
            continue
        cat = lane.cat if lane.kind == GPU else cat
        order = np.argsort(start, kind="stable")
        out[lane.key] = Lane(REPLAY_KEY + lane.key, f"{REPLAYED_MARK}{lane.title}"[:12], lane.kind, lane.categories,
                             start[order], end[order], cat[order], ref[order], device=lane.device,
                             stream=lane.stream, gtid=lane.gtid, depth=lane.depth)
    return ReplayLanes(label, out, step_window)


def with_lanes(measured: Timeline, replay: ReplayLanes | None) -> Timeline:
    """The measured timeline with each replayed lane right under its measured one (a shallow copy:
    the measured lanes and their caches are shared); `replay` None: the measured one."""
    if replay is None:
        return measured
    both = copy.copy(measured)
    lanes: list[Lane] = []
    for lane in measured.lanes:
        lanes.append(lane)
        if lane.key in replay.lanes:
            lanes.append(replay.lanes[lane.key])
    both.lanes = lanes
    return both


def is_replayed(lane: Lane) -> bool:
    return lane.key.startswith(REPLAY_KEY)
