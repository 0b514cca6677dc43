"""The `report` document, typed: every answer about one trace, built by one call (`build`).

The core returns the results as they are (dataclasses with numbers in units: `_ns`, `_bytes`);
`nsight_tui.render.document` lays them out as the JSON the README documents and
`nsight_tui.render.report` as the Markdown page. An Nsight Compute report joined to the trace
(`Options.ncu_file`, or a join the caller holds) is part of the same document: its section and the
findings that read it come from the same call."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nsight_tui.parsers.analyses.questions import RATIO_BASIS, PhaseSummary, Timing, _ratios, phases, timing
from nsight_tui.parsers.kernels import occupancy
from nsight_tui.parsers.model import main_thread as main_threads
from nsight_tui.parsers.model.inferred import has_iteration_ranges, inference
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.ranges import range_model
from nsight_tui.parsers.options import Options
from nsight_tui.parsers.read.load import Trace

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.backward_parts import BackwardParts
    from nsight_tui.parsers.analyses.findings.result import FindingsReport
    from nsight_tui.parsers.analyses.gpu_metrics import GpuMetricsReport
    from nsight_tui.parsers.analyses.idle_report import PhaseIdle
    from nsight_tui.parsers.analyses.memory import MemoryReport
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis
    from nsight_tui.parsers.analyses.oom import OomFacts
    from nsight_tui.parsers.analyses.ranks import RunRanks
    from nsight_tui.parsers.kernels.occupancy import OccupancyReport
    from nsight_tui.parsers.analyses.roofline import RooflineReport
    from nsight_tui.parsers.model.inferred.result import Inference


@dataclass
class Report:
    """Everything `nsight-tui report` says about one trace. Times in ns on the clock each figure
    names (CPU: NVTX spans; GPU: its work's span), shares 0..1, memory in bytes.

    ranges/warmup: per phase (`step`, `forward`, ...) over the steady-state steps / the warm-ups;
    ratios: each with its basis in ratio_basis; timing: NVTX against the capture's Python clock;
    gpu_idle: idle by cause per phase (analyses.idle_report); occupancy: theoretical, per kernel
    name (kernels.occupancy); roofline: how far from the hardware (analyses.roofline); findings:
    what to fix first (analyses.findings); ranks: where the export holds several ranks; inferred:
    what the kernel sequence gave where the export names no iteration (None: nothing to say);
    ncu: the Nsight Compute report joined to it (None: none given)."""

    file: str
    attribution: str
    main_threads: list[dict]
    config: dict
    ranges: dict[str, PhaseSummary]
    warmup: dict[str, PhaseSummary]
    ratios: dict[str, float | None]
    ratio_basis: dict[str, str]
    timing: Timing
    gpu_idle: PhaseIdle
    memory: MemoryReport
    oom: OomFacts | None  # a run that ran out of GPU memory: the failed allocation leads (analyses.oom)
    gpu_metrics: GpuMetricsReport
    ranks: RunRanks | None
    roofline: RooflineReport
    occupancy: OccupancyReport
    findings: FindingsReport
    backward_parts: list[BackwardParts]
    inferred: Inference | None
    notes: list[str] = field(default_factory=list)
    ncu: NcuAnalysis | None = None


def build(trace: Trace, options: Options | None = None, ncu: NcuAnalysis | None = None) -> Report:
    """The report on one trace. `ncu`: a join the caller already holds (else `options.ncu_file`'s,
    joined here once: its section and the findings that read it share it)."""
    from nsight_tui.parsers.analyses.backward_parts import backward_parts
    from nsight_tui.parsers.analyses.findings import answers as findings_answers
    from nsight_tui.parsers.analyses.findings.result import no_step
    from nsight_tui.parsers.analyses.gpu_metrics import gpu_metrics_analysis
    from nsight_tui.parsers.analyses.idle_report import phase_idle
    from nsight_tui.parsers.analyses.memory import memory_analysis
    from nsight_tui.parsers.analyses.oom import oom_facts
    from nsight_tui.parsers.analyses.roofline import NO_FLOPS, answers as roofline_answers, build as build_roofline

    options = options or Options()
    attribution = options.attribution
    if ncu is None and options.ncu_file:
        from nsight_tui.parsers.analyses import ncu as ncu_analysis
        from nsight_tui.parsers.read.ncu_rep import read_ncu_report

        ncu = ncu_analysis.analyse(trace, read_ncu_report(options.ncu_file), attribution)
    model = range_model(trace, attribution, options.main_thread)
    config = dict(trace.meta().config)
    config.update(options.dims)
    steady = phases(model)
    warm = phases(model, warmup=True) if len(steps_of(model).warmup) else {}
    roof = build_roofline(trace, attribution, **options.roofline)
    memory = memory_analysis(model)
    oom = oom_facts(model, memory)
    findings = findings_answers(trace, attribution, ncu)
    if oom is not None and not oom.steps_finished:
        findings = no_step(findings)
    return Report(
        file=str(trace.given),
        attribution=attribution,
        main_threads=main_threads.as_json(trace, model.main_info),
        config=config,
        ranges=steady,
        warmup=warm,
        ratios=_ratios(steady, config, roof.counts),
        ratio_basis=RATIO_BASIS,
        timing=timing(trace, model),
        gpu_idle=phase_idle(model),
        memory=memory,
        oom=oom,
        gpu_metrics=gpu_metrics_analysis(model, config),
        ranks=_ranks(trace),
        roofline=roofline_answers(trace, attribution, **options.roofline, roof=roof),
        occupancy=occupancy.answers(trace),
        findings=findings,
        backward_parts=backward_parts(model),
        inferred=inference(trace) if not has_iteration_ranges(trace) or inference(trace).found else None,
        # rows left out, tables without a column they need; a trace without FLOP counts says so
        notes=[*trace.info.notes, *([f"roofline: {NO_FLOPS}"] if roof.counts is None else [])],
        ncu=ncu,
    )


def _ranks(trace: Trace) -> RunRanks | None:
    """Per-rank figures where the export holds several ranks (processes x GPUs)."""
    from nsight_tui.parsers.analyses.ranks import ranks_of_trace
    from nsight_tui.parsers.analyses.straggler_why import with_why

    run = ranks_of_trace(trace)
    return with_why(trace, run) if len(run.ranks) > 1 else None
