"""What changed between two runs, and why the step got faster or slower.

Two traces are aligned per iteration: a range under `step_N` is compared as its mean per
steady-state step (total over the steps / number of steps on that side), a range under
`warmup_N` per warmup iteration, anything outside an iteration per capture. So a 3-step and
a 10-step capture compare, and every number says which basis it is on.

- `diff_runs(a, b)` merges the two aggregated range trees (parsers.model) by name path, each
  node with A, B and Δ of CPU time, GPU busy, kernel time and kernel count; one-sided ranges
  are `removed` (A only) or `added` (B only). Where one run's ranges are inferred from its kernel
  sequence (parsers.model.inferred) and the other's annotated, a range under another
  parent on each side is matched by role (`role_matches`, `RangeDiff.role_match`); per-layer
  ranges named otherwise on each side (`block_N`, `transformer.h.N`, the inferred `layer_N`) are
  matched by index where analyses.layer_match finds them the same layers (`layer_roles`), else
  left apart with the reason (`RangeDiff.role_unmatched`).
- `kernel_diff(node)` (any merged range) and `RunDiff.kernels` (the step, or the whole
  capture): GPU ops matched by name, ops on one side only listed as removed/added, and the
  same summed by family (parsers.families); sorted by |Δ time|.
- `RunDiff.step`: the step's Δ by family and by phase (forward/backward/optimizer, the rest of
  the step apart) as a waterfall table, and the largest contributors.

Plain numbers only (ns, counts); nothing is normalised (a different batch or ctx is shown in
the config table, never scaled away). Text is made in nsight_tui.render.diff.

Over ~600 lines on purpose: the tree merge, the kernel/family tables and the step's waterfall
share one alignment (per-step bases, `_StepSide`) that a split would spread over modules; the
matching by role and by layer already lives apart (role_match, layer_match).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from nsight_tui.parsers.read import conventions
from nsight_tui.parsers.kernels import families
from nsight_tui.parsers.analyses.role_match import (LAYERS, PLACED, SAME_LEVEL, combined, layer_roles,
                                                    role_matches, text_of)
from nsight_tui.parsers.model.steps import steps_of
from nsight_tui.parsers.model.inferred import inference
from nsight_tui.parsers.read.ids import KERNEL, OP_KINDS, PID_MASK
from nsight_tui.parsers.kernels.kernel_names import table_name
from nsight_tui.parsers.read.load import Trace
from nsight_tui.parsers.model.ranges import RangeModel, RangeNode, ThreadGroup, display_name, path_key, range_model

STEP, WARMUP, PHASES = conventions.STEP_RANGE, conventions.WARMUP_RANGE, conventions.PHASES
BOTH, REMOVED, ADDED = "both", "removed", "added"  # present on both sides / A only / B only
STEP_BASIS, WARMUP_BASIS, CAPTURE_BASIS = "step", "warmup", "capture"
OUTSIDE_PHASES = "rest of step"  # step work in no forward/backward/optimizer range
TOP_CONTRIBUTORS = 5


@dataclass(frozen=True)
class Delta:
    """One figure on both sides, per iteration of its basis; None where the side lacks it."""

    a: float | None
    b: float | None

    @property
    def delta(self) -> float:
        """B − A (a missing side counts as 0: an added range's Δ is all of B)."""
        return (self.b or 0) - (self.a or 0)

    @property
    def delta_pct(self) -> float | None:
        """Δ as a percentage of A; None when A is absent or zero."""
        return 100.0 * self.delta / self.a if self.a else None


def _per(total: int | None, iterations: int) -> float | None:
    return None if total is None else total / iterations


def _status(a, b) -> str:
    return BOTH if a is not None and b is not None else REMOVED if a is not None else ADDED


# -- the merged range tree -------------------------------------------------------------------
@dataclass(eq=False)
class RangeDiff:
    """One name path in A and/or B. Figures are per iteration of `basis`: A's totals over
    `a_iterations`, B's over `b_iterations` (the step counts for a range under step_N)."""

    name: str  # the path's last component, numbers folded (`step_N`)
    path: tuple[str, ...]
    depth: int
    status: str  # both | removed | added
    basis: str  # step | warmup | capture
    a_iterations: int
    b_iterations: int
    a_instances: int
    b_instances: int
    cpu_ns: Delta
    busy_ns: Delta
    kernel_ns: Delta
    kernels: Delta  # kernel count
    is_iteration: bool = False  # a step_N / warmup_N range itself
    # matched by role, not by place: the other side's path below the common parent, where it differs
    # (an inferred layer's `computing_softmax` against the annotated `scaled_dot_product_attention/computing_softmax`)
    role_match: str = ""
    # a per-layer series the other side has under another name, left unmatched: why (layer_match)
    role_unmatched: str = ""
    layers_by_index: int = 0  # matched as per-layer ranges named otherwise: how many layers, by index
    children: list[RangeDiff] = field(default_factory=list, repr=False)
    parent: RangeDiff | None = field(default=None, repr=False)
    a_node: RangeNode | None = field(default=None, repr=False)
    b_node: RangeNode | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return self.name

    @property
    def path_text(self) -> str:
        return "/".join(self.path)

    def walk(self):
        """This node and everything under it, pre-order."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass(eq=False)
class ThreadDiff:
    """A thread's ranges in both runs: threads are matched by process order and role (the
    main annotated thread, else the thread name), since pids and tids differ between runs."""

    label: str
    status: str
    a_label: str | None
    b_label: str | None
    roots: list[RangeDiff] = field(default_factory=list)


# -- kernel and family level ------------------------------------------------------------------
@dataclass(frozen=True)
class KernelDiff:
    name: str  # the demangled name (memcpy/memset: nsys's op label)
    short: str  # a name people tell apart in a table
    kind: str  # kernel | memcpy | memset
    family: str  # parsers.families key
    status: str
    time_ns: Delta  # summed duration per iteration
    count: Delta  # launches per iteration


@dataclass(frozen=True)
class FamilyDiff:
    family: str
    label: str
    time_ns: Delta
    count: Delta
    removed: int  # op names of this family only in A
    added: int  # only in B


@dataclass
class ScopeDiff:
    """The GPU ops of one range (or the step, or the whole capture) on both sides."""

    scope: str  # what was compared, in words
    basis: str
    a_iterations: int
    b_iterations: int
    time_ns: Delta  # all ops of the scope, per iteration
    count: Delta
    kernels: list[KernelDiff]  # sorted by |Δ time|, largest first
    families: list[FamilyDiff]  # the same, by family

    @property
    def removed(self) -> list[KernelDiff]:
        return [k for k in self.kernels if k.status == REMOVED]

    @property
    def added(self) -> list[KernelDiff]:
        return [k for k in self.kernels if k.status == ADDED]


# -- the why summary -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PhaseDiff:
    phase: str  # forward | backward | optimizer | rest of step
    op_ns: Delta  # GPU op time (kernels + memcpy/memset) per step
    family_ns: dict[str, Delta]  # the same by family key


@dataclass
class StepDiff:
    """The steady-state step in both runs, and where its Δ comes from."""

    a_steps: int
    b_steps: int
    a_warmup: int
    b_warmup: int
    step_ns: Delta  # the step period (model.steps.StepTimes: start to the next step's start), mean
    busy_ns: Delta  # GPU busy (union of the step's ops), per step
    op_ns: Delta  # GPU op time (kernels + memcpy/memset), per step
    kernel_ns: Delta
    kernels: Delta
    warmup_ns: Delta | None  # mean warmup iteration, when both have warmup_N
    phases: list[PhaseDiff]  # forward, backward, optimizer, rest of step: op time adds up to op_ns
    families: list[tuple[str, Delta]]  # the step's op time by family, sorted by |Δ|
    top_kernels: list[KernelDiff]
    top_ranges: list[RangeDiff]  # ranges inside the step with the largest |Δ kernel time|
    step_cpu_ns: Delta | None = None  # the step's NVTX span (the CPU's clock), mean
    # GEMM kernel time per step by math path (fp32 CUDA cores, tf32 / bf16 / fp8 tensor cores)
    gemm_paths: dict[str, Delta] = field(default_factory=dict)

    def math_path_change(self) -> tuple[list[str], list[str]] | None:
        """(paths A's GEMMs mostly ran on, B's) where the main one differs, else None."""
        def main(side: str) -> str | None:
            got = {p: getattr(d, side) or 0 for p, d in self.gemm_paths.items()}
            return max(got, key=lambda p: got[p]) if got and max(got.values()) > 0 else None
        a, b = main("a"), main("b")
        if a is None or b is None or a == b:
            return None
        return [a], [b]

    @property
    def slower_pct(self) -> float | None:
        """How much slower B's step is than A's, in percent (negative: faster)."""
        return self.step_ns.delta_pct


@dataclass(frozen=True)
class ConfigRow:
    key: str
    a: object
    b: object

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass
class RunDiff:
    a_path: str
    b_path: str
    attribution: str
    basis: str  # how the runs were aligned, in words
    config: list[ConfigRow]
    notes: list[str]
    threads: list[ThreadDiff]
    common_ranges: int  # name paths present in both
    step: StepDiff | None
    kernels: ScopeDiff  # the step's ops when both runs have steps, else the whole captures

    def ranges(self):
        """Every merged range, pre-order."""
        for t in self.threads:
            for root in t.roots:
                yield from root.walk()

    def find(self, path: str | tuple[str, ...]) -> RangeDiff | None:
        """The first range whose name path is `path` (`step_N/forward`), on any thread."""
        want = tuple(path.split("/")) if isinstance(path, str) else tuple(path)
        return next((r for r in self.ranges() if r.path == want), None)


# -- building ---------------------------------------------------------------------------------
def _iteration_kind(node: RangeNode) -> str | None:
    text = text_of(node)
    return STEP_BASIS if STEP.match(text) else WARMUP_BASIS if WARMUP.match(text) else None


def _keyed(nodes: list[RangeNode]) -> dict[str, RangeNode]:
    """Siblings by match key: the range text with trailing numbers folded (`step_3` ->
    `step_N`, the rule that aggregates within a run), without its NVTX domain, so `forward` in
    domain `trainer` matches a plain `forward`; siblings that then collide keep their domain.
    Several nodes under one key (an iteration found in two places) are summed into one."""
    plain = [path_key(text_of(n)) for n in nodes]
    clash = {k for k in plain if plain.count(k) > 1} if len(set(plain)) < len(plain) else set()
    groups: dict[str, list[RangeNode]] = {}
    for node, key in zip(nodes, plain):
        if key in clash and path_key(display_name(node.name)) != key:
            key = path_key(display_name(node.name))
        groups.setdefault(key, []).append(node)
    return {key: members[0] if len(members) == 1 else combined(members) for key, members in groups.items()}


def _side(node: RangeNode | None, iterations: int) -> tuple:
    if node is None:
        return None, None, None, None, 0
    return (_per(node.cpu_ns, iterations), _per(node.busy_ns, iterations), _per(node.kernel_ns, iterations),
            _per(node.kernels, iterations), node.instances)


def _pair(key: str, a: RangeNode | None, b: RangeNode | None, prefix: tuple[str, ...], depth: int,
          basis: str, a_div: int, b_div: int, cut: set[int], iteration: bool = False,
          adopt: dict | None = None, role_match: str = "", role_unmatched: str = "",
          layers_by_index: int = 0) -> RangeDiff:
    a_cpu, a_busy, a_kern, a_count, a_inst = _side(a, a_div)
    b_cpu, b_busy, b_kern, b_count, b_inst = _side(b, b_div)
    path = (*prefix, key)
    node = RangeDiff(
        name=key, path=path, depth=depth, status=_status(a, b), basis=basis,
        a_iterations=a_div, b_iterations=b_div, a_instances=a_inst, b_instances=b_inst,
        cpu_ns=Delta(a_cpu, b_cpu), busy_ns=Delta(a_busy, b_busy), kernel_ns=Delta(a_kern, b_kern),
        kernels=Delta(a_count, b_count), is_iteration=iteration, a_node=a, b_node=b, role_match=role_match,
        role_unmatched=role_unmatched, layers_by_index=layers_by_index,
    )
    kids = lambda n: [c for c in n.children if id(c) not in cut] if n is not None else []
    node.children = _merge(kids(a), kids(b), path, depth + 1, basis, a_div, b_div, cut, adopt)
    for child in node.children:
        child.parent = node
    return node


def _merge(a_nodes: list[RangeNode], b_nodes: list[RangeNode], prefix: tuple[str, ...], depth: int,
           basis: str, a_div: int, b_div: int, cut: set[int],
           adopt: dict | None = None) -> list[RangeDiff]:
    """Sibling lists of A and B merged by match key: A's order, then B's own. `adopt` (under an
    inferred range one side only has): {"side": that side, "nodes": {key: (the other side's range,
    its path)}}, the cousins role_matches found for its children."""
    a_by, b_by = _keyed(a_nodes), _keyed(b_nodes)
    a_by, b_by, roles, unmatched = layer_roles(a_by, b_by, cut)
    placed = roles.pop(PLACED, [])  # series from inside a one-sided range, met here (cut from their place)
    for side, key, node in placed:
        (a_by if side == "a" else b_by)[key] = node
    roles.update(role_matches(a_by, b_by, cut))
    a_by, b_by = ({k: n for k, n in by.items() if id(n) not in cut} for by in (a_by, b_by))
    for side, key, node in placed:
        (a_by if side == "a" else b_by)[key] = node
    for side, found in roles.pop(SAME_LEVEL, []):  # cousins of one-sided inferred ranges themselves
        other = a_by if side == "b" else b_by
        for key, (node, path) in found.items():
            other[key] = node
            roles[key] = path
    if adopt:  # under an inferred range one side only has: the other side's cousins of the same name
        side, found = adopt["side"], adopt["nodes"]
        mine, other = (b_by, a_by) if side == "b" else (a_by, b_by)
        for key in mine:
            if key not in other and key in found:
                other[key] = found[key][0]
                roles[key] = found[key][1]
    out = []
    for key in list(a_by) + [k for k in b_by if k not in a_by]:
        a, b = a_by.get(key), b_by.get(key)
        under = roles.get(("children", key))
        out.append(_pair(key, a, b, prefix, depth, basis, a_div, b_div, cut, adopt=under,
                         role_match=roles.get(key, ""), role_unmatched=unmatched.get(key, ""),
                         layers_by_index=roles.get((LAYERS, key), 0)))
    return out


def _anchors(roots: list[RangeNode]) -> list[RangeNode]:
    """The iteration ranges of a thread, pre-order: `step_N` / `warmup_N` nodes with no range of
    the same kind below them (a domain copy nesting the same iteration, or a warmup range left
    open around the whole run, yields to the iterations inside it)."""
    out: list[RangeNode] = []

    def visit(node: RangeNode) -> set[str]:
        below: set[str] = set()
        for child in node.children:
            below |= visit(child)
        kind = _iteration_kind(node)
        if kind is not None and kind not in below:
            out.append(node)
        return below | ({kind} if kind else set())

    for root in roots:
        visit(root)
    return sorted(out, key=lambda n: (n.start, n.depth))


def _thread_ranges(a: ThreadGroup | None, b: ThreadGroup | None) -> list[RangeDiff]:
    """Iterations first, aligned wherever they sit in each tree (so `whole_run/step_N` meets a
    top-level `step_N`), each per iteration; then the ranges outside them, per capture."""
    a_it, b_it = (_anchors(a.roots) if a else []), (_anchors(b.roots) if b else [])
    cut = {id(n) for n in a_it + b_it}
    a_by, b_by = _keyed(a_it), _keyed(b_it)
    out = []
    for key in list(a_by) + [k for k in b_by if k not in a_by]:
        an, bn = a_by.get(key), b_by.get(key)
        either = an if an is not None else bn
        basis = (_iteration_kind(either) if either is not None else None) or STEP_BASIS  # anchors are iterations
        out.append(_pair(key, an, bn, (), 0, basis, an.instances if an else 1, bn.instances if bn else 1, cut,
                         iteration=True))
    rest = lambda g: [n for n in g.roots if id(n) not in cut] if g else []
    out += _merge(rest(a), rest(b), (), 0, CAPTURE_BASIS, 1, 1, cut)
    return out


def _range_keys(group: ThreadGroup) -> set[str]:
    """Every range name (numbers folded, no domain) in a thread's tree."""
    out, stack = set(), list(group.roots)
    while stack:
        node = stack.pop()
        out.add(path_key(text_of(node)))
        stack.extend(node.children)
    return out


def _by_process(model: RangeModel) -> list[list[ThreadGroup]]:
    """Thread groups per process, processes in the model's order (by process id)."""
    out: dict[int, list[ThreadGroup]] = {}
    for g in model.aggregated_groups:
        out.setdefault(g.gpid, []).append(g)
    return list(out.values())


def _thread_name(model: RangeModel, g: ThreadGroup) -> str:
    return model.trace.threads.get(g.gtid) or ("main thread" if g.is_main else "unnamed thread")


def _pair_threads(a: list[ThreadGroup], b: list[ThreadGroup], a_model: RangeModel,
                  b_model: RangeModel) -> list[tuple[ThreadGroup | None, ThreadGroup | None]]:
    """Threads of one process in A and B, paired by the range names they share (pids, tids and
    which thread launches the most work differ between runs); then by thread name; the rest
    stand alone. One thread each: they are the pair."""
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])]
    a_keys, b_keys = [_range_keys(g) for g in a], [_range_keys(g) for g in b]
    scores = sorted(((len(ka & kb), -i, -j) for i, ka in enumerate(a_keys) for j, kb in enumerate(b_keys)),
                    reverse=True)
    pair_of: dict[int, int] = {}
    for score, i, j in scores:
        if score > 0 and -i not in pair_of and -j not in pair_of.values():
            pair_of[-i] = -j
    for i, g in enumerate(a):
        if i not in pair_of:
            same = next((k for k, h in enumerate(b) if k not in pair_of.values()
                         and _thread_name(b_model, h) == _thread_name(a_model, g)), None)
            if same is not None:
                pair_of[i] = same
    out: list[tuple[ThreadGroup | None, ThreadGroup | None]] = [(g, b[pair_of[i]] if i in pair_of else None)
                                                                for i, g in enumerate(a)]
    return out + [(None, h) for j, h in enumerate(b) if j not in pair_of.values()]


def _threads(a_model: RangeModel, b_model: RangeModel) -> list[ThreadDiff]:
    """Processes matched by order (rank 0 with rank 0), their threads by content."""
    a_procs, b_procs = _by_process(a_model), _by_process(b_model)
    several = max(len(a_procs), len(b_procs)) > 1
    out = []
    for p in range(max(len(a_procs), len(b_procs))):
        pairs = _pair_threads(a_procs[p] if p < len(a_procs) else [], b_procs[p] if p < len(b_procs) else [],
                              a_model, b_model)
        seen: dict[str, int] = {}
        for a, b in pairs:
            name = _thread_name(a_model, a) if a is not None else _thread_name(b_model, b) if b is not None else ""
            seen[name] = seen.get(name, 0) + 1
            label = name + (f" #{seen[name]}" if seen[name] > 1 else "")
            label = f"process {p + 1} · {label}" if several else label
            out.append(ThreadDiff(label, _status(a, b), a.label if a else None, b.label if b else None,
                                  _thread_ranges(a, b)))
    return out


# -- ops by name --------------------------------------------------------------------------------
def _durations(trace: Trace, positions: np.ndarray) -> np.ndarray:
    ops = trace.ops
    return (ops["end"].to_numpy() - ops["start"].to_numpy())[positions]


def _int_sums(keys: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Integer sums per key. bincount adds in float64, exact while a sum stays below 2^53 ns
    (104 days of GPU time), and is many times faster than np.add.at over 10^6 ops."""
    return np.rint(np.bincount(keys, weights=values, minlength=n)).astype(np.int64)


def _op_totals(model: RangeModel, positions: np.ndarray) -> dict[str, tuple[int, int, int]]:
    """name -> (total ns, launches, kind) over the ops at `positions`."""
    trace = model.trace
    pos = np.asarray(positions, dtype=np.int64)
    if len(pos) == 0:
        return {}
    codes = trace.ops["name"].to_numpy()[pos].astype(np.int64)
    n = len(trace.op_names)
    total = _int_sums(codes, _durations(trace, pos), n)
    count = np.bincount(codes, minlength=n)
    kind = np.zeros(n, dtype=np.int64)
    kind[codes] = trace.ops["kind"].to_numpy()[pos]
    return {trace.op_names[c]: (int(total[c]), int(count[c]), int(kind[c])) for c in np.flatnonzero(count)}


Side = tuple  # (RangeModel, op positions, iterations) of one run, or None where it has no such scope


def scope_diff(a: Side | None, b: Side | None, scope: str, basis: str) -> ScopeDiff:
    """The ops of A and B matched by name, and summed by family, per iteration."""
    a_tot = _op_totals(a[0], a[1]) if a else {}
    b_tot = _op_totals(b[0], b[1]) if b else {}
    a_div, b_div = (a[2] if a else 1), (b[2] if b else 1)

    def pair(ta, tb, i):
        return Delta(_per(ta[i], a_div) if ta else None, _per(tb[i], b_div) if tb else None)

    rows = []
    for name in list(a_tot) + [n for n in b_tot if n not in a_tot]:
        ka, kb = a_tot.get(name), b_tot.get(name)
        kind = ka[2] if ka is not None else kb[2] if kb is not None else 0
        rows.append(KernelDiff(name=name, short=table_name(name) or name, kind=OP_KINDS[kind],
                               family=families.classify(name), status=_status(ka, kb),
                               time_ns=pair(ka, kb, 0), count=pair(ka, kb, 1)))
    rows.sort(key=lambda k: (-abs(k.time_ns.delta), k.name))

    def summed(totals: dict, names) -> tuple[int, int] | None:
        return (sum(totals[n][0] for n in names if n in totals), sum(totals[n][1] for n in names if n in totals))

    fams = []
    for f in families.FAMILIES:
        members = [k for k in rows if k.family == f.key]
        if members:
            names = [k.name for k in members]
            fa, fb = (summed(a_tot, names) if a else None), (summed(b_tot, names) if b else None)
            fams.append(FamilyDiff(f.key, f.label, pair(fa, fb, 0), pair(fa, fb, 1),
                                   removed=sum(k.status == REMOVED for k in members),
                                   added=sum(k.status == ADDED for k in members)))
    fams.sort(key=lambda f: -abs(f.time_ns.delta))
    ta, tb = (summed(a_tot, a_tot) if a else None), (summed(b_tot, b_tot) if b else None)
    return ScopeDiff(scope, basis, a_div, b_div, pair(ta, tb, 0), pair(ta, tb, 1), rows, fams)


def kernel_diff(node: RangeDiff) -> ScopeDiff:
    """The ops of one merged range on both sides, per iteration of its basis."""
    a = (node.a_node.model, node.a_node.op_positions(), node.a_iterations) if node.a_node is not None else None
    b = (node.b_node.model, node.b_node.op_positions(), node.b_iterations) if node.b_node is not None else None
    return scope_diff(a, b, node.path_text, node.basis)


def _whole(model: RangeModel) -> Side:
    return model, np.arange(len(model.trace.ops), dtype=np.int64), 1


# -- the step ---------------------------------------------------------------------------------
PHASE_ROWS = (*PHASES, OUTSIDE_PHASES)


@dataclass
class _StepSide:
    """One run's steady state: its step ranges, warmup ranges, the step's ops, and per op the
    phase row it counts for and its family (indices into PHASE_ROWS and FAMILY_KEYS)."""

    model: RangeModel
    iters: np.ndarray
    warmup: np.ndarray
    ops: np.ndarray
    phase: np.ndarray
    family: np.ndarray

    @property
    def steps(self) -> int:
        return len(self.iters)

    @property
    def processes(self) -> int:
        """Processes the steps come from (each rank of a data-parallel run steps on its own)."""
        return len(np.unique(self.model.r_gtid[self.iters] & PID_MASK))

    def steps_text(self, side: str) -> str:
        n, p = self.steps, self.processes
        return f"{side}'s {n} steps" + (f" ({n // p if n % p == 0 else '~' + str(n // p)} in each of {p} processes, "
                                         "each rank's step counted once)" if p > 1 else "")

    def table(self) -> np.ndarray:
        """GPU op time per (phase row, family): integer ns, all steps together."""
        nf = len(families.FAMILY_KEYS)
        keys = self.phase * nf + self.family
        dur = _durations(self.model.trace, self.ops)
        return _int_sums(keys, dur, len(PHASE_ROWS) * nf).reshape(len(PHASE_ROWS), nf)

    def total(self, values: np.ndarray) -> int:
        return int(values[self.iters].sum())


def _step_side(model: RangeModel) -> _StepSide:
    steps = steps_of(model)
    iters = steps.steady
    ops = model.ops_of(iters) if len(iters) else np.zeros(0, dtype=np.int64)
    rest = len(PHASES)
    phase = np.full(len(ops), rest, dtype=np.int64)
    for i, name in enumerate(PHASES):
        ids = steps.phase(name)
        if len(ids):
            # the first phase that holds an op claims it, so the rows add up to the step
            phase[(phase == rest) & np.isin(ops, model.ops_of(ids))] = i
    key_index = {k: i for i, k in enumerate(families.FAMILY_KEYS)}
    name_family = np.array([key_index[k] for k in families.name_families(model.trace)], dtype=np.int64)
    family = name_family[model.trace.ops["name"].to_numpy()[ops]] if len(ops) else np.zeros(0, dtype=np.int64)
    return _StepSide(model, iters, steps.warmup, ops, phase, family)


def _gemm_paths(side: _StepSide) -> dict[str, float]:
    """GEMM kernel time per step by math path (analyses.roofline.kernel_math_path)."""
    from nsight_tui.parsers.analyses.roofline import kernel_math_path

    t = side.model.trace
    gemm = families.FAMILY_KEYS.index("gemm")
    ops = side.ops[side.family == gemm]
    ops = ops[t.ops["kind"].to_numpy()[ops] == KERNEL]
    dur = _durations(t, ops)
    codes = t.ops["name"].to_numpy()[ops]
    config = dict(t.meta().config)
    out: dict[str, float] = {}
    for code in np.unique(codes):
        path = kernel_math_path(t.op_names[int(code)], config)
        out[path] = out.get(path, 0.0) + float(dur[codes == code].sum()) / max(side.steps, 1)
    return out


def _mean_period(side: _StepSide) -> float:
    """The mean step period (each step's start to the next iteration's), summed over every
    process's steps and divided by their count as the other per-step figures are."""
    return float(steps_of(side.model).times(side.iters).period_ns.sum()) / side.steps if side.steps else 0.0


def _step(a: _StepSide, b: _StepSide, kernels: ScopeDiff, threads: list[ThreadDiff], inferred: bool = False) -> StepDiff:
    """`inferred`: one run's ranges are inferred, so a range one side only has is structure the other
    did not name (an inferred layer, an annotated attention core), not work added or removed: the
    largest contributors among the ranges are those both runs have."""
    na, nb = a.steps, b.steps
    ta, tb = a.table(), b.table()

    def metric(values) -> Delta:
        return Delta(a.total(values(a.model)) / na, b.total(values(b.model)) / nb)

    phases = [PhaseDiff(name, Delta(int(ta[i].sum()) / na, int(tb[i].sum()) / nb),
                        {f: Delta(int(ta[i, j]) / na, int(tb[i, j]) / nb) for j, f in enumerate(families.FAMILY_KEYS)})
              for i, name in enumerate(PHASE_ROWS)]
    by_family = [(f, Delta(int(ta[:, j].sum()) / na, int(tb[:, j].sum()) / nb))
                 for j, f in enumerate(families.FAMILY_KEYS) if ta[:, j].any() or tb[:, j].any()]
    by_family.sort(key=lambda kv: -abs(kv[1].delta))
    warm = None
    if len(a.warmup) and len(b.warmup):
        warm = Delta(int(a.model.cpu_ns[a.warmup].sum()) / len(a.warmup),
                     int(b.model.cpu_ns[b.warmup].sum()) / len(b.warmup))
    inside = [r for t in threads for root in t.roots for r in root.walk()
              if r.basis == STEP_BASIS and not r.is_iteration and (r.status == BOTH or not inferred)]
    top_ranges = sorted(inside, key=lambda r: -abs(r.kernel_ns.delta))[:TOP_CONTRIBUTORS]
    return StepDiff(
        a_steps=na, b_steps=nb, a_warmup=len(a.warmup), b_warmup=len(b.warmup),
        step_ns=Delta(_mean_period(a), _mean_period(b)), step_cpu_ns=metric(lambda m: m.cpu_ns),
        busy_ns=metric(lambda m: m.busy_ns),
        op_ns=Delta(int(ta.sum()) / na, int(tb.sum()) / nb),
        kernel_ns=metric(lambda m: m.kernel_ns), kernels=metric(lambda m: m.kernel_count),
        warmup_ns=warm, phases=phases, families=by_family,
        gemm_paths={p: Delta(ga.get(p, 0.0), gb.get(p, 0.0)) for ga, gb in [(_gemm_paths(a), _gemm_paths(b))]
                    for p in sorted(set(ga) | set(gb))},
        top_kernels=kernels.kernels[:TOP_CONTRIBUTORS], top_ranges=top_ranges,
    )


# -- the whole diff ----------------------------------------------------------------------------
def _config(a: Trace, b: Trace, a_side: _StepSide, b_side: _StepSide) -> list[ConfigRow]:
    ca, cb = a.meta().config, b.meta().config
    rows = [ConfigRow(k, ca.get(k), cb.get(k)) for k in list(ca) + [k for k in cb if k not in ca]]
    gpus = lambda t: ", ".join(t.info.gpus) or None
    rows += [
        ConfigRow("file: GPU", gpus(a), gpus(b)),
        ConfigRow("file: nsys", a.info.nsys_version or None, b.info.nsys_version or None),
        ConfigRow("file: processes", a.info.processes, b.info.processes),
        ConfigRow("file: kernels", a.info.kernels, b.info.kernels),
        ConfigRow("file: NVTX ranges", a.info.ranges, b.info.ranges),
        ConfigRow("file: steps (step_N)", len(a_side.iters), len(b_side.iters)),
        ConfigRow("file: warmup iterations", len(a_side.warmup), len(b_side.warmup)),
    ]
    return rows


def diff_runs(a: Trace, b: Trace, attribution: str = "process") -> RunDiff:
    """A against B (B − A everywhere), both under the same attribution mode."""
    a_model, b_model = range_model(a, attribution), range_model(b, attribution)
    a_side, b_side = _step_side(a_model), _step_side(b_model)
    threads = _threads(a_model, b_model)
    common = sum(1 for t in threads for root in t.roots for r in root.walk() if r.status == BOTH)
    notes = []
    both_steps = len(a_side.iters) > 0 and len(b_side.iters) > 0
    if both_steps:
        basis = (f"per steady-state step: ranges under step_N are means over {a_side.steps_text('A')} and "
                 f"{b_side.steps_text('B')}; under warmup_N per warmup iteration (apart); elsewhere per capture")
        kernels = scope_diff((a_model, a_side.ops, a_side.steps), (b_model, b_side.ops, b_side.steps),
                             "step_N (steady-state step)", STEP_BASIS)
    else:
        basis = "per capture (totals): " + (
            "neither run has step_N ranges" if not len(a_side.iters) and not len(b_side.iters)
            else f"{'A' if not len(a_side.iters) else 'B'} has no step_N ranges, so steps cannot be aligned")
        kernels = scope_diff(_whole(a_model), _whole(b_model), "whole capture", CAPTURE_BASIS)
    scope = "covers the steady-state step" if both_steps else "compares the whole captures"
    inferred = []
    for side, t in (("A", a), ("B", b)):
        found = inference(t)
        if found.found:
            inferred.append(side)
            notes.append(f"{side}'s ranges (inferred:step_N, inferred:forward, ...) are inferred, not annotated: "
                         f"{found.basis}; their CPU figures are their kernels' launch span (first launch to the "
                         "next range's), not an NVTX span")
    merged = [r for t in threads for root in t.roots for r in root.walk()]
    by_role = sum(1 for r in merged if r.role_match and not r.layers_by_index)
    layered = [r for r in merged if r.layers_by_index]
    if layered:
        notes.append(f"{len(layered)} per-layer range{'s' if len(layered) > 1 else ''} named otherwise on each side "
                     "matched by role and index (the N-th layer with the N-th of the same iteration and phase, "
                     "checked by their kernel sequences): " + "; ".join(f"{r.path_text} = {r.role_match}"
                                                                        for r in layered[:3])
                     + ("; ..." if len(layered) > 3 else ""))
    said = {r.path[:-1] for r in merged if r.role_unmatched and r.status == REMOVED}
    for r in merged:  # A's series says it; B's where A's did not (each of a pair carries its reason)
        if r.role_unmatched and (r.status == REMOVED or r.path[:-1] not in said):
            notes.append(f"{r.path_text} ({'A' if r.status == REMOVED else 'B'} only) left unmatched: "
                         f"{r.role_unmatched}")
    if by_role:
        notes.append(f"{by_role} range{'s' if by_role > 1 else ''} matched by role across an inferred and an "
                     "annotated run: the same name under another parent (shown with the other side's path)")
    if not a.info.has_nvtx and not b.info.has_nvtx and not inference(a).found and not inference(b).found:
        notes.append(f"no NVTX ranges in either run: the kernel and family diff {scope}")
    elif common == 0:
        notes.append(f"no range names in common: every range shows as removed/added; the kernel and family "
                     f"diff {scope}")
    config = _config(a, b, a_side, b_side)
    differing = [r.key for r in config if not r.same and not r.key.startswith("file:")]
    if differing:
        notes.append(f"configurations differ ({', '.join(differing)}): figures are as measured, not normalised")
    if a.info.gpus != b.info.gpus:
        notes.append("the runs are on different GPUs")
    whole = [side for side, t in (("A", a), ("B", b)) if t.info.graphs_whole]
    by_node = [side for side, t in (("A", a), ("B", b)) if t.info.graphs_by_node]
    if len(whole) == 1 and by_node and by_node != whole:
        notes.append(f"{whole[0]} traced its CUDA graphs whole and {by_node[0]} node by node: {whole[0]}'s graph "
                     f"launches are one op each where {by_node[0]}'s list their kernels, and node-by-node tracing "
                     "slows each launch call: the kernel and family diff and the step's change are not like for like")
    for side, t in (("A", a), ("B", b)):
        notes += [f"{side}: {n}" for n in t.info.notes]
    step = _step(a_side, b_side, kernels, threads, bool(inferred)) if both_steps else None
    return RunDiff(str(a.given), str(b.given), attribution, basis, config, notes, threads, common, step, kernels)

