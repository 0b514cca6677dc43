"""Words for the process view: which thread is main in each process, and why.

Thread names come from the profile: they pass through `safe` like every other name, cut
(`safe.short`) where a line holds them."""
from __future__ import annotations

from types import SimpleNamespace

from nsight_tui.render import safe


def main_thread_reason(info, thread_label: str) -> str:
    """`python3 (559): its ranges frame 5,744 of the process's 5,895 GPU launches (...)`."""
    if info.picked_by != "auto":
        why = f"named by --main-thread {safe.short(info.picked_by)}"
    else:
        why = f"its ranges frame {info.framed_ops:,} of the process's {info.process_ops:,} GPU launches"
        if info.own_ops != info.process_ops:
            why += f" ({info.own_ops:,} launched by itself)"
        if info.candidates > 1:
            why += f"; {info.candidates - 1} other thread{'s' if info.candidates > 2 else ''} with ranges"
    return f"{safe.short(thread_label)}: {why}"


def main_thread_line(trace, model) -> str:
    """One line for a header: the main thread of each process and why it was chosen."""
    infos = sorted(model.main_info.values(), key=lambda m: m.gpid)
    if not infos:
        return "main thread: none (no NVTX ranges)"
    if len(infos) == 1:
        return "main thread: " + main_thread_reason(infos[0], trace.thread_label(infos[0].gtid))
    # Several processes: the threads, then the reason once when it is the same kind everywhere.
    names = ", ".join(safe.short(trace.thread_label(m.gtid)) for m in infos)
    framed = sum(m.framed_ops for m in infos)
    total = sum(m.process_ops for m in infos)
    picked = {m.picked_by for m in infos} - {"auto"}
    why = (f"named by --main-thread {safe.short(picked.pop())}" if picked else
           f"their ranges frame {framed:,} of {total:,} GPU launches")
    return f"main threads ({len(infos)} processes): {names} — {why}"


def main_thread_short(trace, model) -> str:
    """A header's few words: `main thread python3 (492) frames 96% of GPU launches`."""
    infos = sorted(model.main_info.values(), key=lambda m: m.gpid)
    if not infos:
        return "no main thread (no NVTX ranges)"
    names = ", ".join(safe.short(trace.thread_label(m.gtid)) for m in infos)
    head = f"main thread{'s' if len(infos) > 1 else ''} {names}"
    picked = [m.picked_by for m in infos if m.picked_by != "auto"]
    if picked:
        return f"{head} (picked: {safe.short(picked[0])})"
    total = sum(m.process_ops for m in infos)
    framed = sum(m.framed_ops for m in infos)
    share = f"{100 * framed / total:.0f}%" if total else "none"
    return f"{head} frame{'' if len(infos) > 1 else 's'} {share} of GPU launches"


def section(a: dict) -> list[str]:
    """The report's line per process: its main thread and why (from the answers' JSON)."""
    out = []
    for m in a.get("main_threads", []):
        info = SimpleNamespace(**{**m, "candidates": m["threads_with_ranges"]})
        out.append(f"_main thread of pid {m['pid']}: {safe.markdown(main_thread_reason(info, m['thread']))}_")
    return [*out, ""] if out else []
