"""`nsight-tui mcp FILE|DIR...`: a Model Context Protocol server over stdio (the official `mcp`
SDK's MCPServer) answering from the same model and code paths as `report -f json`, `stats -f
json`, `diff -f json` and `ranks -f json`.

- Read-only, and only the profiles named on the command line (nsight_tui.mcp.served): any other
  path is a tool error before anything is read.
- Each trace is loaded once, on first use, and kept with its range model per attribution mode
  and its report answers; calls run in the SDK's worker threads, one computation at a time.
- Stdout is the protocol: nothing else is written there (the SDK diverts file descriptor 1 to
  stderr while it serves; logs go to stderr). Failures are MCP tool errors in one line, never a
  traceback; a bad argument too (one line per call, not pydantic's text).
- Answers sized for an agent (nsight_tui.mcp.sizing): each is sent once as structured content and
  once as its compact JSON text, under 50,000 characters in all by default; what was left out is
  said in the answer with the argument that brings it.
- Fixed choices are Literal types (the tool's input schema lists them): attribution, by, report
  sections, nsys reports.
"""
from __future__ import annotations

import copy
import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from nsight_tui import __version__
from nsight_tui.mcp import answers as A
from nsight_tui.mcp import sizing
from nsight_tui.mcp.served import Served, ServedSet
from nsight_tui.parsers import MODES, REPORTS, NsightError, Options, OptionsError, Profile, TraceError

if TYPE_CHECKING:
    from nsight_tui.parsers.read.load import Trace

log = logging.getLogger("nsight_tui.mcp")

F = TypeVar("F", bound=Callable[..., Any])

# The fixed choices, as the tools' input schemas list them (checked against the core's own lists below).
Attribution = Literal["process", "nsys"]
By = Literal["kernel", "name", "range", "tensor", "findings"]
NsysReportName = Literal["nvtx_sum", "nvtx_gpu_proj_sum", "nvtx_kern_sum", "cuda_gpu_kern_sum", "cuda_api_sum",
                         "cuda_gpu_mem_time_sum"]
# `report -f json`'s sections (render.document) and, on a served folder, `report DIR -f json`'s
Section = Literal["file", "attribution", "main_threads", "config", "ranges", "warmup", "ratios", "ratio_basis",
                  "timing", "gpu_idle", "memory", "oom", "gpu_metrics", "ranks", "roofline", "occupancy",
                  "findings", "backward_parts", "inferred", "notes", "ncu",
                  "folder", "runs", "tables", "skipped", "memory_model"]
assert set(get_args(Attribution)) == set(MODES) and set(get_args(NsysReportName)) == set(REPORTS)

# The report's sections an agent reads first, when not all fit (the rest follow in the document's order).
FIRST_SECTIONS = ("findings", "main_threads", "config", "ratios", "ratio_basis", "timing", "inferred", "notes",
                  "oom", "memory", "gpu_metrics", "ranges", "gpu_idle", "ranks", "roofline", "ncu", "tables",
                  "skipped", "memory_model")

INSTRUCTIONS = """\
nsight-tui: exact answers about NVIDIA Nsight Systems exports (SQLite) of PyTorch training,
the same figures as `nsight-tui report -f json` and `nsys stats` (to the nanosecond).
Start with list_files, then summary and range_tree; range paths are name paths such as
step_N/backward (instances merged; on a capture without NVTX they find the inferred ranges,
inferred:step_N/inferred:backward). Attribution "process" (default) credits the main
thread's ranges with the GPU work any thread (PyTorch's autograd thread) launched while they
were open; "nsys" is NVIDIA's rule (only the launching thread's ranges), which leaves
backward nearly empty when autograd launches it. Times are ns (*_ns); shares are 0..1.
Answers are kept under 50,000 characters: tables are paged (offset/limit, limit at most 500,
left out: the rows that fit; next_offset is null at the end), report without sections answers
the sections that fit and names the others in left_out; whatever is left out says how to get it.
With an Nsight Compute report served (a .ncu-rep on the command line), pass it as `ncu` to
findings/report (its kernels joined to the export: occupancy-limited, elementwise chains) and
read its per-kernel figures with the ncu tool (`nsight-tui ncu -f json`)."""


class Cache:
    """Profiles by resolved path, loaded once; report answers per (path, attribution)."""

    def __init__(self) -> None:
        self.profiles: dict[Path, Profile] = {}
        self.answers: dict[tuple[Path, str, Path | None], dict] = {}
        self.rank_answers: dict[tuple[str, str], dict] = {}  # a served folder's per-rank exports as one
        self.ncu_reports: dict[Path, Any] = {}  # NcuReport by resolved path
        self.ncu_joins: dict[tuple[Path, Path, str], Any] = {}  # NcuAnalysis by (export, report, attribution)
        # the ncu tool's whole document by (report, export or None, attribution): an agent paging
        # through its tables asks for the same document once per page
        self.ncu_docs: dict[tuple[Path, Path | None, str], dict] = {}
        self.ranks: dict[str, dict] = {}
        self.merged: dict[Path, Profile] = {}  # a served folder of per-rank exports as one trace, by its path
        self.sweeps: dict[tuple[str, str], dict] = {}
        self.lock = threading.RLock()  # one computation at a time (the model's caches are not thread-safe)

    def profile(self, served: Served, options: Options | None = None) -> Profile:
        """The served export, loaded once, read with `options` (default: attribution process)."""
        if served.path not in self.profiles:
            log.info("loading %s", served.name)
            profile = Profile.open(served.path)
            for note in profile.notes:
                log.info("note: %s: %s", served.name, note)
            self.profiles[served.path] = profile
        opened = self.profiles[served.path]
        return opened if options is None else opened.with_options(options)

    def ranks_profile(self, folder: Path, members: list[Path]) -> Profile:
        """A served folder of one run's per-rank exports, loaded once as one trace (Profile.open_ranks):
        of its served `members` alone, so a file put there since, or a link out of it, is never read."""
        if folder not in self.merged:
            log.info("loading the per-rank exports of %s", folder)
            self.merged[folder] = Profile.open_ranks(folder, files=members)
        return self.merged[folder]

    def trace(self, served: Served) -> Trace:
        return self.profile(served).trace

    def model(self, served: Served, attribution: str):
        return self.profile(served, options(attribution=attribution)).ranges()

    def ncu_report(self, report: Served):
        from nsight_tui.parsers import read_ncu

        if report.path not in self.ncu_reports:
            log.info("reading %s", report.name)
            try:
                self.ncu_reports[report.path] = read_ncu(report.path)
            except TraceError as exc:  # said with the name the client gave, not the resolved path
                raise TraceError(str(exc).replace(str(report.path), report.name)) from None
        return self.ncu_reports[report.path]

    def ncu_join(self, served: Served, report: Served, attribution: str):
        """The report's kernels joined to the export (analyses.ncu.analyse), as `report --ncu` joins them."""
        key = (served.path, report.path, A.check_mode(attribution))
        if key not in self.ncu_joins:
            self.ncu_joins[key] = self.profile(served, options(attribution=attribution)).ncu(self.ncu_report(report))
        return self.ncu_joins[key]

    def report(self, served: Served, attribution: str, ncu: Served | None = None) -> dict[str, Any]:
        """`report -f json`'s document (cli/report.py's single-file path, `--ncu R` with a report):
        the same call (Profile.report) and the same layout (render.report.single_json), parsed back."""
        key = (served.path, A.check_mode(attribution), ncu.path if ncu else None)
        if key not in self.answers:
            from nsight_tui.render.report import single_json

            joined = self.ncu_join(served, ncu, attribution) if ncu else None
            document = self.profile(served, options(attribution=attribution)).report(joined)
            self.answers[key] = _named(A.from_json_text(single_json(document)), [served, *([ncu] if ncu else [])])
        return self.answers[key]

    def ranks_report(self, folder: str, profile: Profile, attribution: str, files: list[Served]) -> dict[str, Any]:
        """`report -f json`'s document of a served folder's per-rank exports read as one trace
        (`profile`, ranks_profile's), as the TUI's findings of the ranks opened as one."""
        key = (folder, A.check_mode(attribution))
        if key not in self.rank_answers:
            from nsight_tui.render.report import single_json

            document = profile.with_options(options(attribution=attribution)).report()
            self.rank_answers[key] = _named(A.from_json_text(single_json(document)), files)
        return self.rank_answers[key]

    def sweep(self, served: ServedSet, path: str, attribution: str) -> dict[str, Any]:
        """`report DIR -f json` (cli/report.py's folder path) over a served folder of captures: its
        members resolved inside it only (a link leading out is left out, and said so)."""
        from nsight_tui.parsers import Sweep
        from nsight_tui.render import sweep as sweep_text
        from nsight_tui.render.report import sweep_json

        raw, real = served.folder(path)
        key = (raw, A.check_mode(attribution))
        if key not in self.sweeps:
            for oom in real.glob("*.oom.json"):  # discover reads these: none may lead out
                if not _inside_folder(oom, real):
                    raise A.BadRequest(f"{raw}/{oom.name} leads out of the served folder; the folder's sweep is "
                                       "not read (ask for its files one by one)")
            found = Sweep.discover(real)
            skipped = found.skipped
            runs = []
            for run in found.runs:
                if _inside_folder(run.path, real):
                    runs.append(run)
                else:
                    skipped.append(f"{run.path.name}: leads out of the folder, not read")
            Sweep(real, runs, skipped).analyse(options(attribution=attribution))
            text = sweep_json(Path(raw), runs, sweep_text.tables(runs), attribution, skipped)
            self.sweeps[key] = _named(A.from_json_text(text), served.folder_files(raw))
        return self.sweeps[key]


def options(**values: Any) -> Options:
    """The request's options, checked once; a bad one is a BadRequest naming the tool's argument."""
    try:
        return Options(**values)
    except OptionsError as exc:
        raise A.BadRequest(str(exc)) from None


def _inside_folder(path: Path, folder: Path) -> bool:
    real = path.resolve()
    return real.parent == folder


class Whole(dict):
    """An answer the client asked for in full (the report's named sections): not cut to size."""


class Server(MCPServer):
    """The SDK's MCPServer whose argument errors are one plain line: the argument, what it takes and
    what it got (never pydantic's multi-line text and its docs URL); an unknown argument is one too."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            known = tool.parameters.get("properties", {})
            unknown = sorted(set(arguments) - set(known))
            if unknown:
                raise ToolError(f"Error executing tool {name}: unknown argument(s) {', '.join(unknown)}; "
                                f"it takes {', '.join(known) or 'none'}")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"Error executing tool {name}: {bad_arguments(exc.__cause__)}") from exc.__cause__
            raise


def bad_arguments(exc: ValidationError) -> str:
    """pydantic's errors as one line: `depth: Input should be a valid integer (got 'deep')`."""
    said = []
    for err in exc.errors(include_url=False):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".") or "arguments"
        got = "" if err["type"] == "missing" else f" (got {_short(err.get('input'))})"
        said.append(f"{where}: {err['msg']}{got}")
    return "bad argument: " + "; ".join(said)


def _short(value: Any) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


def build(served: ServedSet) -> MCPServer:
    cache = Cache()
    server: MCPServer = Server("nsight-tui", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False)

    def tool(whole: str, keep: tuple[str, ...] = ()) -> Callable[[F], F]:
        """Register the function as a read-only tool whose failures are one-line tool errors and
        whose answer is sized (sizing.fit): its longest lists cut if it is over (`whole`: where an
        agent gets them whole; the lists under `keep` last), its pages to the rows that fit."""

        def register(fn: F) -> F:
            @functools.wraps(fn)
            def call(*args, **kwargs):
                try:
                    with cache.lock:
                        doc = fn(*args, **kwargs)
                except ToolError:
                    raise
                except NsightError as exc:  # bad input, a path not served, a range not found
                    raise ToolError(str(exc)) from None
                except Exception as exc:  # noqa: BLE001 - never a traceback to the client
                    log.exception("tool %s failed", fn.__name__)
                    raise ToolError(f"internal error: {type(exc).__name__}: {exc}") from None
                return answer(doc, whole, keep)

            server.add_tool(call, annotations=read_only)
            return fn

        return register

    def file(path: str | None) -> Served:
        return served.file(path)

    def ncu_file(ncu: str | None) -> Served | None:
        return served.ncu_report(ncu) if ncu else None

    def members(folder: str) -> list[Path]:
        """A served folder's exports as served (named as in the folder: a rank is in its file's name)."""
        _, real = served.folder(folder)
        return [real / Path(f.name).name for f in served.folder_files(folder) if f.kind == "sqlite"]

    def merged(folder: str) -> Profile:
        """A served folder's per-rank exports as one trace; its errors name the folder as the client did."""
        _, real = served.folder(folder)
        try:
            return cache.ranks_profile(real, members(folder))
        except NsightError as exc:
            raise ToolError(str(exc).replace(str(real), folder)) from None

    def twin(name: str) -> tuple[Callable[[], Trace], list[Served]]:
        """A `kernels-from:` twin: a served export, or a served folder of per-rank exports (read as one)."""
        if served.is_folder(name):
            return (lambda: merged(name).trace), served.folder_files(name)
        s = file(name)
        return (lambda: cache.trace(s)), [s]

    @tool(whole="list_files answers every file")
    def list_files() -> dict[str, Any]:
        """The profiles this server may read (exactly those named on its command line, and the
        exports directly inside a folder named there). Pass a `name` as `path` to the other tools."""
        return {"files": [{"name": f.name, "kind": f.kind, "folder": f.folder, "loaded": f.path in cache.profiles}
                          for f in served.files],
                "folders": [raw for raw, _ in served.folders],
                "ncu_reports": [{"name": r.name, "folder": r.folder, "read": r.path in cache.ncu_reports}
                                for r in served.reports]}

    @tool(whole="summary has no longer form")
    def summary(path: str | None = None, attribution: Attribution = "process") -> dict[str, Any]:
        """What the file is: GPUs, nsys version, capture span and start (ns), counts (kernels,
        memcpys, memsets, CUDA API calls, NVTX ranges, processes), the attribution in force and
        what it means, which thread's ranges frame the iteration and why, the run's
        configuration and any notes about repaired rows. `path` may be left out when one
        profile is served."""
        s = file(path)
        return A.summary(cache.trace(s), A.check_mode(attribution), s.name)

    @tool(whole="page on with offset")
    def range_tree(path: str | None = None, attribution: Attribution = "process", under: str | None = None,
                   depth: int = 3, offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """The NVTX range tree, instances merged by name path (step_N/forward/...), depth first:
        per range its instances, CPU (NVTX) time, GPU busy time (union of its GPU ops), kernel
        time, kernel count and GPU share of its parent. `under`: a range path to list below;
        `depth`: levels (1..16). Paged: offset/limit (limit left out: the rows that fit)."""
        return A.range_tree(cache.model(file(path), attribution), under, depth, offset, limit)

    @tool(whole="page on with offset")
    def range_kernels(range: str | None = None, path: str | None = None, attribution: Attribution = "process",
                      offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """The GPU operations a range launched (`range`: a path such as step_N/backward; left
        out: the whole trace), one row per kernel name, most GPU time first: its full name (what
        kernel_launches takes) and a readable label, instances, total/avg/median/min/max ns,
        share of the range's GPU op time, family; with the range's ratios (family shares, GPU
        busy / CPU time, launch overhead and queue delay medians). Paged (limit left out: the
        rows that fit)."""
        return A.range_kernels(cache.model(file(path), attribution), range, offset, limit)

    @tool(whole="page on with offset")
    def kernel_launches(kernel: str, range: str | None = None, path: str | None = None,
                        attribution: Attribution = "process", offset: int = 0,
                        limit: int | None = None) -> dict[str, Any]:
        """Every launch of one kernel (its full name, or the label range_kernels gives), in
        `range` (a path) or the whole trace, in time order: start_ns, duration_ns, corr_id,
        the CUDA API call, its launch overhead (call duration) and queue delay (kernel start -
        call start), thread, device, stream, grid and block. Paged (limit left out: the rows
        that fit)."""
        return A.kernel_launches(cache.model(file(path), attribution), kernel, range, offset, limit)

    @tool(whole="correlation has no longer form")
    def correlation(corr_id: int, path: str | None = None, pid: int | None = None,
                    attribution: Attribution = "process") -> dict[str, Any]:
        """One correlation ID: the CUDA API call (thread, start, end, launch overhead), the GPU
        ops it started, the NVTX ranges open on its own thread and on the main thread, and the
        ranges its work is attributed to. `pid` picks the process when several have the ID."""
        return A.correlation(cache.model(file(path), attribution), corr_id, pid)

    @tool(whole="fewer top_gaps, or page the items with items_offset")
    def idle_window(path: str | None = None, start_ns: int | None = None, end_ns: int | None = None,
                    range: str | None = None, attribution: Attribution = "process", top_gaps: int = 10,
                    items_offset: int = 0, items_limit: int = 0) -> dict[str, Any]:
        """GPU busy and idle by cause (launch-bound, sync-bound, host-bound) per device, the CPU's
        lead and the queue depth, and the longest gaps with what each CPU thread was doing:
        over [start_ns, end_ns) on the capture's clock (summary gives start_ns and span_ns), or
        over the instances of a `range` path (step_N gives the report's gpu_idle for the step).
        items_limit > 0 adds the timeline's items in the window (ranges, API calls, GPU ops), paged."""
        return A.idle_window(cache.model(file(path), attribution), start_ns, end_ns, range, top_gaps,
                             items_offset, items_limit)

    @tool(whole="report(sections=['findings']) answers the findings whole")
    def findings(path: str | None = None, attribution: Attribution = "process",
                 ncu: str | None = None) -> dict[str, Any]:
        """What to fix first: the findings (launch-bound, sync stalls, unfused optimizer or
        attention, fp32 GEMMs, pageable or synchronous copies, exposed communication, ...),
        ranked by the step time their fix would save, each with evidence and the fix
        (`report -f json`'s findings). Each names its fix as whatif `edits` (`whatif` with
        ["fix:ID"] replays them); `replayed` false with `not_replayed` saying why: its saving is the
        rule's estimate and fix:ID is refused for that reason. `ncu`: a served Nsight Compute report of the same
        workload (list_files' ncu_reports), joined to the export as `report --ncu R` joins it;
        it adds the findings from the hardware (occupancy-limited, memory-bound elementwise
        chains by ncu's throughputs). `path` may name a served folder of one run's per-rank exports
        (NAME_rank0.sqlite, ...): the findings of the ranks as one trace on one clock, as whatif replays
        them (the straggler among them); `ncu` is refused there."""
        if path and served.is_folder(path):
            if ncu:
                raise ToolError(f"ncu is not taken with a folder of per-rank exports ({path}): an Nsight Compute "
                                "report profiles one process; give path one rank's export, or leave ncu out")
            return cache.ranks_report(path, merged(path), attribution, served.folder_files(path))["findings"]
        s = file(path)
        return cache.report(s, attribution, ncu_file(ncu))["findings"]

    @tool(whole="report(sections=['roofline']) answers the roofline whole")
    def roofline(path: str | None = None, attribution: Attribution = "process", peak_tflops: float | None = None,
                 peak_gbps: float | None = None) -> dict[str, Any]:
        """Achieved TFLOP/s and GB/s of the step, forward and backward (and their kernel families)
        against the GPU's roofs, MFU and a bound verdict (`report -f json`'s roofline).
        peak_tflops/peak_gbps: roofs for a GPU the peaks table lacks."""
        s = file(path)
        if peak_tflops is None and peak_gbps is None:
            return cache.report(s, attribution)["roofline"]
        roofs = options(attribution=attribution, peak_tflops=peak_tflops, peak_gbps=peak_gbps)
        from nsight_tui.render.roofline import roofline_json

        return A.plain(roofline_json(cache.profile(s, roofs).roofline()))

    @tool(whole="report(sections=[...]) answers the sections named whole")
    def report(path: str | None = None, attribution: Attribution = "process", sections: list[Section] | None = None,
               ncu: str | None = None) -> dict[str, Any]:
        """`nsight-tui report -f json` for one file: sections file, attribution, main_threads,
        config, ranges (step/forward/backward/optimizer/attention parts: times, top kernels,
        family shares), warmup, ratios (each with ratio_basis), timing (NVTX vs Python),
        gpu_idle, memory, gpu_metrics, roofline, occupancy, findings, backward_parts (and ranks
        for a multi-rank export, inferred for an unannotated one). `sections` picks some, answered
        whole; left out, the sections that fit in the answer, findings first, and `left_out` names
        the others with their size. On a served folder of captures
        ({model}_ctx{N}*.sqlite): `report DIR -f json`'s tables (one per question, rows model,
        columns ctx) and its runs (each run's own answers: report on that file).
        `ncu`: a served Nsight Compute report of the same workload (`report --ncu R`): adds the
        section ncu (its kernels joined to the export) and the findings that read it."""
        if path and served.is_folder(path):
            if ncu:
                raise A.BadRequest("ncu takes one export, not a folder")
            doc = dict(cache.sweep(served, path, attribution))
            doc["runs"] = [{k: v for k, v in r.items() if k != "answers"} for r in doc["runs"]]
        else:
            s = file(path)
            doc = cache.report(s, attribution, ncu_file(ncu))
        heading = tuple(k for k in ("file", "folder", "attribution") if k in doc)
        if not sections:
            return sizing.pick_sections(doc, heading, FIRST_SECTIONS)
        unknown = [k for k in sections if k not in doc]
        if unknown:
            raise A.BadRequest(f"no section {', '.join(unknown)} in this report; it has {', '.join(doc)}")
        return Whole({k: doc[k] for k in dict.fromkeys((*heading, *sections))})

    @tool(whole="page on with offset")
    def ncu(ncu: str, path: str | None = None, attribution: Attribution = "process", by: By = "kernel",
            offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """An Nsight Compute report's figures (`nsight-tui ncu R [--trace T] -f json`): `ncu` a
        served .ncu-rep (list_files' ncu_reports), `path` the nsys export of the same workload to
        join it to (left out: the report alone, ranges from ncu's NVTX stacks). The join summary
        (profiled/joined kernels, window, notes) and one table, paged: by "kernel" (every profiled
        kernel: ncu duration, SM/memory % of peak, DRAM bytes, occupancy theoretical/achieved and
        limiter, top stalls, rules with estimated speedups, measured FLOP/s, tensor-core FLOPs vs
        the tensor peak), "name" (mean per kernel name within a range), "range" (measured vs
        estimated roofline, needs path), "tensor" (the kernels whose tensor cores worked: measured
        tensor FLOPs, FLOP/s and pipe busy % vs the datasheet's peak for their precision; every
        figure's basis in tensor_basis) or "findings" (occupancy-limited, needs path). Durations and
        rates are ncu's replay at its locked clocks, not nsys's timing. Paged (limit left out: the
        rows that fit)."""
        from nsight_tui.parsers import ncu_alone
        from nsight_tui.render import tables
        from nsight_tui.render.ncu import ncu_json, report_only_json

        tables_of = {"kernel": "kernels", "name": "by_name", "range": "ranges", "tensor": "kernels",
                     "findings": "findings"}
        if by in ("range", "findings") and not path:
            raise A.BadRequest(f"by={by} needs the export's ranges and timing: give path (the nsys export)")
        rep = served.ncu_report(ncu)
        s = file(path) if path else None
        key = (rep.path, s.path if s else None, A.check_mode(attribution))
        if key not in cache.ncu_docs:
            if s is not None:
                whole, named = ncu_json(cache.ncu_join(s, rep, attribution)), [s, rep]
            else:
                whole, named = report_only_json(ncu_alone(cache.ncu_report(rep))), [rep]
            cache.ncu_docs[key] = _named(A.from_json_text(tables.json(whole)), named)
        doc = cache.ncu_docs[key]
        out = {k: v for k, v in doc.items() if k not in tables_of.values()}
        out["by"] = by
        rows = doc[tables_of[by]]
        if by == "tensor":  # the kernels whose tensor cores did work (`ncu --by tensor`)
            rows = [k for k in rows if k.get("tensor_flops")]
        out["table"] = A.page(rows, offset, limit)
        return copy.deepcopy(out)  # the answer is sized in place; the cached document stays whole

    @tool(whole="page on with offset")
    def nsys_report(report: NsysReportName, path: str | None = None, attribution: Attribution = "process",
                    offset: int = 0, limit: int | None = None) -> dict[str, Any]:
        """One of NVIDIA's six `nsys stats` reports, in nsys's columns (`stats -f json`):
        nvtx_sum, nvtx_gpu_proj_sum, nvtx_kern_sum, cuda_gpu_kern_sum, cuda_api_sum,
        cuda_gpu_mem_time_sum. With attribution "nsys" the figures are nsys's own; "process"
        differs only in the NVTX reports (autograd's kernels counted in backward). Paged rows
        (limit left out: the rows that fit)."""
        return A.nsys_report(cache.trace(file(path)), report, A.check_mode(attribution), offset, limit)

    @tool(whole="a smaller range_depth; page the kernels with kernels_offset", keep=("step", "config", "notes", "kernels"))
    def diff(a: str, b: str, attribution: Attribution = "process", range_depth: int = 4, kernels_offset: int = 0,
             kernels_limit: int | None = None) -> dict[str, Any]:
        """What changed from run A to run B (two served files) and why the step moved (`diff -f
        json`; every delta is B - A, per steady-state step): the step verdict and waterfall,
        the merged range tree (to range_depth levels), the kernels matched by name (paged:
        kernels_offset/kernels_limit; limit left out: the rows that fit) and by family, both
        configurations."""
        from nsight_tui.render.diff import json_text

        sa, sb = file(a), file(b)
        if not 1 <= range_depth <= A.MAX_DEPTH:
            raise A.BadRequest(f"range_depth must be 1..{A.MAX_DEPTH}, not {range_depth}")
        mode = options(attribution=attribution)
        doc = A.from_json_text(json_text(cache.profile(sa, mode).diff(cache.profile(sb, mode))))
        doc = _named(doc, [sa, sb])
        for t in doc["threads"]:
            t["ranges"] = _cut(t["ranges"], range_depth)
        kernels = doc["kernels"]
        kernels["kernels"] = A.page(kernels["kernels"], kernels_offset, kernels_limit, "kernels_offset")
        return doc

    @tool(whole="ranks has no longer form")
    def ranks(path: str | None = None, attribution: Attribution = "process") -> dict[str, Any]:
        """Per rank (process x GPU): step time, compute, communication and their overlap, idle,
        and the straggler (`ranks -f json`), for an export holding several ranks, or a served
        folder of per-rank exports (`nsys profile -o report_%q{RANK}`). `attribution` is taken
        as every tool takes it and said back; it changes no figure here: a rank's GPU work is
        its process's, whichever thread launched it."""
        from nsight_tui.parsers import ranks_of_files, run_of
        from nsight_tui.render.ranks import ranks_json_text

        mode = A.check_mode(attribution)
        if path and served.is_folder(path):
            files = served.folder_files(path)
            key = "folder:" + files[0].folder if files and files[0].folder else path
            if key not in cache.ranks:
                # the files `whatif` replays as one, where it would (run_of, as the command line's `ranks DIR`)
                _, real = served.folder(path)
                run = run_of(real, members(path), per_host=True)
                doc = A.from_json_text(ranks_json_text(ranks_of_files(run, None, 1)))
                cache.ranks[key] = _named(doc, files)
            doc = cache.ranks[key]
        else:
            s = file(path)
            doc = _named(A.from_json_text(ranks_json_text(cache.profile(s).ranks())), [s])
        return {**doc, "attribution": mode, "attribution_help": RANKS_ATTRIBUTION}

    @tool(whole="whatif has no longer form")
    def whatif(path: str | None = None, edits: list[str] | None = None, ncu: str | None = None) -> dict[str, Any]:
        """Replay the captured step with edits and predict the step (`whatif -f json`): the
        baseline (measured and replayed step, ns), each edit and the assumption it rests on, the
        predicted step with its low..high range (and that range's two sources apart: the edits'
        assumptions, `edits_low_ns`..`edits_high_ns`, and the CPU's pace, `pace_low_ns`..`pace_high_ns`), the
        saving, what holds the step after the edits
        (its critical path: holders, ns per step, shares), the GPU idle split, and `launch_queue`: the
        launches a step the edits leave onto an empty queue (or behind queued work) and the CPU time
        that may move with them, which the prediction leaves out (`extra_cpu_ns_per_step` low <=
        central <= high, negative where the CPU time goes away; `cost_ns_per_launch` the extra cost of
        one launch onto an empty queue, low to high). All times are ns per step;
        `saving_ns` is negative where the edits lengthen the step. `edits` is a list, one edit a
        string, applied in order; a bad one is a tool error naming what there is. Edits:
        speed:PATTERN=K (K times faster, below 1 slower; K1..K2 a factor not known, the answer's
        range; speed:PATTERN@RANGE=K only ops launched inside RANGE), drop:PATTERN[@RANGE] (those ops
        gone, with their launch calls' CPU time), fuse:P1+P2+...[@RANGE[,N+][,<DURATION]] (each run
        of consecutive kernels of one stream matching the patterns one kernel), kernels-from:NAME (kernel
        durations from another served file, a capture of the same program, its steps named as these),
        nosync[:RANGE|CALL] (blocking syncs no longer wait; CALL e.g. cudaStreamSynchronize),
        nohost[:RANGE|DURATION] (host time between CUDA calls gone; nohost:2ms the pauses of at least
        2 ms, nohost:-5ms each such pause 5 ms shorter), workers:N (the host work nohost removes run
        by N DataLoader workers: the step at least that work / N), graph[:RANGE] (one CUDA graph launch),
        attention[:RANGE] (attention written out as one fused kernel, found by kernel order),
        pin[:RANGE] (pageable copies from pinned memory, non_blocking), straggler (on several ranks:
        the one that arrives last at the collectives without the pauses and slower kernels the others do
        not have), fix:FINDING_ID (the edits a
        finding names: an `id` from the findings tool on this file; fix:occupancy-limited needs `ncu`,
        a served Nsight Compute report of the same workload). PATTERN: a kernel family (gemm,
        convolution, attention, softmax, elementwise, reduction, normalization, optimizer, memory,
        layout, communication, other) or a
        case-sensitive glob over kernel names ('*gemm*'). RANGE: an NVTX range name or glob (range_tree
        lists them; on an export without NVTX, the ranges inferred from its kernels: forward,
        layer_N, prefill, decode, ...); `step`, the default, is the steady-state steps. No edits: the
        unchanged replay against the measured step. E.g. ["speed:gemm=2"], ["nosync", "nohost"],
        ["fix:launch-bound"]. `path` may name a served folder of one run's per-rank exports
        (NAME_rank0.sqlite, NAME_rank1.sqlite, ...): replayed as one trace on one clock, the ranks
        coupled through their collectives (`rank_files` says how closely their clocks agree); `ncu`
        is refused there (a report profiles one process: give one rank's export)."""
        from nsight_tui.parsers import NsightError
        from nsight_tui.render.whatif import whatif_json_text

        wanted = list(edits or [])
        # kernels-from names a served file or folder: the twin is read like any other served profile,
        # never from a path the server was not started with
        twins = {e.partition(":")[2]: twin(e.partition(":")[2]) for e in wanted if e.startswith("kernels-from:")}
        twin_files = [f for _, files in twins.values() for f in files]
        if path and served.is_folder(path):
            if ncu:
                # the join (analyses.ncu) aligns the report's kernels with one process's launches in order; the
                # ranks merged into one trace interleave several processes' launches, so no join stands there
                raise ToolError(f"ncu is not taken with a folder of per-rank exports ({path}): an Nsight Compute "
                                "report profiles one process, joined to one export's kernel launches, not to every "
                                "rank replayed as one; give path one rank's export, or leave ncu out")
            profile = merged(path)
            try:
                p = profile.whatif(wanted, load=lambda q: twins[str(q)][0]())
            except NsightError as exc:
                raise ToolError(str(exc)) from None
            return _named(A.from_json_text(whatif_json_text(p)), [*served.folder_files(path), *twin_files])
        s = file(path)
        report = ncu_file(ncu)
        try:
            joined = cache.ncu_join(s, report, "process") if report else None
            p = cache.profile(s).whatif(wanted, load=lambda q: twins[str(q)][0](), ncu=joined)
        except NsightError as exc:
            raise ToolError(str(exc)) from None
        return _named(A.from_json_text(whatif_json_text(p)), [s, *twin_files, *([report] if report else [])])

    return server


RANKS_ATTRIBUTION = ("the same figures under either attribution: a rank's compute and communication are its "
                     "process's GPU work on its GPU, whichever of its threads launched it")


def answer(doc: Any, whole: str, keep: tuple[str, ...] = ()) -> CallToolResult:
    """The tool's answer as the client receives it: the structured content and its compact JSON text
    (one copy each, not the SDK's indented duplicate), cut to size unless asked for whole."""
    asked_whole = isinstance(doc, Whole)
    doc = A.from_json_text(sizing.compact(doc))  # a copy: the cached answers stay as they were
    if not asked_whole:
        doc = sizing.fit(doc, whole, keep)
    return CallToolResult(content=[TextContent(type="text", text=sizing.compact(doc))], structured_content=doc)


def _named(doc: Any, files: list[Served]) -> Any:
    """`doc` with each served file's resolved path (what was opened) shown as the client names it."""
    names = {str(f.path): f.name for f in files}
    if isinstance(doc, dict):
        return {k: _named(v, files) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_named(v, files) for v in doc]
    return names.get(doc, doc) if isinstance(doc, str) else doc


def _cut(ranges: list[dict], depth: int) -> list[dict]:
    """The diff's range tree to `depth` levels; a cut node says how many children it had."""
    out = []
    for r in ranges:
        r = dict(r)
        if depth <= 1:
            r["children_omitted"] = len(r["children"])
            r["children"] = []
        else:
            r["children"] = _cut(r["children"], depth - 1)
        out.append(r)
    return out


def serve(items: list[str]) -> None:
    """Run the server on stdio until the client closes it."""
    build(ServedSet(items)).run("stdio")
