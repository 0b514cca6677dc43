"""Findings' savings from the replay (parsers.replay): every finding names the edit that is its fix
(`edits_of`), its saving is the replayed step without that edit minus with it (median over the
steps of the step period), and "all fixes together" is one more replay with every edit, so no time
is counted twice. The rule's own estimate stays beside it (`estimate_ms_per_step`); where the
replay cannot express a fix, or cannot run, the estimate stays the saving and the basis says so."""
from __future__ import annotations

import re

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext
from nsight_tui.parsers.analyses.findings.result import Finding, edit_words
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.ids import api_display_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.read.conventions import PHASES
from nsight_tui.parsers.replay.edits import EditError
from nsight_tui.parsers.replay.predict import saving

# The fixes the replay has no edit for, and why (their savings stay the rules' estimates).
NO_EDIT = {
    # a bucket size or an overlap setting moves when each all-reduce starts; which gradients it then
    # waits for is DDP's choice at run time, not in this capture (kernels-from:TWIN carries a twin's)
    "exposed-communication": "when each all-reduce would start under another bucket size is not in this capture "
                             "(replay a twin capture with kernels-from:TWIN.sqlite)",
    # the warm-up steps lie outside the steady-state steps the replay re-times: moving the window
    # changes which steps are measured, not how long one takes
    "warmup-in-window": "a warm-up step inside the window changes what is measured, not a steady step's time",
}


def _glob_escape(name: str) -> str:
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in name)


# The words a name's glob is looked for among (each under 64 characters): a name of many words, or of
# one very long one (a hostile export's 10 MB name), is named by its shortest unique beginning
NAME_GLOB_WORDS = 64


def _in_order(name: str, words: tuple[str, ...]) -> bool:
    """`name` matches `*W1*W2*...*` (words hold no glob character: fnmatch's answer, without a regex)."""
    at = 0
    for w in words:
        at = name.find(w, at)
        if at < 0:
            return False
        at += len(w)
    return True


def _name_glob(names: list[str], code: int) -> str:
    """A glob that matches name `code` and no other of `names`: `*WORD*` (or `*WORD*WORD*`) over the
    words of the name, the fewest and shortest first, so an edit names a kernel in words a reader
    knows; the escaped name itself where no such glob is exact."""
    name = names[code]
    words = list(dict.fromkeys(w for w in re.findall(r"[A-Za-z_]\w{3,}", name) if len(w) < 64))[:NAME_GLOB_WORDS]
    others = [n for i, n in enumerate(names) if i != code]

    def only(*ws: str) -> bool:
        return not any(_in_order(n, ws) for n in others)

    for w in sorted(words, key=len):
        if only(w):
            return f"*{w}*"
    for i, a in enumerate(words):
        for b in words[i + 1:]:
            if only(a, b):
                return f"*{a}*{b}*"
    for n in (32, 64, 128, 256):  # a long name by the shortest of its beginnings no other name shares
        if len(name) > n and not any(o.startswith(name[:n]) for o in others):
            return _glob_escape(name[:n]) + "*"
    return _glob_escape(name)


# How much of the tf32/fp32 peak ratio the GEMMs reach once on the tensor cores: in the committed
# TF32 twins (tests/helpers/replay_twins.py; the GEMM kernels' total time fp32 over TF32, per
# configuration, the five H100 ctx-512 batch-8 async pairs as one) 4.36x (GPT-2 small ctx 512 batch 8,
# H100), 4.38 (batch 4, phase syncs), 4.57 (ctx 1024, H200), 4.74 (large, H100), 4.75 (small ctx 512,
# H200), 5.11 (medium, H200) against the 7.38 peak ratio: the least and the median of those shares.
# tests/core/test_findings_tf32_share.py recomputes them in SQL. The peak itself is the best end.
TF32_SHARE_OF_PEAK = (0.591, 0.631)


def tensor_factors(peak_ratio: float) -> tuple[float, float]:
    """The GEMMs' speed-up on the tensor cores: (the least the committed twins reached, the central)."""
    return peak_ratio * TF32_SHARE_OF_PEAK[0], peak_ratio * TF32_SHARE_OF_PEAK[1]


def _fp32_gemm_edits(c: StepContext, f: Finding) -> list[str]:
    """`speed:` on each fp32 GEMM kernel: between the least share of the tf32/fp32 peak ratio the
    committed TF32 twins' GEMMs reached and the peak itself, centrally their median share."""
    from nsight_tui.parsers.analyses import roofline

    slow, fast = f.evidence.get("fp32_tflops"), f.evidence.get("tf32_tflops")
    if not slow or not fast:
        return []
    t = c.trace
    r = roofline.build(t)
    fam = name_families(t)
    codes = np.unique(t.ops["name"].to_numpy()[c.model.ops_of(c.steps)])
    names = [t.op_names[int(k)] for k in codes.tolist() if fam[int(k)] == "gemm"]
    fp32 = [n for n in names if roofline.kernel_math_path(n, r.config) == "fp32"]
    low, central = tensor_factors(fast / slow)
    factors = f"{_factor(low)}..{_factor(central)}..{_factor(fast / slow)}"
    if names and len(fp32) == len(names):
        return [f"speed:gemm={factors}"]
    return [f"speed:{_glob_escape(n)}={factors}" for n in fp32]


def _factor(k: float) -> str:
    return f"{k:.4g}"


def _occupancy_edits(c: StepContext, f: Finding) -> list[str]:
    """The kernel the finding names (by a glob of its name that matches it alone) at most ncu's own
    estimated speedup for the occupancy fix faster: ncu's TheoreticalOccupancy rule estimates the
    share of the kernel's time a full occupancy saves (100 − theoretical occupancy %), an upper bound
    (occupancy hides latency only while nothing else limits first), so the range runs from no change
    to it; and no faster than its busiest unit allows: a kernel whose memory or SM throughput already
    runs at X% of peak (ncu's Speed Of Light, mean over its profiled instances weighted by their nsys
    time) cannot take less than X% of its time, whatever its occupancy. Central: the duration halfway
    between the two ends (`speed:NAME=1..K`), as no figure in the capture says where between them the
    kernel lands."""
    bound = ncu_speedup_bound(c, f)
    code = _code_of(c, f.evidence.get("kernel"))
    if bound is None or bound[0] <= 1 or code < 0:
        return []
    return [f"speed:{_name_glob(c.trace.op_names, code)}=1..{_factor(bound[0])}"]


def _code_of(c: StepContext, name) -> int:
    """The name code of the kernel named `name` (-1: none)."""
    names = c.trace.op_names
    return names.index(name) if isinstance(name, str) and name in names else -1


def ncu_speedup_bound(c: StepContext, f: Finding) -> tuple[float, float | None] | None:
    """The factor the occupancy fix can speed the finding's kernel by at most, and its busiest unit's
    % of peak: ncu's estimate (a share p of its time saved: 1 / (1 − p)) capped by its Speed Of Light
    (100 / that %: the unit runs the same work at its peak at best); None without the figures."""
    pct = f.evidence.get("ncu_estimated_speedup_pct")
    if c.ncu is None or pct is None or not 0 < pct < 100:
        return None
    k = 1 / (1 - pct / 100)
    name_of = c.trace.ops["name"].to_numpy()
    code = _code_of(c, f.evidence.get("kernel"))
    sol, w = [], []
    for j in c.ncu.joined:
        if int(name_of[j.op]) != code:
            continue
        busiest = max((x for x in (j.figures.sm_throughput_pct, j.figures.memory_throughput_pct) if x is not None),
                      default=None)
        if busiest is not None and busiest > 0:
            sol.append(float(busiest))
            w.append(float(j.nsys_duration_ns or 0))
    if not sol:
        return k, None
    busiest = min(float(np.average(sol, weights=w)) if sum(w) else float(np.mean(sol)), 100.0)
    return min(k, 100 / busiest), busiest


def _tensor_edits(c: StepContext, f: Finding) -> list[str]:
    """The GEMMs the finding names (every GEMM of the steps: `speed:gemm`) on the tensor-core path their
    names say: the path's peak over fp32's, the central and the best end (the fp32 rule's fix, whose
    twins measure it); the other end no change (the GEMMs already ran on the tensor cores, as named,
    and the samples missed them). The capture measures none of these GEMMs on the tensor cores."""
    from nsight_tui.parsers.analyses import roofline

    pk = roofline.build(c.trace).peaks.peaks
    path = f.evidence.get("named_path")
    fast = pk.tflops.get(path) if pk is not None and path else None
    slow = pk.tflops.get("fp32") if pk is not None else None
    if not fast or not slow or fast <= slow:
        return []
    return [f"speed:gemm=1..{_factor(tensor_factors(fast / slow)[1])}..{_factor(fast / slow)}"]


def decode_floor(c: StepContext, f: Finding) -> tuple[float, float, float, str] | None:
    """The decode's GEMMs at the weights' floor: (their time per decode call, the factor that takes
    them to the floor, the central factor, how the central was found); None without a decode range or
    GEMMs in it.

    The floor is the rule's: every weight read once per token at the HBM peak, per call. The
    central: the best-streaming GEMM of the decode (the name with the longest median launch) taken to
    read the largest weight matrix (the largest host-to-device copy before the first call; a model's
    output head, often): its bytes over its median time is the rate a decode GEMM reaches in this
    capture (at most the peak); every GEMM at that rate."""
    from nsight_tui.parsers.read.ids import KERNEL

    ev = f.evidence
    floor, tokens, peak = ev.get("floor_ns_per_token"), ev.get("tokens_per_call"), ev.get("hbm_bytes_per_s")
    if not floor or not tokens or not peak:
        return None
    calls = c.phase("decode")
    if not len(calls):
        return None
    t = c.trace
    pos = c.model.ops_of(calls)
    fam = name_families(t)
    codes = t.ops["name"].to_numpy()[pos]
    gemm = pos[(t.ops["kind"].to_numpy()[pos] == KERNEL) & (np.asarray(fam)[codes] == "gemm")] if len(pos) else pos
    if not len(gemm):
        return None
    dur = (t.ops["end"].to_numpy() - t.ops["start"].to_numpy())[gemm].astype(np.float64)
    per_call = float(dur.sum()) / len(calls)
    high = per_call / (floor * tokens)
    g_codes = t.ops["name"].to_numpy()[gemm]
    medians = {int(k): float(np.median(dur[g_codes == k])) for k in np.unique(g_codes).tolist()}
    best = max(medians, key=lambda k: medians[k])
    largest = ev.get("largest_weight_bytes") or 0
    rate = min(largest / (medians[best] / 1e9), peak) if largest and medians[best] > 0 else 0.0
    # without a weight's size, the duration halfway between the ends (speed:'s K1..K2 central)
    central = max(high * rate / peak, 1.0) if rate else 2 * high / (1 + high)
    how = (f"the decode's longest GEMM ({medians[best] / 1e3:,.1f} µs median) read as the largest weight matrix "
           f"({largest / 1e6:,.1f} MB): {rate / 1e12:,.2f} TB/s, {rate / peak:.0%} of the peak" if rate else
           "no weight's size known: the duration halfway between the ends")
    return per_call, high, min(central, high), how


def _decode_edits(c: StepContext, f: Finding) -> list[str]:
    """The decode's GEMMs (inside the `decode` ranges: a generate() call's steps after its prefill)
    streaming the weights at the floor the rule computes: the best end; the other end no change;
    central: every GEMM at the rate the decode's best-streaming GEMM reaches (decode_floor)."""
    found = decode_floor(c, f)
    if found is None or found[1] <= 1:
        return []
    _, high, central, _ = found
    return [f"speed:gemm@decode=1..{_factor(central)}..{_factor(high)}"]


def _launch_edits(c: StepContext, f: Finding) -> list[str]:
    """The step's GPU work as CUDA graphs, the per-launch CPU cost gone: in a training step (a backward range, the
    export's or inferred), each of forward / backward / optimizer one graph (what torch.compile(mode=
    "reduce-overhead") or torch.cuda.graphs capture: the model's and the optimizer's launches), the loop's own host
    work between them left as it ran (a graph replays launches, not the Python that waits on the next batch: a
    loader with too few workers held 52 ms of a 70 ms step there, which graphing the whole step took away); else
    (an inference loop: a token's forward and its sampling graphed together) the step as one graph."""
    if not len(c.phase("backward")):
        return ["graph"]
    return [f"graph:{p}" for p in PHASES if len(c.phase(p))]


def _sync_edits(c: StepContext, f: Finding) -> list[str]:
    """`nosync:CALL` for each blocking call the finding names (a `.item()` is a cudaStreamSynchronize)."""
    calls = sorted({api_display_name(str(r["call"])) for r in f.rows if r.get("call")})
    return [f"nosync:{n}" for n in calls]


def _optimizer_edits(c: StepContext, f: Finding) -> list[str]:
    """A fused optimizer: one launch for its many kernels (`graph:optimizer`, the per-launch CPU cost
    gone) whose GPU work runs at the memory roof (`speed:*@optimizer=K`, K its kernels' busy time over
    its bytes at the roof, the rule's floor)."""
    opt = c.phase("optimizer")
    busy = float(c.model.busy_ns[opt].sum()) / c.n if len(opt) else 0.0
    floor = f.evidence.get("memory_roof_ns_per_step")
    out = ["graph:optimizer"]
    if floor and busy > floor:
        out.append(f"speed:*@optimizer={busy / floor:.4g}")
    return out


def _range_glob(name: str) -> str:
    """A range's name as the RANGE of a `fuse:` edit: its glob characters taken literally, and a `,`
    or `@` (the edit's own separators: an inferred stage is "later blocks, head and loss") matched by
    `?`; as it was, the Lightning ResNet's chains made a fix its own parser refused ("bad edit")."""
    return "".join("?" if ch in ",@" else ch for ch in _glob_escape(name))


def _chain_edits(c: StepContext, f: Finding) -> list[str]:
    """`fuse:` the chains the rule found, one edit per range they ran in (their innermost; a chain in
    the step itself, the step): the kernel names its chains there are made of, with the rule's
    fewest kernels in a row and longest kernel."""
    from nsight_tui.parsers.analyses.findings.context import range_path
    from nsight_tui.parsers.analyses.findings.fusion import elementwise_chains

    t = c.trace
    codes = t.ops["name"].to_numpy()
    names: dict[str, list[int]] = {}  # range -> kernel names, in the order first met
    for p, rid in elementwise_chains(c):
        leaf = range_path(c.model, rid).rsplit("/", 1)[-1]
        mine = names.setdefault("step" if leaf == "step_N" else _range_glob(leaf), [])
        mine += [k for k in dict.fromkeys(codes[p].tolist()) if k not in mine]
    # a `+` in a name is a plus sign, not the edit's separator
    limits = f"{threshold('chain_min_kernels'):g}+,<{threshold('chain_kernel_max_ns') / 1e3:g}us"
    return [f"fuse:{'+'.join(_name_glob(t.op_names, k).replace('+', '[+]') for k in ks)}@{where},{limits}"
            for where, ks in names.items()]


# Each rule whose fix the replay can express, and the edits that are that fix; every other rule is in
# NO_EDIT with the reason (a test holds the two to all the rules).
EDITS = {
    "launch-bound": _launch_edits,
    "host-bound-gap": lambda c, f: [f"nohost:{threshold('host_gap_min_ns') / 1e6:g}ms"],  # the pauses it names
    "sync-stall": _sync_edits,
    "sync-memcpy": lambda c, f: ["nosync:cudaMemcpy*"],
    # the copies from pinned memory, non_blocking: the staging out of the step, the copy at a pinned rate
    "pageable-memcpy": lambda c, f: ["pin"],
    "unfused-optimizer": _optimizer_edits,
    "fp32-gemm-without-tensor-cores": _fp32_gemm_edits,
    # channels_last: cuDNN no longer turns the tensors round, so the transposes the rule counts (the
    # layout family inside the steps) are gone with their launch calls (a launch-bound conv net pays
    # for them on the CPU)
    "channels-last-layout": lambda c, f: ["drop:layout@step"],
    # each attention written out as one fused kernel: its passes over the scores gone with their
    # launches and the framework's work that made them, the GEMMs standing for the fused kernel's
    "unfused-attention": lambda c, f: ["attention"],
    # each chain one fused kernel: its launches but one gone, its time one pass (fused.py's range)
    "elementwise-chain": _chain_edits,
    # the kernel at a better occupancy: between no change and ncu's own estimate (its upper bound)
    "occupancy-limited": _occupancy_edits,
    # the GEMMs on the tensor cores their names promise: between no change and the path's peak ratio
    "tensor-cores-idle": _tensor_edits,
    # the decode's GEMMs streaming the weights: between no change and the HBM floor
    "memory-bound-decode": _decode_edits,
    # the straggler without its own pauses and other kernels (replay.straggler; its pace: the low end)
    "straggler": lambda c, f: ["straggler"],
}


def _occupancy_range(c: StepContext, f: Finding) -> str:
    bound = ncu_speedup_bound(c, f)
    if bound is None:
        return ""
    k, busiest = bound
    pct = f.evidence["ncu_estimated_speedup_pct"]
    cap = (f", capped at {k:.3g}x by its busiest unit at {busiest:.0f}% of its peak (ncu's Speed Of Light: no "
           "occupancy runs the same work faster than that unit's peak)" if busiest is not None and k < 1 / (1 - pct / 100)
           else "")
    return (f"the range: no change .. ncu's estimate {1 / (1 - pct / 100):.3g}x ({pct:.1f}% of the kernel's time saved, "
            f"an upper bound){cap}; central: the duration halfway between, as nothing in the capture says where "
            "between them the kernel lands")


def _tensor_range(c: StepContext, f: Finding) -> str:
    path = f.evidence.get("named_path")
    return (f"the range: no change (the GEMMs already run on the tensor cores, as their names say, and the samples "
            f"missed them) .. the {path}/fp32 peak ratio, the central: the GEMMs on the {path} path at "
            f"{TF32_SHARE_OF_PEAK[1]:.3g} of its peak ratio, the fp32 rule's own central; the capture measures none of "
            "them on the tensor cores")


def _fp32_range(c: StepContext, f: Finding) -> str:
    return (f"the range: the GEMMs at {TF32_SHARE_OF_PEAK[0]:.3g} of the tf32/fp32 peak ratio (the least the "
            "committed TF32 twins' GEMMs reached: GPT-2 small to large, H100 and H200) .. the peak ratio itself; "
            f"central {TF32_SHARE_OF_PEAK[1]:.3g} of it (their median)")


def _decode_range(c: StepContext, f: Finding) -> str:
    found = decode_floor(c, f)
    if found is None:
        return ""
    _, high, central, how = found
    return (f"the range: no change .. {high:.3g}x (the decode's GEMMs at the weights' floor, the best end); central "
            f"{central:.3g}x: every GEMM at the rate {how}")


# Where a fix's replay rests on an assumption of its own: what its range is, in words (the basis)
RANGE_BASIS = {"occupancy-limited": _occupancy_range, "tensor-cores-idle": _tensor_range,
               "memory-bound-decode": _decode_range}
# Said by `whatif fix:ID` only: the finding's own basis names the edit, whose factors are the range
# (the fp32 finding's detail stays whole on an 80x24 screen)
FIX_RANGE_BASIS = {"fp32-gemm-without-tensor-cores": _fp32_range}


def range_basis(c: StepContext | None, f: Finding) -> str:
    """What the range of `f`'s fix stands on, in words ("" where its edits carry no range of the rule's
    own, or there are no steps): for `whatif fix:ID`, which says it beside the edit's assumption."""
    said = RANGE_BASIS.get(f.id) or FIX_RANGE_BASIS.get(f.id)
    return said(c, f) if c is not None and said is not None else ""


def edits_of(c: StepContext, f: Finding) -> list[str]:
    """The replay edits that are this finding's fix, in the edit language (parsers.replay.edits);
    [] where the replay has none (NO_EDIT says why)."""
    edit = EDITS.get(f.id)
    return edit(c, f) if edit else []


def _replayed(trace: Trace, edits: list[str]):
    try:
        return saving(trace, edits), ""
    except EditError as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - a capture the replay cannot hold must not cost the report: the estimate stands, the basis says why
        return None, f"the replay failed: {type(e).__name__}: {e}"


def replay_findings(c: StepContext, found: list[Finding], run: bool = True) -> list[Finding]:
    """Each finding names its edits; with `run`, each with an edit takes its replayed saving (the
    rule's estimate kept beside it)."""
    for f in found:
        f.estimate_ms_per_step = f.saving_ms_per_step if f.saving_alone_ms_per_step is None else f.saving_alone_ms_per_step
        f.edits = edits_of(c, f)
        if not run:
            continue
        f.estimate_basis = f.basis
        if not f.edits:
            why = NO_EDIT.get(f.id, "its edit has nothing to act on in this capture" if f.id in EDITS else "no edit named")
            f.basis += f" (not replayed: {why})"
            f.not_replayed = why
            continue
        s, why = _replayed(c.trace, f.edits)
        if s is None:
            f.basis += f" (not replayed: {why})"
            f.not_replayed = why
            continue
        f.saving_ms_per_step = s.saving_ns / 1e6
        f.saving_alone_ms_per_step = f.saving_ms_per_step
        f.replay_low_ms_per_step = (s.baseline_step_ns - s.high_ns) / 1e6
        f.replay_high_ms_per_step = (s.baseline_step_ns - s.low_ns) / 1e6
        f.overlaps, f.capped_by_cpu_wait = [], False
        f.basis = (f"replayed: the step period without − with `{edit_words(f.id, f.edits)}` (medians over the steps); "
                   f"the rule's estimate {f.estimate_ms_per_step:.2f}")
        if f.id in RANGE_BASIS:
            f.basis += f"; {RANGE_BASIS[f.id](c, f)}"
        f.replayed = True
    return found


def combined(trace: Trace, found: list[Finding], step_ms: float | None = None) -> tuple[float, str] | None:
    """All fixes together: one replay with every replayed finding's edits, plus the estimates of
    the findings the replay cannot express, those at most the step the replay leaves (`step_ms`: the
    measured step; ms per step, and how); None where none was replayed."""
    replayed = [f for f in found if f.replayed]
    edits = [e for f in replayed for e in f.edits]
    if not edits:
        return None
    if len(replayed) == 1:  # that finding's own replay is the one with every edit
        saved_ms = replayed[0].saving_ms_per_step
    else:
        s, _ = _replayed(trace, edits)
        if s is None:
            return None
        saved_ms = s.saving_ns / 1e6
    rest = [f for f in found if not f.replayed]
    # an estimate of host time outside CUDA (slow steps that differ in nothing the export records) is the
    # pauses a `nohost` edit in the replay already takes (a data loader's wait, every other step): not added
    taken = [f for f in rest if f.evidence.get("host_only") and any(e.startswith("nohost") for e in edits)]
    rest = [f for f in rest if f not in taken]
    extra = sum(f.saving_ms_per_step for f in rest)
    how = (f"one replay with {' '.join(edit_words(f.id, f.edits) for f in replayed)}"
           + (f", plus the estimates of {', '.join(f.id for f in rest)}" if rest else "")
           + (f"; {', '.join(f.id for f in taken)} not added: host time outside CUDA, the pauses `nohost` takes"
              if taken else ""))
    left_ms = None if step_ms is None else max(0.0, step_ms - saved_ms)
    if left_ms is not None and extra > left_ms:  # estimates made on the whole step, applied to what is left of it
        extra = left_ms
        how += f" (those capped at the {left_ms:.3f} ms/step the replay leaves)"
    return saved_ms + extra, how
