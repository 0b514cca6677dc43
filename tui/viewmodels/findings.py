"""The findings view (`F`, "what to fix first"): parsers.findings' results as a table ranked by
the step time each fix would save, the highlighted finding's evidence and fix as lines of text,
and where `enter` takes the user to see the evidence. No Textual here.

Where the evidence is seen best depends on what it is (EVIDENCE_VIEW): idle time, blocking calls,
copies and slow steps are moments in time (the timeline over the finding's `start_ns`..`end_ns`);
kernels are rows of a range's kernel table (the range the finding names, the costliest kernel
highlighted). A rule not listed there goes to the range it names in the tree, else its window.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from nsight_tui.parsers.analyses.findings import Finding, NOTHING_TO_GAIN_MS, RULE_IDS, all_fixes, context, findings
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode
from nsight_tui.render import numbers
from nsight_tui.render.findings import evidence_text
from nsight_tui.render.tables import markdown as md_table
from nsight_tui.tui.names import display_kernel_name
from nsight_tui.tui.table_model import Column, SortState, TableModel
from nsight_tui.tui.tree_source import find_path
from nsight_tui.tui.viewmodels.timeline import TimelineTarget

TIMELINE, KERNELS, RANGE, NOWHERE = "timeline", "kernels", "range", ""

EVIDENCE_VIEW = {
    "host-bound-gap": TIMELINE,  # the largest idle stretch with no CUDA call
    "sync-stall": TIMELINE,  # the blocking call that cost most, and the GPU idle after it
    "launch-bound": TIMELINE,  # a step: the GPU idle between launches
    "pageable-memcpy": TIMELINE,  # the slowest copy call
    "sync-memcpy": TIMELINE,
    "warmup-in-window": TIMELINE,  # the first slow step
    "unfused-optimizer": KERNELS,  # the optimizer's many small kernels
    "unfused-attention": KERNELS,  # the separate score / softmax / matmul kernels
    "fp32-gemm-without-tensor-cores": KERNELS,  # the fp32 GEMMs, the costliest highlighted
    "exposed-communication": KERNELS,  # backward's collectives
    "memory-bound-decode": KERNELS,  # the decode step's GEMVs against the weights' floor
}

CHECKED = ", ".join(RULE_IDS)


@dataclass(frozen=True)
class Jump:
    """Where `enter` goes for one finding."""

    kind: str  # TIMELINE | KERNELS | RANGE | NOWHERE
    what: str  # in words, for the detail and the status line
    gtid: int | None = None  # RANGE: the thread group the range is on
    key: tuple[str, ...] = ()  # RANGE: its name path
    node: RangeNode | None = None  # KERNELS: the aggregated range
    kernel: str | None = None  # KERNELS: the kernel row to highlight
    target: TimelineTarget | None = None  # the finding's window (TIMELINE, and `t` from any finding)

    @property
    def leads_somewhere(self) -> bool:
        """Whether `enter` has a view to go to (else the status line says `what`)."""
        return (self.kind == KERNELS or (self.kind == RANGE and self.gtid is not None)
                or (self.kind == TIMELINE and self.target is not None))


@dataclass(frozen=True)
class FindingsView:
    findings: list[Finding]  # largest saving first, as parsers.findings returns them
    jumps: list[Jump]  # one per finding
    steps: int  # steady-state steps the rules read (0: none)
    step_ns: float | None  # their mean duration
    frame: pd.DataFrame = field(repr=False)  # one row per finding: COLUMN keys; `pos` = index in findings
    oom: str = ""  # the run ran out of GPU memory before it finished a step: the failed allocation (no findings)
    together: tuple[float, str] | None = None  # every fix at once, ms per step and how (one replay, not a sum)

    def table(self) -> TableModel:
        """A fresh table (it holds the screen's sort and filter), largest saving first."""
        return TableModel(self.frame, columns(self.findings), SortState("saving", descending=True))

    @property
    def scope(self) -> str:
        if not self.steps:
            return "no step finished: the run ran out of GPU memory" if self.oom else "no steady-state steps"
        # the saving is the model's, the step the capture's: each says which (the least needed last, where
        # a narrow screen cuts)
        step = f"{numbers.ms(self.step_ns, 2)} ms/step measured (CPU clock, mean of {self.steps})"
        if self.together:  # one replay with every fix (and the estimates it cannot express)
            how = "replay + estimates" if "plus the estimates" in self.together[1] else "replay"
            return f"all fixes save {numbers.fixed(self.together[0], 2)} ms/step ({how}) of {step}"
        if self.findings:  # no fix replayed: the estimates, each nanosecond claimed once (partition)
            together = numbers.fixed(sum(f.saving_ms_per_step for f in self.findings), 2)
            return f"all fixes save {together} ms/step (estimates) of {step}"
        return f"step period {numbers.ms(self.step_ns, 2)} ms, measured (CPU clock, mean of {self.steps})"

    def none_text(self) -> str:
        """What the view says when no rule fired: why, and what was checked."""
        if self.oom:
            return (f"Out of GPU memory: {self.oom}. The run never finished a step: no step time to find savings in "
                    "(report leads with the failed allocation and the fixes that apply).")
        if not self.steps:
            return (f"No findings: no steady-state step_N ranges, and the rules ({CHECKED}) work per training "
                    "step. Name each steady-state iteration step_<n> with an NVTX range (warm-up ones anything else).")
        return (f"No rule fired on the {self.steps} steady-state steps ({self.scope}). Checked: {CHECKED} "
                "(each threshold with its reason: report -f json, findings.thresholds).")

    def detail(self, pos: int) -> list[tuple[str, str]]:
        """The highlighted finding as (label, text) lines: what it is, where, its saving and basis,
        the evidence figures, the largest row behind them, the fix, and where enter goes."""
        f, jump = self.findings[pos], self.jumps[pos]
        step = f" of a {numbers.ms(self.step_ns)} ms step" if self.step_ns else ""
        lines = [("", f"{f.title} ({f.id})"), ("where", f.range or "–"),
                 ("saving", self._saving_text(f, step)),
                 ("evidence", evidence_text({"evidence": f.evidence}))]
        if f.rows:
            top = {k: v for k, v in f.rows[0].items() if k not in ("start_ns", "end_ns")}
            lines.append(("rows", f"{len(f.rows)} behind it (e exports them); the first: "
                          + evidence_text({"evidence": top})))
        lines += [("fix", f.fix), ("enter", jump.what)]
        return lines

    @staticmethod
    def _saving_text(f: Finding, step: str) -> str:
        alone = f.saving_alone_ms_per_step
        if f.saving_ms_per_step < NOTHING_TO_GAIN_MS:  # present, nothing to gain: say why
            why = ("the findings above use up the time the CPU waits for the GPU: after them the CPU sets the pace"
                   if f.capped_by_cpu_wait else f"its time is {', '.join(f.overlaps)}'s" if f.overlaps else f.basis)
            return f"present, nothing to gain{step}" + (f" (alone {alone:.2f} ms/step)" if alone else "") + f": {why}"
        shared = (f" (alone {alone:.2f}: time {', '.join(f.overlaps)} names too is theirs)"
                  if f.overlaps and alone is not None else "")
        return f"{f.saving_ms_per_step:.2f} ms/step{step}: {f.basis}{shared}"

    def evidence_markdown(self, pos: int) -> str:
        """The rows behind the finding at `pos`, as one table (the export's)."""
        f = self.findings[pos]
        if not f.rows:
            return ""
        keys = list(dict.fromkeys(k for r in f.rows for k in r))
        return md_table(keys, [[r.get(k) for k in keys] for r in f.rows], title=f"Evidence behind `{f.id}`")


def columns(found: list[Finding]) -> list[Column]:
    """id, title, where, saving, basis. Ids are never cut (as wide as the longest shown); on a
    narrow screen the basis goes first, then the title (the detail under the table has both)."""
    id_width = max([len("Finding")] + [len(f.id) for f in found])
    return [
        Column("id", "Finding", id_width, "left", text=True, priority=8, md_header="id"),
        Column("title", "Title", 34, "left", text=True, priority=3, md_header="title"),
        Column("where", "Where", None, "left", text=True, min_width=16, md_header="where (range)"),
        Column("saving", "ms/step", 9, fmt=lambda v: numbers.fixed(v, 2), priority=9,
               md_header="saving ms/step"),
        Column("basis", "Basis", 40, "left", text=True, priority=1, md_header="basis"),
    ]


def build(trace: Trace, model: RangeModel, attribution: str, rank=None, ncu=None) -> FindingsView:
    """Run the rules (parsers.findings) over rank 0's steps, or `rank`'s under a rank filter, and
    decide each finding's jump; `ncu`: the Nsight Compute report joined to the trace (--ncu), for
    the rules that read it. Slow: call from a worker."""
    from nsight_tui.parsers.analyses.oom import oom_facts

    c = context(trace, attribution, rank, ncu)
    oom = oom_facts(model)
    dead = oom is not None and not oom.steps_finished
    # every finding, largest saving first: a cause present with nothing left to gain comes last and says why
    found = [] if dead else findings(trace, attribution, rank=rank, ncu=ncu)
    frame = pd.DataFrame({"pos": range(len(found)), "id": [f.id for f in found], "title": [f.title for f in found],
                          "where": [f.range for f in found], "saving": [f.saving_ms_per_step for f in found],
                          "basis": [f.basis for f in found]})
    said = ""
    if dead and oom is not None:
        said = (f"{oom.call} returned {oom.return_value} in {oom.path or '(no range)'}"
                + (f", asked for {oom.asked.text}" if oom.asked else "")
                + (f", {numbers.bytes_(oom.in_use_bytes)} in use" if oom.in_use_bytes is not None else ""))
    return FindingsView(found, [jump_for(f, model) for f in found], 0 if c is None or dead else c.n,
                        None if c is None or dead else c.step_ns, frame, said,
                        None if dead else all_fixes(trace, found, c))


def jump_for(f: Finding, model: RangeModel) -> Jump:
    target = window_target(f)
    found = _the_range(f, model)
    kind = EVIDENCE_VIEW.get(f.id, RANGE)
    if kind == KERNELS and found is not None:
        node = found[1]
        kernel = next((str(r["kernel"]) for r in f.rows if "kernel" in r), None)
        which = f", {display_kernel_name(kernel)} highlighted" if kernel else ""
        return Jump(KERNELS, f"the kernels of {f.range}{which}", node=node, kernel=kernel, target=target)
    if kind == RANGE and found is not None:
        return Jump(RANGE, f"{f.range} in the range tree", gtid=found[0], key=_key(f.range), target=target)
    if target is not None:
        return Jump(TIMELINE, f"the timeline at {numbers.duration(target.fit[1] - target.fit[0])} from "
                    f"{numbers.seconds(target.fit[0])} s ({_window_what(f)})", target=target)
    if found is not None:  # a timeline rule without a window: the range it names
        return Jump(RANGE, f"{f.range} in the range tree", gtid=found[0], key=_key(f.range))
    return Jump(NOWHERE, "nothing to jump to: the finding names no single range and no time window")


def window_target(f: Finding) -> TimelineTarget | None:
    """The finding's evidence window on the timeline: `0` fits it exactly; it opens with half
    its length of context on each side (the GPU work around a gap)."""
    if f.start_ns is None or f.end_ns is None:
        return None
    a, b = int(f.start_ns), int(f.end_ns)
    pad = max(b - a, 1) // 2
    return TimelineTarget(f"{f.id} evidence", (a, b), (a - pad, b + pad), origin=a)


def _window_what(f: Finding) -> str:
    return {"host-bound-gap": "the largest gap", "sync-stall": "the costliest blocking call",
            "launch-bound": "the first steady-state step", "warmup-in-window": "the first slow step",
            "pageable-memcpy": "the slowest copy call", "sync-memcpy": "the slowest copy call"}.get(
        f.id, "the largest piece of evidence")


def _key(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))


def _the_range(f: Finding, model: RangeModel) -> tuple[int, RangeNode] | None:
    """(thread id, aggregated node) of the one range the finding names, if the tree has it
    (on the main thread first); None when it names none, several, or a stretch between two."""
    if len(f.ranges) != 1 or "→" in f.ranges[0]:
        return None
    key = _key(f.ranges[0])
    for group in sorted(model.aggregated_groups, key=lambda g: not g.is_main):
        node = find_path(group.roots, key)
        if node is not None:
            return group.gtid, node
    return None
