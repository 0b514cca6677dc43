"""Theoretical occupancy (parsers/kernels/occupancy.py) against an independent computation:
NVIDIA's CUDA Occupancy Calculator written out here by hand, one configuration at a time in
plain Python, over every kernel row the SQL of each export gives, and hand-checked cases."""
from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from nsight_tui.parsers.kernels import occupancy
from nsight_tui.parsers.read.load import load_trace
from conftest import SAMPLES, SHARED
from helpers.xz_samples import plain

KB = 1024
# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability":
# cc -> (max warps/SM, max blocks/SM, shared memory/SM, max shared/block, allocation unit,
# driver-reserved shared memory per block)
GUIDE = {
    (7, 0): (64, 32, 96 * KB, 96 * KB, 256, 0),
    (7, 5): (32, 16, 64 * KB, 64 * KB, 256, 0),
    (8, 0): (64, 32, 164 * KB, 163 * KB, 128, KB),
    (8, 6): (48, 16, 100 * KB, 99 * KB, 128, KB),
    (8, 9): (48, 24, 100 * KB, 99 * KB, 128, KB),
    (9, 0): (64, 32, 228 * KB, 227 * KB, 128, KB),
    (10, 0): (64, 32, 228 * KB, 227 * KB, 128, KB),
}


def calculator(cc, regs, smem, threads, carveout=0, warps_sm=None, blocks_sm=None, smem_sm=None):
    """The Occupancy Calculator for one launch: (occupancy %, limiter, active blocks/SM)."""
    g_warps, g_blocks, g_smem_sm, _, unit, reserved = GUIDE[cc]
    max_warps = warps_sm or g_warps
    max_blocks = blocks_sm or g_blocks
    smem_sm = smem_sm or g_smem_sm
    warps_per_block = math.ceil(threads / 32)
    limits = {"warps": max_warps // warps_per_block, "blocks": max_blocks}
    # 65,536 registers in 4 sub-partitions, allocated per warp in units of 256
    if regs:
        per_warp = math.ceil(regs * 32 / 256) * 256
        limits["registers"] = (65536 // 4 // per_warp) * 4 // warps_per_block
    per_block = math.ceil((smem + reserved) / unit) * unit
    config = carveout if carveout and carveout >= per_block else smem_sm
    if per_block:
        limits["shared memory"] = config // per_block
    blocks = min(limits.values())
    limiter = next(k for k in ("warps", "blocks", "registers", "shared memory") if limits.get(k) == blocks)
    return 100.0 * blocks * warps_per_block / max_warps, limiter, blocks


# -- hand-checked cases ---------------------------------------------------------------------
def one(cc, regs, smem_static, smem_dynamic, threads, carveout=0):
    lim = occupancy.limits_for(cc)
    r = occupancy.blocks_per_sm(lim, [regs], [smem_static], [smem_dynamic], [threads], [carveout])
    return float(r["occupancy"][0]) * 100, occupancy.LIMITERS[int(r["limiter"][0])], int(r["blocks"][0])


def test_256_threads_32_registers_is_full_limited_by_warps():
    assert one((9, 0), 32, 0, 0, 256) == (100.0, "warps", 8)


def test_128_registers_256_threads_registers_limit_a_quarter():
    # 128 x 32 = 4,096 registers a warp: 4 warps per 16,384-register sub-partition, 16 warps/SM
    assert one((9, 0), 128, 0, 0, 256) == (25.0, "registers", 2)


def test_100kb_shared_memory_two_blocks_on_hopper():
    # (100 KB + 1 KB reserved) per block against 228 KB: 2 blocks (4 warps each: 8 of 64)
    assert one((9, 0), 32, 0, 100 * KB, 128) == (12.5, "shared memory", 2)
    assert one((9, 0), 32, 48 * KB, 52 * KB, 128) == (12.5, "shared memory", 2)


def test_block_limit_on_small_blocks():
    # 32 threads: 1 warp a block; 32 blocks/SM hold 32 of Hopper's 64 warps
    assert one((9, 0), 16, 0, 0, 32) == (50.0, "blocks", 32)
    # GA10x: 16 blocks of 2 warps, 32 of 48 warps
    assert one((8, 6), 16, 0, 0, 64) == pytest.approx((200 / 3, "blocks", 16))


def test_carveout_in_force_limits_shared_memory():
    # 8 KB a block (+1 KB reserved, 9 KB) with the driver's 32 KB carve-out: 3 blocks, not 25
    assert one((9, 0), 32, 8 * KB, 0, 128, carveout=32 * KB) == (18.75, "shared memory", 3)
    assert one((9, 0), 32, 8 * KB, 0, 128)[2] == 16  # the SM's maximum: 25 by shared, 16 by warps


def test_volta_has_no_reserved_shared_memory_and_256_byte_units():
    # 48 KB exactly: 2 blocks in 96 KB (no driver reservation before CC 8.0)
    assert one((7, 0), 32, 48 * KB, 0, 128) == (12.5, "shared memory", 2)
    assert one((7, 0), 32, 100, 0, 1024)[2] == 2  # 100 B round up to 256; 2 by warps


def test_unknown_compute_capability_has_no_limits():
    assert occupancy.limits_for((3, 5)) is None


def test_export_figures_override_the_table():
    lim = occupancy.limits_for((9, 0), {"maxWarpsPerSm": 48, "maxShmemPerSm": 100 * KB})
    assert (lim.max_warps, lim.smem_per_sm, lim.max_blocks) == (48, 100 * KB, 32)


@pytest.mark.parametrize("cc", list(GUIDE))
def test_module_table_matches_the_guide(cc):
    lim = occupancy.limits_for(cc)
    assert (lim.max_warps, lim.max_blocks, lim.smem_per_sm, lim.smem_per_block, lim.smem_unit,
            lim.reserved_smem) == GUIDE[cc]
    assert (lim.regs_per_sm, lim.reg_unit, lim.max_regs_per_thread) == (65536, 256, 255)


# -- every kernel configuration of real exports --------------------------------------------
def _traces() -> list[Path]:
    found = [SAMPLES / "small_ctx128.sqlite", plain(SAMPLES / "small_ctx128_fused.sqlite.xz")]
    for name in ("mock.sqlite", "medium_ctx1024_fwd_flash.sqlite", "xl_ctx256.sqlite", "small_ctx128_graphs.sqlite",
                 "older/nsys2022.2_vectoradd.sqlite"):
        found.append(SHARED / name)
    return found


def _sql_expected(path: Path) -> dict:
    """(kernel name, regs, static, dynamic, threads, carve-out) -> (launches, occupancy %,
    limiter), from SQL over the export and the calculator above."""
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        gpu = con.execute("SELECT id, computeMajor, computeMinor, maxWarpsPerSm, maxBlocksPerSm, maxShmemPerSm "
                          "FROM TARGET_INFO_GPU").fetchall()
        by_dev = {d: ((ma, mi), w, b, s) for d, ma, mi, w, b, s in gpu}
        rows = con.execute(
            "SELECT s.value, k.deviceId, registersPerThread, staticSharedMemory, dynamicSharedMemory,"
            " blockX*blockY*blockZ, coalesce(sharedMemoryExecuted, 0), count(*)"
            " FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
            " GROUP BY 1, 2, 3, 4, 5, 6, 7").fetchall()
    finally:
        con.close()
    out = {}
    for name, dev, regs, st, dy, threads, carve, n in rows:
        cc, w, b, s = by_dev[dev]
        pct, limiter, _ = calculator(cc, regs, st + dy, threads, carve, w, b, s)
        out[(name, regs, st, dy, threads, carve)] = (n, round(pct, 9), limiter)
    return out


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.stem)
def test_every_configuration_matches_the_calculator(path):
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is only beside the team's checkouts)")
    expected = _sql_expected(path)
    trace = load_trace(path)
    got = occupancy.name_configs(trace)
    mine = {(r.kernel, r.regs, r.smem_static, r.smem_dynamic, r.threads, r.smem_config):
            (int(r.launches), round(float(r.occupancy_pct), 9), r.limiter) for r in got.itertuples()}
    assert mine == expected
    assert sum(v[0] for v in mine.values()) == len(trace.ops[trace.ops["kind"] == 0])


def test_a_trace_without_gpu_description_says_why():
    path = SHARED / "h100_2gpu_1s.sqlite"
    if not path.exists():
        pytest.skip(f"{path} not present")
    occ = occupancy.trace_occupancy(load_trace(path))
    assert occ.empty and "TARGET_INFO_GPU" in occ.note
    assert (occ.op_config == -1).all()


def test_per_name_takes_the_configuration_with_most_time():
    trace = load_trace(SAMPLES / "small_ctx128.sqlite")
    per = occupancy.name_configs(trace)
    names = occupancy.by_kernel_name(trace)
    assert set(names.index) == set(per["kernel"])
    for name, row in names.iterrows():
        mine = per[per["kernel"] == name]
        top = mine.sort_values("total_ns", ascending=False, kind="stable").iloc[0]
        assert row["occupancy_pct"] == top["occupancy_pct"] and row["configs"] == len(mine)
