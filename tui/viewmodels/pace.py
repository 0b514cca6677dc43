"""The pace view (`p`): each iteration's time in order, outliers marked (what NVIDIA's
`nvtx_pace` recipe gives). No Textual here.

Iterations come from parsers.model.steps (`warmup_N`, `step_N`, found by name wherever they
nest). Two times per iteration, each saying what it is:
- CPU span: the iteration range's own start to end (the CPU clock: NVTX push to pop);
- GPU time: the range's GPU projection (first GPU op start to last op end of the work it holds,
  `RangeModel.proj_ns`, nsys's nvtx_gpu_proj_sum).
- period: the iteration's start to the next iteration's start (the last: to the end of its GPU
  work), parsers.model.steps.StepTimes: the step as the loop keeps it, which is the pace.

Outliers: among the steady-state steps, a period further than max(3 × 1.4826 × MAD, 5% of the
median) from the median (a robust z-score; the floor keeps near-identical steps unmarked); with
several ranks, each rank's steps against their own median.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from nsight_tui.parsers.model.steps import period_ends, steps_of
from nsight_tui.parsers.model.ranges import RangeModel
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.ids import pid_of
from nsight_tui.render import numbers
from nsight_tui.tui.table_model import Column
from nsight_tui.tui.viewmodels.step_clock import StepClock, died_steps, step_clock

BAR_WIDTH = 12
MAD_SCALE = 1.4826  # MAD of a normal distribution -> its standard deviation
OUTLIER_Z = 3.0
OUTLIER_FLOOR = 0.05  # of the median


def _signed(ns) -> str:
    if numbers.missing(ns):
        return ""
    return ("+" if ns >= 0 else "−") + numbers.duration(abs(ns))


COLUMNS = [
    Column("order", "#", 4, fmt=numbers.count, priority=3, md_header="#"),
    Column("name", "Iteration", None, "left", text=True, min_width=9, md_header="Iteration"),
    Column("start_ns", "Start", 9, fmt=numbers.duration, priority=4, md_header="Start (ns after the first iteration)"),
    Column("cpu_ns", "CPU span", 9, fmt=numbers.duration, priority=9, md_header="CPU span (ns: range start to end)"),
    Column("gpu_ns", "GPU time", 9, fmt=numbers.duration, priority=8,
           md_header="GPU time (ns: projection of its GPU work, first op start to last op end)"),
    Column("period_ns", "Period", 9, fmt=numbers.duration, priority=9,
           md_header="Period (ns: its start to the next iteration's start; the last: to its GPU work's end)"),
    Column("own_ns", "Own", 9, fmt=numbers.duration, priority=8, show=False,
           md_header="Own (ns: its start to its work's end; the rest of the period is the loop's between steps)"),
    Column("vs_median_ns", "vs med", 9, fmt=_signed, priority=6, md_header="Period minus the steps' median (ns)"),
    Column("bar", "Period", BAR_WIDTH, "left", text=True, priority=5, md_header="Period (bar)"),
    Column("mark", "", 7, "left", text=True, priority=7, md_header="Outlier"),
    Column("process", "", show=False, md_header="Process"),
]


@dataclass(frozen=True)
class PaceView:
    frame: pd.DataFrame  # COLUMNS' keys, one row per iteration in time order
    steps: int
    warmups: int
    median_ns: float | None  # the steps' median period (None with several ranks: one each)
    threshold_ns: float | None  # an outlier is further than this from the median
    # the steps' own time against the loop's between them, where that is visible (else None)
    clock: StepClock | None = None
    died: str = ""  # the iterations the run died in, said (DiedSteps.text)

    @property
    def columns(self) -> list[Column]:
        """COLUMNS, with the steps' own time where the loop's time between them is visible."""
        if self.clock is None:
            return COLUMNS
        return [replace(c, show=True) if c.key == "own_ns" else c for c in COLUMNS]

    def summary(self) -> str:
        if not self.steps:
            if self.died:
                return f"{self.died}: nothing to pace"
            return "no step_N iterations: nothing to pace" + (f" ({self.warmups} warmup)" if self.warmups else "")
        out = int((self.frame["mark"] != "").sum())
        if self.median_ns is None:  # several ranks: each against its own steps
            return (f"{self.steps} steps · vs med: each rank's period minus its own steps' median · outlier: "
                    f"further than 3 robust σ (or 5%) from it ({out} marked) · GPU time: projection of the "
                    "iteration's GPU work")
        if self.clock is not None:  # the period's two parts, each said, and which one Python's clock reads
            return (f"{self.steps} steps · {self.clock.sentence()} · outlier: period more than "
                    f"{numbers.duration(self.threshold_ns)} from its median {numbers.duration(self.median_ns)} "
                    f"({out} marked)")
        return (f"{self.steps} steps · median period {numbers.duration(self.median_ns)} · outlier: more than "
                f"{numbers.duration(self.threshold_ns)} from it ({out} marked) · GPU time: projection of the "
                "iteration's GPU work")


def iteration_rows(model: RangeModel) -> pd.DataFrame:
    """Every iteration range, in time order: name, kind, start, end, CPU span, GPU time."""
    found = steps_of(model)
    steps, warm = found.steady, found.warmup
    ids = np.concatenate([warm, steps]).astype(np.int64)
    # an iteration the run died in (out of GPU memory) is no step: its span is the time to the failure
    kind = np.array(["died" if d else "warmup" for d in np.isin(warm, found.died)]
                    + ["died" if d else "step" for d in np.isin(steps, found.died)])
    order = np.lexsort((ids, model.r_start[ids])) if len(ids) else np.zeros(0, dtype=np.int64)
    ids, kind = ids[order], kind[order]
    texts = model.trace.range_texts.objects
    # inferred iterations under the tree's name for them (`inferred:step_0`), NVTX ones as they are
    inferred = model.trace.range_domains.objects == conventions.INFERRED_DOMAIN
    names = [f"{conventions.INFERRED_DOMAIN}:{texts[i]}" if inferred[i] else str(texts[i]) for i in ids]
    names = [f"{n} ✗ died (OOM)" if k == "died" else n for n, k in zip(names, kind)]
    start, end = model.r_start[ids].astype(np.int64), model.r_end[ids].astype(np.int64)
    gpu = np.asarray(model.proj_ns)[ids] if not model.gpu_pending else np.full(len(ids), np.nan)
    if model.gpu_pending:  # the last iteration's GPU end is not known yet: its range's end for now
        period = period_ends(start, end, start) - start if len(ids) else np.zeros(0, np.int64)
    else:
        times = found.times(ids)
        at = {int(i): int(p) for i, p in zip(times.ids, times.period_ns)}
        period = np.array([at[int(i)] for i in ids], dtype=np.int64)
    own = period
    if not model.gpu_pending and len(ids):  # its start to its work's end (the rest: the loop's between steps)
        at_own = {int(i): int(p - b) for i, p, b in zip(times.ids, times.period_ns, times.between_ns)}
        own = np.array([at_own[int(i)] for i in ids], dtype=np.int64)
    return pd.DataFrame({"rid": ids, "name": names, "kind": kind, "start": start,
                         "end": end, "cpu_ns": end - start, "gpu_ns": gpu, "period_ns": period, "own_ns": own,
                         "process": pid_of(model.r_gtid[ids].astype(np.int64)) if len(ids) else []})


def _robust(spans: np.ndarray) -> tuple[float | None, float | None]:
    """The median and how far from it a span is an outlier (see the module doc)."""
    if not len(spans):
        return None, None
    median = float(np.median(spans))
    mad = float(np.median(np.abs(spans - median)))
    return median, max(OUTLIER_Z * MAD_SCALE * mad, OUTLIER_FLOOR * median)


def pace(model: RangeModel, who: dict[int, str] | None = None) -> PaceView:
    """`who`: process id -> what to call it (`r0`) where iterations of several processes
    (ranks) interleave; each row then says whose it is."""
    rows = iteration_rows(model)
    if len(rows) and rows["process"].nunique() > 1:
        names = who or {}
        rows["name"] = [f"{n} {names.get(int(p), f'pid {int(p)}')}" for n, p in zip(rows["name"], rows["process"])]
    steps = rows[rows["kind"] == "step"]
    # each process (rank) against its own steps: ranks run at their own pace
    stats = {int(pid): _robust(g["period_ns"].to_numpy(dtype=float)) for pid, g in steps.groupby("process")}
    median, threshold = _robust(steps["period_ns"].to_numpy(dtype=float)) if len(stats) == 1 else (None, None)
    first = int(rows["start"].min()) if len(rows) else 0
    # bars on the steps' scale (a first warmup is often 30× a step); longer rows end in `›`
    longest = float(steps["period_ns"].max()) if len(steps) else float(rows["period_ns"].max()) if len(rows) else 0.0
    marks, vs, bars = [], [], []
    for r in rows.itertuples():
        med, thr = stats.get(int(r.process), (None, None))
        d = None if med is None or r.kind != "step" else r.period_ns - med
        vs.append(np.nan if d is None else d)
        marks.append("" if d is None or thr is None or abs(d) <= thr else ("▲ slow" if d > 0 else "▼ fast"))
        cells = int(round(BAR_WIDTH * r.period_ns / longest)) if longest else 0
        ch = "█" if r.kind == "step" else "░"
        bars.append(ch * (BAR_WIDTH - 1) + "›" if cells > BAR_WIDTH else ch * max(cells, 1))
    frame = pd.DataFrame({
        "order": np.arange(1, len(rows) + 1), "name": rows["name"], "start_ns": rows["start"] - first,
        "cpu_ns": rows["cpu_ns"], "gpu_ns": rows["gpu_ns"], "period_ns": rows["period_ns"], "own_ns": rows["own_ns"],
        "vs_median_ns": vs, "bar": bars, "mark": marks,
        "process": rows["process"], "kind": rows["kind"], "rid": rows["rid"],
    })
    clock = step_clock(model) if not model.gpu_pending and median is not None else None
    died = died_steps(model) if not model.gpu_pending else None
    return PaceView(frame, int((rows["kind"] == "step").sum()), int((rows["kind"] == "warmup").sum()), median, threshold,
                    clock if clock is not None and clock.visible else None, died.text() if died is not None else "")
