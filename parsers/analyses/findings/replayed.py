"""Findings' savings from the replay (parsers.replay): every finding names the edit that is its fix
(`edits_of`), its saving is the replayed step without that edit minus with it (median over the
steps of the step period), and "all fixes together" is one more replay with every edit, so no time
is counted twice. The rule's own estimate stays beside it (`estimate_ms_per_step`); where the
replay cannot express a fix, or cannot run, the estimate stays the saving and the basis says so."""
from __future__ import annotations

import re

import numpy as np

from nsight_tui.parsers.analyses.findings.context import StepContext
from nsight_tui.parsers.analyses.findings.result import Finding
from nsight_tui.parsers.analyses.findings.thresholds import threshold
from nsight_tui.parsers.kernels.families import name_families
from nsight_tui.parsers.read.ids import api_display_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.replay.edits import EditError
from nsight_tui.parsers.replay.predict import saving

# The fixes the replay has no edit for, and why (their savings stay the rules' estimates).
NO_EDIT = {
    "occupancy-limited": "the kernel's duration at a better occupancy is not in this capture",
    "tensor-cores-idle": "the math mode in force is not known from the capture",
    "exposed-communication": "the overlap a bucket change buys is not in this capture",
    "warmup-in-window": "a warm-up step is outside the steady state the replay re-times",
    # the weights' read at the HBM peak is a bound on the kernels, not a duration measured anywhere
    "memory-bound-decode": "kernels streaming the weights at the HBM peak is a floor, not a measured duration",
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


def _fp32_gemm_edits(c: StepContext, f: Finding) -> list[str]:
    """`speed:` on each fp32 GEMM kernel at the peak ratio the rule used (tf32 or bf16 over fp32)."""
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
    if names and len(fp32) == len(names):
        return [f"speed:gemm={fast / slow:.6g}"]
    return [f"speed:{_glob_escape(n)}={fast / slow:.6g}" for n in fp32]


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


def _attention_edits(c: StepContext, f: Finding) -> list[str]:
    """A fused attention: the forward attention's non-GEMM kernels (the scale, mask, softmax passes over
    the scores and the copies around them, what the rule counts, by name: a copy of the mask from the
    host is not a kernel the rule counts) dropped with their launches, and their
    backward counterparts: a kernel name the forward uses only inside the attention, met as many
    times in the backward (softmax_warp_forward's backward is softmax_warp_backward); the GEMMs stay as
    measured, standing for the fused kernel's matmuls."""
    from nsight_tui.parsers.read.ids import KERNEL

    t = c.trace
    kind, codes_all = t.ops["kind"].to_numpy(), t.ops["name"].to_numpy()

    def counts(phase: str) -> np.ndarray:
        pos = c.model.ops_of(c.phase(phase))
        return np.bincount(codes_all[pos[kind[pos] == KERNEL]], minlength=len(t.op_names))

    attn, fwd, bwd = counts("scaled_dot_product_attention"), counts("forward"), counts("backward")
    fam = name_families(t)
    mine = [k for k in np.flatnonzero(attn).tolist() if fam[k] != "gemm"]
    out = [f"drop:{_name_glob(t.op_names, k)}@scaled_dot_product_attention" for k in mine]
    for k in mine:
        if fwd[k] != attn[k]:  # used outside the attention too: its backward uses are not the attention's alone
            continue
        name = t.op_names[k]
        # the same kernel, or its template's backward twin (its arguments differ: matched up to them)
        twin = name.split(">(")[0].replace("forward", "backward") + ">(" if "forward" in name else None
        for j in np.flatnonzero(bwd).tolist():
            other = t.op_names[j]
            if (other == name or (twin and other.startswith(twin))) and bwd[j] == attn[k]:
                out.append(f"drop:{_name_glob(t.op_names, j)}@backward")
    return out


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
        mine = names.setdefault("step" if leaf == "step_N" else _glob_escape(leaf), [])
        mine += [k for k in dict.fromkeys(codes[p].tolist()) if k not in mine]
    # a `+` in a name is a plus sign, not the edit's separator
    limits = f"{threshold('chain_min_kernels'):g}+,<{threshold('chain_kernel_max_ns') / 1e3:g}us"
    return [f"fuse:{'+'.join(_name_glob(t.op_names, k).replace('+', '[+]') for k in ks)}@{where},{limits}"
            for where, ks in names.items()]


# Each rule whose fix the replay can express, and the edits that are that fix; every other rule is in
# NO_EDIT with the reason (a test holds the two to all the rules).
EDITS = {
    "launch-bound": lambda c, f: ["graph"],  # the step as one CUDA graph: the per-launch CPU cost gone
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
    "unfused-attention": _attention_edits,
    # each chain one fused kernel: its launches but one gone, its time one pass (fused.py's range)
    "elementwise-chain": _chain_edits,
}


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
            f.basis += f" (not replayed: {NO_EDIT.get(f.id, 'no edit named')})"
            continue
        s, why = _replayed(c.trace, f.edits)
        if s is None:
            f.basis += f" (not replayed: {why})"
            continue
        f.saving_ms_per_step = s.saving_ns / 1e6
        f.saving_alone_ms_per_step = f.saving_ms_per_step
        f.replay_low_ms_per_step = (s.baseline_step_ns - s.high_ns) / 1e6
        f.replay_high_ms_per_step = (s.baseline_step_ns - s.low_ns) / 1e6
        f.overlaps, f.capped_by_cpu_wait = [], False
        f.basis = (f"replayed: the step period without − with `{' '.join(f.edits)}` (medians over the steps); "
                   f"the rule's estimate {f.estimate_ms_per_step:.2f}")
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
    extra = sum(f.saving_ms_per_step for f in rest)
    how = f"one replay with {' '.join(edits)}" + (f", plus the estimates of {', '.join(f.id for f in rest)}" if rest else "")
    left_ms = None if step_ms is None else max(0.0, step_ms - saved_ms)
    if left_ms is not None and extra > left_ms:  # estimates made on the whole step, applied to what is left of it
        extra = left_ms
        how += f" (those capped at the {left_ms:.3f} ms/step the replay leaves)"
    return saved_ms + extra, how
