"""Run the workload under `nsys profile`, export SQLite atomically, record out-of-memory configs.

One child process per configuration: a configuration that runs out of GPU memory leaves the
next one a clean device, and its failure is written down (`STEM.oom.json`) rather than raised.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from nsight_tui.capture import progress
from nsight_tui.capture.errors import CaptureError
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.render.output import write_atomic
from nsight_tui.parsers.read.source import connect_readonly
from nsight_tui.capture.nsys import MEMORY_USAGE, NSYS_OP_RANGES, export_command, gpu_metrics_options, profile_command
from nsight_tui.capture.ncu import DEFAULT_KERNEL_LIMIT, ncu_command
from nsight_tui.capture.plant import nsys_options as plant_nsys_options
from nsight_tui.capture.sizes import RunSettings
from nsight_tui.parsers.read.conventions import (BARE_SIDECAR_SUFFIX, NO_NVTX_SUFFIX, OOM_SUFFIX, STEPS_SIDECAR_SUFFIX,
                                                 output_stem)

PROJECT_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CaptureConfig(RunSettings):
    @property
    def stem(self) -> str:
        stem = output_stem(self.model, self.ctx, self.mode, self.dtype, self.attention, self.batch, self.processes,
                           self.tf32, self.op_ranges, self.backward_ranges)
        sync = "" if self.phase_sync else "_nosync" if self.range_sync else "_async"
        every = f"-every{self.plant_every}" if self.plant_every > 1 else ""
        return stem + sync + (f"_{self.plant}{every}" if self.plant else "") + ("" if self.nvtx else NO_NVTX_SUFFIX)

    def describe(self) -> str:
        ranks = f", data-parallel over {self.processes} GPUs" if self.processes > 1 else ""
        tf32 = " tf32" if self.tf32 else ""
        extra = "".join([f", {self.op_ranges} op ranges" if self.op_ranges != "none" else "",
                         ", backward ranges" if self.backward_ranges else "",
                         ", no NVTX" if not self.nvtx else ""])
        return (f"{self.model} ctx{self.ctx} {self.mode} {self.dtype}{tf32} {self.attention} attention, "
                f"batch {self.batch}, {self.warmup} warmup + {self.steps} steps{ranks}{extra}")

    def workload_args(self) -> list[str]:
        return ["--model", self.model, "--ctx", str(self.ctx), "--mode", self.mode, "--dtype", self.dtype,
                "--attention", self.attention, "--batch", str(self.batch), "--steps", str(self.steps),
                "--warmup", str(self.warmup), *(["--tf32"] if self.tf32 else []),
                *(["--plant", self.plant] if self.plant else []),
                *(["--plant-every", str(self.plant_every)] if self.plant_every > 1 else []),
                *([] if self.phase_sync else ["--no-phase-sync"]),
                *([] if self.range_sync else ["--no-range-sync"]),
                *(["--op-ranges", self.op_ranges] if self.op_ranges != "none" else []),
                *(["--backward-ranges"] if self.backward_ranges else []),
                *([] if self.nvtx else ["--no-nvtx"]),
                *(["--profile-step", self.profile_step] if self.profile_step else [])]

    def nsys_options(self) -> list[str]:
        return [*([NSYS_OP_RANGES[self.op_ranges]] if self.op_ranges in NSYS_OP_RANGES else []),
                *plant_nsys_options(self.plant)]


@dataclass
class CaptureResult:
    config: CaptureConfig
    status: str  # "ok", "oom", "failed", "skipped"
    path: Path | None = None
    message: str = ""
    seconds: float = 0.0
    details: dict = field(default_factory=dict)


def output_paths(out_dir: Path, config: CaptureConfig) -> tuple[Path, Path]:
    return out_dir / f"{config.stem}.sqlite", out_dir / f"{config.stem}{OOM_SUFFIX}.json"


def oom_export_path(out_dir: Path, config: CaptureConfig) -> Path:
    """The export of a run that ran out of memory (beside its STEM.oom.json; a sweep reads it for
    where the run failed, never as a run of its own)."""
    return out_dir / f"{config.stem}{OOM_SUFFIX}.sqlite"


NCU_SUFFIX = ".ncu-rep"


def steps_sidecar_path(out_dir: Path, config: CaptureConfig) -> Path:
    """STEM.steps.json beside a --no-nvtx export: the workload's Python step times, which an
    annotated capture writes into the trace as `nsight-tui:step` marks."""
    return out_dir / f"{config.stem}{STEPS_SIDECAR_SUFFIX}"


def bare_sidecar_path(out_dir: Path, config: CaptureConfig) -> Path:
    """STEM.bare.json beside the export (`capture --bare-run`): the workload's step times run alone."""
    return out_dir / f"{config.stem}{BARE_SIDECAR_SUFFIX}"


def existing_outputs(out_dir: Path, config: CaptureConfig, keep_report: bool = False) -> list[Path]:
    paths = [*output_paths(out_dir, config), oom_export_path(out_dir, config), bare_sidecar_path(out_dir, config),
             *([] if config.nvtx else [steps_sidecar_path(out_dir, config)]),
             *([out_dir / f"{config.stem}{NCU_SUFFIX}"] if config.profile_step else []),
             *([out_dir / f"{config.stem}.nsys-rep"] if keep_report else [])]
    return [p for p in paths if p.exists()]


def trace_counts(path: Path) -> dict:
    """Kernel and NVTX event counts of an export, for the progress line (read-only, best effort)."""
    counts = {}
    try:
        db = connect_readonly(path)
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for key, table in (("kernels", "CUPTI_ACTIVITY_KIND_KERNEL"), ("nvtx_events", "NVTX_EVENTS")):
                if table in tables:
                    counts[key] = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        finally:
            db.close()
    except (sqlite3.Error, TraceError):
        pass
    return counts


def child_environment(base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    # The workload imports nsight_tui as installed (pip install -e '.[capture]'); the checkout on
    # the path keeps `python -m nsight_tui...` working from the repository root too.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Runner:
    def __init__(self, nsys: Path | str, out_dir: Path, python: str = sys.executable, force: bool = False,
                 keep_report: bool = False, environment: dict | None = None,
                 echo: Callable[[str], None] | None = None, extra_metadata: dict | None = None,
                 count_flops: bool = False, count_device: str | None = None, memory_usage: bool = True,
                 gpu_metrics_hz: int = 0, ncu: Path | str | None = None,
                 ncu_kernel_limit: int = DEFAULT_KERNEL_LIMIT, bare_run: bool = False, bare_device: str | None = None):
        self.nsys = str(nsys)
        self.out_dir = Path(out_dir)
        self.python = python
        self.force = force
        self.keep_report = keep_report
        self.env = child_environment(environment)
        self.echo = echo or (lambda line: print(line, flush=True))
        self.extra_metadata = extra_metadata or {}
        # Count FLOPs and bytes in a process of its own before nsys starts (capture.counting):
        # the trace then holds the profiled workload's GPU work only. Data-parallel runs are
        # counted as one rank (the same model and per-rank batch; the all-reduce is no FLOP).
        self.count_flops = count_flops
        self.count_device = count_device
        self.memory_usage = memory_usage  # nsys --cuda-memory-usage=true
        self.gpu_metrics_hz = gpu_metrics_hz  # >0: nsys --gpu-metrics-devices=all at this rate
        # capture --ncu: after the nsys capture, the same workload once more under
        # Nsight Compute over the config's profile_step, written to STEM.ncu-rep beside STEM.sqlite.
        self.ncu = str(ncu) if ncu is not None else None
        self.ncu_kernel_limit = ncu_kernel_limit
        # capture --bare-run: the same workload once alone, without nsys, just before the capture (the
        # same machine and minute), its step times kept beside the export (STEM.bare.json)
        self.bare_run = bare_run
        self.bare_device = bare_device

    def commands(self, config: CaptureConfig, work_dir: Path) -> tuple[list[str], list[str]]:
        # Full file names: a stem like `2.7B_ctx128` must not look like a name with an extension.
        report = work_dir / f"{config.stem}.nsys-rep"
        counts = ["--counts-in", str(work_dir / "counts.json")] if self.count_flops else []
        # Data-parallel: torchrun starts one workload process per GPU; nsys follows them all
        # into one export (the ranks are its processes).
        launcher = (["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={config.processes}"]
                    if config.processes > 1 else [])
        app = [self.python, *launcher, "-m", "nsight_tui.capture.workload", *config.workload_args(),
               "--status-file", str(work_dir / "status.json"), *counts]
        extra = [*config.nsys_options(), *([MEMORY_USAGE] if self.memory_usage else []),
                 *(gpu_metrics_options(self.gpu_metrics_hz) if self.gpu_metrics_hz > 0 else [])]
        return (profile_command(self.nsys, report, app, extra),
                export_command(self.nsys, report, work_dir / f"{config.stem}.sqlite"))

    def bare_command(self, config: CaptureConfig, work_dir: Path) -> list[str]:
        launcher = (["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={config.processes}"]
                    if config.processes > 1 else [])
        device = ["--device", self.bare_device] if self.bare_device else []
        return [self.python, *launcher, "-m", "nsight_tui.capture.workload", *config.workload_args(), *device,
                "--status-file", str(work_dir / "bare_status.json")]

    def _bare_steps(self, config: CaptureConfig, work_dir: Path) -> list[dict] | None:
        """The bare run's steps, or None (said in a line) where it did not finish: the capture goes on."""
        code = self._run(self.bare_command(config, work_dir))
        status = self._read_status(work_dir / "bare_status.json")
        if code != 0 or status.get("status") != "ok":
            self.echo(f"    the run without nsys did not finish ({status.get('status') or f'exit {code}'}): "
                      "capturing without STEM.bare.json")
            return None
        return [s for s in status.get("steps", []) if isinstance(s, dict)]

    def ncu_command(self, config: CaptureConfig, work_dir: Path) -> list[str]:
        app = [self.python, "-m", "nsight_tui.capture.workload", *config.workload_args(),
               "--status-file", str(work_dir / "ncu_status.json")]
        return ncu_command(self.ncu or "ncu", work_dir / f"{config.stem}{NCU_SUFFIX}", app, self.ncu_kernel_limit)

    def count_command(self, config: CaptureConfig, work_dir: Path) -> list[str]:
        device = ["--device", self.count_device] if self.count_device else []
        return [self.python, "-m", "nsight_tui.capture.workload", *config.workload_args(), *device,
                "--count-out", str(work_dir / "counts.json")]

    def _run(self, command: Sequence[str]) -> int:
        self.echo("$ " + shlex.join(command))
        return progress.run(command, env=self.env)

    def refuse_clobber(self, config: CaptureConfig) -> None:
        existing = existing_outputs(self.out_dir, config, self.keep_report)
        if existing and not self.force:
            raise CaptureError(f"{existing[0]} already exists; pass --force to replace it"
                               " (or --skip-existing in a sweep)")

    def capture(self, config: CaptureConfig) -> CaptureResult:
        sqlite_path, oom_path = output_paths(self.out_dir, config)
        self.refuse_clobber(config)
        self.make_out_dir()
        started = time.perf_counter()
        # Work happens in a hidden folder beside the output, so the final os.replace is on one
        # file system and a crash leaves no half-written STEM.sqlite behind.
        work_dir = Path(tempfile.mkdtemp(prefix=f".{config.stem}.", suffix=".partial", dir=self.out_dir))
        try:
            profile, export = self.commands(config, work_dir)
            if self.count_flops and self._run(self.count_command(config, work_dir)) != 0:
                self.echo("    FLOP counting failed (see above): capturing without counts")
            bare = self._bare_steps(config, work_dir) if self.bare_run else None
            code = self._run(profile)
            status = self._read_status(work_dir / "status.json")
            if status.get("status") == "oom":
                record = {"status": "oom", "config": {**config.metadata(), **self.extra_metadata},
                          "message": status.get("message", "out of memory")}
                if status.get("range"):
                    record["range"] = status["range"]  # the NVTX path open when memory ran out
                exported_oom = self._export_oom(config, work_dir)
                if exported_oom is not None:
                    record["export"] = exported_oom.name
                try:
                    write_atomic(oom_path, json.dumps(record, indent=2) + "\n", overwrite=self.force)
                except TraceError as exc:
                    raise CaptureError(f"{oom_path} appeared while capturing; not replacing it without --force") from exc
                if sqlite_path.exists():  # a --force rerun that now runs out of memory: the old trace is stale
                    sqlite_path.unlink()
                return CaptureResult(config, "oom", oom_path, record["message"], time.perf_counter() - started)
            report = work_dir / f"{config.stem}.nsys-rep"
            if status.get("status") == "error":
                return CaptureResult(config, "failed", None, f"workload failed: {status.get('message')}",
                                     time.perf_counter() - started)
            if not report.exists():
                hint = ""
                if list(work_dir.glob("*.qdstrm")):
                    hint = (" (only a .qdstrm was written: nsys's QdstrmImporter failed; it needs libdw.so.1 "
                            "and libelf.so.1 on LD_LIBRARY_PATH)")
                return CaptureResult(config, "failed", None,
                                     f"nsys profile exited with {code} and wrote no report{hint}",
                                     time.perf_counter() - started)
            if status.get("status") != "ok":
                return CaptureResult(config, "failed", None,
                                     f"the workload did not finish (nsys profile exited with {code})",
                                     time.perf_counter() - started)
            code = self._run(export)
            exported = work_dir / f"{config.stem}.sqlite"
            if code != 0 or not exported.exists():
                return CaptureResult(config, "failed", None, f"nsys export exited with {code}",
                                     time.perf_counter() - started)
            self._replace_check(sqlite_path)
            if not config.nvtx:  # first, so an export is never without its step times
                sidecar = steps_sidecar_path(self.out_dir, config)
                self._replace_check(sidecar)
                write_atomic(sidecar, json.dumps({"config": {**config.metadata(), **self.extra_metadata},
                                                  "steps": status.get("steps", [])}, indent=1) + "\n",
                             overwrite=True)
            bare_record = bare_sidecar_path(self.out_dir, config)
            if bare is not None:  # before the export lands, so an export never misses its bare record
                self._replace_check(bare_record)
                write_atomic(bare_record, json.dumps({"config": {**config.metadata(), **self.extra_metadata},
                                                      "run": "the workload alone, without nsys, just before the capture",
                                                      "steps": bare}, indent=1) + "\n", overwrite=True)
            elif bare_record.exists():  # a --force rerun without --bare-run: stale
                bare_record.unlink()
            os.replace(exported, sqlite_path)
            if oom_path.exists():  # this configuration fits now: the old OOM record is stale
                oom_path.unlink()
            if self.keep_report:
                kept = self.out_dir / report.name
                self._replace_check(kept)
                os.replace(report, kept)
            details: dict = {}
            if self.ncu is not None:
                details["ncu"] = self._capture_ncu(config, work_dir)
            details |= {"size_bytes": sqlite_path.stat().st_size, **trace_counts(sqlite_path)}
            measured = [s["seconds"] for s in status.get("steps", []) if s["name"].startswith("step_")]
            if measured:
                details["median_step_s"] = statistics.median(measured)
            return CaptureResult(config, "ok", sqlite_path, "", time.perf_counter() - started, details)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)

    def _capture_ncu(self, config: CaptureConfig, work_dir: Path) -> str:
        """Run ncu over the profiled step; the report's path, or why there is none (the nsys
        export stands on its own either way)."""
        code = self._run(self.ncu_command(config, work_dir))
        made = work_dir / f"{config.stem}{NCU_SUFFIX}"
        if self._read_status(work_dir / "ncu_status.json").get("status") != "ok" or not made.exists():
            return f"no Nsight Compute report (ncu exited with {code})"
        target = self.out_dir / made.name
        self._replace_check(target)
        os.replace(made, target)
        return str(target)

    def _export_oom(self, config: CaptureConfig, work_dir: Path) -> Path | None:
        """Export the report of a run that ran out of memory to STEM.oom.sqlite (the failed cudaMalloc
        and the ranges open then are in it); None when nsys wrote no report or the export failed."""
        report = work_dir / f"{config.stem}.nsys-rep"
        exported = work_dir / f"{config.stem}.sqlite"
        if not report.exists() or self._run(export_command(self.nsys, report, exported)) != 0 or not exported.exists():
            return None
        target = oom_export_path(self.out_dir, config)
        self._replace_check(target)
        os.replace(exported, target)
        return target

    def make_out_dir(self) -> None:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CaptureError(f"{self.out_dir}: cannot create the output folder ({exc.strerror})") from None

    def _replace_check(self, path: Path) -> None:
        # Checked again just before replacing: another run may have written it meanwhile.
        if path.exists() and not self.force:
            raise CaptureError(f"{path} appeared while capturing; not replacing it without --force")

    @staticmethod
    def _read_status(path: Path) -> dict:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    def sweep(self, configs: Sequence[CaptureConfig], skip_existing: bool = False) -> list[CaptureResult]:
        if not skip_existing and not self.force:
            clashes = [p for c in configs for p in existing_outputs(self.out_dir, c, self.keep_report)]
            if clashes:
                names = ", ".join(str(p) for p in clashes)
                raise CaptureError(f"already there: {names}; pass --force to replace or --skip-existing to keep them")
        results = []
        for index, config in enumerate(configs, 1):
            self.echo(f"[{index}/{len(configs)}] {config.describe()} -> {self.out_dir / config.stem}.sqlite")
            existing = existing_outputs(self.out_dir, config, self.keep_report) if skip_existing else []
            if existing:
                self.echo(f"    skipped: {existing[0]} exists")
                results.append(CaptureResult(config, "skipped", existing[0]))
                continue
            try:
                result = self.capture(config)
            except CaptureError as exc:
                result = CaptureResult(config, "failed", None, str(exc))
            self.echo("    " + describe_result(result))
            results.append(result)
        return results


def describe_result(result: CaptureResult) -> str:
    if result.status == "ok":
        d = result.details
        parts = [f"wrote {result.path} ({d.get('size_bytes', 0) / 1e6:.1f} MB"]
        if "kernels" in d:
            parts.append(f"{d['kernels']:,} kernels")
        if "nvtx_events" in d:
            parts.append(f"{d['nvtx_events']:,} NVTX events")
        if "median_step_s" in d:
            parts.append(f"median step {d['median_step_s'] * 1e3:.1f} ms")
        ncu = f"; Nsight Compute: {d['ncu']}" if "ncu" in d else ""
        return ", ".join(parts) + f") in {result.seconds:.1f} s{ncu}"
    if result.status == "oom":
        return f"out of memory, recorded in {result.path}: {result.message}"
    if result.status == "skipped":
        return f"skipped ({result.path} exists)"
    return f"FAILED: {result.message}"
