"""Single figures from the export's TARGET_INFO tables that an analysis asks for now and then,
read on first use through the loader's reader (SQLite or nsys's Parquet/Arrow folders alike):
the first GPU's memory bandwidth (a hint for the roofline's memory roof) and the session's clock
origin (to line per-rank exports up)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nsight_tui.parsers.read.columns import open_tables


def gpu_memory_bandwidth(path: Path, schema) -> float | None:
    """TARGET_INFO_GPU.memoryBandwidth of the GPU with the lowest id (bytes/s), None where absent."""
    if not schema.has("TARGET_INFO_GPU", "memoryBandwidth"):
        return None
    try:
        with open_tables(path, probe=False) as tables:
            gpu = tables.read("TARGET_INFO_GPU", ["id", "memoryBandwidth"])
        first = int(np.argmin(gpu.int("id", 0))) if gpu.n else -1
        value = gpu.values["memoryBandwidth"][first] if first >= 0 and not gpu.null("memoryBandwidth")[first] else None
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
