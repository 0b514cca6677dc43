"""`nsight-tui report FILE|DIR`: the answers to the profiling questions, Markdown or JSON."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from nsight_tui.parsers.attribution import MODE_HELP, MODES
from nsight_tui.parsers.errors import TraceError
from nsight_tui.render.output import write_atomic
from nsight_tui.render.markdown import table


def add_arguments(parser) -> None:
    parser.add_argument("target", help="an nsys SQLite export, or a folder of {model}_ctx{N}*.sqlite captures")
    parser.add_argument("-f", "--format", default="markdown", choices=("markdown", "json"))
    parser.add_argument("-o", "--output", default="-", help="write to this file ('-' = stdout, default)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.add_argument("--attribution", default="process", choices=MODES)
    dims = parser.add_argument_group("attention dims for traces without capture metadata (FLOP ratio)")
    dims.add_argument("--batch", type=int)
    dims.add_argument("--heads", type=int, dest="n_heads")
    dims.add_argument("--ctx", type=int)
    dims.add_argument("--d-head", type=int, dest="d_head")


def _ms(ns) -> str:
    return "–" if ns is None else f"{ns / 1e6:,.3f}"


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x, fmt="{:.3f}") -> str:
    return "–" if x is None else fmt.format(x)


def single_markdown(a: dict) -> str:
    from nsight_tui.parsers.families import FAMILIES

    out = [f"# nsight-tui report: {Path(a['file']).name}", ""]
    out.append(f"_attribution: {a['attribution']} — {MODE_HELP[a['attribution']]}_")
    cfg = a["config"]
    if cfg:
        out.append("_run: " + ", ".join(f"{k}={v}" for k, v in cfg.items()) + "_")
    out.append("")
    ranges = a["ranges"]
    t = a["timing"]

    out.append("## (a) Forward time, NVTX vs Python")
    rows = []
    for name in ("forward", "backward", "optimizer", "step"):
        r = ranges.get(name)
        if r:
            py = t["python_phase_mean_ns"].get(name) if name != "step" else t["python_step_mean_ns"]
            per = r["range_ns"] / r["instances"]
            rows.append([name, r["instances"], _ms(per), _ms(py), _num(per / py if py else None, "{:.3f}")])
    if rows:
        out.append(table(["range", "instances", "NVTX ms (mean)", "Python ms (mean)", "NVTX / Python"], rows))
    if t["steps"]:
        out.append(table(["step", "NVTX ms", "Python ms", "NVTX − Python (µs)"],
                         [[s["step"], _ms(s["nvtx_ns"]), _ms(s["python_ns"]), f"{s['diff_ns'] / 1e3:,.1f}"]
                          for s in t["steps"]]))
    elif not rows:
        out.append("No forward/step ranges in this trace.\n")
    else:
        out.append("_No Python timings in this trace (captures by `nsight-tui capture` carry them)._\n")

    out.append("## (b) Most expensive kernels: forward and backward")
    tops = {}
    for name in ("forward", "backward"):
        r = ranges.get(name)
        if not r:
            continue
        tops[name] = [k["name"] for k in r["top_kernels"]]
        out.append(table(["kernel", "family", "GPU ms", "calls", "calls / instance", f"share of {name}"],
                         [[k["short"], k["family"], _ms(k["total_ns"]), k["instances"],
                           f"{k['instances'] / r['instances']:.1f}", _pct(k["total_ns"] / r["kernel_ns"] if r["kernel_ns"] else None)]
                          for k in r["top_kernels"]], title=name))
    if len(tops) == 2 and tops["forward"] and tops["backward"]:
        same = tops["forward"][0] == tops["backward"][0]
        shared = len(set(tops["forward"]) & set(tops["backward"]))
        out.append(f"Top kernel the same in forward and backward: **{'yes' if same else 'no'}**; "
                   f"{shared} of the top {len(tops['forward'])} appear in both.\n")

    out.append("## (c) Non-GEMM kernels that matter in forward")
    fwd = ranges.get("forward")
    if fwd:
        fam = fwd["families"]
        rows = [[f.label, _pct(fam.get(f.key))] for f in FAMILIES if f.key != "gemm" and fam.get(f.key)]
        out.append(table(["family", "share of forward GPU time"], rows))
        out.append(f"GEMM share of forward: {_pct(fam.get('gemm'))}; everything else: "
                   f"{_pct(1 - fam.get('gemm', 0) if fam else None)}.\n")
    out.append("## (d) Kernel families: forward vs the whole training step")
    cols = [c for c in ("forward", "backward", "optimizer", "step") if c in ranges]
    if cols:
        out.append(table(["family", *cols],
                         [[f.label, *[_pct(ranges[c]["families"].get(f.key)) for c in cols]] for f in FAMILIES],
                         notes=["share of GPU op time (kernels + memcpy/memset) in each range, steady-state steps"]))
    out.append("## (e) Softmax vs the attention matmuls")
    ra = a["ratios"]
    out.append(table(["ratio", "value", "divides by"], [
        ["softmax / matmul runtime", _num(ra["softmax_over_matmul_runtime"]), a["ratio_basis"]["softmax_over_matmul_runtime"]],
        ["softmax / matmul FLOPs", _num(ra["softmax_over_matmul_flops"], "{:.4f}"), a["ratio_basis"]["softmax_over_matmul_flops"]],
    ]))
    if ra["softmax_over_matmul_runtime"] and ra["softmax_over_matmul_flops"]:
        out.append(f"Softmax takes {ra['softmax_over_matmul_runtime'] / ra['softmax_over_matmul_flops']:.1f}x more time "
                   "per FLOP than the attention matmuls (memory-bound vs compute-bound).\n")
    out.append("## Ratios")
    out.append(table(["ratio", "value", "divides by"],
                     [[k, _num(v, "{:.4f}"), a["ratio_basis"].get(k, "")] for k, v in ra.items()]))
    if a["warmup"]:
        w, s = a["warmup"].get("step"), ranges.get("step")
        if w:
            out.append("## Warmup (reported apart from steady state)")
            out.append(table(["", "iterations", "NVTX ms / iteration", "kernel ms / iteration"], [
                ["warmup", w["instances"], _ms(w["range_ns"] / w["instances"]), _ms(w["kernel_ns"] / w["instances"])],
                *([["steady state", s["instances"], _ms(s["range_ns"] / s["instances"]),
                    _ms(s["kernel_ns"] / s["instances"])]] if s else []),
            ]))
    return "\n".join(out)


def sweep_markdown(folder: Path, tables, attribution: str) -> str:
    out = [f"# nsight-tui sweep report: {folder}", "",
           f"_attribution: {attribution} — {MODE_HELP[attribution]}; rows: model, columns: context length; "
           "OOM: the configuration ran out of GPU memory_", ""]
    for t in tables:
        out.append(table(t.headers, t.rows, title=t.title, notes=[f"basis: {t.basis}", *t.notes]))
    return "\n".join(out)


def _clean(a: dict) -> dict:
    return {k: v for k, v in a.items() if not k.startswith("_")}


def run(args) -> int:
    from nsight_tui.parsers import sweep
    from nsight_tui.parsers.analysis import questions
    from nsight_tui.parsers.load import load_trace

    target = Path(args.target)
    if args.output != "-" and Path(args.output).exists() and not args.force:
        raise TraceError(f"{args.output}: exists; not overwriting (use --force or another name)")
    dims = {"batch": args.batch, "n_heads": args.n_heads, "ctx": args.ctx, "d_head": args.d_head}
    if target.is_dir():
        runs = sweep.discover(target)
        if not runs:
            raise TraceError(f"{target}: no .sqlite captures in this folder")
        sweep.analyse(runs, args.attribution,
                      progress=lambda f, name: print(f"analysing {name}", file=sys.stderr))
        tables = sweep.tables(runs)
        if args.format == "json":
            text = json.dumps({
                "folder": str(target), "attribution": args.attribution,
                "runs": [{"file": r.path.name, "model": r.model, "ctx": r.ctx, "variant": r.variant,
                          "status": r.status, "message": r.message,
                          "answers": _clean(r.answers) if r.answers else None} for r in runs],
                "tables": [{"title": t.title, "basis": t.basis, "columns": t.headers, "rows": t.rows, "notes": t.notes}
                           for t in tables],
            }, indent=1) + "\n"
        else:
            text = sweep_markdown(target, tables, args.attribution)
    else:
        answers = questions(load_trace(target), args.attribution, dims)
        text = json.dumps(_clean(answers), indent=1) + "\n" if args.format == "json" else single_markdown(answers)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_atomic(args.output, text, overwrite=args.force)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
