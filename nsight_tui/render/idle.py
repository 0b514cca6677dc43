"""GPU idle time by cause, the CPU's lead and the queue depth as Markdown: the report's
section (f) (one function, hooked into the report page with one line), the timeline's
window export, and the sweep report's per-figure cells."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.idle import WindowIdle
from nsight_tui.parsers.analyses.idle_report import PhaseIdle
from nsight_tui.render import numbers, tables
from nsight_tui.render.numbers import MISSING

PHASE_ORDER = ("forward", "backward", "optimizer", "step")
_ms, _us = numbers.ms, numbers.us


def window_json(w: WindowIdle) -> dict:
    """One window, or a range's instances taken together: per device busy and idle by cause (ns),
    the CPU's lead and the queue depth; the longest gaps with their cause."""
    return {
        "instances": w.windows, "window_ns": w.span_ns, "burst_gap_ns": w.burst_gap_ns,
        "devices": [{
            "device": d.device, "busy_ns": d.split.busy_ns, "launch_bound_ns": d.split.launch_bound_ns,
            "sync_bound_ns": d.split.sync_bound_ns, "host_bound_ns": d.split.host_bound_ns,
            "idle_ns": d.split.idle_ns,
            "lead": asdict(d.lead), "queue": {"mean_depth": d.queue.mean_depth, "max_depth": d.queue.max_depth},
        } for d in w.devices],
        "gaps": [{
            "device": g.device, "start_ns": g.start_ns, "end_ns": g.end_ns, "duration_ns": g.duration_ns,
            "launch_bound_ns": g.launch_bound_ns, "sync_bound_ns": g.sync_bound_ns,
            "host_bound_ns": g.host_bound_ns, "cause": g.cause,
            "threads": [asdict(t) for t in g.threads],
        } for g in w.gaps],
    }


def gpu_idle_json(p: PhaseIdle) -> dict:
    """The JSON under "gpu_idle": per phase its window_json."""
    return {"burst_gap_ns": p.burst_gap_ns, "definitions": p.definitions, "windows": p.windows,
            "phases": {name: window_json(w) for name, w in p.phases.items()}}


def _pct(part, whole) -> str:
    return numbers.percent(part / whole if part is not None and whole else None)


def _depth(x) -> str:
    return numbers.fixed(x, 2)


def table(headers, rows, title=None, notes=()) -> str:
    return tables.markdown(headers, rows, title=title, notes=notes)


def split_rows(label: str, w: dict, per: int = 1) -> list[list]:
    """One row per device: window, busy and the three causes (ms per instance and share)."""
    rows = []

    def each(ns):  # per instance; none when no instance counts (every range of zero length)
        return ns / per if per else None

    for d in w["devices"]:
        span = w["window_ns"]
        rows.append([label if len(w["devices"]) == 1 else f"{label} (GPU {d['device']})", w["instances"],
                     _ms(each(span)), f"{_ms(each(d['busy_ns']))} ({_pct(d['busy_ns'], span)})",
                     f"{_ms(each(d['launch_bound_ns']))} ({_pct(d['launch_bound_ns'], span)})",
                     f"{_ms(each(d['sync_bound_ns']))} ({_pct(d['sync_bound_ns'], span)})",
                     f"{_ms(each(d['host_bound_ns']))} ({_pct(d['host_bound_ns'], span)})"])
    return rows


SPLIT_HEADERS = ["range", "instances", "window ms", "GPU busy ms", "launch-bound ms", "sync-bound ms",
                 "host-bound ms"]
LEAD_HEADERS = ["range", "kernels", "lead median µs", "lead p95 µs", "lead max µs", "queue mean", "queue max"]


def lead_rows(label: str, w: dict) -> list[list]:
    return [[label if len(w["devices"]) == 1 else f"{label} (GPU {d['device']})", d["lead"]["kernels"],
             _us(d["lead"]["median_ns"]), _us(d["lead"]["p95_ns"]), _us(d["lead"]["max_ns"]),
             _depth(d["queue"]["mean_depth"]), MISSING if d["queue"]["max_depth"] is None else d["queue"]["max_depth"]]
            for d in w["devices"]]


GAP_HEADERS = ["#", "GPU", "start (ns)", "length µs", "cause", "launch / sync / host µs", "CPU threads then"]


def gap_rows(gaps: list[dict], origin: int | None = None) -> list[list]:
    rows = []
    for i, g in enumerate(gaps, 1):
        doing = []
        for t in g["threads"]:
            calls = ", ".join(f"{name} ×{n}" for name, n, _ in t["api_calls"][:3]) or "no CUDA call"
            nvtx = " › ".join(t["nvtx_open"]) if t["nvtx_open"] else ""
            started = f"; began {', '.join(t['nvtx_started'][:2])}" if t["nvtx_started"] else ""
            doing.append(f"{t['thread']}: {calls}{f' in {nvtx}' if nvtx else ''}{started}")
        rows.append([i, g["device"], g["start_ns"] - (origin or 0), _us(g["duration_ns"]), g["cause"],
                     f"{_us(g['launch_bound_ns'])} / {_us(g['sync_bound_ns'])} / {_us(g['host_bound_ns'])}",
                     " · ".join(doing) or MISSING])
    return rows


DEFINITION_NOTE = (
    "busy: a GPU op runs; launch-bound: idle while an issued op has not started, or a CPU thread is in a "
    "non-synchronising CUDA call or between launches at most {gap} µs apart; sync-bound: idle, nothing "
    "queued, a thread in cudaDeviceSynchronize/cudaStreamSynchronize/cudaEventSynchronize/blocking cudaMemcpy; "
    "host-bound: idle and none of these (Python, data loading, optimizer CPU work). The four add up to the "
    "window (the range from NVTX start to end) exactly. Lead: kernel start − launching call start; queue: ops "
    "issued and not started."
)


def idle_section(answers: dict) -> list[str]:
    """Report section (f) from `answers["gpu_idle"]` (parsers/analyses/idle_report.py): the split per
    phase, the lead and queue, the step's longest gaps. Markdown blocks, as render/report's
    sections return them."""
    idle = answers.get("gpu_idle") or {}
    phases = idle.get("phases") or {}
    out = ["## (f) GPU idle and the CPU's lead", ""]
    present = [p for p in PHASE_ORDER if p in phases]
    if not present:
        out.append("No forward/backward/optimizer/step ranges, or no GPU work in them.\n")
        return out
    note = DEFINITION_NOTE.format(gap=f"{idle['burst_gap_ns'] / 1e3:g}")
    windows = idle.get("windows") or {}
    notes = [note] + ([f"windows: step — {windows['step']}; forward/backward/optimizer — {windows['phases']}"]
                      if windows else [])
    out.append(table(SPLIT_HEADERS, [r for p in present for r in split_rows(p, phases[p], phases[p]["instances"])],
                     title="GPU time in each range, per instance, by cause", notes=notes))
    out.append(table(LEAD_HEADERS, [r for p in present for r in lead_rows(p, phases[p])],
                     title="The CPU's lead over the GPU and the launch queue",
                     notes=[("over the kernels whose launching call started inside the range; queue depth "
                             "time-weighted over the range")]))
    step = phases.get("step")
    if step and step["gaps"]:
        out.append(table(GAP_HEADERS, gap_rows(step["gaps"]), title="The longest GPU gaps in the steps",
                         notes=["start on the capture's clock; what each CPU thread was in during the gap"]))
    return out


def window_markdown(title: str, idle: dict, items: list[list], origin: int) -> str:
    """The timeline's `e`: the window's idle summary, its longest gaps and every item in it."""
    out = [table(SPLIT_HEADERS, split_rows("window", idle), title=f"GPU idle in the window ({title})",
                 notes=[DEFINITION_NOTE.format(gap=f"{idle['burst_gap_ns'] / 1e3:g}")])]
    out.append(table(LEAD_HEADERS, lead_rows("window", idle), title="CPU lead and queue in the window"))
    if idle["gaps"]:
        out.append(table(GAP_HEADERS, gap_rows(idle["gaps"], origin), title="Longest GPU gaps in the window",
                         notes=[f"start relative to {origin} ns"]))
    out.append(table(["lane", "kind", "name", "start (ns)", "duration (ns)", "correlation ID", "CPU lead (ns)"],
                     items, title=f"Items in the window ({len(items):,})",
                     notes=[("every range, API call and GPU op overlapping the window, by lane then start; "
                             "start on the capture's clock")]))
    return "\n".join(out)


# -- sweep: one table per figure ------------------------------------------------------------------
def _step(a: dict) -> dict | None:
    phases = ((a.get("gpu_idle") or {}).get("phases") or {})
    return phases.get("step")


def _share(key: str):
    def cell(a: dict) -> str:
        s = _step(a)
        if not s or not s["devices"]:
            return MISSING
        return " / ".join(_pct(d[key], s["window_ns"]) for d in s["devices"])
    return cell


def _lead(a: dict) -> str:
    s = _step(a)
    if not s or not s["devices"]:
        return MISSING
    return " / ".join(f"{_us(d['lead']['median_ns'])} / {_us(d['lead']['p95_ns'])}" for d in s["devices"])


def _queue(a: dict) -> str:
    s = _step(a)
    if not s or not s["devices"]:
        return MISSING
    return " / ".join(f"{_depth(d['queue']['mean_depth'])} (max {d['queue']['max_depth']})" for d in s["devices"])


# (title, basis, answers -> cell): one table each in the sweep report (render/sweep.QUESTIONS)
IDLE_FIGURES = [
    ("(f) GPU busy, share of the step", "union of GPU op intervals / NVTX step time", _share("busy_ns")),
    ("(f) Launch-bound GPU idle, share of the step", "idle while launching (see the report's definitions) / step time",
     _share("launch_bound_ns")),
    ("(f) Sync-bound GPU idle, share of the step", "idle while a CPU thread synchronises / step time",
     _share("sync_bound_ns")),
    ("(f) Host-bound GPU idle, share of the step", "idle with no CUDA activity / step time", _share("host_bound_ns")),
    ("(f) CPU lead per kernel in the step, median / p95 (µs)", "kernel start − launching call start", _lead),
    ("(f) Launch queue depth in the step, mean (max)", "ops issued and not started, time-weighted", _queue),
]
