"""Pan/zoom latency of the timeline view on the ~600k-kernel trace and its scaled copies.

    python bench/timeline_latency.py [--base PATH] [--scales 1,2] [--repeat 5] [--out bench/TIMELINE.md]

Per scale (the base trace of bench/run.py, replicated in time by bench/scale_trace.py):

  build     seconds to load the trace, build the range model, the idle analysis (every GPU)
            and the timeline's lanes, and the resident memory they add (VmRSS after - before)
  frame     TimelineState.frame() alone (bucketing every visible lane, the cursor's item,
            the window's idle split) for each key, at a 120-column canvas: what a key costs
            the worker, with 600k kernels in view (fit) and with a few (zoomed in)
  keys      the app headless (App.run_test, 120x40), `t` on the first root range (the whole
            run), then each key timed from Pilot.press to the new frame drawn and the app idle;
            a move in the range tree is timed the same way first, as the machine's reference

Targets (issue 12): pan and zoom under 50 ms at 600k kernels and 1M API calls.
Not a test: run it by hand; it prints a Markdown table and writes it to --out if given.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import os
import platform
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(BENCH), str(REPO)]

from run import pick_base, scaled_file, trace_counts  # noqa: E402 - bench/ on the path first
from tui_latency import _fine_idle_detection, _settle  # noqa: E402

# (label, state method, argument) as the screen's keys call them
FRAME_KEYS = [
    ("fit (0)", "fit", None),
    ("zoom in (+)", "zoom", 2.0),
    ("zoom in again (+)", "zoom", 2.0),
    ("pan a cell (l)", "pan", 1),
    ("pan a screen (L)", "pan", "screen"),
    ("zoom out (-)", "zoom", 0.5),
    ("next gap (])", "to_gap", True),
    ("lane down (j)", "move_lane", 1),
]
KEYS = [("zoom in (+)", "plus", 8), ("zoom out (-)", "minus", 8), ("pan a cell (l)", "l", 5),
        ("pan a screen (L)", "L", 3), ("pan back (H)", "H", 3), ("next gap (])", "right_square_bracket", 3),
        ("previous gap ([)", "left_square_bracket", 2), ("lane down (j)", "j", 3), ("fit (0)", "0", 2)]
WIDTH, HEIGHT = 120, 40


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build(path: Path) -> dict:
    from nsight_tui.parsers.analyses.idle import idle_analysis
    from nsight_tui.parsers.read.load import load_trace
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.analyses.timeline import timeline

    t0 = time.perf_counter()
    trace = load_trace(path)
    model = range_model(trace)
    t1 = time.perf_counter()
    before = rss_mb()
    idle = idle_analysis(trace)
    for d in idle.devices:
        idle.device(d)
    t2 = time.perf_counter()
    tl = timeline(trace, model, idle)
    t3 = time.perf_counter()
    return {"trace": trace, "timeline": tl, "load_s": t1 - t0, "idle_s": t2 - t1, "lanes_s": t3 - t2,
            "added_mb": rss_mb() - before, "lanes": len(tl.lanes)}


def frame_costs(tl, repeat: int) -> dict:
    from nsight_tui.tui.viewmodels.timeline import TimelineState, target_for_trace

    state = TimelineState(tl, target_for_trace(tl))
    state.set_cells(WIDTH - 13)
    visible = HEIGHT - 12
    out = {}
    for label, method, arg in FRAME_KEYS:
        samples = []
        for _ in range(repeat):
            s = copy.copy(state)
            t0 = time.perf_counter()
            if method == "pan" and arg == "screen":
                s.pan(s.n)
            elif arg is None:
                getattr(s, method)()
            else:
                getattr(s, method)(arg)
            s.frame(visible)
            samples.append((time.perf_counter() - t0) * 1000)
        getattr(state, method)(*(() if arg is None else (state.n if arg == "screen" else arg,)))
        out[label] = (statistics.median(samples), max(samples))
    return out


async def key_costs(path: Path, repeat: int) -> dict:
    from nsight_tui.tui.app import NsightApp

    _fine_idle_detection()
    app = NsightApp([str(path)])
    out = {}
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        while not app.loaded:
            await pilot.pause(0.05)
        await _settle(app, pilot)
        samples = []  # the reference on the same machine, same moment: a move in the range tree
        for key in ["j", "k"] * repeat:
            t0 = time.perf_counter()
            await pilot.press(key)
            await _settle(app, pilot)
            samples.append((time.perf_counter() - t0) * 1000)
        out["range tree j/k (reference)"] = (statistics.median(samples), max(samples))
        await pilot.press("t")
        while type(app.screen).__name__ != "TimelineScreen" or not app.screen.frames_drawn:
            await _settle(app, pilot)
            await asyncio.sleep(0.01)
        for label, key, times in KEYS:
            samples = []
            for _ in range(times * repeat // 3 or times):
                before = app.screen.frames_drawn
                t0 = time.perf_counter()
                await pilot.press(key)
                await _settle(app, pilot)
                while app.screen.frames_drawn == before and time.perf_counter() - t0 < 10:
                    await asyncio.sleep(0.001)
                    await _settle(app, pilot)
                samples.append((time.perf_counter() - t0) * 1000)
            out[label] = (statistics.median(samples), max(samples))
        out["_window"] = app.screen.crumb()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="pan/zoom latency of the timeline (issue 12)")
    p.add_argument("--base", type=Path, help="the x1 trace (default: as bench/run.py picks it)")
    p.add_argument("--scales", default="1,2", help="comma list of multiples of the base")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--max-gb", type=float, default=3.0)
    p.add_argument("--out", type=Path, help="also write the Markdown here")
    args = p.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr)
    base, note = pick_base(args.base, log)
    lines = [f"# Timeline pan/zoom latency ({platform.node()}, {platform.processor() or platform.machine()})", "",
             f"base: {note}", ""]
    for scale in [int(s) for s in args.scales.split(",")]:
        path = scaled_file(base, scale, log, int(args.max_gb * 1e9))
        if path is None:
            continue
        counts = trace_counts(path)
        log(f"x{scale}: {path.name} ({counts['kernels']:,} kernels, {counts['api']:,} API calls)")
        b = build(path)
        frames = frame_costs(b["timeline"], args.repeat)
        del b["trace"], b["timeline"]
        keys = asyncio.run(key_costs(path, args.repeat))
        lines += [(f"## x{scale}: {counts['kernels']:,} kernels, {counts['api']:,} API calls, "
                   f"{counts['bytes'] / 1e6:,.0f} MB"), "",
                  (f"load + model {b['load_s']:.2f} s · idle analysis {b['idle_s']:.2f} s · "
                   f"{b['lanes']} lanes {b['lanes_s']:.2f} s · +{b['added_mb']:.0f} MB resident for both"), "",
                  "| key | frame alone, median / max (ms) | key to new frame, headless app, median / max (ms) |",
                  "|---|---:|---:|"]
        for label in dict.fromkeys([k[0] for k in FRAME_KEYS] + [k[0] for k in KEYS] + ["range tree j/k (reference)"]):
            f = frames.get(label)
            k = keys.get(label)
            lines.append(f"| {label} | {f'{f[0]:.1f} / {f[1]:.1f}' if f else '–'} | "
                         f"{f'{k[0]:.1f} / {k[1]:.1f}' if k else '–'} |")
        load = os.getloadavg()[0]
        lines += ["", f"_app window after the walk: {keys['_window']}; load average {load:.1f} on "
                      f"{os.cpu_count()} cores while measuring_", ""]
        print("\n".join(lines[-(len(FRAME_KEYS) + len(KEYS) + 8):]), file=sys.stderr)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        from nsight_tui.render.output import write_atomic

        write_atomic(args.out, text, overwrite=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
