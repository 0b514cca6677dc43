"""Command palette (ctrl+p) entries: the views, the actions, and a jump to any range
(by name path) or kernel (by name) of the open file. A jump is a Navigation posted to the app,
as a view's choice is: the navigator decides where it leads."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from nsight_tui.tui.host import Host
from nsight_tui.tui.messages import Navigation
from nsight_tui.tui.tree_source import node_key

MAX_RANGES = 2000
Entry = tuple[str, str, Callable[[], Any]]


class NsightCommands(Provider):
    @dataclass
    class RangeNamed(Navigation):
        """A range picked by its name path on thread group `gtid`: the range tree, on it."""

        gtid: int
        key: tuple[str, ...]

    @dataclass
    class KernelNamed(Navigation):
        """A kernel picked by name: every kernel of the trace, on it."""

        name: str

    async def startup(self) -> None:
        self._entries = self._build()

    def _build(self) -> list[Entry]:
        app = self.app
        run = app.run_action
        host = cast(Host, app)
        out: list[Entry] = [
            ("View: range tree", "NVTX ranges per thread (1)", partial(run, "view_ranges")),
            ("View: kernel summary", "every kernel of the trace (2)", partial(run, "view_kernels")),
            ("View: CUDA API summary", "as nsys cuda_api_sum (3)", partial(run, "view_api")),
            ("View: timeline", "the selection in time: lanes, GPU idle by cause, CPU lead (t)", partial(run, "timeline")),
            ("View: what to fix first", "findings ranked by the step time their fix would save (F)",
             partial(run, "view_findings")),
            ("View: roofline", "ranges or kernel families against the GPU's roofs (r)", partial(run, "view_roofline")),
            ("View: pace", "each iteration's CPU span and GPU time in order, outliers marked (p)",
             partial(run, "view_pace")),
            ("View: GPU memory", "the peak in use and where, per phase, an out-of-memory run's failed allocation (u)",
             partial(run, "view_memory")),
            ("View: Nsight Compute", "ncu's figures per kernel name within a range, with --ncu FILE.ncu-rep (6)",
             partial(run, "view_ncu")),
            ("View: ranks", "the ranks side by side: step time, straggler, communication vs compute (5)",
             partial(run, "view_ranks")),
            ("Rank filter: next rank", "every rank -> rank 0 -> rank 1 ...: the tree and kernel tables of one rank (R)",
             partial(run, "cycle_rank")),
            ("Jump: correlation ID…", "the API call and GPU work of one correlation ID (c)",
             partial(run, "ask_correlation")),
            ("Switch attribution mode", "process-wide or nsys's launching-thread rule (m)",
             partial(run, "switch_attribution")),
            ("Export this view to Markdown", "writes nsight-tui_<view>.md here (e)", partial(run, "export")),
            ("Help: every key", "(?)", partial(run, "help")),
        ]
        if host.multi:
            out.insert(3, ("View: files", "the files side by side (4)", partial(run, "view_files")))
        self._views = len(out)  # what discover lists: the views and actions, not every range and kernel
        session = host.session
        if session is None:
            return out
        model = session.model
        added = 0
        for group in model.aggregated_groups:
            stack = list(reversed(group.roots))
            while stack and added < MAX_RANGES:
                node = stack.pop()
                key = node_key(node)
                out.append((f"Range: {'/'.join(key)}", f"{node.kernels:,} kernels · {group.label}",
                            partial(self._post, self.RangeNamed, group.gtid, key)))
                added += 1
                stack.extend(reversed(node.children))
        for name, short in session.palette_kernels():
            out.append((f"Kernel: {short}", name[:120], partial(self._post, self.KernelNamed, name)))
        return out

    def _post(self, kind: Callable[..., Navigation], *args: Any) -> None:
        self.app.post_message(kind(*args))  # made when picked: the palette lists thousands

    async def discover(self) -> Hits:
        for text, help_text, callback in self._entries[:self._views]:
            yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, callback in self._entries:
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)
