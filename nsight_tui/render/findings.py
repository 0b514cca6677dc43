"""What to fix first: the findings' JSON (`report -f json`'s "findings", from the core's
`FindingsReport`), and as Markdown the report's section (h) (one function, hooked into the report
page with one line), the sweep's findings cell, and the `--fail-on` check's line."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.findings.result import Finding, FindingsReport, edit_words
from nsight_tui.render import numbers, safe, tables
from nsight_tui.render.numbers import MISSING

def finding_json(f: Finding) -> dict:
    """One finding: every field (units in the keys) but the device time it claims, and its ranges joined."""
    out = {k: v for k, v in asdict(f).items() if k not in ("claim", "gpu_work")}
    return {**out, "range": f.range}


def findings_json(r: FindingsReport) -> dict:
    """The JSON under "findings"; `not_run` only where no rule ran."""
    return {"step_ns": r.step_ns, "steps": r.steps, "combined_basis": r.combined_basis, "step_basis": r.step_basis,
            "findings": [finding_json(f) for f in r.findings],
            "combined_saving_ms_per_step": r.combined_saving_ms_per_step,
            "overlap_ms_per_step": r.overlap_ms_per_step,
            "present_no_saving": [{"id": f.id, "title": f.title, "saving_alone_ms_per_step": f.saving_alone_ms_per_step,
                                   "evidence": f.evidence, "overlaps": f.overlaps,
                                   "capped_by_cpu_wait": f.capped_by_cpu_wait} for f in r.present_no_saving],
            "cpu_wait_ms_per_step": r.cpu_wait_ms_per_step,
            "not_checked": r.not_checked,
            "thresholds": {k: asdict(v) for k, v in r.thresholds.items()},
            **({"not_run": r.not_run} if r.not_run is not None else {})}


HEADERS = ["#", "finding (id)", "where", "saving ms/step", "basis", "evidence", "fix"]


_COUNT_WORDS = ("kernels", "calls", "launches", "syncs", "copies", "count", "instances", "steps", "gaps")


def _is_count(key: str) -> bool:
    """Evidence keys that count things (`kernels_per_step`, `sync_calls`), not measure them."""
    return not key.endswith(("_ns", "_share", "_ratio", "_fraction", "_pct")) and any(w in key for w in _COUNT_WORDS)


def _figure(key: str, value) -> str:
    if value is None:
        return f"{key} –"
    if key.endswith("_ns") or key.endswith("_ns_per_step"):
        return f"{key.replace('_ns', '')} {numbers.ms(value)} ms"
    if _is_count(key) and isinstance(value, (int, float)):
        return f"{key} {round(value):,}"  # a count (per step: a mean) reads as a whole number
    if isinstance(value, float):
        return f"{key} {value:,.3g}"
    return f"{key} {value}"


def evidence_text(f: dict) -> str:
    return "; ".join(_figure(k, v) for k, v in f["evidence"].items())


def fix_text(f: dict) -> str:
    """The fix in PyTorch terms, and the replay edit that stands for it (`whatif TRACE fix:ID`)."""
    edits = f.get("edits") if f.get("replayed") else None
    if not edits:
        return f["fix"]
    words = edit_words(f["id"], edits)
    said = "" if words.startswith("fix:") else f"`{words}`: "  # a long one is named by the command itself
    return f["fix"] + f" (replayed as {said}`nsight-tui whatif TRACE fix:{f['id']}`)"


def rows(findings: list[dict]) -> list[list]:
    return [[i + 1, f"{f['title']} (`{f['id']}`)", f["range"], numbers.fixed(f["saving_ms_per_step"], 2),
             f["basis"], evidence_text(f), fix_text(f)] for i, f in enumerate(findings)]


def section(answers: dict) -> list[str]:
    """Report section (h) from the page's "findings" (findings_json)."""
    data = answers.get("findings") or {}
    found = data.get("findings") or []
    out = ["## (h) What to fix first", ""]
    out += [f"_note: {safe.markdown(line)}_\n" for line in data.get("not_checked") or []]
    if data.get("not_run"):
        out.append(f"No findings: {safe.markdown(data['not_run'])}.\n")
        return out
    if not data.get("steps"):
        out.append("No steady-state `step_N` ranges: the rules work per step.\n")
        return out
    if not found:
        out.append("No rule fired on the steady-state steps.\n")
        return out
    notes = ["saving: step time the fix would save, per step of the step period (each step's start to the next's): "
             "replayed (the capture re-timed without and with the fix's edit, medians over the steps) where its basis "
             "says so, else the rule's estimate; the thresholds are in `report -f json` under findings.thresholds"]
    if data.get("combined_saving_ms_per_step") is not None:
        overlap = data.get("overlap_ms_per_step") or 0.0
        how = data.get("combined_basis") or "the savings summed"
        notes.append(f"together: {numbers.fixed(data['combined_saving_ms_per_step'], 2)} ms/step, each nanosecond "
                     f"counted once ({how})" + (f" ({numbers.fixed(overlap, 2)} ms/step of the savings alone overlap: "
                                                 "they cannot be added)" if overlap > 0.005 else ""))
    out.append(tables.markdown(HEADERS, rows(found), title=f"Findings, largest saving first "
                               f"(step period {numbers.ms(data['step_ns'])} ms, mean of {data['steps']} steps)",
                               notes=notes))
    apart = data.get("present_no_saving") or []
    if apart:
        def why(f: dict) -> str:
            if f.get("capped_by_cpu_wait"):
                return (" (the findings above use up the time the CPU waits for the GPU, "
                        f"{numbers.fixed(data.get('cpu_wait_ms_per_step'), 2)} ms/step: after them the CPU sets the pace)")
            return f" (its time is {', '.join(f['overlaps'])}'s)" if f.get("overlaps") else ""

        # a rule per kernel name (occupancy-limited) gives several: one entry, with their count
        said: dict[tuple[str, str], int] = {}
        for f in apart:
            said[(f["id"], why(f))] = said.get((f["id"], why(f)), 0) + 1

        def entry(fid: str, w: str, k: int) -> str:
            return f"`{fid}`" + (f" ×{k} kernel names" + w.replace("its time", "their time") if k > 1 else w)

        out.append("Present, nothing to gain: " + ", ".join(entry(fid, w, k) for (fid, w), k in said.items()) + "\n")
    top = found[0]
    if top.get("rows"):
        keys = list(top["rows"][0])
        scope = ([f"a row's count and time: over the {data['steps']} steady steps"]
                 if "count" in keys and not any(k.endswith("_per_step") for k in keys) else [])
        out.append(tables.markdown([evidence_header(k) for k in keys],
                                   [[evidence_cell(k, r.get(k)) for k in keys] for r in top["rows"]],
                                   title=f"Evidence behind `{top['id']}`", notes=scope))
    return out


# an evidence row's durations (JSON `..._ns`, `..._ns_per_step`) said in ms; its instants (`start_ns`, `end_ns`:
# the capture's clock) as they are
_INSTANTS = ("start_ns", "end_ns")


def _duration(key: str) -> bool:
    return key not in _INSTANTS and (key.endswith("_ns") or key.endswith("_ns_per_step"))


def evidence_header(key: str) -> str:
    if not _duration(key):
        return key
    return key.replace("_ns_per_step", " ms/step") if key.endswith("_ns_per_step") else key[:-3] + " ms"


def evidence_cell(key: str, value):
    return numbers.ms(value) if _duration(key) and isinstance(value, (int, float)) else value


def _cell(a: dict) -> str:
    found = (a.get("findings") or {}).get("findings") or []
    return ", ".join(f"{f['id']} {f['saving_ms_per_step']:.1f}" for f in found[:3]) or MISSING


SWEEP_QUESTIONS = [("What to fix first (id saving ms/step, top 3)", "parsers/analyses/findings.py rules", _cell)]


def unknown_ids(wanted: str, known: tuple[str, ...]) -> list[str]:
    """The ids `--fail-on wanted` names that no rule can find (a typo would pass a CI gate silently)."""
    if wanted.strip() == "any":
        return []
    asked = [w.strip() for w in wanted.split(",") if w.strip()]
    return [w for w in asked if w not in known] if asked else [wanted]


def present(findings: list[Finding], wanted: str) -> list[str]:
    """The ids among `findings` that `--fail-on wanted` (ID[,ID...] or any) names."""
    ids = [f.id for f in findings]
    if wanted.strip() == "any":
        return ids
    asked = {w.strip() for w in wanted.split(",") if w.strip()}
    return [i for i in ids if i in asked]
