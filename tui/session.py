"""One open file: the loaded trace, the attribution mode in force, and every view's data.

No Textual here (see tui/viewmodels/__init__.py). Screens call these methods from thread
workers; results that do not depend on the cursor are computed once per attribution mode.
"""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from nsight_tui.parsers.analyses import ranks as rank_analysis
from nsight_tui.render import numbers
from nsight_tui.parsers.read.ids import PID_MASK
from nsight_tui.parsers.read.load import Trace, TraceLoader, map_columns
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode, range_model
from nsight_tui.parsers.analyses.ranks import Rank, RunRanks
from nsight_tui.tui.viewmodels.header import HeaderInfo
from nsight_tui.tui.viewmodels.step_clock import DiedSteps, StepClock, died_steps, step_clock

if TYPE_CHECKING:
    from nsight_tui.tui.viewmodels import api, backward_parts, correlation, findings, kernels, launches
    from nsight_tui.tui.viewmodels import ranks as ranks_vm

# The other views' view models (and the analyses behind them) are imported when first asked
# for: the first screen (the range tree and its header) needs none of them.

# what a file without NVTX shows instead of empty range views
INFERRED_NOTE = ("no NVTX data: the range tree is inferred from the kernel sequence (its rows say inferred:; "
                 "CPU* is their launch span); kernel and API summaries as usual")
T = TypeVar("T")


@dataclass
class Session:
    path: Path
    trace: Trace
    attribution: str
    load_seconds: float
    aggregated: bool = True  # the range tree's mode, kept when the file is reopened
    main_thread: str | None = None  # --main-thread or `M`: a thread id; None = chosen by the model
    roofline_options: dict = field(default_factory=dict)  # --flops/--peak-* (tui.launch)
    ncu_file: str | None = None  # --ncu FILE.ncu-rep (tui.launch): its kernels joined to this trace
    rank: Rank | None = None  # `R`: the rank the tree and kernel tables count (None: every rank)
    # The load's first stage is on screen (the NVTX tree, CPU times) and the GPU work is still
    # being read: what the loader is doing, and how far (StagedLoad); "" once it is all in.
    pending: str = ""
    pending_percent: int = 0
    _memo: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def model(self) -> RangeModel:
        """The range model of the mode and rank in force (already built: the loader, the mode
        switch and `R` build it in a worker before they set `attribution` / `rank`)."""
        return rank_analysis.scoped_model(self.trace, self.attribution, self.main_thread, self.rank)

    def timeline(self):
        """The timeline's lanes and idle analysis under the mode in force (built once; slow:
        call from a worker). Every rank's lanes, each titled with its rank, whatever the filter."""
        from nsight_tui.parsers.analyses.idle import idle_analysis
        from nsight_tui.parsers.model.ranges import range_model
        from nsight_tui.parsers.analyses.timeline import timeline

        every_rank = range_model(self.trace, self.attribution, self.main_thread)
        return self._once("timeline", lambda: timeline(self.trace, every_rank, idle_analysis(self.trace)),
                          per_rank=False)

    @property
    def file_name(self) -> str:
        return self.path.name

    def _once(self, key: str, build: Callable[[], T], per_mode: bool = True, per_rank: bool = True) -> T:
        """`build()` once per key (and attribution mode, main thread and rank, unless the result
        does not depend on them); two workers asking at once may both build, and the first
        result is kept."""
        full = self._key(key, per_mode, per_rank)
        with self._lock:
            if full in self._memo:
                return self._memo[full]
        value = build()
        with self._lock:
            return self._memo.setdefault(full, value)

    def _key(self, key: str, per_mode: bool = True, per_rank: bool = True) -> tuple:
        mode = (self.attribution, self.main_thread) if per_mode else None
        rank = (self.rank.gpid, self.rank.device) if self.rank is not None and per_rank else None
        return (key, mode, rank)

    def kept(self, key: str, per_mode: bool = True, per_rank: bool = True):
        """What `_once(key, ...)` computed under the mode and rank in force, or None; never
        computes (a view shows what is ready in its first frame; tests ask whether the
        background warm-up got there first)."""
        with self._lock:
            return self._memo.get(self._key(key, per_mode, per_rank))

    # -- the staged load -----------------------------------------------------------------------
    def loading(self, fraction: float, text: str) -> None:
        """The GPU work's progress, while the tree is on screen (the header shows it)."""
        self.pending, self.pending_percent = text, round(100 * fraction)

    def gpu_loaded(self, trace: Trace, load_seconds: float, ranks: list[Rank] | None = None,
                   prepared: dict | None = None) -> None:
        """The load's second stage: the same ranges with their GPU work (the full model is
        built, its tree nodes taken over from the first stage's). Views computed from the
        first stage are dropped; `ranks`, when the worker found them, are kept, and so is
        what the worker `prepare`d on a Session of the same trace."""
        self.trace, self.load_seconds, self.pending, self.pending_percent = trace, load_seconds, "", 0
        with self._lock:
            self._memo.clear()
            self._memo.update(prepared or {})
        if ranks is not None:
            self._once("ranks", lambda: ranks, per_mode=False, per_rank=False)

    def prepare(self) -> dict:
        """The header's slow parts (the nesting note and the clocks line: passes over every
        range, seconds at 3M ranges), computed now: the load's worker calls this so the first
        frame does not wait for them on the UI thread. Returns what it computed (the memo)."""
        self.nesting()
        if not self.pending:  # the clocks need the GPU work
            self._once("clocks", self._clocks_text)
            self.steps()
            self.step_clock()
            self.died()
        with self._lock:
            return dict(self._memo)

    # -- the views' data ----------------------------------------------------------------------
    def header(self) -> HeaderInfo:
        i = self.trace.info
        return HeaderInfo(
            file_name=self.file_name, gpus=tuple(i.gpus), nsys_version=i.nsys_version, span_ns=i.span_ns,
            kernels=i.kernels, api_calls=i.api_calls, ranges=i.ranges, load_seconds=self.load_seconds,
            attribution=self.attribution, mode_help=self.model.mode_help,
            notes=self._notes() + ((nesting,) if (nesting := self.nesting()) else ()),
            warning="nested steps" if nesting else "",
            main_thread=self._main_text(), rank=self.rank_badge(), rank_help=self.rank_help(),
            pending=self.pending, pending_percent=self.pending_percent,
            clocks="" if self.pending else self._once("clocks", self._clocks_text),
            inferred=self._inferred_count(), steps=self._steps_text())

    def _steps_text(self) -> str:
        """The steps for `?`: the iteration the run died in, or the period's own time and the loop's
        between steps where those differ visibly (viewmodels.step_clock)."""
        if self.pending:
            return ""
        died = self.died()
        if died is not None:
            return f"steps: {died.text()}; it is no step (its span is the time to the failure)"
        clock = self.step_clock()
        if clock is None or not clock.visible:
            return ""
        return f"steps ({clock.steps}, on the capture's clock): {clock.sentence()}"

    def _inferred_count(self) -> int:
        """Ranges inferred from the kernel sequence, in the tree beside the export's NVTX ranges."""
        from nsight_tui.parsers.model.inferred import inference

        found = inference(self.trace)
        return len(found.ranges) if found.found and found.ranges is not None else 0

    def _notes(self) -> tuple[str, ...]:
        """The file's notes; where the tree is inferred, no note says the range views are empty."""
        from nsight_tui.parsers.read.load import NO_NVTX_NOTE

        if not self._inferred_count():
            return tuple(self.trace.info.notes)
        return tuple(INFERRED_NOTE if n == NO_NVTX_NOTE else n for n in self.trace.info.notes)

    def steps(self) -> tuple[int, float, bool] | None:
        """The steady-state steps (`step_N`, inferred ones too): how many, their typical period (the
        loop's pace, parsers.model.steps.typical_period_ns: the median, the mean where the steps
        alternate) and whether they are alike (the median); None without steps or while the GPU
        work loads."""
        if self.pending:
            return None

        def build():
            from nsight_tui.parsers.model.steps import steps_alike, steps_of, typical_period_ns

            found = steps_of(self.model)
            t = found.times(found.finished)  # an iteration the run died in is no step (died())
            if not t.n:
                return None
            return t.n, float(typical_period_ns(t.period_ns)), steps_alike(t.period_ns)

        return self._once("steps", build)

    def step_clock(self) -> StepClock | None:
        """The steps' period against their own time and the loop's between them (viewmodels.step_clock);
        None without finished steps or while the GPU work loads."""
        if self.pending:
            return None
        return self._once("step_clock", lambda: step_clock(self.model))

    def died(self) -> DiedSteps | None:
        """The steady-state iterations the run died in (out of GPU memory), None where none did."""
        return self._once("died", lambda: died_steps(self.model))

    def _clocks_text(self) -> str:
        """The two clocks in words where the GPU runs behind the CPU on the steady-state steps."""
        from nsight_tui.parsers.model.inferred import inference
        from nsight_tui.parsers.model.steps import steps_of
        from nsight_tui.tui.tree_source import INFERRED_CPU_MARK, INFERRED_CPU_TEXT

        t = steps_of(self.model).steady_times
        if not t.gpu_lags():
            return ""
        n = t.n
        # steps inferred from the kernel sequence have no NVTX span: their CPU figure is the launch span
        found = inference(self.trace)
        inferred = found.found and not found.inside
        span = "launch span, inferred" if inferred else "NVTX span"
        cpu = f"CPU{INFERRED_CPU_MARK} = NVTX span, {INFERRED_CPU_TEXT}" if found.found else "CPU = NVTX span"
        return (f"clocks: the GPU runs behind the CPU (no synchronise at phase ends): per step the CPU issues its "
                f"work in {numbers.duration(t.cpu_ns.sum() / n)} ({span}), the GPU runs it in "
                f"{numbers.duration(t.gpu_ns.sum() / n)}; the step is its period, {numbers.duration(t.period_ns.sum() / n)}. "
                f"Columns: {cpu}, GPU = its GPU work's span (first start to last end), both totals ×N")

    def nesting(self) -> str:
        """The note on iterations nested in iterations (unbalanced NVTX), "" when none."""
        from nsight_tui.parsers.model.steps import steps_of

        if not self.trace.info.has_nvtx:
            return ""
        return self._once("nesting", lambda: steps_of(self.model).nesting_note(), per_mode=False, per_rank=False)

    def _main_text(self) -> str:
        """Which thread frames the iterations, and why (empty without NVTX)."""
        if not self.trace.info.has_nvtx:
            return ""
        from nsight_tui.render.process_view import main_thread_short

        return main_thread_short(self.trace, self.model)

    def range_kernels(self, node: RangeNode) -> kernels.KernelsView:
        """The range's kernels and ratios, its roofline figures (TFLOP/s, GB/s, verdict) among them;
        kept per node (`warm` computes the biggest ranges' after loading: a range holding every
        kernel then opens without computing)."""
        from nsight_tui.tui.viewmodels import kernels
        from nsight_tui.tui.viewmodels import roofline as roofline_vm

        def build() -> tuple[RangeNode, kernels.KernelsView]:
            return node, kernels.range_kernels(self.model, node, extra_ratios=roofline_vm.ratios(self, node),
                                               ranks=self.node_scope_text(node))

        kept = self._once(f"range_kernels:{id(node)}", build)
        if kept[0] is not node:  # another node at a recycled address: not the one asked for
            return build()[1]
        return kept[1]

    def range_kernels_kept(self, node: RangeNode) -> kernels.KernelsView | None:
        """The range's kernel table when it is computed already (by `warm` or an earlier
        opening), else None; never computes (the view shows it before its first frame)."""
        kept = self.kept(f"range_kernels:{id(node)}")
        return kept[1] if kept is not None and kept[0] is node else None

    def roofline_context(self):
        """The roofline context (FLOP/byte counts source and peaks), once per attribution mode."""
        from nsight_tui.parsers.analyses import roofline

        return self._once("roofline", lambda: roofline.build(self.trace, self.attribution, **self.roofline_options),
                          per_rank=False)

    def ncu(self):
        """The Nsight Compute report joined to this trace (analyses.ncu), once per attribution;
        None without --ncu."""
        if not self.ncu_file:
            return None
        from nsight_tui.parsers.analyses import ncu
        from nsight_tui.parsers.read.ncu_rep import read_ncu_report

        path = self.ncu_file
        return self._once("ncu", lambda: ncu.analyse(self.trace, read_ncu_report(path), self.attribution),
                          per_rank=False)

    def ncu_view(self):
        """The `6` view's rows (viewmodels.ncu), from the joined report."""
        from nsight_tui.render.ncu import ncu_json
        from nsight_tui.tui.viewmodels import ncu as ncu_vm

        joined = self.ncu()
        if joined is None:
            raise ValueError("no Nsight Compute report: open with --ncu FILE.ncu-rep")
        return ncu_vm.build(ncu_json(joined))

    def roofline(self, mode: str, node: RangeNode | None):
        from nsight_tui.tui.viewmodels import roofline as roofline_vm

        return roofline_vm.build(self, mode, node)

    def backward_parts(self) -> list[backward_parts.Mapping]:
        """Backward by forward part, one table per mapping the trace allows."""
        from nsight_tui.tui.viewmodels import backward_parts

        return self._once("backward_parts", lambda: backward_parts.mappings(self.model))

    def pace(self):
        """Every iteration's CPU span and GPU time in order, outliers marked (viewmodels.pace)."""
        from nsight_tui.tui.viewmodels import pace

        def build():
            who: dict[int, str] = {}
            for r in self.ranks():  # r0, r1... as the timeline's lanes say
                who.setdefault(r.pid, f"r{r.rank}" if r.rank is not None else f"pid {r.pid}")
            return pace.pace(self.model, who)

        return self._once("pace", build)

    def memory(self):
        """GPU memory: peak, by kind, per phase, out of memory (viewmodels.memory)."""
        from nsight_tui.tui.viewmodels import memory

        return self._once("memory", lambda: memory.memory(self.model), per_mode=False, per_rank=False)

    def part_kernels(self, title: str, positions: np.ndarray, where: str = "") -> kernels.KernelsView:
        """The kernels of a backward part (`b`, enter): `positions` in trace.ops."""
        from nsight_tui.tui.viewmodels import kernels

        return kernels.op_kernels(self.model, positions, title, f"kernel time of the backward of {where or title}")

    def findings(self) -> findings.FindingsView:
        """What to fix first: every rule over the steady-state steps, ranked by saving (once per mode)."""
        from nsight_tui.tui.viewmodels import findings

        return self._once("findings", lambda: findings.build(self.trace, self.model, self.attribution, self.rank,
                                                             self.ncu()))

    def whatif(self, ask, progress: Callable[[float, str], None] = lambda fraction, text: None):
        """A finding's fix replayed (`ask`: viewmodels.whatif.WhatIf): the prediction as the view's
        lines (viewmodels.whatif.WhatIfView), once per edits; `progress(fraction, text)` between
        the replay's stages (the dependency graph, the unchanged replay, the edited ones)."""
        from nsight_tui.parsers.api import Profile
        from nsight_tui.parsers.options import Options
        from nsight_tui.parsers.replay.predict import baseline, graph_of
        from nsight_tui.tui.viewmodels.whatif import whatif_view

        key = f"whatif:{' '.join(ask.edits)}"
        kept = self.kept(key)
        if kept is not None:
            return kept
        progress(0.05, "building the replay's dependency graph (CPU calls, streams, syncs, events)")
        graph_of(self.trace)
        progress(0.4, "replaying the capture unchanged (the baseline)")
        baseline(self.trace)
        progress(0.6, f"replaying with {' '.join(ask.edits)}, then the critical path and the GPU idle split")
        profile = Profile(self.trace, Options(attribution=self.attribution))
        view = self._once(key, lambda: whatif_view(ask, profile.whatif(list(ask.edits))))
        progress(1.0, "replayed")
        return view

    def replay_lanes(self, edits: tuple[str, ...] = ()):
        """The replayed step's lanes (viewmodels.whatif.ReplayLanes) beside the timeline's measured
        ones: the unchanged replay, or the one with `edits` (at their assumptions' central values)."""
        from nsight_tui.parsers.analyses.findings.fixes import resolve_fixes
        from nsight_tui.parsers.read.load import load_trace
        from nsight_tui.parsers.replay.edits import parse
        from nsight_tui.parsers.replay.predict import baseline, edited, graph_of
        from nsight_tui.tui.viewmodels.whatif import replayed_lanes

        def build():
            g, _ = graph_of(self.trace)
            if edits:
                wanted = resolve_fixes(self.trace, [parse(e) for e in edits], self.attribution)
                replayed = edited(self.trace, wanted, load_trace)
                g, r = replayed.graph, replayed.mid
            else:
                r = baseline(self.trace)
            first = (int(r.starts_ns[0]), int(r.ends_ns[0])) if len(r.starts_ns) else None
            return replayed_lanes(self.timeline(), g, r.timeline, " ".join(edits) or "unchanged", first)

        return self._once(f"replay_lanes:{' '.join(edits)}", build)

    def trace_kernels(self) -> kernels.KernelsView:
        from nsight_tui.tui.viewmodels import kernels

        return self._once("trace_kernels", lambda: kernels.trace_kernels(self.model, self.scope_text()))

    # -- ranks ----------------------------------------------------------------------------------
    def trace_kernels_kept(self) -> kernels.KernelsView | None:
        """`trace_kernels()` when computed already, else None (never computes)."""
        return self.kept("trace_kernels")

    def ranks(self) -> list[Rank]:
        """The export's ranks (process x GPU with GPU work), in rank order."""
        return self._once("ranks", lambda: rank_analysis.find_ranks(self.trace), per_mode=False, per_rank=False)

    def next_rank(self) -> Rank | None:
        """What `R` moves to: every rank -> rank 0 -> rank 1 ... -> every rank."""
        ranks = self.ranks()
        if self.rank is None:
            return ranks[0] if ranks else None
        at = next((i for i, r in enumerate(ranks) if r == self.rank), len(ranks) - 1)
        return ranks[at + 1] if at + 1 < len(ranks) else None

    def run_ranks(self) -> RunRanks:
        """Every rank's figures (parsers.ranks; independent of the attribution and the filter)."""
        from nsight_tui.parsers.analyses.straggler_why import with_why

        return self._once("run_ranks", lambda: with_why(self.trace, rank_analysis.ranks_of_trace(self.trace)),
                          per_mode=False, per_rank=False)

    def ranks_view(self) -> ranks_vm.RanksView:
        from nsight_tui.tui.viewmodels import ranks as ranks_vm

        return self._once("ranks_view", lambda: ranks_vm.ranks_view(self.run_ranks()), per_mode=False, per_rank=False)

    def rank_badge(self) -> str:
        """The header's rank badge: the rank in force, `all N ranks` (totals sum them), or ""
        for an export with one rank."""
        if self.rank is not None:
            return f"rank {self.rank.rank}" if self.rank.rank is not None else self.rank.label
        n = len(self.ranks())
        return f"Σ {n} ranks" if n > 1 else ""

    def rank_help(self) -> str:
        n = len(self.ranks())
        if self.rank is not None:
            return (f"rank filter: {self.rank.label} (pid {self.rank.pid}): the tree shows its process, GPU columns "
                    f"and kernel tables count its GPU only (R: next rank)")
        if n > 1:
            return f"no rank filter: totals sum all {n} ranks (R: one rank at a time; 5: the ranks side by side)"
        return ""

    def scope_text(self) -> str:
        """What the trace-wide totals cover, when the export has several ranks ("" when one)."""
        if self.rank is not None:
            return self.rank.label
        n = len(self.ranks())
        return f"all {n} ranks, summed" if n > 1 else ""

    def process_ranks_text(self, gpid: int) -> str:
        """A process's rank(s), where the export has several ("" when one)."""
        if len(self.ranks()) < 2:
            return ""
        return ", ".join(r.label for r in self.ranks() if r.gpid == gpid)

    def node_scope_text(self, node: RangeNode) -> str:
        """Which ranks a range's GPU figures count, where the export has several ("" when one):
        its process's rank, or its ranks summed when the process drives several GPUs."""
        if self.rank is not None or len(self.ranks()) < 2:
            return self.scope_text()
        mine = [r for r in self.ranks() if r.gpid == node.gtid & PID_MASK]
        if len(mine) == 1:
            return mine[0].label
        return f"{len(mine)} ranks of this process, summed" if mine else ""

    def api_summary(self) -> api.ApiView:
        """nsys's cuda_api_sum; under a rank filter, the calls of that rank's process only."""
        from nsight_tui.tui.viewmodels import api

        gpids = frozenset({self.rank.gpid}) if self.rank is not None else None
        return self._once("api_summary", lambda: api.api_summary(self.trace, gpids), per_mode=False)

    def api_scope_text(self) -> str:
        """Whose CUDA API calls the summary counts, where the export has several ranks ("" when
        one): every rank's, or the filtered rank's process's (calls are per process: a process
        driving several GPUs makes the calls of all of them)."""
        if self.rank is None:
            return self.scope_text()
        shared = [r.label for r in self.ranks() if r.gpid == self.rank.gpid and r != self.rank]
        return f"process {self.rank.pid} ({self.rank.label}" + (f"; also {', '.join(shared)})" if shared else ")")

    def api_summary_kept(self) -> api.ApiView | None:
        """`api_summary()` when computed already, else None (never computes)."""
        return self.kept("api_summary", per_mode=False)

    def launches(self, positions: np.ndarray, name: str) -> launches.LaunchTable:
        from nsight_tui.tui.viewmodels import launches

        frame = launches.launch_frame(self.model, positions, name)
        return launches.LaunchTable(frame, launches.launch_columns(), self.trace)

    def correlation(self, corr: int, gpid: int | None = None) -> correlation.CorrelationView:
        from nsight_tui.tui.viewmodels import correlation

        return correlation.correlation(self.model, corr, gpid)

    def instance_node(self, rid: int) -> RangeNode | None:
        """The instance tree's node of one range (by range position), indexed once per mode."""
        def index() -> dict[int, RangeNode]:
            out = {}
            for group in self.model.thread_groups:
                stack = list(group.roots)
                while stack:
                    node = stack.pop()
                    out[int(node.ids[0])] = node
                    stack.extend(node.children)
            return out

        return self._once("instance_nodes", index).get(int(rid))

    def palette_kernels(self) -> list[tuple[str, str]]:
        from nsight_tui.tui.viewmodels import palette

        return self._once("palette_kernels", lambda: palette.top_kernels(self.trace), per_mode=False, per_rank=False)

    def warm(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Compute the views that do not depend on the cursor (the app does this in the
        background after loading, so `2` and `3` open at once), the kernel tables of the
        top-level ranges holding the most GPU work (`step_N` over every step: the ones that
        cost most to open) and of the ranges below them holding a big share of it (forward,
        backward...), and the instance tree (`a`; the first screen needs only the
        aggregated one)."""
        roots = sorted((n for g in self.model.aggregated_groups for n in g.roots), key=lambda n: -n.kernels)
        builds: list[Callable[[], object]] = [self.ranks, lambda: self.trace.op_short, self.trace_kernels,
                                              self.api_summary]
        builds += [functools.partial(self.range_kernels, n) for n in roots[:3] if n.kernels]
        # and every range below them holding a big share of the kernels (`step_N/backward`, at
        # any depth: `whole_run/trainer:step_N/step_N/backward`): a kernel table of millions of
        # ops costs a quarter of a second to build, too long for a key (a key's budget: <= 100 ms)
        builds += [functools.partial(self.range_kernels, n) for n in big_parts(roots[:3])]
        builds.append(lambda: self.model.thread_groups)
        for build in builds:
            if cancelled():
                return
            build()

    def export_header(self) -> str:
        h = self.header()
        return (f"file `{self.file_name}` · {h.gpu_text()} · nsys {h.nsys_version or '?'} · "
                f"attribution `{self.attribution}` ({h.mode_help})" + (f" · {h.main_thread}" if h.main_thread else ""))


class StagedLoad:
    """Opens one file for the TUI in two stages, so the NVTX tree (CPU times) is on screen
    while the GPU work is still read and attributed. No Textual: the app's load worker runs
    it and posts what each stage returns.

        load = StagedLoad(path, "process", progress=report)
        first = load.tree()      # a Session holding the ranges only (`pending`), or None
        trace, seconds = load.finish()   # every table read, the full model built

    `tree()` gives None when there is nothing to show early (no NVTX ranges, or no GPU work
    to wait for): the caller then opens one Session with `finish()`'s trace. The full model
    takes over the first stage's tree nodes (`range_model(..., tree_from=)`), so the rows on
    screen stay and only their GPU columns fill in. `progress(fraction, text)`: 0..1 over
    the whole load. `opened`: the file's TraceLoader, opened (and its GPU tables' read begun)
    before the app started (tui.launch.open_early); it raises what opening raised."""

    def __init__(self, path: Path, attribution: str, main_thread: str | None = None,
                 progress: Callable[[float, str], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter, started: float | None = None,
                 opened: Callable[[], TraceLoader] | None = None):
        self.path, self.attribution, self.main_thread = path, attribution, main_thread
        self.progress = progress or (lambda fraction, text: None)
        self.clock = clock
        self.started = clock() if started is None else started
        self._tree: RangeModel | None = None
        self.loader = opened() if opened is not None else TraceLoader(path)
        self.loader.say = lambda f, text: self.progress(0.85 * f, text)

    def seconds(self) -> float:
        return self.clock() - self.started

    def tree(self) -> Session | None:
        with self.loader.foreground():  # the tree on screen before the GPU tables' read ahead
            early = self.loader.ranges_only()
            self._tree = range_model(early, self.attribution, self.main_thread)
            _first_rows(self._tree)  # built here, in the worker
        if not (early.info.gpu_pending and early.info.ranges):
            return None
        return Session(self.path, early, self.attribution, self.seconds(), main_thread=self.main_thread,
                       pending="reading GPU work", pending_percent=round(100 * 0.85 * 0.05))

    def finish(self) -> tuple[Trace, float]:
        trace = self.loader.finish()
        self.progress(0.88, "attributing GPU work to NVTX ranges")
        model = range_model(trace, self.attribution, self.main_thread, tree_from=self._tree)
        self.progress(0.95, "building the range tree")
        _first_rows(model)  # built here, in the worker
        # the columns the cache has written meanwhile replace the load's private copies
        map_columns(trace)
        return trace, self.seconds()


BIG_SHARE = 1 / 16  # of the kernels: a range's table from there costs more than a key may (4.8M kernels)
MAX_BIG_PARTS = 16
MAX_PART_DEPTH = 8


def big_parts(roots: list[RangeNode]) -> list[RangeNode]:
    """The ranges under `roots` (not the roots, nor `ops` levels) holding at least BIG_SHARE of
    the roots' kernels, the most first (at most MAX_BIG_PARTS, down to MAX_PART_DEPTH)."""
    total = sum(n.kernels for n in roots)
    if not total:
        return []
    found: list[RangeNode] = []
    level = [c for n in roots for c in n.children]
    for _ in range(MAX_PART_DEPTH):
        level = [n for n in level if not n.is_ops and n.kernels >= BIG_SHARE * total]
        found += level
        level = [c for n in level for c in n.children]
    return sorted(found, key=lambda n: -n.kernels)[:MAX_BIG_PARTS]


def _first_rows(model: RangeModel) -> None:
    """The aggregated tree and the figures of the rows the first screen shows, computed in the
    load's worker: each row's figures sum over all its instances (a node of every step: 10^5
    of them at 3M ranges), kept on the node, so the UI thread only formats them."""
    from nsight_tui.tui.tree_source import RangeTreeSource

    source = RangeTreeSource(model.aggregated_groups, True)
    source.expand_default()
    for i in range(len(source)):
        for column in source.columns:
            source.value(source.rows[i], column.key)
