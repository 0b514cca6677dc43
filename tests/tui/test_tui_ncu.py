"""`nsight-tui FILE --ncu R.ncu-rep`: the roofline view (`r`) plots Nsight Compute's measured points
beside the estimated ones. Expected figures come from NVIDIA's reading of the report (the ncu_report
module's dump made on the GPU machine), not from the view's model."""
from __future__ import annotations

import asyncio

import pytest

from conftest import make_app
from helpers.ncu_pair import BF16_EXPORT_XZ, BF16_STEM, EXPORT_XZ, STEM, oracle_kernels, report_xz
from helpers.xz_samples import plain


@pytest.fixture(scope="module")
def pair():
    """The report and its export, decompressed once (xz_samples' per-user cache)."""
    return plain(report_xz()), plain(EXPORT_XZ)


def oracle_step_point() -> tuple[float, float, float]:
    """step_1's measured TFLOP/s, FLOP/byte and GB from ncu's own metrics: the roofline section's
    achieved work ((FADD + FMUL + 2 FFMA) per cycle x SM frequency) x duration, summed."""
    flops = seconds = dram = 0.0
    for o in oracle_kernels():
        m = {n: v[0] for n, v in o["metrics"].items()}
        rate = (m["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"]
                + m["smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"]
                + m["derived__smsp__sass_thread_inst_executed_op_ffma_pred_on_x2"]) * m["smsp__cycles_elapsed.avg.per_second"]
        flops += rate * m["gpu__time_duration.sum"] * 1e-9
        seconds += m["gpu__time_duration.sum"] * 1e-9
        dram += m["dram__bytes.sum"]
    return flops / seconds / 1e12, flops / dram, dram / 1e9


def test_roofline_shows_measured_points_beside_the_estimate(tui, pair):
    report, export = pair
    tflops, ai, gb = oracle_step_point()

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(130, 40), app=app) as ui:
            await ui.press("r")
            await ui.settle()
            screen = ui.app.screen
            assert type(screen).__name__ == "RooflineScreen" and screen.data is not None
            records = [screen.table.record(i) for i in range(len(screen.table))]
            measured = {r["label"]: r for r in records if r["source"] == "ncu"}
            estimated = [r for r in records if r["source"] != "ncu"]
            assert estimated and "step_1/backward · measured (ncu)" in measured
            step = measured["step_1 · measured (ncu)"]
            assert step["tflops"] == pytest.approx(tflops, rel=1e-9)
            assert step["ai"] == pytest.approx(ai, rel=1e-9)
            assert step["gb"] == pytest.approx(gb, rel=1e-9)
            text = ui.text()
            assert "measured (ncu counters, ncu time)" in text and "FLOPs, nsys time" in text
            assert "points from Nsight Compute's counters" in text

    asyncio.run(body())


def test_ncu_needs_one_export_and_a_readable_report(tmp_path, pair, capsys):
    from nsight_tui.cli import main

    report, export = pair
    for argv, message in (([str(export), str(export), "--ncu", str(report)], "--ncu goes with one export"),
                          ([str(export), "--ncu", str(tmp_path / "absent.ncu-rep")], "no such file")):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and message in err and err.count("\n") == 1, err


def test_view_6_lists_ncu_figures_per_name_within_a_range(tui, pair):
    report, export = pair
    oracle = oracle_kernels()

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(160, 40), app=app) as ui:
            await ui.press("6")
            await ui.settle()
            screen = ui.app.screen
            assert type(screen).__name__ == "NcuScreen" and screen.view is not None
            frame = screen.view.frame
            # one row per (range, name); the instances add up to every profiled kernel
            assert int(frame["instances"].sum()) == len(oracle)
            text = ui.flat_text()
            assert "264 of 264 profiled kernels joined" in text and "Occ th/ach" in text
            top = frame.iloc[0]
            members = [o for o in oracle if o["name"] == top["name"]]
            assert members  # its mean is over the instances in its range only: at most these
            assert min(o["metrics"]["gpu__time_duration.sum"][0] for o in members) / 1e3 <= top["ncu_us"] <= \
                max(o["metrics"]["gpu__time_duration.sum"][0] for o in members) / 1e3

    asyncio.run(body())


def test_view_6_without_a_report_says_how_to_get_one(tui, pair):
    _, export = pair

    async def body():
        async with tui(export, size=(120, 30)) as ui:
            await ui.press("6")
            await ui.settle()
            assert type(ui.app.screen).__name__ != "NcuScreen"
            assert "no Nsight Compute report: start with --ncu FILE.ncu-rep" in ui.flat_text()  # the status line

    asyncio.run(body())


def test_a_bad_report_costs_the_measured_points_not_the_roofline(tui, pair, tmp_path):
    _, export = pair
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(b"\x00not a report")

    async def body():
        app = make_app(export)
        app.ncu_file = str(bad)
        async with tui(export, size=(120, 40), app=app) as ui:
            await ui.press("r")
            await ui.settle()
            data = ui.app.screen.data
            assert data is not None and len(data.frame) and not (data.frame["source"] == "ncu").any()
            assert "no measured points" in data.source_line and "no profiled kernel" in data.source_line

    asyncio.run(body())


def test_findings_view_ranks_the_occupancy_limited_kernels_with_ncu(tui, pair):
    """`F` with --ncu: the occupancy-limited kernel names (ncu's theoretical occupancy < 50%, from
    NVIDIA's reading) are rows of the findings table, each titled with its limiter; without --ncu
    there are none."""
    report, export = pair
    low = {o["name"] for o in oracle_kernels() if o["metrics"]["sm__maximum_warps_per_active_cycle_pct"][0] < 50}

    async def rows(with_ncu: bool) -> list:
        app = make_app(export)
        if with_ncu:
            app.ncu_file = str(report)
        async with tui(export, size=(130, 40), app=app) as ui:
            await ui.press("F")
            await ui.until(lambda: type(ui.screen).__name__ == "FindingsScreen" and ui.screen.view is not None,
                           "the findings shown")
            await ui.settle()
            return [f for f in ui.screen.view.findings if f.id == "occupancy-limited"]

    found = asyncio.run(rows(True))
    assert len(found) >= 5 and all("limited by registers" in f.title for f in found)
    assert all(any(n in f.evidence["kernel"] for n in low) for f in found)
    assert asyncio.run(rows(False)) == []


@pytest.fixture(scope="module")
def bf16_pair():
    return plain(report_xz(BF16_STEM)), plain(BF16_EXPORT_XZ)


def test_roofline_measured_points_count_the_tensor_cores(tui, bf16_pair):
    """On the bf16 pair, `r`'s measured step_1 point holds the tensor cores' FLOPs: NVIDIA's reader's
    bf16 ops-path counter plus the CUDA cores' (FADD + FMUL + 2 FFMA per cycle x SM Hz x duration),
    over the summed durations; plotted against the bf16 roof and saying how much was tensor work."""
    import ncu_report

    report, export = bf16_pair
    rng = ncu_report.load_report(str(report)).range_by_idx(0)
    flops = tensor = seconds = 0.0
    for i in range(rng.num_actions()):
        m = rng.action_by_idx(i).metric_by_name
        sass = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
        dur = m("gpu__time_duration.sum").value() * 1e-9
        cuda = (m(sass.format("fadd")).value() + m(sass.format("fmul")).value()
                + 2 * m(sass.format("ffma")).value()) * m("smsp__cycles_elapsed.avg.per_second").value() * dur
        ops = m("sm__ops_path_tensor_src_bf16_dst_fp32.sum").value()
        flops, tensor, seconds = flops + cuda + ops, tensor + ops, seconds + dur

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(130, 40), app=app) as ui:
            await ui.press("r")
            await ui.settle()
            records = [ui.app.screen.table.record(i) for i in range(len(ui.app.screen.table))]
            step = next(r for r in records if r["label"] == "step_1 · measured (ncu)")
            assert step["tflops"] == pytest.approx(flops / seconds / 1e12, rel=1e-9)
            assert step["math_path"] == "bf16"
            assert f"tensor cores {tensor / flops:.0%} of FLOPs" in step["verdict"]

    asyncio.run(body())


def test_view_6_shows_the_tensor_cores_measured_rate(tui, bf16_pair):
    """View 6 on the bf16 pair: each GEMM name's tensor column is its mean measured TFLOP/s (NVIDIA's
    reader: the bf16 ops-path counter over gpu__time_duration), precision and % of the datasheet peak."""
    import ncu_report

    report, export = bf16_pair
    rng = ncu_report.load_report(str(report)).range_by_idx(0)
    rates = {}
    for i in range(rng.num_actions()):
        act = rng.action_by_idx(i)
        ops = act.metric_by_name("sm__ops_path_tensor_src_bf16_dst_fp32.sum").value()
        if ops:
            name = act.name(ncu_report.IAction.NameBase_DEMANGLED)
            rates.setdefault(name, []).append(ops / (act.metric_by_name("gpu__time_duration.sum").value() * 1e-9))

    async def body():
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(200, 40), app=app) as ui:
            await ui.press("6")
            await ui.settle()
            frame = ui.app.screen.view.frame
            gemms = frame[frame["tensor"] != ""]
            assert set(gemms["name"]) == set(rates)
            for _, row in gemms.iterrows():
                assert row["tensor"].startswith(f"{sum(rates[row['name']]) / len(rates[row['name']]) / 1e12:.1f} bf16 ")
            assert (frame["tensor"] == "").sum() == len(frame) - len(gemms) > 0
            assert "tensor: measured TFLOP/s" in ui.flat_text()

    asyncio.run(body())


def test_the_ncu_view_warns_above_the_table_when_the_report_is_another_workloads(tui):
    """`6` with --ncu of the bf16 pair's report (H200, another dtype) over the fp32 export (H100):
    the warning over the table; the export's own report: none (tests/cli/test_ncu_mismatch.py has
    the truth of which pairs differ, from NVIDIA's reader and SQL)."""
    export = plain(EXPORT_XZ)
    reports = {stem: plain(report_xz(stem)) for stem in (STEM, BF16_STEM)}

    async def shown(report):
        app = make_app(export)
        app.ncu_file = str(report)
        async with tui(export, size=(140, 36), app=app) as ui:
            await ui.press("6")
            await ui.until(lambda: getattr(ui.app.screen, "view", None) is not None, "the ncu view built")
            await ui.settle()
            return ui.flat_text()

    crossed = asyncio.run(shown(reports[BF16_STEM]))
    assert "warning: profiled on NVIDIA H200, the export ran on NVIDIA H100" in crossed
    assert "of the profiled kernels follow the export's launch order" in crossed
    assert "warning:" not in asyncio.run(shown(reports[STEM]))
