"""Reading an Nsight Compute report (`.ncu-rep`) with NVIDIA's own reader, the `ncu_report` module.

The format is NVIDIA's undocumented protobuf; the reader NVIDIA ships for it (PyPI `ncu-report`,
also in Nsight Compute's `extras/python`, reads without a GPU) is the only faithful way in, so it
is an optional dependency (`pip install 'nsight-tui[ncu]'`) imported here only.

What comes out is plain data: per profiled kernel, in launch order (the report's order), its
names (demangled and mangled, as the export stores them too), its NVTX push/pop stack in the
default domain as ncu recorded it for the launching thread (empty for kernels launched by a
thread without ranges, such as PyTorch's autograd thread), every numeric metric ncu collected,
in the metric's own unit (`units`), and ncu's rule results with their estimated speedups.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from nsight_tui.parsers.read.errors import TraceError

INSTALL_HINT = "reading .ncu-rep files needs NVIDIA's ncu-report package: pip install 'nsight-tui[ncu]'"
SUFFIX = ".ncu-rep"
DEFAULT_DOMAIN = "<default domain>"


@dataclass(frozen=True)
class NcuRule:
    """One of ncu's rule results on one kernel (what its GUI shows under a section)."""

    rule: str  # ncu's rule identifier, e.g. "AchievedOccupancy"
    section: str  # the section that ran it
    kind: str  # OPTIMIZATION, WARNING, OK, ...
    message: str
    speedup_pct: float | None  # ncu's estimated speedup if fixed, % of the kernel's time
    speedup_type: str  # "local" (of the kernel's own time) or "global"


@dataclass(frozen=True)
class NcuKernel:
    index: int  # launch order among the report's profiled kernels (ncu's ID)
    name: str  # demangled, as the export's demangledName
    mangled: str
    function: str  # the short function name ncu's GUI shows (`elementwise_kernel`)
    nvtx_stack: tuple[str, ...]  # default NVTX domain's push/pop ranges, outermost first
    metrics: dict[str, float]
    units: dict[str, str]
    strings: dict[str, str]  # the string-valued metrics (device name, ...)
    rules: tuple[NcuRule, ...] = ()

    def metric(self, name: str) -> float | None:
        return self.metrics.get(name)


@dataclass
class NcuReport:
    path: Path
    kernels: list[NcuKernel] = field(default_factory=list)

    @property
    def device(self) -> str:
        return self.kernels[0].strings.get("device__attribute_display_name", "") if self.kernels else ""


def _module():
    try:
        import ncu_report  # NVIDIA's reader (optional extra)
    except ImportError:
        raise TraceError(INSTALL_HINT) from None
    return ncu_report


def _nvtx_stack(action) -> tuple[str, ...]:
    """The default domain's push/pop stack, where NVTX's default ranges (and the capture's) go.
    ncu's reader names that domain "<default domain>" (an empty name is taken the same way)."""
    state = action.nvtx_state()
    if state is None:
        return ()
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        if not domain.name() or domain.name() == DEFAULT_DOMAIN:
            return tuple(str(r) for r in domain.push_pop_ranges())
    return ()


# ncu_report's MsgType and SpeedupType enums (their values in the module), by name
_MESSAGE_KINDS = {0: "NONE", 1: "OK", 2: "OPTIMIZATION", 3: "WARNING", 4: "ERROR"}
_SPEEDUP_TYPES = {0: "", 1: "local", 2: "global"}


def _rules(action) -> tuple[NcuRule, ...]:
    """ncu's rule results as its reader gives them (`rule_results_as_dicts`): a message with its
    kind and, for the rules that estimate one, the speedup (% of the kernel's time) if fixed."""
    try:
        results = action.rule_results_as_dicts()
    except Exception:  # noqa: BLE001 - a report without rule results has none to show
        return ()
    out = []
    for r in results or ():
        message = r.get("rule_message") or {}
        speedup = r.get("speedup_estimation") or {}
        value = speedup.get("speedup")
        out.append(NcuRule(rule=str(r.get("rule_identifier", "")), section=str(r.get("section_identifier", "")),
                           kind=_MESSAGE_KINDS.get(int(message.get("type") or 0), str(message.get("type", ""))),
                           message=str(message.get("message", "")),
                           speedup_pct=float(value) if isinstance(value, (int, float)) else None,
                           speedup_type=_SPEEDUP_TYPES.get(int(speedup.get("type") or 0), "")))
    return tuple(out)


def check_readable(path: str | os.PathLike) -> Path:
    """The cheap refusals, before any screen: a missing file, or no reader installed."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    _module()
    return path


def read_ncu_report(path: str | os.PathLike) -> NcuReport:
    """Every profiled kernel of the report; TraceError (one line) for a missing, unreadable or
    empty report, or when the reader is not installed."""
    path = check_readable(path)
    ncu_report = _module()
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # noqa: BLE001 - NVIDIA's reader raises plain Exceptions
        raise TraceError(f"{path}: not a readable Nsight Compute report ({str(exc).splitlines()[0]})") from None
    report = NcuReport(path)
    for r in range(context.num_ranges()):
        rng = context.range_by_idx(r)
        for a in range(rng.num_actions()):
            report.kernels.append(_kernel(ncu_report, rng.action_by_idx(a), len(report.kernels)))
    if not report.kernels:
        raise TraceError(f"{path}: not an Nsight Compute report, or one with no profiled kernel")
    return report


def _kernel(ncu_report, action, index: int) -> NcuKernel:
    metrics: dict[str, float] = {}
    units: dict[str, str] = {}
    strings: dict[str, str] = {}
    for name in action.metric_names():
        m = action.metric_by_name(name)
        value = m.value()
        if isinstance(value, str):
            strings[name] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            metrics[name] = float(value)
            units[name] = m.unit()
    base = ncu_report.IAction
    return NcuKernel(index=index, name=action.name(base.NameBase_DEMANGLED), mangled=action.name(base.NameBase_MANGLED),
                     function=action.name(base.NameBase_FUNCTION), nvtx_stack=_nvtx_stack(action),
                     metrics=metrics, units=units, strings=strings, rules=_rules(action))
