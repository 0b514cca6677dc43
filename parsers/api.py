"""The front door to the core: open a profile, read what the analyses say about it.

    from nsight_tui.parsers import NsightError, Options, Profile

    profile = Profile.open("run.sqlite", Options(attribution="nsys"))
    model = profile.ranges()          # the range trees, ops per range (model.ranges.RangeModel)
    report = profile.report()         # every answer `report` gives (analyses.report.Report)

One class (`Profile`), one options value (`Options`, frozen, checked when made) and one error root
(`NsightError`: `str(err)` is the line to show the user). The command line and the MCP server
reach the core through here; the layers below stay theirs to reorganise. Units: every time is in
ns (`_ns`), on the clock its name or docstring says (CPU: NVTX spans; GPU: its work's span),
memory in bytes (`_bytes`), shares 0..1."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from nsight_tui.parsers.exception import NsightError, OptionsError
from nsight_tui.parsers.model.attribution import MODE_HELP, MODES
from nsight_tui.parsers.nsys.reports import REPORTS
from nsight_tui.parsers.options import Options
from nsight_tui.parsers.read.errors import TraceError
from nsight_tui.parsers.read.load import Trace, load_trace
from nsight_tui.parsers.read.source import columnar_kind

if TYPE_CHECKING:
    from nsight_tui.parsers.analyses.diff import RunDiff
    from nsight_tui.parsers.analyses.memory_model import MemoryModel
    from nsight_tui.parsers.analyses.ncu import NcuAnalysis
    from nsight_tui.parsers.analyses.ranks import RunRanks
    from nsight_tui.parsers.analyses.report import Report
    from nsight_tui.parsers.analyses.roofline import RooflineReport
    from nsight_tui.parsers.model.ranges import RangeModel
    from nsight_tui.parsers.nsys.reports import Report as NsysReport
    from nsight_tui.parsers.analyses.sweep import Run
    from nsight_tui.parsers.read.ncu_rep import NcuReport
    from nsight_tui.parsers.replay.edits import Edit
    from nsight_tui.parsers.replay.predict import Prediction

__all__ = ["MODES", "MODE_HELP", "REPORTS", "NsightError", "Options", "OptionsError", "Profile", "Sweep",
           "TraceError", "columnar_kind", "export_paths", "is_sweep_folder", "ncu_alone", "parse_edits", "ranks_of_files",
           "read_ncu"]


class Profile:
    """One Nsight Systems export (SQLite, or nsys's parquetdir/arrowdir folder), opened read-only,
    and the options it is read with. What it derives is kept with the trace (`Trace.stash`, the
    per-user cache), so asking twice costs once; `with_options` reads the same trace otherwise."""

    def __init__(self, trace: Trace, options: Options | None = None, folder: Path | None = None):
        self.trace = trace
        self.options = options or Options()
        # the folder it was opened from (open_ranks), where that folder held one export: its words, not the file's
        self.folder = folder

    @classmethod
    def open(cls, path: str | Path, options: Options | None = None,
             progress: Callable[[float, str], None] | None = None) -> Profile:
        """Load the export at `path`. TraceError (one line) for a missing, unreadable or foreign file."""
        return cls(load_trace(path, progress), options)

    @classmethod
    def open_ranks(cls, folder: str | Path, options: Options | None = None,
                   progress: Callable[[float, str], None] | None = None, files: list[Path] | None = None) -> Profile:
        """A folder of one run's per-rank exports (`nsys profile --output report_%q{RANK}`) as one
        trace on one clock, each file moved by its session start (read.rank_merge), so `whatif`
        replays the ranks coupled through their collectives as in one export holding every rank
        (`report`, `ranks` and `ranges` read it as such an export too: findings on rank 0, the
        straggler judged on the one clock). A plain export opens as `open` does. TraceError (one
        line) for a folder of exports that are not one run's ranks, or files without a session
        start time. `files`: only these of the folder's exports are read (a server that serves no others).
        OptionsError for an Nsight Compute report beside a folder: the join aligns the report's kernels
        with one process's launches in order, and the ranks merged interleave several processes'."""
        from nsight_tui.parsers.read.rank_merge import MergedRanks, load_export

        if options is not None and options.ncu_file and Path(folder).is_dir():
            raise OptionsError("ncu_file", f"is not joined to a folder of per-rank exports ({folder}): an Nsight Compute "
                               "report profiles one process, joined to one export's kernel launches; give one rank's "
                               "export, or leave the report out")
        trace = load_export(folder, progress, files)
        return cls(trace, options, Path(folder) if Path(folder).is_dir() and not isinstance(trace, MergedRanks) else None)

    def with_options(self, options: Options) -> Profile:
        """The same loaded trace, read with other options (another attribution, other roofs)."""
        return Profile(self.trace, options, self.folder)

    @property
    def path(self) -> Path:
        """The export as it was opened (a compressed file's own path, not its decompressed copy's)."""
        return Path(self.trace.given)

    @property
    def notes(self) -> list[str]:
        """What the load left out or repaired (rows, tables without a column), one line each."""
        return list(self.trace.info.notes)

    @property
    def has_nvtx(self) -> bool:
        return bool(self.trace.info.has_nvtx)

    def ranges(self) -> RangeModel:
        """The range model under the options' attribution and main thread: every NVTX range with its
        CPU span (ns, CPU clock), its GPU projection, busy and kernel time (ns, GPU clock)."""
        from nsight_tui.parsers.model.ranges import range_model

        return range_model(self.trace, self.options.attribution, self.options.main_thread)

    def nsys_reports(self, names: list[str]) -> list[NsysReport]:
        """NVIDIA's `nsys stats` reports by name (nvtx_sum, cuda_gpu_kern_sum, ...), in nsys's
        columns and units (ns), in `names`' order."""
        from nsight_tui.parsers.nsys.reports import build_reports

        return build_reports(self.trace, names, self.options.attribution, self.options.main_thread)

    def ncu(self, report: NcuReport | None = None) -> NcuAnalysis:
        """An Nsight Compute report (`report`, else `options.ncu_file`) joined to this trace's
        ranges: its kernels' hardware figures (ncu's replay, at its locked clocks) in the tree."""
        from nsight_tui.parsers.analyses import ncu as ncu_analysis

        if report is None:
            if not self.options.ncu_file:
                raise TraceError("no Nsight Compute report given (ncu_file)")
            from nsight_tui.parsers.read.ncu_rep import read_ncu_report

            report = read_ncu_report(self.options.ncu_file)
        return ncu_analysis.analyse(self.trace, report, self.options.attribution)

    def report(self, ncu: NcuAnalysis | None = None) -> Report:
        """Every answer `nsight-tui report` gives about this trace, typed (analyses.report.Report);
        `nsight_tui.render` lays it out as JSON or Markdown. `ncu`: a join already made (`ncu()`),
        else the options' ncu_file is joined here."""
        from nsight_tui.parsers.analyses.report import build

        return build(self.trace, self.options, ncu)

    def roofline(self) -> RooflineReport:
        """The roofline's answers alone (achieved FLOP/s and bytes/s against the roofs, MFU, the
        bound), under the options' roofs: the report's `roofline` section without the rest
        (render.roofline.roofline_json lays it out)."""
        from nsight_tui.parsers.analyses.roofline import answers

        return answers(self.trace, self.options.attribution, **self.options.roofline)

    def diff(self, other: Profile) -> RunDiff:
        """What changed from this run (A) to `other` (B), every delta B - A per steady-state step (ns):
        the step's verdict and waterfall, the merged range tree, kernels by name and by family."""
        from nsight_tui.parsers.analyses.diff import diff_runs

        return diff_runs(self.trace, other.trace, self.options.attribution)

    def whatif(self, edits: Sequence[str | Edit] = (), load: Callable[[Path], Trace] | None = None,
               ncu: NcuAnalysis | None = None) -> Prediction:
        """The captured step replayed (parsers.replay) unchanged and with `edits` (`speed:PATTERN=K`,
        `drop:PATTERN`, `fuse:P1+P2+...`, `kernels-from:TWIN`, `nosync[:RANGE|CALL]`, `nohost[:RANGE|DURATION]`,
        `workers:N`, `graph[:RANGE]`, `attention[:RANGE]`, `pin[:RANGE]`, `straggler`, `fix:FINDING_ID`: the edits that finding names): the
        measured and replayed step (ns, the period on each timeline), the predicted step with its
        low..high (ns), the saving (ns per step), what holds the step (its critical path, ns per step)
        and the GPU idle split (ns per step). `load`: how a `kernels-from:` twin is read (default: from
        its path: an export, or a folder of per-rank exports as `open_ranks` reads it). `ncu`: a join
        already made (`ncu()`), else the options' ncu_file is joined where a `fix:` needs the findings
        (occupancy-limited reads it). EditError (an NsightError) for an edit that cannot apply or a
        capture with no step."""
        from nsight_tui.parsers.analyses.findings.fixes import resolve_fixes
        from nsight_tui.parsers.replay.predict import graph_of, no_steps, predict

        # no step, no replay: said before a `fix:` is looked up among the findings, which a run dead
        # before its first step has none of ("no finding 'oom-batch' (found: host-bound-gap, ...)")
        _, steps = graph_of(self.trace)
        if steps.n_steps == 0:
            raise no_steps(self.trace, steps)
        fixing = any(getattr(e, "kind", str(e).partition(":")[0]) == "fix" for e in edits)
        if ncu is None and fixing and self.options.ncu_file:
            ncu = self.ncu()
        from nsight_tui.parsers.read.rank_merge import load_export

        from nsight_tui.parsers.replay.edits import OneRank

        wanted = resolve_fixes(self.trace, list(edits), self.options.attribution, ncu)
        try:
            return predict(self.trace, wanted, load=load or load_export)
        except OneRank:  # a folder of one rank's export: said of the folder, not as a file without ranks
            if self.folder is None:
                raise
            raise OneRank(f"the folder holds one rank's export only, {self.path.name}: put every rank's export in "
                          "it, NAME_rank0, NAME_rank1, ..., to replay them as one") from None

    def ranks(self) -> RunRanks:
        """Per rank (process x GPU): step period, compute, communication and overlap (ns)."""
        from nsight_tui.parsers.analyses.ranks import ranks_of_trace
        from nsight_tui.parsers.analyses.straggler_why import with_why

        return with_why(self.trace, ranks_of_trace(self.trace))


def read_ncu(path: str | Path) -> NcuReport:
    """An Nsight Compute report (.ncu-rep) read through NVIDIA's ncu_report; TraceError (one line)
    for a missing, unreadable or empty report, or when the reader is not installed."""
    from nsight_tui.parsers.read.ncu_rep import read_ncu_report

    return read_ncu_report(path)


def export_paths(items: list[str]) -> list[Path]:
    """The exports named on a command line: files and nsys's parquetdir/arrowdir folders as they are,
    a folder of exports as its members."""
    from nsight_tui.parsers.read.source import export_paths as paths

    return paths(items)


def ranks_of_files(files: list[Path], scheduler: str | None = None, workers: int | None = None,
                   progress: Callable[[int, int], None] | None = None) -> RunRanks:
    """Per-rank figures over one export per rank (`nsys profile -o report_%q{RANK}`), summarised
    file by file in worker processes (`scheduler`: Dask's, else local processes)."""
    from nsight_tui.parsers.analyses.rank_files import ranks_of_files as summarise

    return summarise(files, scheduler, workers, progress)


def ncu_alone(report: NcuReport) -> NcuAnalysis:
    """An Nsight Compute report read without an export: ncu's NVTX stacks stand for the ranges, no
    nsys timing (`Profile.ncu` joins one to a trace)."""
    from nsight_tui.parsers.analyses.ncu import report_only

    return report_only(report)


def is_sweep_folder(path: str | Path) -> bool:
    """A folder of captures (a sweep), not nsys's parquetdir/arrowdir folder (one trace)."""
    from nsight_tui.parsers.read.source import columnar_kind

    path = Path(path)
    return path.is_dir() and columnar_kind(path) is None


class Sweep:
    """A folder of captures (`{model}_ctx{N}{variant}.sqlite`, OOM runs as `.oom.json`): its runs,
    each analysed as `Profile.report` does (`run.report`), and the memory model over them."""

    def __init__(self, folder: str | Path, runs: list[Run], skipped: list[str] | None = None):
        self.folder = Path(folder)
        self.runs = runs
        self.skipped = list(skipped or [])  # one line per entry left out (not a regular file, ...)

    @classmethod
    def discover(cls, folder: str | Path) -> Sweep:
        """The captures in `folder`, in name order; anything not a regular file is left out (in `skipped`)."""
        from nsight_tui.parsers.analyses import sweep

        skipped: list[str] = []
        runs = sweep.discover(Path(folder), skipped)
        return cls(folder, runs, skipped)

    def analyse(self, options: Options | None = None, progress: Callable[[float, str], None] | None = None) -> Sweep:
        """Each run that ran, analysed (a run that fails is an error cell saying why, not the end)."""
        from nsight_tui.parsers.analyses import sweep

        sweep.analyse(self.runs, options, progress)
        return self

    def memory_model(self) -> MemoryModel:
        """The model x ctx memory fit over the training runs (bytes), OOM cells explained."""
        from nsight_tui.parsers.analyses import sweep

        return sweep.memory_model(self.runs)


def parse_edits(edits: Sequence[str]) -> list[Edit]:
    """`whatif`'s edits read before any file is opened: EditError (one line) for one that cannot be read."""
    from nsight_tui.parsers.replay.edits import check_once, parse

    parsed = [parse(e) for e in edits]
    check_once(parsed)
    return parsed
