"""What to fix first: rules that name a cause of a slow step, with its evidence, a fix in
PyTorch terms and the step time fixing it would save, ranked by that saving.

Each rule reads the results of other analyses (parsers.idle: GPU idle by cause; parsers.roofline
and parsers.peaks: GEMM math paths and peaks; parsers.ranks: exposed communication; from the
hardware, analyses.ncu's joined kernels when an Nsight Compute report is given and
analyses.gpu_metrics' GEMM check where nsys sampled GPU metrics) plus the export's memcpy rows,
over the steady-state iterations (`step_N`). Figures are per step (the
sum over the steady-state steps divided by their count). Every threshold lives in THRESHOLDS
with the reason for its value. No presentation here (nsight_tui.render.findings makes text).

The package: `context` (the steps and what every rule needs once), `thresholds`, the rules by
cause (`host`: the GPU waiting for the CPU; `fusion`; `gemm`: how kernels use the GPU; `copies`;
`communication`; `window`: warm-up in the steady state), `partition` (each nanosecond claimed
once), `replayed` (each finding's fix as replay edits, its saving from the replay), `rules` (the
rules by id, and running them), `fixes` (`whatif fix:ID`) and `result` (`Finding`, and
`FindingsReport`: what the report says of them; render.findings lays both out as JSON).
"""
from nsight_tui.parsers.analyses.findings.communication import waited_communication
from nsight_tui.parsers.analyses.findings.context import BLOCKED_LAUNCH_NS, StepContext, context
from nsight_tui.parsers.analyses.findings.fusion import elementwise_chains
from nsight_tui.parsers.analyses.findings.partition import partition
from nsight_tui.parsers.analyses.findings.result import NOTHING_TO_GAIN_MS, Finding, FindingsReport
from nsight_tui.parsers.analyses.findings.rules import RULE_IDS, RULES, all_fixes, answers, findings, not_checked
from nsight_tui.parsers.analyses.findings.thresholds import THRESHOLDS, Threshold

__all__ = ["all_fixes", "BLOCKED_LAUNCH_NS", "NOTHING_TO_GAIN_MS", "RULES", "RULE_IDS", "THRESHOLDS", "Finding", "StepContext",
           "FindingsReport", "Threshold", "answers", "context", "elementwise_chains", "findings", "not_checked", "partition",
           "waited_communication"]
