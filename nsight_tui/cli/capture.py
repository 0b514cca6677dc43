"""`nsight-tui capture`: profile the NVTX-annotated GPT-2 under nsys and export SQLite; or, with
`-- CMD ARGS`, anyone's command (capture.command).

Torch is never imported here: a probe runs in the interpreter that will run the workload, so
`--help` and the "no torch" message work on a machine without it.
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from nsight_tui.capture.errors import CaptureError
from nsight_tui.capture.ncu import DEFAULT_KERNEL_LIMIT, find_ncu
from nsight_tui.capture.nsys import GPU_METRICS_DEFAULT_HZ, find_nsys
from nsight_tui.capture.plant import PLANTS
from nsight_tui.capture.plant import check as plant_check
from nsight_tui.capture.runner import CaptureConfig, Runner, describe_result
from nsight_tui.parsers.read.conventions import iteration_names
from nsight_tui.capture.sizes import ATTENTIONS, DEFAULT_BATCH, DTYPES, MODEL_SIZES, MODES

PROBE = """
import json, importlib.util
info = {"torch": None, "cuda": False, "device": None, "nvtx": importlib.util.find_spec("nvtx") is not None}
try:
    import torch
except ImportError:
    pass
else:
    info["torch"] = torch.__version__
    info["cuda"] = torch.cuda.is_available()
    if info["cuda"]:
        info["device"] = torch.cuda.get_device_name()
        info["gpus"] = torch.cuda.device_count()
print(json.dumps(info))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("examples: nsight-tui capture --model large --ctx 512   |   "
                     "nsight-tui capture --sweep --models small,medium --ctxs 128,256 --out outputs/   |   "
                     "nsight-tui capture --out runs/ -- python train.py --lr 3e-4")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                        help="profile this command instead of the GPT-2 workload (after `--`): CUDA + NVTX, no CPU "
                        "sampling, GPU memory usage; STEM.sqlite with STEM.run.json (command, wall clock, exit "
                        "status) and, if it marks its loop with nsight_tui.capture.mark, STEM.steps.json")
    mine = parser.add_argument_group("capturing your own command (-- CMD ARGS)")
    mine.add_argument("--name", metavar="STEM",
                      help="output name STEM.sqlite (default: the script's name, `train` for python train.py)")
    mine.add_argument("--no-open", action="store_true",
                      help="print where the export is instead of opening it in the explorer")
    what = parser.add_argument_group("what to run")
    what.add_argument("--model", default="small", choices=list(MODEL_SIZES), help="model size (default small)")
    what.add_argument("--ctx", type=int, default=128, help="context length (default 128)")
    what.add_argument("--mode", default="train", choices=MODES,
                      help="train: forward+backward+AdamW; forward: inference under no_grad (default train)")
    what.add_argument("--dtype", default="fp32", choices=DTYPES, help="fp32, or bf16 autocast (default fp32)")
    what.add_argument("--tf32", action="store_true",
                      help="allow TF32 tensor-core matmuls for fp32 tensors (default: fp32 GEMMs on the CUDA cores); "
                      "output name gets _tf32")
    what.add_argument("--plant", default="", choices=["", *PLANTS], metavar="CAUSE",
                      help="plant a known cause of a slow step, or its fix: " + ", ".join(PLANTS) + " (capture/plant.py)")
    what.add_argument("--plant-every", type=int, default=1, metavar="N",
                      help="the plant in every Nth step only (step_1, step_3, ... with 2) and its absence in the others: "
                      "the change measured inside one capture, on the same minute's CPU (host-sleep, item, "
                      "item-before-step, pageable-input; output name gets -everyN)")
    what.add_argument("--no-phase-sync", action="store_true",
                      help="synchronise once per step, not after every phase (output name gets _nosync)")
    what.add_argument("--no-sync", action="store_true",
                      help="nothing synchronises inside any NVTX range, as in real training: the CPU runs ahead and "
                      "each step's one synchronise comes after its range (output name gets _async)")
    what.add_argument("--no-nvtx", action="store_true",
                      help="no NVTX ranges and no marks at all, an unannotated trace whose iterations and layers "
                      "nsight-tui infers from the kernel sequence; the Python step times go beside the export in "
                      "STEM.steps.json (output name gets _nonvtx)")
    what.add_argument("--attention", default="manual", choices=ATTENTIONS,
                      help="manual (annotated scores/softmax/matmul) or fused (torch SDPA) (default manual)")
    what.add_argument("--batch", type=int, default=DEFAULT_BATCH, help=f"batch size (default {DEFAULT_BATCH})")
    what.add_argument("--steps", type=int, default=3, help="measured iterations step_N (default 3)")
    what.add_argument("--warmup", type=int, default=2, help="warm-up iterations warmup_N (default 2)")
    ops = what.add_mutually_exclusive_group()
    ops.add_argument("--autograd-nvtx", action="store_true",
                     help="pass --pytorch=autograd-nvtx to nsys: PyTorch's NVTX ranges for every op and backward "
                     "node, with the sequence numbers that map backward onto the forward's parts (output _agnvtx)")
    ops.add_argument("--autograd-shapes", action="store_true",
                     help="pass --pytorch=autograd-shapes-nvtx to nsys: the same op ranges with each op's input "
                     "shapes, from which `r` and MFU estimate FLOPs on traces without counts (output _agshapes)")
    ops.add_argument("--emit-nvtx", action="store_true",
                     help="the same ranges from torch.autograd.profiler.emit_nvtx() around the loop (output _emitnvtx)")
    what.add_argument("--backward-ranges", action="store_true",
                      help="backward:<part> ranges around each annotated part's backward, on the autograd thread "
                      "(module backward hooks; output _bwdranges)")
    what.add_argument("--bare-run", action="store_true",
                      help="run the workload once alone, without nsys, just before the capture: its step times go "
                      "beside the export in STEM.bare.json, and whatif says how much the profiler slowed the step")
    what.add_argument("--ddp", type=int, default=1, metavar="N",
                      help="data-parallel training over N GPUs (torchrun, one process per GPU, NCCL all-reduce "
                           "in backward); one export holds every rank (default 1)")
    ncu = parser.add_argument_group("Nsight Compute")
    ncu.add_argument("--ncu", action="store_true",
                     help="after the nsys capture, run the same workload under ncu over one steady-state step "
                     "(cudaProfilerStart/Stop around it: every thread's kernels, backward's included) -> STEM.ncu-rep")
    ncu.add_argument("--ncu-step", default="step_1", metavar="NAME",
                     help="the iteration ncu profiles (default step_1)")
    ncu.add_argument("--ncu-kernels", type=int, default=DEFAULT_KERNEL_LIMIT, metavar="N",
                     help=f"profile at most N kernels (ncu -c; default {DEFAULT_KERNEL_LIMIT})")
    ncu.add_argument("--ncu-path", help="path to ncu (else $NCU, PATH, then the usual install folders)")
    sweep = parser.add_argument_group("sweep")
    sweep.add_argument("--sweep", action="store_true", help="one capture per (model, ctx) pair of --models x --ctxs")
    sweep.add_argument("--models", help="comma-separated model sizes for --sweep (default: --model)")
    sweep.add_argument("--ctxs", help="comma-separated context lengths for --sweep (default: --ctx)")
    sweep.add_argument("--skip-existing", action="store_true", help="in a sweep, keep outputs already there")
    out = parser.add_argument_group("output and tools")
    out.add_argument("--out", default="outputs", help="output folder (default outputs/)")
    out.add_argument("--force", action="store_true", help="replace outputs that already exist")
    out.add_argument("--keep-rep", action="store_true", help="keep the .nsys-rep beside the .sqlite")
    out.add_argument("--nsys", help="path to nsys (else $NSYS, PATH, then the usual install folders)")
    out.add_argument("--python", default=sys.executable,
                     help="Python that runs the workload; needs torch with CUDA and nvtx (default: this one)")
    out.add_argument("--no-count", action="store_true",
                     help="skip counting FLOPs and bytes (one extra iteration in its own process before nsys, "
                     "recorded in the trace as nsight-tui:flops marks for the roofline)")
    out.add_argument("--no-memory-usage", action="store_true",
                     help="leave out nsys --cuda-memory-usage=true (GPU memory allocations and frees, on by default)")
    out.add_argument("--gpu-metrics", nargs="?", type=int, const=GPU_METRICS_DEFAULT_HZ, default=0, metavar="HZ",
                     help="sample the GPU's hardware metrics (SM active, tensor active, DRAM bandwidth) with nsys "
                     f"--gpu-metrics-devices=all at HZ samples a second (default {GPU_METRICS_DEFAULT_HZ}; "
                     "nsys's own 10000 makes large exports)")
    out.add_argument("--graphs", choices=("node", "whole"), default="node",
                     help="with a command of your own (-- CMD), how nsys traces its CUDA graphs: node (default), "
                     "each node a kernel of its own, every launch call slowed by nsys's work per node (0.7-1.0 us "
                     "a node measured); whole (nsys's own default), each launch one GPU op, its step closer to the "
                     "program's, its kernels unseen")
    out.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")


def _split(text: str, convert, what: str) -> list:
    try:
        values = [convert(v.strip()) for v in text.split(",") if v.strip()]
    except ValueError:
        raise CaptureError(f"bad {what} list {text!r}") from None
    if not values:
        raise CaptureError(f"empty {what} list")
    return values


def build_configs(args: argparse.Namespace) -> list[CaptureConfig]:
    models = _split(args.models, str, "model") if args.sweep and args.models else [args.model]
    ctxs = _split(args.ctxs, int, "context length") if args.sweep and args.ctxs else [args.ctx]
    if not args.sweep and (args.models or args.ctxs):
        raise CaptureError("--models/--ctxs need --sweep")
    for model in models:
        if model not in MODEL_SIZES:
            raise CaptureError(f"unknown model {model!r}; choose from {', '.join(MODEL_SIZES)}")
    for number, what in [(c, "--ctx") for c in ctxs] + [(args.batch, "--batch")]:
        if number < 1:
            raise CaptureError(f"{what} must be at least 1, not {number}")
    if args.ddp < 1:
        raise CaptureError(f"--ddp must be at least 1, not {args.ddp}")
    if args.steps < 1 or args.warmup < 0:
        raise CaptureError("--steps must be at least 1 and --warmup at least 0")
    try:  # a plant that cannot run here fails now, not after nsys has started (the GPU is CUDA's)
        plant_check(args.plant, train=args.mode == "train", cuda=True, distributed=args.ddp > 1,
                    phase_sync=not (args.no_phase_sync or args.no_sync), every=args.plant_every,
                    tf32=args.tf32, bf16=args.dtype == "bf16")
    except ValueError as exc:
        raise CaptureError(str(exc)) from None
    if args.ncu:
        if args.ncu_step not in iteration_names(args.warmup, args.steps):
            raise CaptureError(f"--ncu-step {args.ncu_step} is not one of this run's iterations "
                               f"({', '.join(iteration_names(args.warmup, args.steps))})")
        if args.ncu_kernels < 1:
            raise CaptureError(f"--ncu-kernels must be at least 1, not {args.ncu_kernels}")
        if args.ddp > 1:
            raise CaptureError("--ncu profiles one process: leave out --ddp")
    op_ranges = ("autograd-nvtx" if args.autograd_nvtx else "autograd-shapes-nvtx" if args.autograd_shapes
                 else "emit-nvtx" if args.emit_nvtx else "none")
    if args.no_nvtx and (op_ranges != "none" or args.backward_ranges):
        raise CaptureError("--no-nvtx leaves no room for --autograd-nvtx, --autograd-shapes, --emit-nvtx or "
                           "--backward-ranges")
    if args.gpu_metrics < 0 or args.gpu_metrics > 200_000:
        raise CaptureError(f"--gpu-metrics {args.gpu_metrics}: a rate in samples a second, 1 to 200000")
    if args.graphs != "node":
        raise CaptureError("--graphs: for a command of your own (-- CMD); the GPT-2 workload's cuda-graph plant "
                           "is traced node by node, as the replay's graph figures need")
    return [CaptureConfig(model=m, ctx=c, mode=args.mode, dtype=args.dtype, attention=args.attention,
                          batch=args.batch, steps=args.steps, warmup=args.warmup, processes=args.ddp,
                          tf32=args.tf32, plant=args.plant, plant_every=args.plant_every,
                          phase_sync=not (args.no_phase_sync or args.no_sync),
                          range_sync=not args.no_sync,
                          op_ranges=op_ranges, backward_ranges=args.backward_ranges, nvtx=not args.no_nvtx,
                          profile_step=args.ncu_step if args.ncu else "")
            for m in models for c in ctxs]


def probe_python(python: str) -> dict:
    """Torch, CUDA and nvtx as the workload's interpreter sees them; CaptureError naming what is missing
    (not nvtx: without the package the workload writes its ranges through PyTorch's own NVTX
    bindings, capture.annotate)."""
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CaptureError(f"cannot run {python}: {exc}") from None
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CaptureError(f"{python} failed to report its PyTorch setup: {last}") from None
    if info["torch"] is None:
        raise CaptureError(f"PyTorch is not installed for {python}: pip install torch (a CUDA build, see "
                           "https://pytorch.org/get-started/locally/), or pass --python an interpreter that has it")
    if not info["cuda"]:
        raise CaptureError(f"no CUDA GPU: PyTorch {info['torch']} in {python} reports torch.cuda.is_available() "
                           "False; run on a machine with an NVIDIA GPU, driver and a CUDA build of PyTorch")
    return info


def run(args: argparse.Namespace) -> int:
    if args.command:
        from nsight_tui.cli.capture_command import run_command

        parser = argparse.ArgumentParser(add_help=False)
        add_arguments(parser)
        return run_command(args, vars(parser.parse_args([])), check_out_dir)
    try:
        if args.name or args.no_open:
            raise CaptureError("--name and --no-open go with a command of your own: capture [OPTIONS] -- CMD ARGS")
        configs = build_configs(args)
        out_dir = Path(args.out)
        check_out_dir(out_dir)  # --dry-run too: what it prints must be a run that can happen
        if args.dry_run:
            return _dry_run(args, configs, out_dir)
        nsys = find_nsys(args.nsys)
        ncu = find_ncu(args.ncu_path) if args.ncu else None
        runner = Runner(nsys, out_dir, python=args.python, force=args.force, keep_report=args.keep_rep,
                        count_flops=not args.no_count, memory_usage=not args.no_memory_usage,
                        gpu_metrics_hz=args.gpu_metrics, ncu=ncu, ncu_kernel_limit=args.ncu_kernels,
                        bare_run=args.bare_run)
        if not args.skip_existing and not args.force:  # refuse before paying for the probe
            for config in configs:
                runner.refuse_clobber(config)
        print(f"nsys: {nsys} ({_nsys_version(nsys)})", flush=True)
        info = probe_python(args.python)
        print(f"python: {args.python}, torch {info['torch']}, GPU {info['device']}", flush=True)
        if args.ddp > int(info.get("gpus") or 1):
            raise CaptureError(f"--ddp {args.ddp} needs {args.ddp} GPUs; {args.python} sees {info.get('gpus')}")
        runner.extra_metadata = {"device": info["device"], "torch": info["torch"]}
        runner.make_out_dir()
        results = runner.sweep(configs, skip_existing=args.skip_existing)
    except CaptureError as exc:
        print(f"nsight-tui capture: {exc}", file=sys.stderr)
        return exc.exit_code
    if len(results) > 1:
        print("summary:")
        for result in results:
            print(f"  {result.config.stem:<28} {result.status:<8} {describe_result(result)}")
    if any(r.status == "failed" for r in results):
        return 1
    if len(results) == 1 and results[0].status == "oom":
        return 4  # the one trace asked for was not made; the OOM is recorded
    return 0


def check_out_dir(out_dir: Path) -> None:
    """CaptureError (one line) unless `out_dir` is a folder, or can be made in one, that this
    user can write in: `--out /dev/full` (a device) or a path under a file is refused up front."""
    import os

    if out_dir.exists():
        if not out_dir.is_dir():
            raise CaptureError(f"--out {out_dir}: exists and is not a folder")
        where = out_dir
    else:
        where = next((p for p in out_dir.parents if p.exists()), Path("."))
        if not where.is_dir():
            raise CaptureError(f"--out {out_dir}: {where} is not a folder")
    if not os.access(where, os.W_OK | os.X_OK):
        raise CaptureError(f"--out {out_dir}: cannot write in {where}")


def _nsys_version(nsys: Path) -> str:
    try:
        done = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=60)
        return (done.stdout.strip().splitlines() or ["version unknown"])[-1]
    except (OSError, subprocess.TimeoutExpired):
        return "version unknown"


def _dry_run(args: argparse.Namespace, configs: list[CaptureConfig], out_dir: Path) -> int:
    try:
        nsys: str | Path = find_nsys(args.nsys)
    except CaptureError as exc:
        print(f"# note: {exc}", flush=True)
        nsys = "nsys"
    ncu: str | Path | None = None
    if args.ncu:
        try:
            ncu = find_ncu(args.ncu_path)
        except CaptureError as exc:
            print(f"# note: {exc}", flush=True)
            ncu = "ncu"
    runner = Runner(nsys, out_dir, python=args.python, force=args.force, keep_report=args.keep_rep,
                    count_flops=not args.no_count, memory_usage=not args.no_memory_usage,
                    gpu_metrics_hz=args.gpu_metrics, ncu=ncu, ncu_kernel_limit=args.ncu_kernels,
                    bare_run=args.bare_run)
    for index, config in enumerate(configs, 1):
        work = out_dir / f".{config.stem}.XXXXXXXX.partial"  # the real name is made by mkdtemp
        profile, export = runner.commands(config, work)
        print(f"[{index}/{len(configs)}] {config.describe()} -> {out_dir / config.stem}.sqlite")
        if runner.count_flops:
            print("  $ " + shlex.join(runner.count_command(config, work)))
        if runner.bare_run:
            print("  $ " + shlex.join(runner.bare_command(config, work)) + "   (alone, without nsys)")
        print("  $ " + shlex.join(profile))
        print("  $ " + shlex.join(export))
        print(f"  then os.replace({work / config.stem}.sqlite, {out_dir / config.stem}.sqlite)")
        if runner.ncu is not None:
            print("  $ " + shlex.join(runner.ncu_command(config, work)))
            print(f"  then os.replace({work / config.stem}.ncu-rep, {out_dir / config.stem}.ncu-rep)")
    return 0
