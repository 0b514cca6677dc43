"""The `report` page: one function per question, in the order of SECTIONS.

A section takes the report's document (`render.document.document(report)`: the JSON of
`report -f json`, plain numbers: `*_ns`, fractions 0..1, with the typed report as `.report`) and
returns Markdown blocks (strings joined by newlines), or [] when the trace has nothing for it.
Adding a section is one function here (or in its own module) and one line in SECTIONS; read the
answers it needs from the dict, format with `numbers`, lay out tables with `tables.markdown`, and
pass any text from the profile through `safe.markdown`.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nsight_tui.parsers.analyses.report import Report
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.model.attribution import MODE_HELP
from nsight_tui.render import (backward_parts, findings, gpu_metrics, memory, ncu, numbers, process_view, roofline,
                              safe, tables)
from nsight_tui.render.idle import idle_section
from nsight_tui.render import memory_model as memory_model_text
from nsight_tui.render.document import document
from nsight_tui.render.sweep import SweepTable

Section = Callable[[dict], list[str]]


def _per(total, n):
    return total / n if n else None


def heading(a: dict) -> list[str]:
    out = [f"# nsight-tui report: {safe.markdown(Path(a['file']).name)}", "",
           f"_attribution: {a['attribution']} — {MODE_HELP[a['attribution']]}_"]
    if a["config"]:
        out.append("_run: " + safe.markdown(", ".join(f"{k}={v}" for k, v in a["config"].items())) + "_")
    out += [f"_note: {safe.markdown(n)}_" for n in a.get("notes") or []]
    if _ranks(a) is not None:
        out.append(f"_{len(_ranks(a).ranks)} ranks in this export: the sections below count every rank's "
                   "ranges and kernels together; the Ranks section at the end has them one by one_")
    out.append("")
    return out


LIST_LIMIT = 16  # names in one line of the report; the rest counted


def bounded(items: list[str], limit: int = LIST_LIMIT, sep: str = " → ") -> str:
    """At most `limit` names joined, then "… (N more)": a line stays a line on any model."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return sep.join(items)
    return sep.join(items[:limit]) + f"{sep}… ({len(items) - limit:,} more, {len(items):,} in all)"


def _backward_stages(found: dict) -> list[str]:
    stages = found.get("backward_stages") or []
    if not stages:
        return []
    return [f"One backward layer's stages in order (the forward's met in reverse): {safe.markdown(bounded(stages))}",
            ""]


def inference_run(a: dict) -> bool:
    """The run generates (a decode loop inferred in its calls): the training questions do not apply."""
    return bool(((a.get("inferred") or {}).get("decode")))


def _finding_evidence(a: dict, rule: str) -> dict | None:
    """The evidence of the finding `rule` where it fired (with a saving or apart)."""
    found = a.get("findings") or {}
    for f in [*(found.get("findings") or []), *(found.get("present_no_saving") or [])]:
        if f.get("id") == rule:
            return f.get("evidence")
    return None


def _decode(d: dict | None, weights: dict | None = None) -> list[str]:
    """An inference run's decode loop (parsers.model.inferred.decode): per-token figures, GPU clock; and
    the floor its weights set (parsers.analyses.decode_weights, the memory-bound-decode finding's figures)."""
    if not d:
        return []
    out = [f"**An inference run**: inside each call a prefill, then a decode loop of {d['tokens_per_call']} steps "
           f"(~{d['step_kernels']:,} kernels each). Time to first token (prefill, GPU clock, median of "
           f"{d['calls']} calls): **{numbers.ms(d['prefill_ns'])} ms**; per-token decode: median "
           f"**{numbers.ms(d['median_ns'])} ms**, p90 {numbers.ms(d['p90_ns'])} ms, "
           f"{d['tokens_per_s']:,.1f} tokens/s per sequence; GPU busy {d['gpu_busy_share']:.0%} of the decode."]
    if d.get("cuda_graph_steps"):
        out.append("Each decode step is one CUDA graph replay (a static cache compiled into graphs): the host launches a "
                   "token's kernels in one call" + ("; the GPU still waits on the host between replays (the eager "
                                                    "sampling and stopping check each token)." if d.get("launch_bound")
                                                    else "."))
    elif d.get("launch_bound"):
        out.append("The decode is launch-bound (the GPU waits on the host's launches): CUDA graphs (a static KV "
                   "cache with torch.compile) replay a token's kernels in one launch.")
    if weights:
        out.append(f"Weights per token: up to {weights['weights_bytes'] / 1e6:,.1f} MB (copied to the GPU before the "
                   f"first call); at the HBM peak ({weights['hbm_bytes_per_s'] / 1e9:,.0f} GB/s, the export's target "
                   f"info) a floor of {numbers.ms(weights['floor_ns_per_token'])} ms a token; measured "
                   f"{numbers.ms(weights['per_token_ns'])} ms ({weights['share_of_hbm_peak']:.1%} of the peak), the "
                   f"GPU's kernels {numbers.ms(weights['kernel_ns_per_token'])} ms of it: "
                   + ("memory-bound." if weights["memory_bound"] else "not memory-bound yet."))
    return out + [""]


def oom_headline(a: dict) -> list[str]:
    """A run that ran out of GPU memory: the failed allocation first (parsers.analyses.oom)."""
    oom = a.get("oom")
    if not oom:
        return []
    asked = f"asked for **{oom['asked']['text']}** (PyTorch's message)" if oom.get("asked") else \
        "the size asked is not in the export (PyTorch's message was not kept)"
    held = (f"with {numbers.bytes_(oom['in_use_bytes'])} in use" if oom.get("in_use_bytes") is not None else "")
    held += f" of {numbers.bytes_(oom['total_bytes'])}" if held and oom.get("total_bytes") else ""
    held += " (nsys memory events)" if held else ""
    out = ["## Out of GPU memory", "",
           f"**`{safe.markdown(oom['call'])}` returned {oom['return_value']} (cudaErrorMemoryAllocation)** in "
           f"`{safe.markdown(oom['path'] or '(no range)')}`: {asked}{', ' + held if held else ''}; "
           f"{oom['failed_calls']} failed allocation(s)."]
    if oom.get("torch_allocated"):
        out.append(f"PyTorch held {oom['torch_allocated']['text']} allocated"
                   + (f", {oom['reserved_unallocated']['text']} reserved but unallocated" if oom.get("reserved_unallocated") else "")
                   + (f"; {oom['free']['text']} free" if oom.get("free") else "") + ".")
    if oom.get("tensor"):
        out.append(f"The allocation that did not fit: {safe.markdown(oom['tensor'])} (its size from the run's "
                   "configuration equals the one asked).")
    if not oom.get("steps_finished"):
        out.append("_No iteration finished before it: there is no step time to speak of (no step-time findings)._")
    if oom.get("fixes"):
        out += ["", "Fixes that apply:", *[f"- {safe.markdown(f['text'])} (`{f['id']}`)" for f in oom["fixes"]]]
    return out + [""]


def inferred(a: dict) -> list[str]:
    """Where the export names no iteration: the iterations, layers and stages inferred from its
    kernel sequence (parsers.model.inferred), which every section below then reads as the
    ranges `inferred:step_N`, `inferred:forward`, ...; or why none were."""
    found = a.get("inferred")
    if not found:
        return []
    if found.get("inside_nvtx_iterations"):
        out = ["## Parts inferred inside the NVTX iterations (the export has step_N ranges and nothing inside them)", "",
               f"_{safe.markdown(found['basis'])}_", ""]
        if found["layer_count"]:
            out += [f"Layers: **{found['layer_count']}** (inferred); one forward layer's stages in order: "
                    f"{safe.markdown(bounded(found['layer_stages']))}", "", *_backward_stages(found)]
        return out + ["_The sections below read the phases, layers and stages as ranges of the NVTX domain "
                      "`inferred` (`inferred:forward`, `inferred:layer_N`) inside the export's own step_N: inferred, "
                      "not annotated._", ""]
    if not found["iterations"]:
        return ["## Iterations inferred from the kernel sequence", "",
                f"_No NVTX iteration ranges (step_N), and none inferred: {safe.markdown(found.get('reason', ''))}_", ""]
    shown = found["iterations"] if len(found["iterations"]) <= LIST_LIMIT else found["iterations"][:LIST_LIMIT]
    rows = [[safe.markdown(i["name"]), numbers.ms(i["duration_ns"]), f"{i['kernels']:,}"] for i in shown]
    if len(shown) < len(found["iterations"]):
        rows.append([f"… ({len(found['iterations']) - len(shown):,} more)", "", ""])
    out = ["## Iterations inferred from the kernel sequence (no NVTX iteration ranges)", "",
           f"_{safe.markdown(found['basis'])}_", "",
           tables.markdown(["inferred iteration", "GPU ms (first kernel start to the next iteration's)", "kernels"],
                           rows), ""]
    if found["layer_count"]:
        stages = bounded(found["layer_stages"])
        out += [f"Layers: **{found['layer_count']}** (inferred); one forward layer's stages in order: "
                f"{safe.markdown(stages)}", "", *_backward_stages(found)]
    out += _decode(found.get("decode"), _finding_evidence(a, "memory-bound-decode"))
    out += ["_The sections below read these as ranges of the NVTX domain `inferred` (`inferred:step_N`, "
            "`inferred:forward`, `inferred:layer_N`): inferred, not annotated. Their CPU span runs from their first "
            "kernel's launch to the next one's; the warm-ups (`warmup_N`) are the leading iterations unlike the "
            "steady one, or as many as the capture recorded beside the export (STEM.steps.json)._", ""]
    return out


def forward_time(a: dict) -> list[str]:
    """(a) Each range's time on both clocks against the time Python measured around the same code.

    CPU: the NVTX span; GPU: its GPU work's span (first start to last end, nsys's projection);
    the step: its period (start to the next step's start). Without phase syncs the GPU runs behind
    the CPU and the CPU span of a phase is not the time its work takes."""
    ranges, t = a["ranges"], a["timing"]
    per_step = t.get("phases_per_step") or {}
    out = ["## (a) Forward time: CPU (NVTX span) vs GPU (its work's span) vs Python"]
    rows = []
    for name in ("forward", "backward", "optimizer", "step"):
        r = ranges.get(name)
        if r:
            py = t["python_phase_mean_ns"].get(name) if name != "step" else t["python_step_mean_ns"]
            n = r["instances"]
            cpu, gpu = r["range_ns"] / n, r["proj_ns"] / n
            label = name
            if name == "step" and (a.get("oom") or {}).get("steps_finished") == 0:
                # the iteration the run died in: its spans, no step period (report's opening: no step time)
                rows.append(["step (died: out of GPU memory, no step finished)", n, numbers.ms(cpu), numbers.ms(gpu),
                             "–", numbers.ms(py), "–"])
            elif name == "step" and r.get("period_ns") is not None:
                label, period = "step (period)", r["period_ns"] / n
                rows.append([label, n, numbers.ms(cpu), numbers.ms(gpu), numbers.ms(period), numbers.ms(py),
                             numbers.fixed(period / py if py else None)])
                own = t.get("step_own_mean_ns")
                if own is not None and t.get("between_steps_mean_ns"):
                    rows.append(["step (own: start to its work's end)", n, "", "", numbers.ms(own), numbers.ms(py),
                                 numbers.fixed(own / py if py else None)])
            else:
                k = per_step.get(name, 1)  # its ranges a step (gradient accumulation): Python's time is the step's sum
                if k > 1:
                    label = f"{name} (×{k} a step)"
                rows.append([label, n, numbers.ms(cpu), numbers.ms(gpu), "", numbers.ms(py),
                             numbers.fixed(k * cpu / py if py else None)])
    if rows:
        out.append(tables.markdown(["range", "instances", "CPU ms / instance", "GPU ms / instance",
                                    "period ms / step", "Python ms (mean)", "CPU or period / Python"], rows))
        if per_step.get("forward", 1) > 1:
            k = per_step["forward"]
            out.append(f"_Gradient accumulation: {k} forward and backward ranges a step, one optimizer step: a step is "
                       f"one optimizer step over {k} micro-batches. Python's phase times sum a step's micro-batches: "
                       f"CPU / Python compares {k} × the CPU per instance with them._\n")
        if t.get("gpu_lags"):
            out.append("_The GPU runs behind the CPU in this capture (no synchronise at phase ends): a range's "
                       "CPU span is when the CPU issued its work, its GPU time when that work ran; the step is "
                       "its period, the pace the GPU sets._\n")
    if t["steps"]:
        out.append(tables.markdown(["step", "CPU ms (NVTX)", "GPU ms", "period ms", "own ms", "Python ms",
                                    "period − Python (µs)", "own − Python (µs)"],
                                   [[s["step"], numbers.ms(s["nvtx_ns"]), numbers.ms(s.get("gpu_ns")),
                                     numbers.ms(s.get("period_ns")), numbers.ms(s.get("own_ns")),
                                     numbers.ms(s["python_ns"]),
                                     numbers.us(s["period_ns"] - s["python_ns"] if "period_ns" in s else None),
                                     numbers.us(s["own_ns"] - s["python_ns"] if "own_ns" in s else None)]
                                    for s in t["steps"]]))
        out += clock_note(t)
    elif not rows:
        out.append("No forward/step ranges in this trace.\n")
    else:
        out.append("_No Python timings in this trace (captures by `nsight-tui capture` carry them)._\n")
    return out


def clock_note(t: dict) -> list[str]:
    """Which step figure the workload's Python clock compares with, and what the rest of the period is."""
    covers, between = t.get("python_clock_covers"), t.get("between_steps_mean_ns")
    if covers == "own":
        return [f"_Python's clock reads the step's own time (start to its work's end), not its period: it was taken "
                f"inside the step (a trainer's batch hooks), without the loop's {numbers.ms(between)} ms/step between "
                f"steps (the next batch's fetch and copy, the trainer's hooks). Compare own to Python; the "
                f"period is what a step costs the loop._", ""]
    if covers == "period":
        return [f"_Python's clock reads the step's period (its start to the next one's), the loop's "
                f"{numbers.ms(between)} ms/step between steps included._", ""]
    return []


def top_kernels(a: dict) -> list[str]:
    """(b) The most expensive kernels of forward and of backward, and whether they agree."""
    ranges = a["ranges"]
    out = ["## (b) Most expensive kernels: forward and backward"]
    tops = {}
    for name in ("forward", "backward"):
        r = ranges.get(name)
        if not r:
            continue
        tops[name] = [k["name"] for k in r["top_kernels"]]
        out.append(tables.markdown(
            # the share as the TUI's kernel table gives it: of all GPU op time in the range
            # (kernels + memcpy/memset), one definition (kernel time alone made 37.0% of 36.4%)
            ["kernel", "family", "GPU ms", "calls", "calls / instance", f"share of {name} GPU op time"],
            [[k["short"], k["family"], numbers.ms(k["total_ns"]), k["instances"],
              numbers.mean_count(k["instances"] / r["instances"]),
              numbers.percent(_per(k["total_ns"], r.get("op_ns", r["kernel_ns"])))] for k in r["top_kernels"]],
            title=name))
    if len(tops) == 2 and tops["forward"] and tops["backward"]:
        same = tops["forward"][0] == tops["backward"][0]
        shared = len(set(tops["forward"]) & set(tops["backward"]))
        out.append(f"Top kernel the same in forward and backward: **{'yes' if same else 'no'}**; "
                   f"{shared} of the top {len(tops['forward'])} appear in both.\n")
    return out


def non_gemm_forward(a: dict) -> list[str]:
    """(c) Which kernel families other than GEMM take forward's GPU time."""
    from nsight_tui.parsers.kernels.families import FAMILIES

    out = ["## (c) Non-GEMM kernels that matter in forward"]
    fwd = a["ranges"].get("forward")
    if fwd:
        fam = fwd["families"]
        rows = [[f.label, numbers.percent(fam.get(f.key))] for f in FAMILIES if f.key != "gemm" and fam.get(f.key)]
        out.append(tables.markdown(["family", "share of forward GPU time"], rows))
        out.append(f"GEMM share of forward: {numbers.percent(fam.get('gemm'))}; everything else: "
                   f"{numbers.percent(1 - fam.get('gemm', 0) if fam else None)}.\n")
    return out


def families_by_phase(a: dict) -> list[str]:
    """(d) Kernel family shares in forward against the whole training step."""
    from nsight_tui.parsers.kernels.families import FAMILIES

    ranges = a["ranges"]
    out = ["## (d) Kernel families: forward vs the whole training step"]
    cols = [c for c in ("forward", "backward", "optimizer", "step") if c in ranges]
    if cols:
        # a family with no time in any column is left out (a transformer's convolution, a CNN's attention)
        shown = [f for f in FAMILIES if any(ranges[c]["families"].get(f.key) for c in cols)]
        gone = len(FAMILIES) - len(shown)
        out.append(tables.markdown(
            ["family", *cols],
            [[f.label, *[numbers.percent(ranges[c]["families"].get(f.key)) for c in cols]] for f in shown],
            notes=["share of GPU op time (kernels + memcpy/memset) in each range, steady-state steps"
                   + (f"; {gone} famil{'ies' if gone > 1 else 'y'} with no time left out" if gone else "")]))
    return out


def softmax_vs_matmul(a: dict) -> list[str]:
    """(e) Softmax against the attention matmuls, in runtime and in FLOPs."""
    ra, basis = a["ratios"], a["ratio_basis"]
    rt, fl = ra["softmax_over_matmul_runtime"], ra["softmax_over_matmul_flops"]
    if rt is None and fl is None and inference_run(a):
        return ["## (e) Softmax vs the attention matmuls", "",
                "_An inference run with no separate softmax and attention matmuls (fused attention): nothing to "
                "weigh._", ""]
    out = ["## (e) Softmax vs the attention matmuls", tables.markdown(["ratio", "value", "divides by"], [
        ["softmax / matmul runtime", numbers.fixed(rt), basis["softmax_over_matmul_runtime"]],
        ["softmax / matmul FLOPs", numbers.fixed(fl, 4), basis["softmax_over_matmul_flops"]],
    ])]
    if rt and fl:
        out.append(f"Softmax takes {rt / fl:.1f}x more time per FLOP than the attention matmuls "
                   "(memory-bound vs compute-bound).\n")
    return out


def ratios(a: dict) -> list[str]:
    """Every ratio the answers carry, with what it divides by."""
    return ["## Ratios", tables.markdown(["ratio", "value", "divides by"],
                                         [[k, numbers.fixed(v, 4), a["ratio_basis"].get(k, "")]
                                          for k, v in a["ratios"].items()])]


def warmup(a: dict) -> list[str]:
    """Warmup iterations, apart from the steady state the other sections describe."""
    w = (a["warmup"] or {}).get("step")
    if not w:
        return []
    s = a["ranges"].get("step")

    def row(label, r):
        return [label, r["instances"], numbers.ms(r["range_ns"] / r["instances"]),
                numbers.ms(r["proj_ns"] / r["instances"]), numbers.ms(r["kernel_ns"] / r["instances"])]

    return ["## Warmup (reported apart from steady state)",
            tables.markdown(["", "iterations", "CPU ms / iteration (NVTX)", "GPU ms / iteration",
                             "kernel ms / iteration"],
                            [row("warmup", w), *([row("steady state", s)] if s else [])])]


OCCUPANCY_ROWS = 10


def occupancy(a: dict) -> list[str]:
    """The costliest kernels' theoretical occupancy (from their launch configuration) and limiter."""
    occ = a.get("occupancy")
    if not occ:
        return []
    title = f"## Occupancy: {occ['what']}, the {OCCUPANCY_ROWS} costliest kernels"
    if not occ["kernels"]:
        return [title, "", f"No figure: {safe.markdown(occ['note'] or 'no kernels')}.", ""]
    rows = []
    for k in occ["kernels"][:OCCUPANCY_ROWS]:
        c = k["configs"][0]  # the configuration with the most GPU time
        rows.append([table_name(k["name"]), numbers.ms(k["total_ns"]),
                     f"{k['theoretical_occupancy_pct']:g}%", k["occupancy_limiter"], c["registers_per_thread"],
                     c["threads_per_block"], c["static_shared_bytes"] + c["dynamic_shared_bytes"],
                     c["active_blocks_per_sm"], len(k["configs"])])
    gpus = ", ".join(f"{g['name']} (CC {g['compute_capability']}, {g['max_warps_per_sm']} warps/SM)" for g in occ["gpus"])
    notes = [f"GPU: {gpus}", "method: " + occ["method"],
             "per kernel, its launch configuration with the most GPU time (`-f json`: every configuration)"]
    if occ["note"]:
        notes.append(occ["note"])
    return [title, "", tables.markdown(["kernel", "GPU ms", "theoretical occupancy", "limited by", "regs/thread",
                                        "threads/block", "shared B/block", "blocks/SM", "configs"], rows, notes=notes)]


def _ranks(a: dict):
    """The export's ranks (analyses.ranks.RunRanks) where it holds several, from the typed report."""
    report = getattr(a, "report", None)
    return report.ranks if report is not None else None


def ranks(a: dict) -> list[str]:
    from nsight_tui.render.ranks import ranks_markdown

    run = _ranks(a)
    return [ranks_markdown(run)] if run is not None else []


# The page, top to bottom: add a section with one function above and one line here.
SECTIONS: list[Section] = [
    heading,
    oom_headline,  # a run that ran out of GPU memory: that first
    process_view.section,
    inferred,
    forward_time,
    top_kernels,
    non_gemm_forward,
    families_by_phase,
    softmax_vs_matmul,
    backward_parts.section,
    roofline.section,  # (g) How far from the hardware
    occupancy,  # theoretical occupancy of the costliest kernels
    ncu.section,  # Nsight Compute's figures joined to the ranges (report --ncu)
    ratios,
    idle_section,
    memory.section,  # GPU memory: peak, per phase, out of memory
    gpu_metrics.section,  # sampled SM / tensor / DRAM activity per range
    findings.section,  # (h) What to fix first
    warmup,
    ranks,
]


def single_markdown(report: Report, sections: list[Section] | None = None) -> str:
    """The report on one trace, as Markdown."""
    page = document(report)
    return "\n".join(block for section in (SECTIONS if sections is None else sections)
                     for block in section(page))


def sweep_markdown(folder, sweep_tables: list[SweepTable], attribution: str, runs=(), skipped=(),
                   memory_model: dict | None = None) -> str:
    """The report on a folder of captures: one table per question, then why each `error`
    cell is one and what was not read at all."""
    out = [f"# nsight-tui sweep report: {safe.markdown(str(folder))}", "",
           (f"_attribution: {attribution} — {MODE_HELP[attribution]}; rows: model, columns: context length; "
            "OOM: the configuration ran out of GPU memory_"), ""]
    for t in sweep_tables:
        out.append(tables.markdown(t.headers, t.rows, title=t.title, notes=[f"basis: {t.basis}", *t.notes]))
    ooms = [[r.path.name, r.oom_range or "", ". ".join(r.message.split(". ")[:2])] for r in runs if r.status == "oom"]
    if ooms:
        out.append(tables.markdown(["file", "ran out in (NVTX path)", "message"],
                                   [[safe.markdown(c) for c in row] for row in ooms], title="Out of GPU memory"))
    out += memory_model_text.section(memory_model)
    errors = [[r.path.name, r.message] for r in runs if r.status == "error"]
    if errors:
        out.append(tables.markdown(["file", "why it is an error cell"], errors, title="Runs not analysed"))
    if skipped:
        out.append("Skipped: " + "; ".join(safe.markdown(s) for s in skipped) + "\n")
    return "\n".join(out)


def single_json(report: Report) -> str:
    """The report on one trace, as the JSON document (`report -f json`, the MCP `report` tool)."""
    return tables.json(document(report))


def sweep_json(folder, runs, sweep_tables: list[SweepTable], attribution: str, skipped=(),
               memory_model: dict | None = None) -> str:
    return tables.json({
        "folder": str(folder), "attribution": attribution,
        "runs": [{"file": r.path.name, "model": r.model, "ctx": r.ctx, "variant": r.variant,
                  "status": r.status, "message": r.message, **({"oom_range": r.oom_range} if r.oom_range else {}),
                  "answers": document(r.report) if r.report else None} for r in runs],
        "tables": [{"title": t.title, "basis": t.basis, "columns": t.headers, "rows": t.rows, "notes": t.notes}
                   for t in sweep_tables],
        "skipped": list(skipped),
        **({"memory_model": memory_model} if memory_model is not None else {}),
    })
