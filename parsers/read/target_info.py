"""Single figures from the export's TARGET_INFO tables that an analysis asks for now and then,
read on first use through the loader's reader (SQLite or nsys's Parquet/Arrow folders alike):
the first GPU's memory bandwidth (a hint for the roofline's memory roof) and the session's clock
origin (to line per-rank exports up)."""
from __future__ import annotations

from pathlib import Path


from nsight_tui.parsers.read.columns import open_tables


def gpu_memory_bandwidth(trace) -> float | None:
    """TARGET_INFO_GPU.memoryBandwidth of the GPU with the lowest id (bytes/s), None where absent;
    `trace` a read.load.Trace (its `target_gpus`: per-rank files merged read each file's)."""
    if not trace.schema.has("TARGET_INFO_GPU", "memoryBandwidth"):
        return None
    try:
        gpus = trace.target_gpus(["id", "memoryBandwidth"])
        first = min(gpus, key=lambda g: g.get("id") or 0) if gpus else {}
        value = first.get("memoryBandwidth")
        return float(value) if value else None
    except Exception:  # noqa: BLE001 - only a hint in a message
        return None


def session_start_utc_ns(path: str | Path) -> int | None:
    """The export's clock origin (TARGET_INFO_SESSION_START_TIME.utcEpochNs), if it has one."""
    try:
        with open_tables(Path(path), probe=False) as tables:
            start = tables.read("TARGET_INFO_SESSION_START_TIME", ["utcEpochNs"])
        return int(start.values["utcEpochNs"][0]) if start.n and start.is_integer("utcEpochNs") \
            and not start.null("utcEpochNs")[0] else None
    except Exception:  # noqa: BLE001 - older exports lack the table: no alignment, said in notes
        return None
