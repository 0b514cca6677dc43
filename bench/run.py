"""The scale benchmark: one command, one machine, every figure issues 6 and 11 ask for.

    python bench/run.py [--base PATH] [--scales 1,2,4,8] [--out bench/RESULTS.md]

For each scale (1 = the base trace, ~600k kernels; s = the base replicated s times in time by
bench/scale_trace.py, kept in bench/out/ and reused while newer than the base) it measures:

  floors        the columns any attribution needs, read by Python's sqlite3 (tuples) and by the
                fastest native reader into Arrow/numpy (bench/floor.py)
  stats         wall time and peak RSS of `nsight-tui stats FILE -f csv -o DIR/x` (all reports)
  first screen  a real terminal (tmux 200x40) from launch to the pane showing "loaded in"
  keys          keystroke latency: headless Pilot (bench/tui_latency.py) along the drill-down
                path, and the real terminal's key -> pane change for j/k
  report, whatif, findings (only when named in --only): `report -f json`, `whatif -f json` (the
                unchanged replay, its critical path and idle split) and the findings alone (their
                replayed savings included), each a second open (the cache filled first)

Parts that cannot run yet (the CLI or the TUI missing or failing) show as "n/a" with the
reason; the rest still runs. Results go to stdout and to bench/RESULTS.md with machine info
and the issue's targets marked met / not met.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT_DIR = BENCH / "out"
DEFAULT_BASE = BENCH / "data" / "small_ctx128_big.sqlite"
SHARED = REPO.parent / "shared" / "traces"
TARGET_KERNELS = 600_000
LOADED_RE = re.compile(r"loaded in\s*([0-9.]+)\s*s")
EXIT_MARK = "[bench: app exited with status"

sys.path[:0] = [str(BENCH), str(REPO)]  # scale_trace beside us; parsers from this checkout
from scale_trace import ScaleError, scale_trace  # noqa: E402

from nsight_tui.render.output import write_atomic  # noqa: E402


# ---------------------------------------------------------------------------------------------
# Inputs


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def trace_counts(path: Path) -> dict:
    conn = _ro(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def count(table: str, where: str = "") -> int:
        return conn.execute(f"SELECT count(*) FROM {table} {where}").fetchone()[0] if table in tables else 0

    out = {
        "kernels": count("CUPTI_ACTIVITY_KIND_KERNEL"),
        "api": count("CUPTI_ACTIVITY_KIND_RUNTIME"),
        "nvtx_rows": count("NVTX_EVENTS"),
        "nvtx_ranges": count("NVTX_EVENTS", "WHERE eventType IN (59, 60)"),
        "bytes": path.stat().st_size,
    }
    conn.close()
    return out


def _kernel_count(path: Path) -> int:
    try:
        return trace_counts(path)["kernels"]
    except sqlite3.Error:
        return 0


def pick_base(explicit: Path | None, log) -> tuple[Path, str]:
    """The ~600k-kernel trace every scale is a multiple of, and a line saying where it came from."""
    if explicit is not None:
        if not explicit.is_file():
            raise SystemExit(f"bench: {explicit}: no such file")
        return explicit, f"{explicit} (given)"
    if DEFAULT_BASE.is_file():
        return DEFAULT_BASE, f"{DEFAULT_BASE.relative_to(REPO)} (real capture)"
    # No real big capture here: replicate a real small one up to ~600k kernels. The GPT-2
    # small threads trace is the same workload as the big capture, so it is preferred.
    candidates = sorted((REPO / "sample_traces").glob("*.sqlite")) + sorted(SHARED.glob("*.sqlite"))
    preferred = [p for p in candidates if p.stem.startswith("small_ctx128_threads")]
    ranked = preferred or sorted(candidates, key=_kernel_count, reverse=True)
    ranked = [p for p in ranked if _kernel_count(p) > 0]
    if not ranked:
        raise SystemExit("bench: no base trace: pass --base, or add bench/data/small_ctx128_big.sqlite")
    small = ranked[0]
    times = max(1, round(TARGET_KERNELS / _kernel_count(small)))
    dst = OUT_DIR / f"{small.stem}_x{times}.sqlite"
    _ensure_scaled(small, dst, times, log)
    return dst, f"{small} replicated x{times} by bench/scale_trace.py (no real ~600k capture in bench/data/)"


def _ensure_scaled(src: Path, dst: Path, times: int, log) -> None:
    if dst.is_file() and dst.stat().st_mtime >= src.stat().st_mtime:
        return
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    log(f"  making {dst.relative_to(REPO)} ({times} x {src.name}) ...")
    r = scale_trace(src, dst, times, force=True)
    log(f"  done in {r.seconds:.1f} s, {dst.stat().st_size / 1e6:,.0f} MB")


def scaled_file(base: Path, scale: int, log, max_bytes: int) -> Path | None:
    if scale == 1:
        return base
    dst = OUT_DIR / f"{base.stem}_x{scale}.sqlite"
    if not (dst.is_file() and dst.stat().st_mtime >= base.stat().st_mtime):
        estimate = base.stat().st_size * scale
        if estimate > max_bytes:
            log(f"  skipping x{scale}: would be ~{estimate / 1e9:.1f} GB (> --max-gb)")
            return None
        _ensure_scaled(base, dst, scale, log)
    return dst


def _warm_cache(path: Path) -> None:
    # Every figure is taken with the file in the page cache: the benchmark measures the tool,
    # not the disk, and the first reader would otherwise pay for everyone.
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


# ---------------------------------------------------------------------------------------------
# Child processes


@dataclass
class Child:
    rc: int | None
    seconds: float
    peak_rss: int  # bytes
    stdout: str
    stderr: str
    timed_out: bool = False
    cpu: float = 0.0  # user + system seconds (wait4's rusage)

    def error_line(self) -> str:
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        lines = [ln.strip() for ln in (self.stderr or self.stdout).splitlines() if ln.strip()]
        return f"exit {self.rc}: {lines[-1][:160] if lines else 'no output'}"


def run_child(cmd: list[str], timeout: float, env: dict | None = None) -> Child:
    """Run `cmd`, returning its wall time and its own peak RSS (wait4's rusage, not the max
    over every child this process ever had, which RUSAGE_CHILDREN would give)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Child(
            proc.returncode,
            seconds,
            usage.ru_maxrss * 1024,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
            killed.is_set(),
            usage.ru_utime + usage.ru_stime,
        )


# The tool's per-user cache (parsers/read/cache.py) lives, for the benchmark, in a folder of
# its own (never the user's ~/.cache), emptied where a figure is for a first open.
BENCH_CACHE = OUT_DIR / f"cache-{os.getpid()}"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env["NSIGHT_TUI_CACHE_DIR"] = str(BENCH_CACHE)
    env.pop("NSIGHT_TUI_NO_CACHE", None)
    return env


def clear_cache() -> None:
    shutil.rmtree(BENCH_CACHE, ignore_errors=True)


def cache_bytes() -> int:
    return sum(f.stat().st_size for f in BENCH_CACHE.rglob("*") if f.is_file()) if BENCH_CACHE.exists() else 0


NATIVE_READERS = ("adbc", "connectorx")


def measure_floor(path: Path, repeat: int, native: str | None = None) -> dict:
    best = None
    for _ in range(repeat):
        extra = ["--native", native] if native else []
        c = run_child([sys.executable, str(BENCH / "floor.py"), str(path), *extra], timeout=1200, env=_env())
        if c.rc != 0:
            return {"error": c.error_line()}
        r = json.loads(c.stdout)
        r["peak_rss_bytes"] = c.peak_rss
        # the whole floor process too: Python's start-up and the reader's imports, which a
        # tool pays before its first read (the figures above are the read alone)
        r["process_seconds"], r["process_cpu_s"] = c.seconds, c.cpu
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    return best


def measure_columnar_floor(path: Path, repeat: int) -> dict:
    """The fastest native reader installed (each measured `repeat` times, best kept)."""
    results = {reader: measure_floor(path, repeat, reader) for reader in NATIVE_READERS}
    ok = {k: v for k, v in results.items() if "seconds" in v}
    if not ok:
        return {"error": "; ".join(f"{k}: {v['error']}" for k, v in results.items())}
    best = dict(min(ok.values(), key=lambda v: v["seconds"]))
    best["all"] = {k: v.get("seconds") for k, v in results.items()}
    return best


def measure_stats(path: Path, cmd: list[str], repeat: int, timeout: float, prepare=None) -> dict:
    """`prepare()` before each run (the cache emptied, for a first open each time)."""
    best = None
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        with tempfile.TemporaryDirectory(prefix="nsight-bench-") as tmp:
            c = run_child([*cmd, "stats", str(path), "-f", "csv", "-o", f"{tmp}/x"], timeout, env=_env())
            reports = sorted(p.name for p in Path(tmp).iterdir())
        if c.rc != 0 or c.timed_out:
            return {"error": c.error_line()}
        if not reports:
            return {"error": f"exit 0 but no report file written under -o ({c.seconds:.2f} s)"}
        r = {"seconds": c.seconds, "cpu_s": c.cpu, "peak_rss_bytes": c.peak_rss, "reports": reports}
        if best is None or r["seconds"] < best["seconds"]:
            best = r
    return best


# The findings alone (their replays included), through this checkout's core.
FINDINGS_ONLY = ("import sys; from nsight_tui.parsers import Profile; "
                 "from nsight_tui.parsers.analyses.findings.rules import findings; "
                 "found = findings(Profile.open(sys.argv[1]).trace); print(len(found))")


def measure_answers(path: Path, cmd: list[str], parts: list[str], repeat: int, timeout: float) -> dict:
    """`report`, `whatif` and the findings, each best of `repeat`, on a second open (the cache
    filled by one unmeasured `report` first, so every figure reads the file alike)."""
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="nsight-bench-") as tmp:
        argv = {"report": [*cmd, "report", str(path), "-f", "json", "-o", f"{tmp}/r.json", "--force"],
                "whatif": [*cmd, "whatif", str(path), "-f", "json", "-o", f"{tmp}/w.json", "--force"],
                "findings": [sys.executable, "-c", FINDINGS_ONLY, str(path)]}
        run_child(argv["report"], timeout, env=_env())
        for part in parts:
            best = None
            for _ in range(repeat):
                c = run_child(argv[part], timeout, env=_env())
                if c.rc != 0 or c.timed_out:
                    best = {"error": c.error_line()}
                    break
                r = {"seconds": c.seconds, "cpu_s": c.cpu, "peak_rss_bytes": c.peak_rss}
                if best is None or r["seconds"] < best["seconds"]:
                    best = r
            out[part] = best
    return out


def measure_keys_headless(path: Path, app_spec: str, timeout: float) -> dict:
    c = run_child(
        [sys.executable, str(BENCH / "tui_latency.py"), str(path), "--json", "--app", app_spec,
         "--timeout", str(timeout)],
        timeout + 120, env=_env(),
    )
    last = (c.stdout.strip().splitlines() or [""])[-1]
    try:
        r = json.loads(last)
    except json.JSONDecodeError:
        return {"error": c.error_line()}
    return r


# ---------------------------------------------------------------------------------------------
# A real terminal: tmux


class Tmux:
    """A private tmux server (its own socket): never touches a session a person has open."""

    def __init__(self) -> None:
        self.sock = f"nsight-bench-{os.getpid()}"

    def __call__(self, *args: str, check: bool = True) -> str:
        r = subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, env=_env())
        if check and r.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {r.stderr.strip()}")
        return r.stdout

    def pane(self, escapes: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "bench")

    def text(self) -> str:
        """The pane as one line of words: -J joins what the terminal wrapped ("loaded" at the
        end of a 120-column line and "in 0.21s" on the next)."""
        return " ".join(self("capture-pane", "-p", "-J", "-t", "bench").split())

    def kill(self) -> None:
        socket_path = self("display-message", "-p", "#{socket_path}", check=False).strip()
        self("kill-server", check=False)
        if socket_path:  # tmux leaves the socket file behind
            Path(socket_path).unlink(missing_ok=True)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _cpu_of_tree(pid: int) -> float:
    """User + system CPU seconds used so far by `pid` and its descendants (/proc/PID/stat):
    on a shared 2-core machine, where wall time swings with other work, the steadier figure."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total / ticks


def _peak_rss_of_tree(pid: int) -> int:
    best = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        best = max(best, int(line.split()[1]) * 1024)
        except OSError:
            pass
    return best


def _rss_parts_of_tree(pid: int) -> tuple[int, int]:
    """(private, file-backed) resident bytes of the tree now (RssAnon + RssShmem, RssFile): the
    cache's memory-mapped columns are file pages the kernel can drop and share, not the
    process's own memory."""
    private = mapped = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith(("RssAnon:", "RssShmem:")):
                        private += int(line.split()[1]) * 1024
                    elif line.startswith("RssFile:"):
                        mapped += int(line.split()[1]) * 1024
        except OSError:
            pass
    return private, mapped


def measure_first_screen(path: Path, cmd: list[str], timeout: float, key_repeats: int) -> dict:
    if shutil.which("tmux") is None:
        return {"error": "tmux not installed"}
    tmux = Tmux()
    app = shlex.join([*cmd, str(path)])
    inner = f"{app}; echo; echo '{EXIT_MARK}' $?; sleep 3600"
    try:
        t0 = time.perf_counter()
        # 200 columns: the header's full form ("tree in …", "loaded in …") fits a long file name;
        # narrower, it shortens the load time to its bare figure.
        tmux("new-session", "-d", "-x", "200", "-y", "40", "-s", "bench", "-c", str(REPO), inner)
        text, tree_s = "", None
        while time.perf_counter() - t0 < timeout:
            text = tmux.text()
            if tree_s is None and ("tree in" in text or "loaded in" in text):
                tree_s = time.perf_counter() - t0  # the NVTX tree with CPU times is on screen
            if "loaded in" in text:
                break
            if EXIT_MARK in text:
                said = text.split(EXIT_MARK)[0].strip()
                return {"error": f"app exited before its first screen: {said[-160:] or '?'}"}
            time.sleep(0.02)
        else:
            return {"error": f"no 'loaded in' on screen after {timeout:.0f} s; it showed: {text[:160]}"}
        seconds = time.perf_counter() - t0
        pane_pid = int(tmux("display-message", "-p", "-t", "bench", "#{pane_pid}").strip())
        m = LOADED_RE.search(text)
        result = {
            "seconds": seconds,
            "cpu_s": _cpu_of_tree(pane_pid),
            "tree_s": tree_s,
            "self_reported_s": float(m.group(1)) if m else None,
            "peak_rss_bytes": _peak_rss_of_tree(pane_pid),
        }
        result["private_rss_bytes"], result["file_rss_bytes"] = _rss_parts_of_tree(pane_pid)
        result["keys_ms"] = _terminal_keys(tmux, key_repeats)
        tmux("send-keys", "-t", "bench", "q", check=False)
        return result
    except RuntimeError as exc:
        return {"error": str(exc)}
    finally:
        tmux.kill()


def _terminal_keys(tmux: Tmux, repeats: int) -> dict:
    """Key sent -> the pane's content (with attributes, so a moved highlight counts) changes.
    Resolution is one capture-pane call, a few ms. A key that changes nothing in 2 s is
    reported as such, not as 2000 ms."""
    out: dict[str, dict] = {}
    time.sleep(0.3)  # let the first screen settle
    for key in ["j", "k"] * repeats:
        before = tmux.pane(escapes=True)
        t0 = time.perf_counter()
        tmux("send-keys", "-t", "bench", key)
        changed = None
        while time.perf_counter() - t0 < 2.0:
            if tmux.pane(escapes=True) != before:
                changed = (time.perf_counter() - t0) * 1000
                break
        stats = out.setdefault(key, {"samples": [], "unchanged": 0})
        if changed is None:
            stats["unchanged"] += 1
        else:
            stats["samples"].append(changed)
        time.sleep(0.05)
    return {
        k: {"median": sorted(v["samples"])[len(v["samples"]) // 2], "max": max(v["samples"]), "n": len(v["samples"])}
        if v["samples"] else {"error": "pane did not change"}
        for k, v in out.items()
    }


# ---------------------------------------------------------------------------------------------
# Report


def machine_info() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import textual

        textual_version = textual.__version__
    except ImportError:
        textual_version = "not installed"
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True)
    return {
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "memory_gib": mem / 2**30,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "textual": textual_version,
        "os": platform.platform(),
        "git": (rev.stdout.strip() or "no commit") + (" + uncommitted changes" if dirty.stdout.strip() else ""),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        # Other work on a 2-core box skews every figure: say how busy it was.
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?",
    }


@dataclass
class Row:
    scale: int
    path: Path
    counts: dict
    floor: dict = field(default_factory=dict)
    floor_col: dict = field(default_factory=dict)  # the columnar floor: the fastest native reader
    stats: dict = field(default_factory=dict)
    screen: dict = field(default_factory=dict)
    keys: dict = field(default_factory=dict)
    # issue 32: the same with the cache filled by a first open
    stats2: dict = field(default_factory=dict)
    screen2: dict = field(default_factory=dict)
    cache_bytes: int = 0
    answers: dict = field(default_factory=dict)  # report, whatif, findings (measure_answers)


def _mb(b) -> str:
    return f"{b / 1e6:,.0f}"


def _ratio(x, floor) -> str:
    return f"{x / floor:.1f}x" if floor else "-"


def _worst_key_ms(row: Row) -> float | None:
    vals = [v["max"] for v in row.keys.get("keys_ms", {}).values() if "max" in v]
    vals += [v["max"] for v in row.screen.get("keys_ms", {}).values() if "max" in v]
    return max(vals) if vals else None


def table(rows: list[Row]) -> str:
    head = (
        "| scale | kernels | API rows | NVTX ranges | file MB | Python floor s | columnar floor s (reader) "
        "| stats s (/col. floor) | stats RSS MB (/file) | tree on screen s | first screen s (/col. floor) "
        "| TUI RSS MB (/file) | worst key ms |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        c, py, f = r.counts, r.floor.get("seconds"), r.floor_col.get("seconds")
        cells = [
            f"x{r.scale}", f"{c['kernels']:,}", f"{c['api']:,}", f"{c['nvtx_ranges']:,}", _mb(c["bytes"]),
            f"{py:.2f}" if py else "n/a",
            f"{f:.2f} [{r.floor_col['cpu_s']:.2f}] ({r.floor_col.get('reader')})" if f else "n/a",
        ]
        fc = r.floor_col.get("cpu_s")
        if "seconds" in r.stats:
            cells += [f"{r.stats['seconds']:.2f} ({_ratio(r.stats['seconds'], f)}) "
                      f"[{r.stats['cpu_s']:.2f} ({_ratio(r.stats['cpu_s'], fc)})]",
                      f"{_mb(r.stats['peak_rss_bytes'])} ({r.stats['peak_rss_bytes'] / c['bytes']:.1f}x)"]
        else:
            cells += ["n/a", "n/a"]
        if "seconds" in r.screen:
            tree = r.screen.get("tree_s")
            cells += [f"{tree:.2f}" if tree else "n/a",
                      f"{r.screen['seconds']:.2f} ({_ratio(r.screen['seconds'], f)}) "
                      f"[{r.screen['cpu_s']:.2f} ({_ratio(r.screen['cpu_s'], fc)})]",
                      f"{_mb(r.screen['peak_rss_bytes'])} ({r.screen['peak_rss_bytes'] / c['bytes']:.1f}x)"]
        else:
            cells += ["n/a", "n/a", "n/a"]
        worst = _worst_key_ms(r)
        cells.append(f"{worst:.0f}" if worst is not None else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _growth(rows: list[Row], get) -> tuple[float, str] | None:
    """Exponent b in cost ~ kernels^b between the smallest and the largest scale measured."""
    pts = [(r.scale, r.counts["kernels"], get(r)) for r in rows if get(r)]
    if len(pts) < 2 or pts[0][1] == pts[-1][1]:
        return None
    (s0, k0, v0), (s1, k1, v1) = pts[0], pts[-1]
    return math.log(v1 / v0) / math.log(k1 / k0), f"x{s0} -> x{s1}"


def targets(rows: list[Row]) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) for issue 11's targets, judged at the base scale."""
    out = []
    base = next((r for r in rows if r.scale == 1), rows[0] if rows else None)
    if base is None:
        return out
    f = base.floor_col.get("seconds")
    size = base.counts["bytes"]

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "NOT met")

    def why(d: dict) -> str:
        return f"n/a: {d['error']}" if "error" in d else "not measured"

    s = base.screen.get("seconds")
    out.append(("first TUI screen (tree with GPU columns) <= 2x columnar floor",
                f"{s:.2f} s vs {f:.2f} s ({s / f:.1f}x)" if s and f else why(base.screen),
                verdict(s <= 2 * f if s and f else None)))
    if base.screen.get("cpu_s") and base.floor_col.get("cpu_s"):
        c, fc = base.screen["cpu_s"], base.floor_col["cpu_s"]
        out.append(("(reference) the same in CPU time", f"{c:.2f} s vs {fc:.2f} s ({c / fc:.1f}x)",
                    "met" if c <= 2 * fc else "NOT met"))
    tree = base.screen.get("tree_s")
    out.append(("(reference) the NVTX tree with CPU times on screen", f"{tree:.2f} s" if tree else "n/a", "-"))
    st = base.stats.get("seconds")
    out.append(("all six reports (`stats`) <= 3x columnar floor", f"{st:.2f} s ({st / f:.1f}x)" if st and f
                else why(base.stats), verdict(st <= 3 * f if st and f else None)))
    if base.stats.get("cpu_s") and base.floor_col.get("cpu_s"):
        c, fc = base.stats["cpu_s"], base.floor_col["cpu_s"]
        out.append(("(reference) the same in CPU time", f"{c:.2f} s vs {fc:.2f} s ({c / fc:.1f}x)",
                    "met" if c <= 3 * fc else "NOT met"))
    for label, d in (("stats", base.stats), ("TUI at first screen", base.screen)):
        rss = d.get("peak_rss_bytes")
        out.append((f"peak RSS of {label} <= 2x file size ({_mb(size)} MB)",
                    f"{_mb(rss)} MB ({rss / size:.1f}x)" if rss else why(d),
                    verdict(rss <= 2 * size if rss else None)))
    worst = _worst_key_ms(base)
    key_err = why(base.keys) if base.keys else why(base.screen)
    out.append(("every keystroke <= 50 ms (opening the kernel table of a range holding every kernel included)",
                f"worst {worst:.0f} ms" if worst is not None else key_err,
                verdict(worst <= 50 if worst is not None else None)))
    col = base.floor_col
    if "peak_rss_bytes" in col:
        out.append(("(reference) the columnar floor's own peak RSS",
                    f"{_mb(col['peak_rss_bytes'])} MB ({col['peak_rss_bytes'] / size:.1f}x) in {col['seconds']:.2f} s", "-"))
    py = base.floor.get("seconds")
    if py and f:
        out.append(("(reference) Python floor / columnar floor", f"{py:.2f} s / {f:.2f} s ({py / f:.1f}x)", "-"))
    g = _growth(rows, lambda r: r.floor_col.get("seconds"))
    out.append(("(reference) growth of the columnar floor itself", f"cost ~ kernels^{g[0]:.2f} ({g[1]})" if g else "n/a", "-"))
    for label, get in (
        ("stats time", lambda r: r.stats.get("seconds")),
        ("stats peak RSS", lambda r: r.stats.get("peak_rss_bytes")),
        ("first screen", lambda r: r.screen.get("seconds")),
        ("TUI peak RSS", lambda r: r.screen.get("peak_rss_bytes")),
    ):
        g = _growth(rows, get)
        out.append((f"linear growth: {label}", f"cost ~ kernels^{g[0]:.2f} ({g[1]})" if g else "n/a",
                    verdict(g[0] <= 1.15 if g else None)))
    return out


def cache_table(rows: list[Row]) -> list[str]:
    """Issue 32: first open (cache empty) against second open (from the cache), per scale."""
    if not any(r.screen2 or r.stats2 for r in rows):
        return []
    out = [
        "## First and second open (issue 32: the per-user cache)",
        "",
        "First open: the cache empty (the load writes it meanwhile, in the background). Second open: the "
        "same file again, unchanged, its columns and range model memory-mapped from the cache. Private RSS: "
        "the process tree's RssAnon + RssShmem at its first screen; file-backed: RssFile then (the cache's "
        "mapped pages, which the kernel shares and can drop). Times against the columnar floor at that scale.",
        "",
        "| scale | file MB | columnar floor s | first open: first screen s (/floor) | first open: private RSS MB "
        "(/file) | stats, first open s (/floor) [CPU s] | stats peak RSS MB (/file) | cache MB | second open: "
        "first screen s [CPU s] | second open: private / file-backed RSS MB | stats, second open s (/floor) [CPU s] |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def secs(d: dict, f) -> str:
        if "seconds" not in d:
            return f"n/a: {d['error']}" if "error" in d else "n/a"
        cpu = f" [{d['cpu_s']:.2f}]" if d.get("cpu_s") else ""
        return f"{d['seconds']:.2f} ({_ratio(d['seconds'], f)}){cpu}"

    for r in rows:
        size, f = r.counts["bytes"], r.floor_col.get("seconds")
        priv = r.screen.get("private_rss_bytes")
        p2, m2 = r.screen2.get("private_rss_bytes"), r.screen2.get("file_rss_bytes")
        srss = r.stats.get("peak_rss_bytes")
        out.append("| " + " | ".join([
            f"x{r.scale}", _mb(size), f"{f:.2f}" if f else "n/a", secs(r.screen, f),
            f"{_mb(priv)} ({priv / size:.1f}x)" if priv else "n/a",
            secs(r.stats, f), f"{_mb(srss)} ({srss / size:.1f}x)" if srss else "n/a",
            _mb(r.cache_bytes) if r.cache_bytes else "n/a",
            f"{r.screen2['seconds']:.2f} [{r.screen2['cpu_s']:.2f}]" if "seconds" in r.screen2 else "n/a",
            f"{_mb(p2)} / {_mb(m2)}" if p2 is not None and m2 is not None else "n/a",
            secs(r.stats2, f),
        ]) + " |")
    return out


def cache_targets(rows: list[Row]) -> list[str]:
    """Issue 32's targets: at the largest scale measured (x40 in a full run), and the second
    open at every scale; the keys at x8."""
    if not rows:
        return []
    big = max(rows, key=lambda r: r.scale)
    f, size = big.floor_col.get("seconds"), big.counts["bytes"]
    out = ["## Targets (issue 32)", "", "| target | measured | verdict |", "|---|---|---|"]

    def line(target: str, measured: str, ok: bool | None) -> None:
        out.append(f"| {target} | {measured} | {'n/a' if ok is None else 'met' if ok else 'NOT met'} |")

    s = big.screen.get("seconds")
    line(f"x{big.scale}: first screen (first open) <= 1.5x the columnar floor",
         f"{s:.2f} s vs {f:.2f} s ({s / f:.1f}x)" if s and f else "n/a", s <= 1.5 * f if s and f else None)
    priv = big.screen.get("private_rss_bytes")
    line(f"x{big.scale}: private RSS at the first screen <= the file ({_mb(size)} MB)",
         f"{_mb(priv)} MB ({priv / size:.2f}x); peak RSS {_mb(big.screen['peak_rss_bytes'])} MB" if priv else "n/a",
         priv <= size if priv else None)
    st = big.stats.get("seconds")
    line(f"x{big.scale}: stats (first open, cache written) <= 2x the columnar floor",
         f"{st:.2f} s ({st / f:.1f}x)" if st and f else "n/a", st <= 2 * f if st and f else None)
    st2 = big.stats2.get("seconds")
    line(f"x{big.scale}: stats (second open) <= 2x the columnar floor",
         f"{st2:.2f} s ({st2 / f:.1f}x)" if st2 and f else "n/a", st2 <= 2 * f if st2 and f else None)
    seconds = [(r.scale, r.screen2.get("seconds")) for r in rows]
    measured = [(sc, v) for sc, v in seconds if v]
    line("second open of an unchanged file: tree with GPU columns <= 3 s, at every scale",
         ", ".join(f"x{sc} {v:.2f} s" for sc, v in measured) or "n/a",
         all(v <= 3 for _, v in measured) if measured else None)
    x8 = next((r for r in rows if r.scale == 8), None)
    worst = _worst_key_ms(x8) if x8 is not None else None
    line("x8 (4.8M kernels): every key <= 100 ms", f"worst {worst:.0f} ms" if worst is not None else "n/a",
         worst <= 100 if worst is not None else None)
    return out


def keys_table(rows: list[Row]) -> list[str]:
    """Keystroke latency, one row per key, one column per scale: median / max ms."""
    names: list[str] = []
    for r in rows:
        for source, d in (("tmux", r.screen), ("headless", r.keys)):
            for k in d.get("keys_ms", {}):
                label = f"{k} (real terminal)" if source == "tmux" else k
                if label not in names:
                    names.append(label)
    if not names:
        return []

    def cell(r: Row, label: str) -> str:
        if label.endswith(" (real terminal)"):
            v = r.screen.get("keys_ms", {}).get(label[: -len(" (real terminal)")])
        else:
            v = r.keys.get("keys_ms", {}).get(label)
        if not v:
            return "-"
        if "max" not in v:
            return v.get("error", "-")
        frame = f" ({v['first_frame']:.0f})" if "first_frame" in v else ""
        cpu = f" [{v['cpu']:.0f}]" if "cpu" in v else ""
        return f"{v['median']:.0f} / {v['max']:.0f}{frame}{cpu}"

    out = [
        "## Keystrokes (ms, median / max)",
        "",
        "Real terminal: tmux send-keys -> the pane changes. Others: headless Pilot, press -> the app idle "
        "again (work done, workers finished, screen refreshed); in brackets, press -> the first frame the "
        "app writes after the key (median); in square brackets, the CPU time the app's process (every "
        "thread) spent from press to idle (median), steadier than wall time on a shared machine.",
        "",
        "| key | " + " | ".join(f"x{r.scale}" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    out += [f"| {n} | " + " | ".join(cell(r, n) for r in rows) + " |" for n in names]
    return out


def answers_table(rows: list[Row]) -> list[str]:
    """report, whatif and findings side by side (wall s [CPU s]), each against the columnar floor
    and the two replays against `report` (target: at most 2x)."""
    rows = [r for r in rows if r.answers]
    if not rows:
        return []
    out = ["", "## report, whatif, findings (second open)", "",
           "| scale | kernels | columnar floor | report | whatif | findings | whatif / report | findings / report |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        floor = r.floor_col.get("seconds")

        def cell(part: str, r: Row = r, floor=floor) -> str:
            d = r.answers.get(part, {})
            if "seconds" not in d:
                return "n/a" if "error" in d else "-"
            ratio = f", {d['seconds'] / floor:.1f}x floor" if floor else ""
            return f"{d['seconds']:.2f} s [{d['cpu_s']:.2f}]{ratio}"

        def vs(part: str, r: Row = r) -> str:
            d, rep = r.answers.get(part, {}), r.answers.get("report", {})
            if "seconds" not in d or "seconds" not in rep:
                return "-"
            return f"{d['seconds'] / rep['seconds']:.2f} [{d['cpu_s'] / rep['cpu_s']:.2f}]"

        out.append(f"| x{r.scale} | {r.counts['kernels']:,} | " + (f"{floor:.2f} s" if floor else "-") + " | "
                   + " | ".join(cell(p) for p in ANSWERS) + f" | {vs('whatif')} | {vs('findings')} |")
    out += ["", "Wall seconds [CPU seconds]; the ratios to `report` wall [CPU]. Target: whatif and the findings "
            "within 2x of report."]
    return out


def write_results(path: Path | None, info: dict, base_note: str, rows: list[Row], cmd: list[str], args) -> str:
    lines = [
        "# Benchmark results (issues 6, 11 and 32)",
        "",
        "Written by `python bench/run.py`; see bench/README.md for what each figure means.",
        "",
        "## Machine",
        "",
        f"- CPU: {info['cpu']}, {info['nproc']} cores; memory {info['memory_gib']:.1f} GiB",
        f"- Python {info['python']}, SQLite {info['sqlite']}, Textual {info['textual']}; {info['os']}",
        f"- code: git {info['git']}; run {info['date']}; load average at start {info['loadavg']}",
        f"- command measured: `{shlex.join(cmd)}`",
        f"- base trace (scale x1): {base_note}",
        f"- repeats: floor best of {args.repeat}, stats best of {args.repeat}, first screen 1 run",
        "",
        "## Figures",
        "",
        table(rows),
        "",
        "Python floor: Python's sqlite3 fetching the columns attribution needs as tuples (`fetchall`). Columnar "
        "floor: the same columns read into Arrow/numpy by the fastest native reader installed (ADBC's SQLite "
        "driver, or connectorx with 2 partitions, a reference only: it opens the file read-write). Ratios: "
        "times against the columnar floor at the same scale; RSS against the file size. \"tree on screen\": "
        "the NVTX tree with CPU times (the load's first stage); \"first screen\": the GPU columns filled in. "
        "[In brackets]: CPU seconds (user + system) and their ratio to the floor's: the floor's for its read alone, "
        "stats' and the TUI's for the whole process (start-up, imports and, for the TUI, drawing included), "
        "steadier than wall time when the machine is shared.",
        "",
        "## Targets (at x1)",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
    ]
    lines += [f"| {t} | {m} | {v} |" for t, m, v in targets(rows)]
    for part in (cache_table(rows), cache_targets(rows)):
        if part:
            lines += ["", *part]
    lines += ["", *keys_table(rows)]
    lines += answers_table(rows)
    detail = []
    for r in rows:
        for label, d in (("floor", r.floor), ("columnar floor", r.floor_col), ("stats", r.stats),
                         ("first screen", r.screen), ("stats (second open)", r.stats2),
                         ("first screen (second open)", r.screen2), ("keys (headless)", r.keys)):
            if "error" in d:
                detail.append(f"- x{r.scale} {label}: n/a: {d['error']}")
        if r.floor_col.get("all"):
            detail.append(f"- x{r.scale} columnar floor by reader: " + ", ".join(
                f"{k} {v:.2f} s" if v else f"{k} n/a" for k, v in r.floor_col["all"].items()))
        if r.floor_col.get("process_cpu_s"):
            f = r.floor_col
            detail.append(f"- x{r.scale} columnar floor's whole process (Python start-up, imports, read): "
                          f"{f['process_seconds']:.2f} s [{f['process_cpu_s']:.2f} CPU]")
        if r.screen.get("self_reported_s") is not None:
            detail.append(f"- x{r.scale} first screen: the TUI's own 'loaded in' says {r.screen['self_reported_s']:.2f} s "
                          f"(tmux wall {r.screen['seconds']:.2f} s includes Python start-up and imports)")
    if detail:
        lines += ["", "## Notes", "", *detail]
    text = "\n".join(lines) + "\n"
    if path is not None:
        write_atomic(path, text, overwrite=True)
    return text


# ---------------------------------------------------------------------------------------------


def _brief(d: dict) -> str:
    parts = []
    if "seconds" in d:
        parts.append(f"{d['seconds']:.2f} s")
    if d.get("self_reported_s") is not None:
        parts.append(f"(the app says {d['self_reported_s']:.2f} s)")
    if "peak_rss_bytes" in d:
        parts.append(f"peak RSS {_mb(d['peak_rss_bytes'])} MB")
    keys = {k: v for k, v in d.get("keys_ms", {}).items() if "max" in v}
    if keys:
        worst = max(keys, key=lambda k: keys[k]["max"])
        parts.append(f"worst key {keys[worst]['max']:.0f} ms ({worst})")
    if "error" in d:
        parts.append(f"n/a: {d['error']}")
    return ", ".join(parts) or "nothing measured"


PARTS = ("floor", "stats", "screen", "keys")
ANSWERS = ("report", "whatif", "findings")  # measured only when named in --only


def _positive(text: str) -> int:
    value = int(text) if text.strip().isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, not {text!r}")
    return value


def _scale_list(text: str) -> list[int]:
    return sorted({_positive(s) for s in text.split(",") if s.strip()})


def _part_list(text: str) -> list[str]:
    parts = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in parts if s not in PARTS + ANSWERS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(f"parts are {', '.join(PARTS + ANSWERS)}; not {', '.join(unknown) or 'none'}")
    return parts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="scale benchmark of nsight-tui (issues 6 and 11)")
    p.add_argument("--base", type=Path, help=f"the x1 trace (default {DEFAULT_BASE.relative_to(REPO)} if present)")
    p.add_argument("--scales", default="1,2,4,8,40", type=_scale_list,
                   help="comma list of multiples of the base (default 1,2,4,8,40)")
    p.add_argument("--out", type=Path, help="results file (default bench/RESULTS.md for a full run; a partial "
                   "run (--only, --scales) prints only, unless --out is given)")
    p.add_argument("--cmd", default=f"{sys.executable} -m nsight_tui",
                   help="how to run nsight-tui (default: this checkout via python -m nsight_tui)")
    p.add_argument("--app", default="nsight_tui.tui.app:NsightApp", help="module:Class for the headless key benchmark")
    p.add_argument("--only", default=",".join(PARTS), type=_part_list, help="which parts to run (comma list)")
    p.add_argument("--repeat", type=_positive, default=1, help="runs of floor and stats per scale (best kept)")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a stats run or a TUI load is abandoned")
    p.add_argument("--max-gb", type=float, default=5.0, help="skip scales whose file would exceed this")
    p.add_argument("--clean", action="store_true", help="delete each scaled file (x2 and up) once measured")
    p.add_argument("--python-floor-max-gb", type=float, default=1.5,
                   help="skip the Python floor (every row as tuples) for files bigger than this")
    p.add_argument("--keys-scales", type=_scale_list, default=[1, 2, 4, 8],
                   help="scales to run the headless key benchmark at (default 1,2,4,8)")
    args = p.parse_args(argv)
    parts, scales = set(args.only), args.scales
    if args.out is None and parts == set(PARTS) and scales == [1, 2, 4, 8, 40]:
        args.out = BENCH / "RESULTS.md"  # only a full run replaces the committed results
    cmd = shlex.split(args.cmd)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    # Compile once so no measured run pays for writing .pyc files.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "parsers", "tui"], cwd=REPO, capture_output=True)
    info = machine_info()
    try:
        base, base_note = pick_base(args.base, log)
    except (ScaleError, sqlite3.Error) as exc:
        log(f"bench: cannot make the base trace: {exc}")
        return 2
    log(f"base: {base_note}")
    rows: list[Row] = []
    for scale in scales:
        try:
            path = scaled_file(base, scale, log, int(args.max_gb * 1e9))
        except (ScaleError, sqlite3.Error, OSError) as exc:
            log(f"  x{scale}: cannot build it: {exc}")
            continue
        if path is None:
            continue
        try:
            row = Row(scale, path, trace_counts(path))
        except sqlite3.Error as exc:
            log(f"bench: {path}: cannot read it as an nsys export ({exc})")
            return 2
        log(f"x{scale}: {path.name}: {row.counts['kernels']:,} kernels, {_mb(row.counts['bytes'])} MB")
        _warm_cache(path)
        if "floor" in parts:
            if row.counts["bytes"] <= args.python_floor_max_gb * 1e9:
                row.floor = measure_floor(path, args.repeat)
            else:  # every row as Python tuples: several times the file in memory
                row.floor = {"error": f"skipped above {args.python_floor_max_gb:g} GB (--python-floor-max-gb)"}
            log(f"  floor: {_brief(row.floor)}")
            row.floor_col = measure_columnar_floor(path, args.repeat)
            log(f"  columnar floor: {_brief(row.floor_col)}")
        # First open: the cache empty (what a new file costs, its cache written meanwhile);
        # second open: the cache a first open wrote (issue 32).
        if "screen" in parts:
            clear_cache()
            row.screen = measure_first_screen(path, cmd, args.timeout, key_repeats=5)
            log(f"  first screen (first open): {_brief(row.screen)}")
        if "stats" in parts:
            row.stats = measure_stats(path, cmd, args.repeat, args.timeout, prepare=clear_cache)
            log(f"  stats (first open, writes the cache): {_brief(row.stats)}")
            row.cache_bytes = cache_bytes()
            row.stats2 = measure_stats(path, cmd, args.repeat, args.timeout)
            log(f"  stats (second open, from the cache, {_mb(row.cache_bytes)} MB): {_brief(row.stats2)}")
        if "screen" in parts:
            if "stats" not in parts:  # a first open that runs to its end fills the cache
                clear_cache()
                measure_stats(path, cmd, 1, args.timeout)
                row.cache_bytes = cache_bytes()
            row.screen2 = measure_first_screen(path, cmd, args.timeout, key_repeats=5)
            log(f"  first screen (second open): {_brief(row.screen2)}")
        wanted = [a for a in ANSWERS if a in parts]
        if wanted:
            clear_cache()
            row.answers = measure_answers(path, cmd, wanted, args.repeat, args.timeout)
            for a in wanted:
                log(f"  {a} (second open): {_brief(row.answers[a])}")
        if "keys" in parts and scale in args.keys_scales:
            row.keys = measure_keys_headless(path, args.app, args.timeout)
            log(f"  keys (headless): {_brief(row.keys)}")
        clear_cache()
        rows.append(row)
        if args.clean and path != base:
            path.unlink(missing_ok=True)
    if not rows:
        log("bench: nothing measured")
        return 1
    text = write_results(args.out, info, base_note, rows, cmd, args)
    if args.out is not None:
        log(f"wrote {args.out}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
