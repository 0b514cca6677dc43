"""GPU memory as nsys records it with `--cuda-memory-usage=true`, read on first use.

- CUDA_GPU_MEMORY_USAGE_EVENTS: one row per allocation or free (`memoryOperationType` 0/1,
  ENUM_CUDA_DEV_MEM_EVENT_OPER) with its bytes and memory kind (`memKind`, ENUM_CUDA_MEM_KIND:
  Device for cudaMalloc, which is what PyTorch's caching allocator's segments are; Device Static
  for modules' `__device__` globals). PyTorch's allocator keeps its segments, so a training run
  shows allocations only until its working set is reached, and frees only on `empty_cache()`
  or when an allocation fails (it releases its cached segments and tries again).
- A failed allocation is a CUDA runtime call whose `returnValue` is not 0 (cudaMalloc returns
  cudaErrorMemoryAllocation, 2, when the GPU is full): CUPTI_ACTIVITY_KIND_RUNTIME has it, with
  the correlation ID that links it to the trace's API calls.
- TARGET_INFO_GPU.totalMemory: how much the GPU has.

Nothing here is read while loading a trace: `Trace.gpu_memory` calls `read_gpu_memory` the first
time an analysis asks, so exports without memory events load as fast as before.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.columns import Fetched, Tables

EVENTS = "CUDA_GPU_MEMORY_USAGE_EVENTS"
KINDS = "ENUM_CUDA_MEM_KIND"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
ALLOCATION, DEALLOCATION = 0, 1  # ENUM_CUDA_DEV_MEM_EVENT_OPER
DEVICE_KIND, DEVICE_STATIC_KIND = 2, 5  # CUDA_MEMOPR_MEMORY_KIND_DEVICE (cudaMalloc), _DEVICE_STATIC
CUDA_ERROR_MEMORY_ALLOCATION = 2  # cudaErrorMemoryAllocation
# nsys's labels where an export lacks the enum table
DEFAULT_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                 6: "Managed Static", 7: "Unknown"}


@dataclass
class GpuMemoryEvents:
    present: bool = False  # the export has the memory events table (nsys --cuda-memory-usage=true)
    # start, gpid, device, address, bytes, kind (memKind), op (ALLOCATION/DEALLOCATION), corr; by start
    events: pd.DataFrame = field(default_factory=lambda: _frame({}))
    kinds: dict[int, str] = field(default_factory=lambda: dict(DEFAULT_KINDS))
    # CUDA runtime calls that returned an error: start, end, gtid, corr, return_value (rows of RUNTIME)
    failed_calls: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {c: np.zeros(0, np.int64) for c in ("start", "end", "gtid", "corr", "return_value")}))
    total_memory: dict[int, int] = field(default_factory=dict)  # GPU id -> TARGET_INFO_GPU.totalMemory


_EVENT_COLUMNS = {"start": "start", "globalPid": "gpid", "deviceId": "device", "address": "address",
                  "bytes": "bytes", "memKind": "kind", "memoryOperationType": "op", "correlationId": "corr"}


def _frame(columns: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame({name: columns.get(name, np.zeros(0, np.int64)) for name in _EVENT_COLUMNS.values()})


def _ints(f: Fetched, name: str, default: int = -1) -> np.ndarray:
    if not f.has(name) or f.n == 0:
        return np.full(f.n, default, np.int64)
    if not f.is_integer(name):  # a value nsys never writes there: unknown (the row is left out), not fatal
        return np.array([_as_int(v, default) for v in f.values[name]], dtype=np.int64)
    return np.where(f.null(name), default, f.int(name, default)).astype(np.int64)


def _as_int(value, default: int) -> int:
    """An integer of a mixed column (a reader may give the whole column as text), else `default`."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value) if -2**63 <= int(value) < 2**63 else default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value)
        return number if -2**63 <= number < 2**63 else default
    return default


def _present(tables: Tables, table: str, wanted) -> list[str]:
    return [c for c in wanted if tables.schema.has(table, c)]


def read_failed_calls(tables: Tables, after_rowid: int = 0) -> pd.DataFrame:
    """The CUDA runtime calls that returned an error (GpuMemoryEvents.failed_calls' columns), of
    the rows with rowid > `after_rowid` (SQLite seeks there: the rest of the table is not read).
    A columnar export takes no condition: every failed call, whatever `after_rowid`."""
    cols = _present(tables, RUNTIME, ["start", "end", "globalTid", "correlationId", "returnValue"])
    where = '"returnValue" != 0' + (f" AND rowid > {int(after_rowid)}" if after_rowid > 0 else "")
    try:  # SQLite: only the failed calls (a big trace holds a million calls)
        f = tables.read(RUNTIME, cols, None, (), where)
    except ValueError:  # a columnar export takes no SQL condition: every call, filtered below
        f = tables.read(RUNTIME, cols)
    ret = _ints(f, "returnValue", 0)
    bad = np.flatnonzero(ret != 0)
    return pd.DataFrame({"start": _ints(f, "start")[bad], "end": _ints(f, "end")[bad],
                         "gtid": _ints(f, "globalTid")[bad], "corr": _ints(f, "correlationId")[bad],
                         "return_value": ret[bad]})


def read_gpu_memory(tables: Tables) -> GpuMemoryEvents:
    out = GpuMemoryEvents()
    schema = tables.schema
    if schema.has("TARGET_INFO_GPU"):
        cols = _present(tables, "TARGET_INFO_GPU", ["id", "totalMemory"])
        if len(cols) == 2:
            f = tables.read("TARGET_INFO_GPU", cols)
            out.total_memory = {int(i): int(m) for i, m in zip(_ints(f, "id"), _ints(f, "totalMemory", 0)) if m > 0}
    if schema.has(KINDS):
        cols = _present(tables, KINDS, ["id", "label"])
        if len(cols) == 2:
            f = tables.read(KINDS, cols)
            out.kinds.update({int(i): str(v) for i, v in zip(_ints(f, "id"), f.text("label")) if v is not None})
    if schema.has(RUNTIME, "returnValue"):
        out.failed_calls = read_failed_calls(tables)
    if not schema.has(EVENTS):
        return out
    out.present = True
    cols = _present(tables, EVENTS, list(_EVENT_COLUMNS))
    f = tables.read(EVENTS, cols)
    columns = {_EVENT_COLUMNS[c]: _ints(f, c) for c in cols}
    frame = _frame(columns)
    keep = (frame["start"] >= 0) & (frame["bytes"] >= 0) & frame["op"].isin([ALLOCATION, DEALLOCATION])
    out.events = frame[keep].sort_values("start", kind="stable").reset_index(drop=True)
    return out
