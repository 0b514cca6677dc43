"""`nsight-tui capture -- CMD ARGS`: anyone's command under `nsys profile`, exported to SQLite.

The command runs as given, with the nsys options this tool reads best (CUDA and NVTX traced,
no CPU sampling or context switches, CUDA graphs node by node, GPU memory usage; PyTorch's
autograd NVTX on request).
Beside STEM.sqlite go STEM.run.json (the command, its wall clock, its exit status, the nsys
command) and, when the command marked its loop with `nsight_tui.capture.mark`, STEM.steps.json
(the Python clock's step records). A run that ran out of GPU memory (its step records say so)
is kept as STEM.oom.sqlite with STEM.oom.json, as the GPT-2 capture keeps its own.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from nsight_tui.capture import progress
from nsight_tui.capture.errors import CaptureError
from nsight_tui.capture.mark import STEPS_FILE_ENV
from nsight_tui.capture.nsys import MEMORY_USAGE, NSYS_OP_RANGES, export_command, profile_command
from nsight_tui.parsers.read.conventions import OOM_SUFFIX, STEPS_SIDECAR_SUFFIX
from nsight_tui.render.output import write_atomic

RUN_RECORD_SUFFIX = ".run.json"
GRAPH_NODES = "--cuda-graph-trace=node"
GRAPH_WHOLE = "--cuda-graph-trace=graph"
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def default_stem(command: Sequence[str]) -> str:
    """A file name for the command's capture: the script's name (`train` for `python train.py`),
    the module's (`python -m pkg.main` -> `pkg.main`), else the program's."""
    words = list(command)
    if not words:
        raise CaptureError("no command given after --")
    name = Path(words[0]).name
    for i, word in enumerate(words[1:], 1):
        if word == "-m" and i + 1 < len(words):
            name = words[i + 1]
            break
        if word.endswith(".py"):
            name = Path(word).stem
            break
    stem = _NAME.sub("_", name).strip("._") or "capture"
    return stem


def check_stem(stem: str) -> str:
    if not stem or _NAME.search(stem) or stem.startswith("."):
        raise CaptureError(f"--name {stem!r}: use letters, digits, '_', '-' and '.' (not first)")
    return stem


@dataclass
class CommandResult:
    status: str  # "ok", "failed" (the command exited non-zero; the export is still kept), "oom", "error"
    path: Path | None
    exit_status: int | None
    wall_seconds: float
    record: dict = field(default_factory=dict)
    message: str = ""


class CommandCapture:
    def __init__(self, nsys: Path | str, out_dir: Path, stem: str, autograd_nvtx: str = "none",
                 memory_usage: bool = True, force: bool = False, keep_report: bool = False,
                 echo: Callable[[str], None] | None = None, graphs: str = "node"):
        self.nsys = str(nsys)
        self.out_dir = Path(out_dir)
        self.stem = check_stem(stem)
        self.autograd_nvtx = autograd_nvtx
        self.memory_usage = memory_usage
        self.force = force
        self.keep_report = keep_report
        if graphs not in ("node", "whole"):
            raise CaptureError(f"--graphs {graphs}: node or whole")
        self.graphs = graphs
        self.echo = echo or (lambda line: print(line, flush=True))

    # file names -----------------------------------------------------------------------------
    def outputs(self) -> dict[str, Path]:
        o, s = self.out_dir, self.stem
        return {"sqlite": o / f"{s}.sqlite", "run": o / f"{s}{RUN_RECORD_SUFFIX}",
                "steps": o / f"{s}{STEPS_SIDECAR_SUFFIX}", "oom_sqlite": o / f"{s}{OOM_SUFFIX}.sqlite",
                "oom": o / f"{s}{OOM_SUFFIX}.json", "report": o / f"{s}.nsys-rep"}

    def refuse_clobber(self) -> None:
        if self.force:
            return
        for key, path in self.outputs().items():
            if path.exists() and (key != "report" or self.keep_report):
                raise CaptureError(f"{path} already exists; pass --force to replace it (or --name another)")

    def nsys_options(self) -> list[str]:
        # CUDA graphs kernel by kernel unless asked (a `generate()` with a static cache replays its
        # decode as graphs): each kernel attributed, at nsys's cost per node in each launch call;
        # traced whole (nsys's default), each launch one op (read.load: ids.GRAPH)
        graphs = GRAPH_NODES if self.graphs == "node" else GRAPH_WHOLE
        return [graphs, *([NSYS_OP_RANGES[self.autograd_nvtx]] if self.autograd_nvtx in NSYS_OP_RANGES else []),
                *([MEMORY_USAGE] if self.memory_usage else [])]

    def commands(self, command: Sequence[str], work_dir: Path) -> tuple[list[str], list[str]]:
        report = work_dir / f"{self.stem}.nsys-rep"
        return (profile_command(self.nsys, report, list(command), self.nsys_options()),
                export_command(self.nsys, report, work_dir / f"{self.stem}.sqlite"))

    # the run --------------------------------------------------------------------------------
    def run(self, command: Sequence[str], environment: dict | None = None) -> CommandResult:
        if not command:
            raise CaptureError("no command given after --")
        self.refuse_clobber()
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CaptureError(f"{self.out_dir}: cannot create the output folder ({exc.strerror})") from None
        work_dir = Path(tempfile.mkdtemp(prefix=f".{self.stem}.", suffix=".partial", dir=self.out_dir))
        try:
            return self._run(list(command), work_dir, environment)
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)

    def _run(self, command: list[str], work_dir: Path, environment: dict | None) -> CommandResult:
        env = dict(os.environ if environment is None else environment)
        steps_file = work_dir / "steps.json"
        env[STEPS_FILE_ENV] = str(steps_file)
        env.setdefault("PYTHONUNBUFFERED", "1")
        profile, export = self.commands(command, work_dir)
        self.echo("$ " + " ".join(_quote(w) for w in profile))
        started_at = time.time()
        started = time.perf_counter()
        code = progress.run(profile, env=env)
        wall = time.perf_counter() - started
        steps = _read_json(steps_file)
        oom = _oom_of(steps)
        record = {"command": command, "exit_status": code, "wall_seconds": round(wall, 6),
                  "started_unix": round(started_at, 3), "nsys": profile,
                  "status": "oom" if oom else "ok" if code == 0 else "failed",
                  "steps_recorded": len(steps.get("steps", [])) if steps else 0}
        report = work_dir / f"{self.stem}.nsys-rep"
        if not report.exists():
            hint = (" (only a .qdstrm was written: nsys's QdstrmImporter failed; it needs libdw.so.1 and "
                    "libelf.so.1 on LD_LIBRARY_PATH)") if list(work_dir.glob("*.qdstrm")) else ""
            return CommandResult("error", None, code, wall, record,
                                 f"nsys profile exited with {code} and wrote no report{hint}")
        self.echo("$ " + " ".join(_quote(w) for w in export))
        exported = work_dir / f"{self.stem}.sqlite"
        if progress.run(export, env=env) != 0 or not exported.exists():
            return CommandResult("error", None, code, wall, record, "nsys export failed")
        out = self.outputs()
        target = out["oom_sqlite"] if oom else out["sqlite"]
        record["export"] = target.name
        stale = [out["sqlite"], out["steps"]] if oom else [out["oom_sqlite"], out["oom"]]
        if steps:
            write_atomic(out["steps"], json.dumps(steps, indent=1) + "\n", overwrite=True)
            record["steps_file"] = out["steps"].name
        if oom:
            write_atomic(out["oom"], json.dumps({"status": "oom", "config": {"command": command},
                                                 "message": oom.get("message", "out of memory"),
                                                 "range": oom.get("path"), "export": target.name},
                                                indent=2) + "\n", overwrite=True)
        write_atomic(out["run"], json.dumps(record, indent=2) + "\n", overwrite=True)
        os.replace(exported, target)
        if self.keep_report:
            os.replace(report, out["report"])
        for path in stale:
            if path.exists() and not (path == out["steps"] and steps):
                path.unlink()
        status = "oom" if oom else "ok" if code == 0 else "failed"
        message = "" if code == 0 else f"the command exited with {code}"
        return CommandResult(status, target, code, wall, record, message)


def _oom_of(steps: dict) -> dict | None:
    """The out-of-memory record of a marked run: the config's `oom`, or a step whose status is oom."""
    if not steps:
        return None
    config = steps.get("config")
    oom = config.get("oom") if isinstance(config, dict) else None
    if isinstance(oom, dict):
        return oom
    for s in [*steps.get("failed_steps", []), *steps.get("steps", [])]:
        if isinstance(s, dict) and s.get("status") == "oom":
            return {"path": s.get("name"), "message": s.get("message", "out of memory")}
    return None


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _quote(word: str) -> str:
    import shlex

    return shlex.quote(word)
