"""The report document (`parsers.analyses.report.Report`) laid out as plain data: the JSON of
`report -f json` and of the MCP `report` tool (the keys the README documents, in its order), which
the Markdown page's sections read too."""
from __future__ import annotations

from nsight_tui.parsers.analyses.report import Report


class Page(dict):
    """The document as plain data, with the typed report it was laid out from (`page.report`), for
    the Markdown sections that need more than the JSON carries (the ranks' table)."""

    report: Report


def document(report: Report) -> Page:
    """The JSON document of one trace's report."""
    page = Page({
        "file": report.file,
        "attribution": report.attribution,
        "main_threads": report.main_threads,
        "config": report.config,
        # op_ns (kernels + memcpy/memset): what a kernel's share divides by, in the TUI and here
        "ranges": {k: {**v.to_json(), "op_ns": v.op_ns} for k, v in report.ranges.items()},
        "warmup": {k: {**v.to_json(), "op_ns": v.op_ns} for k, v in report.warmup.items()},
        "ratios": report.ratios,
        "ratio_basis": report.ratio_basis,
        "timing": report.timing,
        "gpu_idle": report.gpu_idle,
        "memory": report.memory.to_json(),
        "gpu_metrics": report.gpu_metrics.to_json(),
        **({"ranks": report.ranks.to_json()} if report.ranks is not None else {}),
        "roofline": report.roofline,
        "occupancy": report.occupancy,
        "findings": report.findings,
        "backward_parts": [t.to_json() for t in report.backward_parts],
        # where the export names no iteration (or nothing inside its iterations): what was inferred
        # from its kernel sequence, or why nothing
        **({"inferred": report.inferred.to_json()} if report.inferred is not None else {}),
        "notes": report.notes,
        **({"ncu": _ncu(report)} if report.ncu is not None else {}),
    })
    page.report = report
    return page


def _ncu(report: Report) -> dict:
    from nsight_tui.parsers.analyses.ncu import answers_of

    assert report.ncu is not None
    return answers_of(report.ncu)
