"""A folder of captures (`{model}_ctx{N}{variant}.sqlite`, OOM runs as `.oom.json`): which runs
there are, and the same answers (`analysis.questions`) for each. The tables people read are
made from these runs in `nsight_tui.render.sweep`.

Every run is kept: one whose name is not `{model}_ctx{N}` is placed by its `nsight-tui:config`
mark (`placement`), and failing that, its model or ctx is unknown (None)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nsight_tui.parsers.options import Options
from nsight_tui.parsers.read.compressed import as_plain_name, exports_in, is_compressed_export
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.read.errors import TraceError

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.report import Report


@dataclass
class Run:
    path: Path
    model: str | None  # None: the file name does not say (the config mark may: `placement`)
    ctx: int | None
    variant: str  # "" for the default (training, fp32, manual attention), else e.g. "_fwd"
    status: str = "ok"  # ok | oom | error
    message: str = ""
    report: Report | None = None  # its answers (analyses.report.build), the runs that ran
    oom_range: str | None = None  # where an OOM run ran out: the NVTX path (its record, else its export)
    oom_config: dict | None = None  # an OOM run's configuration, from its record (the runs that ran have answers)


def _oom_range(path: Path) -> str | None:
    """The NVTX path an OOM run ran out in: its record's "range" (what newer captures record), else the
    failed cudaMalloc's path in its export (STEM.oom.sqlite beside the record), else None."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(record, dict) and isinstance(record.get("range"), str) and record["range"]:
        return record["range"]
    export = path.with_name(path.name[: -len(".json")] + ".sqlite")
    if not export.is_file():
        return None
    from nsight_tui.parsers.analyses.memory import memory_analysis
    from nsight_tui.parsers.model.ranges import range_model
    from nsight_tui.parsers.read.load import load_trace

    try:
        oom = memory_analysis(range_model(load_trace(export))).out_of_memory
    except Exception:  # noqa: BLE001 - the export only adds where; the cell stays OOM without it
        return None
    return oom.path or None if oom is not None else None


def _oom_config(path: Path) -> dict | None:
    """The configuration an OOM record carries ("config": the capture's config mark keys), else None."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    config = record.get("config") if isinstance(record, dict) else None
    return config if isinstance(config, dict) else None


def _oom_message(path: Path) -> tuple[str, str]:
    """(status, message) of an OOM record; a record that cannot be read is an error, with why."""
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        return "error", f"OOM record unreadable ({exc.strerror})"
    except UnicodeDecodeError:
        return "error", "OOM record is not UTF-8 text"
    except json.JSONDecodeError as exc:
        return "error", f"OOM record is not valid JSON ({exc.msg}, line {exc.lineno})"
    if not isinstance(record, dict):
        return "error", f"OOM record is a JSON {type(record).__name__}, expected an object"
    message = record.get("message", "out of memory")
    return "oom", message if isinstance(message, str) else "out of memory"


def discover(folder: Path, skipped: list[str] | None = None) -> list[Run]:
    """The captures in `folder`. Anything not a regular file (a FIFO would block the read)
    is left out, with a line in `skipped`."""
    runs = []
    exports = set(exports_in(folder))  # a plain export, or one compressed whole (read.compressed)
    for path in sorted(folder.iterdir()):
        name = path.name
        export = name.endswith(".sqlite") or is_compressed_export(path)
        if (name.endswith(".oom.json") or export) and not path.is_file():
            if skipped is not None:
                skipped.append(f"{name}: not a regular file, skipped")
            continue
        if as_plain_name(path).name.endswith(f"{conventions.OOM_SUFFIX}.sqlite"):
            continue  # an OOM run's export: read through its record
        if name.endswith(".oom.json"):
            stem, status = name[: -len(".oom.json")], "oom"
        elif path in exports:
            stem, status = as_plain_name(path).stem, "ok"
        else:
            continue
        parsed = conventions.parse_stem(stem)
        model, ctx, variant = parsed if parsed else (None, None, "")
        run = Run(path, model, ctx, variant, status)
        if status == "oom":
            run.status, run.message = _oom_message(path)
            if run.status == "oom":
                run.oom_range = _oom_range(path)
                run.oom_config = _oom_config(path)
        runs.append(run)
    return runs


def analyse(runs: list[Run], options: Options | None = None, progress=None, done=None) -> list[Run]:
    """Each run's answers, in order. `progress(fraction, name)` before a run is read, `done(index, run)`
    after (its answers in, or its status saying why not): a caller shows each run as it comes."""
    for i, run in enumerate(runs):
        if progress:
            progress(i / max(1, len(runs)), run.path.name)
        if run.status == "ok":
            _analyse_one(run, options)
        if done:
            done(i, run)
    return runs


def _analyse_one(run: Run, options: Options | None) -> None:
    from nsight_tui.parsers.analyses.report import build
    from nsight_tui.parsers.read.load import load_trace

    try:
        run.report = build(load_trace(run.path), options)
        oom = run.report.oom
        if oom is not None:  # an export of a run that ran out, with no record beside it: OOM all the same
            run.status, run.oom_range = "oom", oom.path or None
            run.message = oom.message or f"{oom.call} returned {oom.return_value} (cudaErrorMemoryAllocation)"
            run.oom_config = run.report.config or None
    except TraceError as exc:
        run.status, run.message = "error", str(exc)
    except Exception as exc:  # one member must not end the sweep; its cell says why
        run.status, run.message = "error", f"could not be analysed: {exc}"


def runs_for(paths: list[Path]) -> list[Run]:
    """Runs for these files, plus the OOM records beside them (a sweep folder's `.oom.json`). Paths are
    taken as given, never resolved: a folder of symbolic links is that folder's runs, under their names.
    An OOM run's export beside its record is read through the record, as `discover` reads it (one run,
    one row: listed again, the one run was two rows, "CUDA out of memory" and "ok"; oom_export finds it)."""
    wanted = {Path(p).absolute() for p in paths}
    runs: list[Run] = []
    seen: set[Path] = set()
    for folder in dict.fromkeys(Path(p).absolute().parent for p in paths):
        for run in discover(folder):
            if run.status == "oom" or run.path.absolute() in wanted:
                runs.append(run)
                seen.add(run.path.absolute())
    for p in paths:  # files whose names do not follow {model}_ctx{N}: placed by their config mark
        if Path(p).absolute() not in seen and _oom_record(Path(p)).absolute() not in seen:
            runs.append(Run(Path(p), None, None, ""))
    return runs


def _oom_record(export: Path) -> Path:
    """Where an OOM run's record would be beside `export` (STEM.oom.sqlite[.xz] -> STEM.oom.json); the
    export's own path where its name is not an OOM run's."""
    name = as_plain_name(export).name
    if not name.endswith(f"{conventions.OOM_SUFFIX}.sqlite"):
        return export
    return export.with_name(name[: -len(".sqlite")] + ".json")


def oom_export(record: Path) -> Path | None:
    """The export an OOM run's record (STEM.oom.json) sits beside (STEM.oom.sqlite, plain or compressed
    whole), if there is one."""
    return next((p for p in exports_in(record.parent) if _oom_record(p).name == record.name), None)


def placement(run: Run) -> tuple[str | None, int | None, str]:
    """(model, ctx, variant): from the file name, else from the run's config mark (the variant
    then from the config's mode, dtype, attention and batch, as the capture names its files);
    None where neither says."""
    model, ctx, variant = run.model, run.ctx, run.variant
    if model is not None and ctx is not None:
        return model, ctx, variant
    config = run.report.config if run.report is not None else {}
    if model is None and isinstance(config.get("model"), str) and config["model"]:
        model = config["model"]
    if ctx is None and isinstance(config.get("ctx"), int):
        ctx = config["ctx"]
    if run.model is None and model is not None and ctx is not None:
        try:
            stem = conventions.output_stem(model, ctx, **{k: config[k] for k in ("mode", "dtype", "attention", "batch")
                                                          if k in config})
            variant = (conventions.parse_stem(stem) or (model, ctx, ""))[2]
        except (TypeError, ValueError):
            variant = ""
    return model, ctx, variant


def _int(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def memory_points(runs: list[Run]) -> tuple[list, list[str]]:
    """The memory model's points (memory_model.ConfigPoint) of a sweep's training runs: the ones that ran
    with their measured peak, the OOM ones with their configuration; and a line for each run left out."""
    from nsight_tui.parsers.analyses.memory_model import ConfigPoint

    points, left_out = [], []
    for run in runs:
        if run.status == "ok" and run.report is not None:
            config, memory = run.report.config, run.report.memory
        elif run.status == "oom":
            config, memory = run.oom_config or {}, None
        else:
            continue
        dims = {k: _int(config, k) for k in ("ctx", "batch", "d_model", "n_layers", "n_heads", "vocab")}
        missing = [k for k, v in dims.items() if v is None]
        if missing:
            left_out.append(f"{run.path.name}: its configuration lacks {', '.join(missing)} (no config mark)")
            continue
        if config.get("mode", "train") != "train":
            left_out.append(f"{run.path.name}: mode {config.get('mode')}, the model is of training (weights, "
                            "gradients, AdamW's state)")
            continue
        if config.get("dtype", "fp32") != "fp32":
            left_out.append(f"{run.path.name}: dtype {config.get('dtype')}, the model's bytes per element are fp32's")
            continue
        measured, source = getattr(memory, "allocator_peak_bytes", None), "nsys"
        if measured is None:
            measured, source = getattr(memory, "torch_peak_reserved_bytes", None), "torch"
        points.append(ConfigPoint(
            file=run.path.name, model=placement(run)[0], status=run.status, attention=str(config.get("attention", "manual")),
            measured_bytes=measured, measured_source=source if measured is not None else "",
            beside_allocator_bytes=getattr(memory, "beside_allocator_bytes", None),
            gpu_bytes=getattr(memory, "gpu_total_bytes", None),
            **dims))  # type: ignore[arg-type]
    return points, left_out


def memory_model(runs: list[Run]):
    """The sweep's memory model (memory_model.MemoryModel) over its training runs."""
    from nsight_tui.parsers.analyses.memory_model import model_sweep

    points, left_out = memory_points(runs)
    model = model_sweep(points)
    model.left_out = [*left_out, *model.left_out]
    return model
