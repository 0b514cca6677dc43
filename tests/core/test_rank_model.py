"""One rank's range model (parsers.ranks.rank_model): the ranges of its process only, every GPU
figure over its GPU's ops only. Expected: the kernels of each (process, device) by SQL, and the
plain fact that the ranks split the ops of the full model (per range, the ranks' figures add up
to the full model's)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import SAMPLES, shared_trace
from helpers.xz_samples import plain
from test_ranks import _kernels_by_rank

from nsight_tui.parsers.analyses import ranks
from nsight_tui.parsers.read.ids import KERNEL, pid_of
from nsight_tui.parsers.read.load import load_trace
from nsight_tui.parsers.model.ranges import range_model


@pytest.mark.parametrize("name", ["sample:small_ctx128_ddp2", "mfu_2gpu_before", "h100_2gpu_1s"])
@pytest.mark.parametrize("mode", ["process", "nsys"])
def test_rank_models_split_the_full_model(name, mode):
    where, _, stem = name.rpartition(":")
    path = plain(SAMPLES / f"{stem}.sqlite.xz") if where else shared_trace(name)
    trace = load_trace(path)
    full = range_model(trace, mode)
    found = ranks.find_ranks(trace)
    assert len(found) == 2
    kernels = _kernels_by_rank(path)
    counts = np.zeros(full.n, dtype=np.int64)
    times = np.zeros(full.n, dtype=np.int64)
    for rank in found:
        m = ranks.rank_model(full, rank)
        assert ranks.rank_model(full, rank) is m  # kept with the trace
        # its tree: its process's threads only
        assert {g.gpid for g in m.thread_groups} == {rank.gpid}
        ks = kernels[(rank.pid, rank.device)]
        scope = m.scope_op_positions()
        kinds = trace.ops["kind"].to_numpy()[scope]
        dur = (trace.ops["end"] - trace.ops["start"]).to_numpy()[scope]
        assert int((kinds == KERNEL).sum()) == len(ks) and int(dur[kinds == KERNEL].sum()) == sum(e - s for s, e, _ in ks)
        # a range of another process holds nothing of this rank
        other = pid_of(full.r_gtid) != rank.pid
        assert not m.kernel_count[other].any() and not m.busy_ns[other].any()
        counts += m.kernel_count
        times += m.kernel_ns
    np.testing.assert_array_equal(counts, full.kernel_count)
    np.testing.assert_array_equal(times, full.kernel_ns)
    # the full model is left as it was: every process's tree, every op in scope
    assert full.scope_gpids is None and {g.gpid for g in full.thread_groups} >= {r.gpid for r in found}
    assert len(full.scope_op_positions()) == len(trace.ops)
