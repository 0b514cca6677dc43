"""An Nsight Compute report read by NVIDIA's own `ncu_report` module (shipped in ncu's extras/python),
written as JSON, the tests' oracle for the project's reader: per kernel its names, the NVTX push/pop
stack, its metrics (all, or those whose name holds one of the --keep parts) and ncu's rule results.

    PYTHONPATH=$NCU_HOME/extras/python python3 devruns/ncu_dump.py REPORT.ncu-rep OUT.json [--keep PART ...]
"""
import argparse
import json

import ncu_report  # type: ignore[import-not-found]


def value(metric):
    try:
        v = metric.value()
    except Exception as exc:  # noqa: BLE001 - the reader raises for metrics it cannot read; say which
        return f"<{exc}>"
    return v if isinstance(v, (int, float, str)) or v is None else str(v)


def kernel(r, a, act, keep):
    nvtx = {}
    state = act.nvtx_state()
    for d in state.domains():
        dom = state.domain_by_id(d)
        nvtx[dom.name() or str(d)] = list(dom.push_pop_ranges())
    metrics = {}
    for name in act.metric_names():
        if keep and not any(k in name for k in keep):
            continue
        m = act.metric_by_name(name)
        metrics[name] = [value(m), m.unit()]
    try:
        rules = act.rule_results_as_dicts()
    except Exception as exc:  # noqa: BLE001
        rules = [f"<{exc}>"]
    return {"range": r, "action": a, "name": act.name(), "mangled": act.name(act.NameBase_MANGLED),
            "function": act.name(act.NameBase_FUNCTION), "nvtx": nvtx, "metrics": metrics,
            "rules": json.loads(json.dumps(rules, default=str))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("out")
    ap.add_argument("--keep", nargs="*", default=[])
    args = ap.parse_args()
    ctx = ncu_report.load_report(args.report)
    kernels = []
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            kernels.append(kernel(r, a, rng.action_by_idx(a), args.keep))
    with open(args.out, "w") as f:
        json.dump({"kernels": kernels}, f)
    print("dumped", len(kernels), "kernels ->", args.out)


if __name__ == "__main__":
    main()
