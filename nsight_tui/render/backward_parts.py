"""The backward-by-forward-part table as text (the report's section, the TUI view's notes):
from the plain data of parsers.backward_parts (`BackwardParts.to_json()`)."""
from __future__ import annotations

from nsight_tui.parsers.analyses.backward_parts import BackwardParts
from nsight_tui.render import numbers, safe, tables

METHOD = {
    "seq": "each backward node's kernels charged to the forward op with the same sequence number, and "
    "through it to the forward range around that op",
    "name": "the kernels inside each `backward:<part>` range charged to the forward part of that name",
}
HEADERS = ["forward part", "fwd ms", "bwd ms", "bwd/fwd", "fwd self ms", "bwd self ms", "self bwd/fwd",
           "fwd kernels", "bwd kernels"]


def ms(ns) -> str:
    return numbers.ms(ns)


def ratio(x) -> str:
    return "–" if x is None else f"{x:.2f}x"


def rows(entry: dict) -> list[list]:
    out = []
    for p in entry["parts"]:
        self_ratio = p["backward_self_ns"] / p["forward_self_ns"] if p["forward_self_ns"] else None
        out.append([safe.markdown(p["part"]), ms(p["forward_kernel_ns"]), ms(p["backward_kernel_ns"]),
                    ratio(p["bwd_over_fwd"]), ms(p["forward_self_ns"]), ms(p["backward_self_ns"]), ratio(self_ratio),
                    p["forward_kernels"], p["backward_kernels"]])
    return out


def notes(entry: dict) -> list[str]:
    """What was mapped, what was not and why (never dropped silently)."""
    total = entry["backward_kernel_ns"]
    share = entry["mapped_share"]
    lines = [(f"{entry['method']} mapping: {METHOD[entry['method']]}; kernel time summed over "
              f"{entry['iterations']} `backward` range(s) of the steady-state steps; a row includes its sub-parts, "
              "self = without them")]
    mapped = f"mapped: {ms(entry['mapped_kernel_ns'])} of {ms(total)} ms backward kernel time"
    lines.append(mapped + (f" ({100 * share:.2f}%)" if share is not None else ""))
    if entry.get("engine_kernel_ns"):
        lines.append(f"of which {ms(entry['engine_kernel_ns'])} ms launched by the autograd engine inside a node's "
                     "evaluate_function, after the node (bias-gradient reductions, gradient accumulation): "
                     "charged to that node")
    if entry.get("unnamed_kernel_ns"):
        lines.append(f"{ms(entry['unnamed_kernel_ns'])} ms of backward ran outside every backward:<part> range: "
                     "in the `forward` row only")
    for u in entry["unmapped"]:
        lines.append(f"not mapped: {u['reason']}: {ms(u['kernel_ns'])} ms ({u['kernels']:,} kernels)")
    if entry.get("backward_memcpy_memset_ns"):
        lines.append(f"memcpy/memset in backward (not kernels, not in the table): "
                     f"{ms(entry['backward_memcpy_memset_ns'])} ms")
    return lines


def section(a: dict) -> list[str]:
    """The report's section: one table per mapping the trace allows (`a["backward_parts"]`)."""
    if "backward_parts" not in a:
        return []
    out = ["## Backward by forward part", ""]
    if not a["backward_parts"] and ((a.get("inferred") or {}).get("decode")):
        out.append("_An inference run (a decode loop in each call): no backward._\n")
        return out
    if not a["backward_parts"]:
        out.append("_No backward-to-forward mapping in this trace: capture with `--autograd-nvtx`, `--emit-nvtx` "
                   "(sequence numbers) or `--backward-ranges` (backward:\\<part\\> ranges), with `forward` and "
                   "`backward` ranges._\n")
        return out
    for entry in a["backward_parts"]:
        out.append(tables.markdown(HEADERS, rows(entry), title=f"by {entry['method']}",
                                   notes=[safe.markdown(n) for n in notes(entry)]))
    return out


def backward_parts_json(t: BackwardParts) -> dict:
    """One mapping of backward's kernels onto forward's parts as plain data (kernel time in ns)."""
    return {
        "method": t.method, "iterations": t.iterations,
        "backward_kernel_ns": t.backward_kernel_ns, "backward_kernels": t.backward_kernels,
        "backward_memcpy_memset_ns": t.backward_other_ns, "engine_kernel_ns": t.engine_kernel_ns,
        "unnamed_kernel_ns": t.unnamed_kernel_ns,
        "mapped_kernel_ns": t.mapped_kernel_ns, "mapped_share": t.mapped_share,
        "parts": [{"part": "/".join(p.path), "forward_kernel_ns": p.forward_kernel_ns,
                   "forward_kernels": p.forward_kernels, "backward_kernel_ns": p.backward_kernel_ns,
                   "backward_kernels": p.backward_kernels, "bwd_over_fwd": p.ratio,
                   "forward_self_ns": p.forward_self_ns, "backward_self_ns": p.backward_self_ns}
                  for p in t.parts],
        "unmapped": [{"reason": r, "kernel_ns": ns, "kernels": k} for r, (ns, k) in t.unmapped.items()],
    }
