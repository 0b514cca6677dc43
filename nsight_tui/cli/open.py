"""`nsight-tui FILE [FILE2 ... | DIR]`: open the Textual app (the default command)."""
from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", help="one or more .sqlite exports, or a directory of them")
    parser.add_argument(
        "--attribution",
        choices=("process", "nsys"),
        default="process",
        help="process (default): the main thread's ranges hold every kernel launched while they were open, "
        "by any thread (e.g. the autograd thread); nsys: NVIDIA's rule, launching thread only",
    )
    parser.add_argument("--main-thread", metavar="TID|NAME",
                        help="the thread whose ranges frame the iteration (default: chosen; the header says "
                        "which and why; `M` in the range tree picks another)")
    parser.add_argument("--diff", action="store_true",
                        help="with two files A B: open on their diff (what changed, and why the step moved)")
    roof = parser.add_argument_group("roofline (r)")
    roof.add_argument("--flops", metavar="FILE.json", help="FLOPs and bytes per range path (see `report --help`)")
    roof.add_argument("--peak-tflops", type=float, help="compute roof in TFLOP/s (a GPU the peaks table lacks)")
    roof.add_argument("--peak-gbps", type=float, help="memory roof in GB/s")
    roof.add_argument("--ncu", metavar="FILE.ncu-rep",
                      help="an Nsight Compute report of the same workload (capture --ncu): its measured roofline "
                      "points beside the estimated ones (pip install '.[ncu]')")


def run(args: argparse.Namespace) -> int:
    from nsight_tui.tui.launch import launch  # Textual only for this command

    return int(launch(args) or 0)
