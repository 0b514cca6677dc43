"""`nsight-tui capture [OPTIONS] -- CMD ARGS`: the user's own command under nsys (capture.command)."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Callable

from nsight_tui.capture.command import CommandCapture, default_stem
from nsight_tui.capture.errors import CaptureError
from nsight_tui.capture.nsys import find_nsys, gpu_metrics_options

# The options that choose or shape the GPT-2 workload: meaningless for someone else's command.
WORKLOAD_ONLY = ("model", "ctx", "mode", "dtype", "tf32", "plant", "no_phase_sync", "no_sync", "no_nvtx",
                 "attention", "batch", "steps", "warmup", "emit_nvtx", "backward_ranges", "ddp", "ncu", "ncu_step",
                 "ncu_kernels", "ncu_path", "sweep", "models", "ctxs", "skip_existing", "python", "no_count")


def _refuse_workload_options(args: argparse.Namespace, defaults: dict) -> None:
    given = [name for name in WORKLOAD_ONLY if getattr(args, name, None) != defaults.get(name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise CaptureError(f"{flags}: options of the GPT-2 workload, not of a command of your own (-- CMD)")


def command_words(args: argparse.Namespace) -> list[str]:
    words = list(args.command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        raise CaptureError("no command given after --")
    return words


def run_command(args: argparse.Namespace, defaults: dict, check_out_dir: Callable[[Path], None]) -> int:
    """`defaults`: every capture option's default (the GPT-2 ones must stay so); `check_out_dir`:
    the capture command's own check of --out."""
    try:
        _refuse_workload_options(args, defaults)
        words = command_words(args)
        out_dir = Path(args.out)
        check_out_dir(out_dir)
        stem = args.name or default_stem(words)
        op_ranges = "autograd-nvtx" if args.autograd_nvtx else "autograd-shapes-nvtx" if args.autograd_shapes else "none"
        if args.dry_run:
            try:
                nsys: str | Path = find_nsys(args.nsys)
            except CaptureError as exc:
                print(f"# note: {exc}", flush=True)
                nsys = "nsys"
        else:
            nsys = find_nsys(args.nsys)
        capture = CommandCapture(nsys, out_dir, stem, autograd_nvtx=op_ranges, memory_usage=not args.no_memory_usage,
                                 force=args.force, keep_report=args.keep_rep, graphs=args.graphs)
        if args.gpu_metrics:
            if args.gpu_metrics < 0 or args.gpu_metrics > 200_000:
                raise CaptureError(f"--gpu-metrics {args.gpu_metrics}: a rate in samples a second, 1 to 200000")
            extra = gpu_metrics_options(args.gpu_metrics)
            base = capture.nsys_options
            capture.nsys_options = lambda: [*base(), *extra]  # type: ignore[method-assign]
        if args.dry_run:
            work = out_dir / f".{stem}.XXXXXXXX.partial"
            profile, export = capture.commands(words, work)
            print(f"{shlex.join(words)} -> {out_dir / stem}.sqlite")
            print("  $ " + shlex.join(profile))
            print("  $ " + shlex.join(export))
            print(f"  then STEM.sqlite, STEM.run.json (and STEM.steps.json when the command marks its loop) in {out_dir}")
            return 0
        result = capture.run(words)
    except CaptureError as exc:
        print(f"nsight-tui capture: {exc}", file=sys.stderr)
        return exc.exit_code
    if result.status == "error":
        print(f"nsight-tui capture: {result.message}", file=sys.stderr)
        return 1
    steps = result.record.get("steps_recorded", 0)
    note = {"ok": "", "failed": f"; {result.message} (the export is kept)",
            "oom": "; the run ran out of GPU memory (recorded in the .oom.json beside it)"}[result.status]
    print(f"wrote {result.path} in {result.wall_seconds:.1f} s (exit status {result.exit_status}; "
          f"{steps} steps recorded by the Python clock){note}", flush=True)
    if not args.no_open and result.status != "oom" and sys.stdout.isatty() and sys.stdin.isatty():
        from nsight_tui.cli import main as nsight_main

        return nsight_main([str(result.path)])
    if not args.no_open and result.status != "oom":
        print(f"open it with: nsight-tui {shlex.quote(str(result.path))}")
    return 0 if result.status == "ok" else 4 if result.status == "oom" else result.exit_status or 1
