"""Typed messages: how workers hand results to the UI thread (post_message is thread-safe),
and how a view says what the user chose.

A screen's worker computes a view model (tui/viewmodels) and posts one of these to the
screen itself; the screen's `on_<name>` handler renders it. Workers never touch widgets
and never use call_from_thread.

A view never opens another view: it posts a `Navigation` (declared inside the view's class,
`RangesScreen.RangeChosen`), which bubbles to the app, and the navigator (tui/navigator.py)
decides where it leads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.sweep import Run
    from nsight_tui.parsers.read.load import Trace
    from nsight_tui.tui.session import Session
    from nsight_tui.tui.table_model import ViewText
    from nsight_tui.tui.viewmodels.api import ApiView
    from nsight_tui.tui.viewmodels.roofline import RooflineData
    from nsight_tui.tui.viewmodels.correlation import CorrelationView
    from nsight_tui.tui.viewmodels.diff import DiffView, ScopeView
    from nsight_tui.tui.viewmodels.files import FilesView
    from nsight_tui.tui.viewmodels.findings import FindingsView
    from nsight_tui.tui.viewmodels.kernels import KernelsView
    from nsight_tui.tui.viewmodels.launches import LaunchTable
    from nsight_tui.tui.viewmodels.ranks import RanksView
    from nsight_tui.tui.viewmodels.pace import PaceView
    from nsight_tui.parsers.analyses.ranks import Rank


# -- what a view asks for (bubbles to the app, which hands it to the navigator) ---------------------
@dataclass
class Navigation(Message):
    """The base of every view's "the user chose this" message: a range, a kernel, a launch,
    an iteration, a file. Each view declares its own, nested in its class; the app hands every
    one to the navigator, the one place that decides which screen comes next."""


# -- loading and the attribution mode (posted to the app) -----------------------------------------
@dataclass
class LoadProgress(Message):
    path: Path
    fraction: float
    text: str


@dataclass
class TraceLoaded(Message):
    """A file is open: the whole of it, or (`session.pending`) the load's first stage, the
    NVTX tree with CPU times, while the GPU work is still read (GpuLoaded follows)."""

    session: Session


@dataclass
class GpuLoaded(Message):
    """The load's second stage: `session`'s ranges with their GPU work (tui.session.StagedLoad)."""

    session: Session
    trace: Trace
    load_seconds: float
    ranks: list[Rank]  # found in the worker (parsers.ranks.find_ranks): the header shows them at once
    prepared: dict = field(default_factory=dict)  # Session.prepare's memo, computed in the worker


@dataclass
class LoadFailed(Message):
    path: Path
    message: str
    exit_code: int = 2


@dataclass
class ModelReady(Message):
    """The model for `attribution` is built; the app may switch to it."""

    session: Session
    attribution: str
    main_thread: str | None = None  # the main-thread pick the model was built with
    rank: Rank | None = None  # the rank filter it was built for (None: every rank)


@dataclass
class ModelFailed(Message):
    message: str


@dataclass
class ExportReady(Message):
    """`e`: the text of the view on screen, ready to write (None: nothing to export)."""

    screen: object  # the screen it was made from (the status line to answer on)
    view: ViewText | None
    text: str


@dataclass
class ExportFailed(Message):
    message: str


# -- one per view (posted by a screen's worker to the screen itself) ---------------------------------
@dataclass
class KernelsReady(Message):
    view: KernelsView


@dataclass
class ApiReady(Message):
    view: ApiView


@dataclass
class LaunchesReady(Message):
    table: LaunchTable


@dataclass
class DetailsRead(Message):
    """Grid/block of the launches in view were read from the file (or why not)."""

    error: str = ""


@dataclass
class CorrelationReady(Message):
    view: CorrelationView


@dataclass
class FilesProgress(Message):
    text: str


@dataclass
class FilesListed(Message):
    """The runs of the files view, before any is read: a row each at once."""

    runs: list[Run]


@dataclass
class FilesRow(Message):
    """One run read: its row's cells (the runs before it are in too)."""

    index: int
    cells: list


@dataclass
class FilesReady(Message):
    view: FilesView


@dataclass
class TableChanged(Message):
    """A big table's sort or filter, done in a worker; keep the cursor on `keep` (a frame position)."""

    keep: int | None


@dataclass
class RooflineReady(Message):
    data: RooflineData


# -- the diff views (posted by their workers to the screen itself) ---------------------------------
@dataclass
class DiffReady(Message):
    view: DiffView


@dataclass
class DiffFailed(Message):
    message: str


@dataclass
class DiffProgress(Message):
    text: str


@dataclass
class ScopeReady(Message):
    view: ScopeView


@dataclass
class RanksReady(Message):
    view: RanksView


@dataclass
class PaceReady(Message):
    view: PaceView


@dataclass
class MemoryReady(Message):
    view: object  # viewmodels.memory.MemoryView


@dataclass
class NcuReady(Message):
    view: object  # viewmodels.ncu.NcuView


@dataclass
class BackwardPartsReady(Message):
    mappings: list  # viewmodels.backward_parts.Mapping, one per mapping the trace allows


@dataclass
class FindingsReady(Message):
    view: FindingsView
