"""CUDA's synchronisation and event records, read on first use (the replay's dependencies).

- CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: one row per synchronising CUDA call (stream, event or
  context synchronize, stream wait event, event query), with the correlation ID of that call, the
  stream it names and the event's id. Its `syncType` does not follow ENUM_CUPTI_SYNC_TYPE in the
  exports we hold (nsys 2025.3 writes 2 for both cudaStreamSynchronize and cudaStreamWaitEvent),
  so callers tell the calls apart by the API call's name, and read only the stream and event here.
- CUPTI_ACTIVITY_KIND_CUDA_EVENT: one row per cudaEventRecord: the stream recorded on, the event's
  id and the record call's correlation ID. A wait (stream wait event, event synchronize) waits for
  the latest record of its event before the wait's call.

Nothing here is read while loading a trace: `Trace.sync_events` reads it the first time the
replay asks, so exports without these tables load as before.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nsight_tui.parsers.read.columns import Fetched, Tables

SYNCS = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
RECORDS = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"

_SYNC_COLUMNS = {"start": "start", "end": "end", "globalPid": "gpid", "deviceId": "device", "streamId": "stream",
                 "correlationId": "corr", "eventId": "event"}
_RECORD_COLUMNS = {"globalPid": "gpid", "deviceId": "device", "streamId": "stream", "correlationId": "corr",
                   "eventId": "event"}


def _empty(names) -> pd.DataFrame:
    return pd.DataFrame({n: np.zeros(0, np.int64) for n in names})


@dataclass
class SyncEvents:
    # start,end,gpid,device,stream,corr,event: one row per synchronising call (SYNCS)
    syncs: pd.DataFrame = field(default_factory=lambda: _empty(_SYNC_COLUMNS.values()))
    # gpid,device,stream,corr,event: one row per event record (RECORDS)
    records: pd.DataFrame = field(default_factory=lambda: _empty(_RECORD_COLUMNS.values()))


def _ints(f: Fetched, name: str) -> np.ndarray:
    if not f.has(name) or f.n == 0 or not f.is_integer(name):
        return np.full(f.n, -1, np.int64)
    return np.where(f.null(name), -1, f.int(name, -1)).astype(np.int64)


def _table(tables: Tables, table: str, columns: dict[str, str]) -> pd.DataFrame:
    if not tables.schema.has(table):
        return _empty(columns.values())
    present = [c for c in columns if tables.schema.has(table, c)]
    f = tables.read(table, present)
    return pd.DataFrame({short: _ints(f, long) for long, short in columns.items()})


def read_sync_events(tables: Tables) -> SyncEvents:
    syncs = _table(tables, SYNCS, _SYNC_COLUMNS)
    records = _table(tables, RECORDS, _RECORD_COLUMNS)
    return SyncEvents(syncs[syncs["corr"] >= 0].reset_index(drop=True),
                      records[records["corr"] >= 0].reset_index(drop=True))
