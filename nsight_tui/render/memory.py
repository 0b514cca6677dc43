"""The report's GPU memory section: the peak, when and where; per phase over the
steady-state steps; an out-of-memory run's failed allocation. Reads `answers["memory"]`
(parsers.analyses.memory.MemoryReport.to_json)."""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict

from nsight_tui.parsers.analyses.memory import DEFINITIONS, MemoryReport
from nsight_tui.parsers.analyses.oom import Amount, OomFacts
from nsight_tui.render import numbers, safe, tables


def _b(n) -> str:
    return numbers.bytes_(n)


def _signed(n) -> str:
    if n is None:
        return numbers.bytes_(n)
    return ("+" if n > 0 else "") + numbers.bytes_(n)


def _gap(a: int, b: int) -> str:
    share = f" ({numbers.percent((a - b) / b, 2)})" if b else ""
    return _signed(a - b) + share


OWNER_LABELS = {
    "allocator": "PyTorch's caching allocator's segments (nsys: each cudaMalloc right after its cudaStreamIsCapturing "
                 "check), most held",
    "library": "not torch's allocator: libraries' own cudaMalloc (cuBLAS handles)",
    "static": "not torch's allocator: Device Static (modules' __device__ globals)",
    "other": "not torch's allocator: other memory kinds",
}


def owner_rows(m: dict) -> list[list[str]]:
    """The allocator's segments at their most, then what is not torch's, listed apart: "N in K allocations"."""
    owners = m.get("owners") or {}
    rows = []
    if m.get("allocator_peak_bytes") is not None:
        rows.append([OWNER_LABELS["allocator"], _b(m["allocator_peak_bytes"])])
    for name in ("library", "static", "other"):
        g = owners.get(name)
        if not g:
            continue
        sizes = ""
        if name == "library":
            sizes = "; sizes " + ", ".join(f"{_b(int(size))} ×{n}" for size, n in g["sizes"].items())
        rows.append([OWNER_LABELS[name], f"{_b(g['held_at_end_bytes'])} in {g['allocations']:,} allocations{sizes}"])
    return rows


def section(a: dict) -> list[str]:
    m = a.get("memory")
    if not m or (not m["has_events"] and not m["phases"] and not m["out_of_memory"]):
        return []
    out = ["## GPU memory"]
    src = safe.markdown(m.get("torch_source") or "step marks")  # the marks, or the sidecar beside the export
    if m["has_events"]:
        total = f" of {_b(m['gpu_total_bytes'])}" if m.get("gpu_total_bytes") else ""
        if len(m.get("device_peaks") or {}) > 1:
            out.append(f"_GPU {m['device']}, the one that held the most; peaks by GPU: "
                       + ", ".join(f"GPU {d} {_b(v)}" for d, v in m["device_peaks"].items()) + "_")
            out.append("")
        out.append(f"Peak in use (nsys memory events, every kind): **{_b(m['peak_bytes'])}**{total}, at "
                   f"{numbers.seconds(m['peak_t_ns'])} s into the capture, in `{safe.markdown(m['peak_path'] or '(no range)')}`; "
                   f"{m['allocations']:,} allocations, {m['frees']:,} frees.")
        out.append("")
        rows = [[f"{safe.markdown(kind)} (nsys memory kind, most held)", _b(v)] for kind, v in m["peak_by_kind"].items()]
        rows += owner_rows(m)
        if m.get("torch_peak_reserved_bytes") is not None:
            rows.append([f"torch max reserved (the allocator's segments, {src})", _b(m["torch_peak_reserved_bytes"])])
            if m.get("allocator_peak_bytes") is not None:
                rows.append([f"allocator's segments (nsys) − torch max reserved ({src})",
                             _gap(m["allocator_peak_bytes"], m["torch_peak_reserved_bytes"])])
            else:
                rows.append(["in use beyond torch's segments (libraries' own cudaMalloc, static globals)",
                             _b(m["peak_bytes"] - m["torch_peak_reserved_bytes"])])
        if m.get("torch_peak_allocated_bytes") is not None:
            rows.append([f"torch max allocated (live tensors, {src})", _b(m["torch_peak_allocated_bytes"])])
        out.append(tables.markdown(["what", "bytes"], rows))
    else:
        out.append("_No memory events in this export (capture with nsys --cuda-memory-usage=true)._")
    if m["phases"]:
        rows = [[p["phase"], p["steps"], _b(p["allocated_start_bytes"]), _b(p["allocated_end_bytes"]),
                 _signed(p["kept_bytes"]), _b(p["peak_allocated_bytes"]), _b(p["peak_reserved_bytes"]),
                 _b(p["segments_grown_bytes"])] for p in m["phases"]]
        notes = [f"torch's figures from the {src}, medians over the steady-state steps; kept: allocated at the "
                 "phase's end minus at its start (forward: the activations it keeps for backward; backward: what "
                 "it frees, net of the gradients it makes; optimizer: zero_grad's freed gradients)",
                 "segments grown: bytes the caching allocator cudaMalloc'd inside the phase (nsys), all steps"]
        if m.get("optimizer_state_bytes") is not None:
            notes.append(f"optimizer state: {_b(m['optimizer_state_bytes'])} (allocated at the first step's start "
                         "minus at the first warmup's start: AdamW's moments and whatever else the warmups keep)")
        out.append(tables.markdown(["phase", "steps", "allocated at start", "allocated at end", "kept",
                                    "peak allocated", "peak reserved", "segments grown"], rows,
                                   title="Per phase (steady state)", notes=notes))
    every = m.get("instances", [])
    # a path met more than once (a phase per micro-batch under gradient accumulation) numbered in time order
    times = Counter(i["path"] for i in every)
    nth: dict[str, int] = {}
    label = []
    for i in every:
        nth[i["path"]] = nth.get(i["path"], 0) + 1
        label.append(i["path"] + (f" #{nth[i['path']]}" if times[i["path"]] > 1 else ""))
    grown = [(i, name) for i, name in zip(every, label) if i["allocated_bytes"] or i["freed_bytes"]]
    if grown:
        out.append(tables.markdown(
            ["range instance", "allocated", "freed", "net", "held at start", "most held"],
            [[safe.markdown(name), _b(i["allocated_bytes"]), _b(i["freed_bytes"]), _signed(i["net_bytes"]),
              _b(i["in_use_start_bytes"]), _b(i["peak_bytes"])] for i, name in grown],
            title="Where device memory was taken (nsys)",
            notes=["the iteration and phase instances that cudaMalloc'd or freed; the others took nothing from "
                   "the driver (the caching allocator reused its segments)"]))
    oom = m.get("out_of_memory")
    if oom:
        total = _b(oom["total_memory_bytes"])
        out.append(f"**Out of memory**: `{safe.markdown(oom['call'])}` returned {oom['return_value']} "
                   f"(cudaErrorMemoryAllocation) at {numbers.seconds(oom['t_ns'])} s on {safe.markdown(oom['thread'])}, "
                   f"in `{safe.markdown(oom['path'] or '(no range)')}`, with {_b(oom['in_use_bytes'])} in use of "
                   f"{total}; {oom['failed_calls']} failed allocation(s).")
        if oom.get("workload_path") and oom["workload_path"] != oom["path"]:
            out.append(f"The workload recorded `{safe.markdown(oom['workload_path'])}` as the range open.")
        if oom.get("message"):
            out.append(f"PyTorch: {safe.markdown(oom['message'].split('  See documentation')[0])}")
    out.append("")
    return out


def oom_json(o: OomFacts) -> dict:
    """A run that ran out of GPU memory: the failed call, what was asked and held (bytes), the fixes."""
    def amount(a: Amount | None):
        return None if a is None else {"bytes": a.bytes, "rounding_bytes": a.rounding_bytes, "text": a.text}

    return {"t_ns": o.t_ns, "call": o.call, "return_value": o.return_value, "path": o.path,
            "thread": o.thread, "failed_calls": o.failed_calls, "in_use_bytes": o.in_use_bytes,
            "total_bytes": o.total_bytes, "steps_finished": o.steps_finished,
            "asked": amount(o.asked), "free": amount(o.free),
            "torch_allocated": amount(o.torch_allocated),
            "reserved_unallocated": amount(o.reserved_unallocated), "tensor": o.tensor,
            "fixes": [{"id": f.id, "text": f.text} for f in o.fixes], "message": o.message,
            "message_source": o.message_source}


def memory_json(m: MemoryReport) -> dict:
    """The report's `memory` section as plain data (bytes; times in ns on the GPU's clock)."""
    out = {k: v for k, v in asdict(m).items() if k not in ("times_ns", "in_use", "steps")}
    # every iteration and phase instance (nsys): what each took from the driver, freed, and the most held
    out["instances"] = [asdict(r) for r in m.steps]
    out["definitions"] = DEFINITIONS
    return out
