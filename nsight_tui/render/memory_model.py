"""The sweep's memory model as text: a model x ctx table of what torch's caching
allocator reserved at its most (measured, with the model's prediction beside it; predicted where no
run was made), each OOM cell explained, and the largest ctx and batch that fit. Reads
`parsers.analyses.memory_model.MemoryModel.to_json()`."""
from __future__ import annotations

from dataclasses import asdict

from nsight_tui.parsers.analyses.memory_model import DEFINITIONS, MemoryModel
from nsight_tui.render import numbers, safe, tables

TERM_LABELS = {"fixed": "fixed (weights, gradients, AdamW state)", "activations": "activations",
               "attention_scores": "attention scores"}


def _b(n) -> str:
    return numbers.bytes_(n)


def _pct(x) -> str:
    return MISSING_PCT if x is None else f"{100 * x:+.1f}%"


MISSING_PCT = "–"


def _label(model, batch) -> str:
    return f"{model} (batch {batch})"


def _oom_text(o: dict) -> str:
    grew = ""
    if o.get("grew_most"):
        grew = (f"; {TERM_LABELS[o['grew_most']]} grew the most: +{_b(o['growth'][o['grew_most']])} over "
                f"{safe.markdown(o['reference'])}")
    return (f"OOM: predicted {_b(o['predicted_bytes'])} > {_b(o['room_bytes'])} available, over by "
            f"{_b(o['over_bytes'])}{grew}")


def table(m: dict) -> tuple[list[str], list[list[str]]]:
    """Rows model (and batch), columns ctx: measured (predicted, error; by the others' fit), OOM explained,
    predicted where no run."""
    preds = m["predictions"]
    ooms = {o["file"]: o for o in m["out_of_memory"]}
    rows_keys = []
    for p in sorted(preds, key=lambda p: (p["terms"]["fixed"], p["batch"])):
        key = (p["model"] or p["file"], p["batch"])
        if key not in rows_keys:
            rows_keys.append(key)
    ctxs = sorted({p["ctx"] for p in preds})
    cells = {((p["model"] or p["file"]), p["batch"], p["ctx"]): p for p in preds}
    predicted = {(c["model"], c["batch"], c["ctx"]): c["predicted_bytes"] for c in m.get("cells_not_run", [])}
    rows = []
    for model, batch in rows_keys:
        row = [safe.markdown(_label(model, batch))]
        for ctx in ctxs:
            p = cells.get((model, batch, ctx))
            if p is None:
                value = predicted.get((model, batch, ctx))
                row.append(f"not run: predicted {_b(value)}" if value is not None else "")
            elif p["status"] == "oom":
                row.append(_oom_text(ooms[p["file"]]) if p["file"] in ooms else "OOM")
            else:
                loo = (f"; unseen {_b(p['leave_one_out_bytes'])} ({_pct(p['leave_one_out_error'])})"
                       if p.get("leave_one_out_bytes") is not None else "")
                row.append(f"{_b(p['measured_bytes'])} (fit {_b(p['predicted_bytes'])}, {_pct(p['error'])}{loo})")
        rows.append(row)
    return ["model", *[f"ctx {c}" for c in ctxs]], rows


def section(m: dict | None) -> list[str]:
    """The memory model's part of the sweep report."""
    if not m:
        return []
    out = ["## GPU memory model (torch's caching allocator's peak reserved)", ""]
    f = m.get("fit")
    if f is None:
        out += [f"_No fit: {safe.markdown(m.get('note') or 'no runs with a memory figure')}_", ""]
        if m.get("left_out"):
            out += [f"Not modelled: {len(m['left_out'])} run(s): "
                    + "; ".join(safe.markdown(s) for s in m["left_out"][:5])
                    + ("; …" if len(m["left_out"]) > 5 else "") + " (JSON: memory_model.left_out)", ""]
        return out
    gpu = (f"GPU {_b(m['gpu_bytes'])} (TARGET_INFO_GPU.totalMemory) less {_b(m['beside_allocator_bytes'])} held "
           f"outside torch's allocator (cuBLAS handles, static globals; nsys) = {_b(m['room_bytes'])} available"
           if m.get("gpu_bytes") else "the GPU's memory is unknown (no TARGET_INFO_GPU)")
    out.append(f"reserved ≈ 16 B × parameters + {f['bytes_per_activation']:.1f} B × batch·ctx·layers·d_model + "
               f"{f['bytes_per_score']:.2f} B × batch·heads·ctx²·layers, fitted by least squares to "
               f"{len(f['files'])} runs (RMS error {numbers.percent(f['rms_error'], 1)}); {gpu}.")
    out.append("")
    headers, rows = table(m)
    out.append(tables.markdown(headers, rows, title="Peak reserved by torch's caching allocator, model × ctx", notes=[
        "measured: the allocator's segments at their most (nsys memory events; torch's max_memory_reserved where an "
        "export has none); fit: the model fitted to every run; unseen: predicted by the fit on the other runs only",
        "OOM: the configuration ran out; predicted against the GPU's memory less what is held outside torch's "
        "allocator; the term that grew the most from the largest run of that model that fit"]))
    if m["out_of_memory"]:
        rows = [[safe.markdown(o["file"]), *[_b(o["terms"][k]) for k in TERM_LABELS], _b(o["predicted_bytes"]),
                 _b(o["room_bytes"]), _b(o["over_bytes"]),
                 TERM_LABELS.get(o.get("grew_most") or "", "–")] for o in m["out_of_memory"]]
        out.append(tables.markdown(["ran out", *TERM_LABELS.values(), "predicted", "available", "over by",
                                    "grew the most"], rows, title="Why each OOM cell ran out (model terms)"))
    if m["limits"]:
        ctxs = sorted({int(c) for lim in m["limits"] for c in lim["max_batch_by_ctx"]})
        rows = [[safe.markdown(lim["model"]), lim["batch"], "–" if lim["max_ctx"] is None else f"{lim['max_ctx']:,}",
                 *[str(lim["max_batch_by_ctx"].get(c, lim["max_batch_by_ctx"].get(str(c), "–"))) for c in ctxs]]
                for lim in m["limits"]]
        out.append(tables.markdown(["model", "batch", "largest ctx that fits (this batch)",
                                    *[f"largest batch at ctx {c}" for c in ctxs]], rows,
                                   title="What fits (predicted)", notes=["the model's prediction against the "
                                                                         "available memory; not measured"]))
    if m.get("left_out"):
        out.append("Not modelled: " + "; ".join(safe.markdown(s) for s in m["left_out"]) + "\n")
    return out


def memory_model_json(m: MemoryModel) -> dict:
    """The sweep's memory model as plain data (bytes; the fit's terms, predictions, limits, OOM cells)."""
    out = asdict(m)
    out["definitions"] = DEFINITIONS
    return out
