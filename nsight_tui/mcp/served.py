"""Which profiles the MCP server may read: the files and folders named on its command line, and
nothing else. Nsight Compute reports (`.ncu-rep`) named there, or lying directly inside a served
folder, are served too, apart from the exports: tools take them as their `ncu` argument.

A request names a path; it is served only when it is one of the served files, or an export
directly inside a served folder, compared after resolving both (`..`, symbolic links, relative
names). A path that does not even lexically fall under something served is refused before the
file system is asked anything about it; one that does is then resolved (a symlink inside a
served folder pointing out of it is refused). Nothing here opens a profile.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from nsight_tui.parsers import TraceError, columnar_kind, exports_in

NCU_SUFFIX = ".ncu-rep"
NCU_KIND = "ncu-rep"


class NotServed(TraceError):
    """A request for a path the server was not started with."""


@dataclass(frozen=True)
class Served:
    """One export the server may read."""

    name: str  # as the client names it: as given on the command line, or folder/member
    path: Path  # resolved
    kind: str  # "sqlite", "parquetdir", "arrowdir"; "ncu-rep" for an Nsight Compute report
    folder: str | None = None  # the served folder it was found in, as given


def _members(folder: Path) -> list[Path]:
    """The exports directly inside a folder: *.sqlite regular files (and those compressed whole,
    *.sqlite.xz: exports_in), parquetdir/arrowdir folders and Nsight Compute reports, *.ncu-rep."""
    exports = set(exports_in(folder))
    out = []
    for p in sorted(folder.iterdir()):
        if p in exports or (p.suffix == NCU_SUFFIX and p.is_file()):
            out.append(p)
        elif p.is_dir() and columnar_kind(p):
            out.append(p)
    return out


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class ServedSet:
    """The command line's files and folders, resolved once at start."""

    def __init__(self, items: list[str]):
        if not items:
            raise TraceError("name at least one profile or folder to serve")
        self.files: list[Served] = []
        self.reports: list[Served] = []  # Nsight Compute reports
        self.folders: list[tuple[str, Path]] = []  # (as given, resolved)
        for raw in items:
            p = Path(raw)
            if not p.exists():
                raise TraceError(f"{raw}: no such file or folder")
            real = p.resolve()
            kind = columnar_kind(real) if real.is_dir() else None
            if real.is_dir() and kind is None:
                members = [m for m in _members(real) if _inside(m.resolve(), real)]
                if not members:
                    raise TraceError(f"{raw}: no .sqlite exports in this folder")
                self.folders.append((raw, real))
                for m in members:
                    kind = NCU_KIND if m.suffix == NCU_SUFFIX else columnar_kind(m) or "sqlite"
                    self._add(Served(str(Path(raw) / m.name), m.resolve(), kind, folder=raw))
            elif kind:
                self._add(Served(raw, real, kind))
            elif real.is_file() and real.suffix == NCU_SUFFIX:
                self._add(Served(raw, real, NCU_KIND))
            elif real.is_file():
                self._add(Served(raw, real, "sqlite"))
            else:  # a FIFO would block the read
                raise TraceError(f"{raw}: not a regular file or folder")

    def _add(self, s: Served) -> None:
        pool = self.reports if s.kind == NCU_KIND else self.files
        if all(f.path != s.path for f in pool):
            pool.append(s)

    # -- lookups --------------------------------------------------------------------------------
    def _lexically_served(self, absolute: str, pool: list[Served]) -> bool:
        """Whether `absolute` (normalised, not resolved) is a served name or falls under a served folder."""
        for f in pool:
            if absolute in (os.path.abspath(f.name), str(f.path)):
                return True
        for raw, real in self.folders:
            for base in (os.path.abspath(raw), str(real)):
                if absolute == base or absolute.startswith(base.rstrip(os.sep) + os.sep):
                    return True
        return False

    def file(self, requested: str | None) -> Served:
        """The served export `requested` names (None: the only one served)."""
        if requested is None or requested == "":
            if len(self.files) == 1:
                return self.files[0]
            raise NotServed(f"{len(self.files)} profiles are served; name one (list_files lists them)")
        try:
            found = self._find(requested, self.files)
        except NotServed as exc:
            raise NotServed(str(exc) + self._same_name(requested)) from None
        if found is None:
            if self._find(requested, self.reports, quiet=True) is not None:
                raise NotServed(f"{requested}: an Nsight Compute report, not an nsys export: pass it as `ncu` "
                                "(and the export of the same workload as `path`)")
            if self.is_folder(requested):  # served, but a folder where this tool reads one export
                raise NotServed(f"{requested}: a served folder, where this tool reads one export: pass one of its "
                                "files (list_files lists them); whatif, findings and ranks take the folder (its "
                                "per-rank exports as one run)")
            raise NotServed(f"{requested}: not served (it resolves outside the served profiles; "
                            f"list_files lists them){self._same_name(requested)}")
        return found

    def _same_name(self, requested: str) -> str:
        """Where a served export has the file name asked for (an agent passing the bare name of a file
        that list_files names with its folder): the name to pass, as a clause. A hint only: the path
        asked for is still refused, as it may name another file of that name."""
        if not isinstance(requested, str):
            return ""
        same = [f.name for f in self.files if Path(f.name).name == Path(requested).name != ""]
        return f"; did you mean {same[0]!r}?" if len(same) == 1 else ""

    def ncu_report(self, requested: str) -> Served:
        """The served Nsight Compute report `requested` names."""
        if not self.reports:
            raise NotServed("no Nsight Compute report is served: name the .ncu-rep file on the server's command "
                            "line (nsight-tui mcp EXPORT.sqlite REPORT.ncu-rep)")
        found = self._find(requested, self.reports)
        if found is None:
            what = ("an nsys export, not an Nsight Compute report" if self._find(requested, self.files, quiet=True)
                    else "not a served Nsight Compute report")
            raise NotServed(f"{requested}: {what} (list_files lists them)")
        return found

    def _find(self, requested: str, pool: list[Served], quiet: bool = False) -> Served | None:
        """The member of `pool` that `requested` names, by its served name or by path; None when it
        names a served location that is not in `pool`. A path outside everything served is refused
        before the file system is asked about it (`quiet`: None instead)."""
        if not isinstance(requested, str) or "\x00" in requested:
            if quiet:
                return None
            raise NotServed("not a path")
        for f in pool:  # the names list_files gives, as they are
            if requested == f.name:
                return f
        absolute = os.path.abspath(os.path.expanduser(requested))
        if not self._lexically_served(absolute, self.files + self.reports):
            if quiet:
                return None
            raise NotServed(f"{requested}: not served (this server reads only the profiles named on its "
                            "command line; list_files lists them)")
        real = Path(absolute).resolve()
        return next((f for f in pool if real == f.path), None)

    def folder(self, requested: str) -> tuple[str, Path]:
        """A served folder (as named on the command line, or resolving to it): (as given, resolved)."""
        absolute = os.path.abspath(os.path.expanduser(requested))
        for raw, real in self.folders:
            if requested == raw or absolute in (os.path.abspath(raw), str(real)):
                if Path(absolute).resolve() != real:
                    break
                return raw, real
        raise NotServed(f"{requested}: not a served folder")

    def folder_files(self, requested: str) -> list[Served]:
        """The exports of a served folder."""
        raw, _ = self.folder(requested)
        return [f for f in self.files if f.folder == raw]

    def is_folder(self, requested: str | None) -> bool:
        if not requested:
            return False
        absolute = os.path.abspath(os.path.expanduser(requested))
        return any(requested == raw or absolute in (os.path.abspath(raw), str(real)) for raw, real in self.folders)
