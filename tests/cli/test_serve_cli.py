"""`nsight-tui serve`'s refusals: one line on stderr and a non-zero exit, before or instead of serving."""
from __future__ import annotations

import shlex
import socket
import subprocess
import sys

import pytest

from conftest import ROOT
from helpers import cli_process

pytest.importorskip("textual_serve", reason="the serve extra is not installed")


def serve(*args: str) -> subprocess.CompletedProcess:
    return cli_process.run(["serve", *args], cwd=ROOT,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_missing_file_is_one_line():
    proc = serve("sample_traces/nope.sqlite")
    assert proc.returncode != 0
    assert proc.stderr.strip() == "nsight-tui: sample_traces/nope.sqlite: no such file or folder"


@pytest.mark.parametrize("host", ["", " "])
def test_an_empty_host_is_refused_before_serving(host):
    """An empty --host listened on every interface behind a URL with no address in it."""
    proc = serve("sample_traces/small_ctx128.sqlite", "--host", host)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("nsight-tui: --host '': names no address")


def test_taken_port_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = serve("sample_traces/small_ctx128.sqlite", "--port", str(port))
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nsight-tui: cannot listen on 127.0.0.1:{port}: ") and "Traceback" not in proc.stderr


def test_the_page_runs_the_same_command():
    from argparse import Namespace

    from nsight_tui.cli.serve import command

    cmd = command(Namespace(paths=["sample_traces/small_ctx128.sqlite"], attribution="nsys", main_thread="python3"))
    assert shlex.split(cmd) == [sys.executable, "-m", "nsight_tui", str(ROOT / "sample_traces/small_ctx128.sqlite"),
                                "--attribution", "nsys", "--main-thread", "python3"]


@pytest.mark.parametrize("content, why", [(b"", "empty file"), (b"not a database\n", "not an SQLite file"),
                                          (None, "damaged or truncated")])
def test_bad_file_is_refused_before_serving(tmp_path, content, why):
    """Refused as `nsight-tui FILE` refuses it, one line and a non-zero exit; it used to print
    'open http://...' and serve, each browser tab then failing on its own."""
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(content if content is not None else (ROOT / "sample_traces/small_ctx128.sqlite").read_bytes()[:100_000])
    with socket.socket() as taken:  # had the file passed, listening would fail instead (and not hang the test)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = serve(str(bad), "--port", str(taken.getsockname()[1]))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nsight-tui: {bad}: ") and why in lines[0], proc.stderr


def test_the_page_follows_the_requests_address_and_fetches_nothing_from_the_internet():
    """Behind `ssh -L 9000:127.0.0.1:8000` the browser asks for localhost:9000: the page's websocket and
    static addresses must be that one, and its font textual-serve's bundled copy."""
    import asyncio
    import re
    import time

    import aiohttp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "nsight_tui", "serve", "sample_traces/small_ctx128.sqlite",
                               "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def fetch() -> tuple[str, list[int]]:
        deadline = time.monotonic() + 60
        async with aiohttp.ClientSession() as http:
            while True:
                try:
                    async with http.get(f"http://127.0.0.1:{port}/", headers={"Host": "localhost:9000"}) as r:
                        page = await r.text()
                    break
                except aiohttp.ClientConnectionError:
                    assert server.poll() is None and time.monotonic() < deadline, "the server never answered"
                    await asyncio.sleep(0.1)  # polling a state (the port opens), bounded by the deadline
            statuses = []
            for path in re.findall(r'(?:href|src)="(/[^"]+)"|url\("(/[^"]+)"\)', page):
                async with http.get(f"http://127.0.0.1:{port}{path[0] or path[1]}") as r:
                    statuses.append(r.status)
            return page, statuses

    try:
        page, statuses = asyncio.run(fetch())
    finally:
        server.terminate()
        server.wait(10)
    assert 'data-session-websocket-url="ws://localhost:9000/ws"' in page
    assert f":{port}" not in page  # nothing names the port the server listens on
    assert "googleapis" not in page and not re.search(r'(?:href|src|url\()="?https?://', page)
    assert "RobotoMono-VariableFont_wght.ttf" in page
    assert len(statuses) >= 4 and set(statuses) == {200}  # css, script, both fonts: all served here
