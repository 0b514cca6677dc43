"""`nsight-tui serve FILE` in a real headless browser: Debian's Chromium, driven over its DevTools
protocol (a small client on aiohttp's websocket, which textual-serve brings). The page loads,
the app draws its first screen (the file's name arrives over the page's websocket), `?` opens
the help (its title arrives, and the screenshot changes). The browser reaches the server through a
forwarded port, as `ssh -L 9000:127.0.0.1:8000` would give it, and resolves no other host: every
request the page makes must go to the address the browser used (none to the server's own port, none
to the internet: no web font). Every wait is for a state, with a deadline. Skips when Chromium or
textual-serve is absent.

NSIGHT_TUI_SCREENSHOT=PATH keeps the screenshot with the help open (for a closing note).
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("textual_serve", reason="the serve extra is not installed")
aiohttp = pytest.importorskip("aiohttp", reason="aiohttp (a dependency of textual-serve) is absent")

CHROMIUM = next((p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome"))
                 if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium (apt-get install chromium)")

DEADLINE_S = 90


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)  # polling the state (is the port open?), with the deadline above
    raise AssertionError(f"port {port} never opened")


class Cdp:
    """Just enough of the Chrome DevTools protocol: commands, and the page's websocket frames."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.frames: list[bytes] = []  # what the app sent the page, decoded
        self.requested: list[str] = []  # every URL the page asked for (documents, scripts, fonts, websockets)
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif data.get("method") in ("Network.requestWillBeSent", "Network.webSocketCreated"):
                params = data["params"]
                self.requested.append(params["request"]["url"] if "request" in params else params["url"])
            elif data.get("method") == "Network.webSocketFrameReceived":
                r = data["params"]["response"]
                payload = r["payloadData"]
                self.frames.append(base64.b64decode(payload) if r.get("opcode") == 2 else payload.encode())

    async def send(self, method: str, **params):
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        await self.ws.send_str(json.dumps({"id": self.next_id, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 30)
        assert "error" not in reply, reply
        return reply.get("result", {})

    def received(self, text: str, since: int = 0) -> bool:
        return any(text.encode() in f for f in self.frames[since:])

    async def until(self, check, what: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.1)  # polling a state, bounded by the deadline
        raise AssertionError(f"timed out waiting for {what}")

    async def key(self, key: str, code: str, text: str, modifiers: int = 0) -> None:
        await self.send("Input.dispatchKeyEvent", type="keyDown", key=key, code=code, text=text,
                        unmodifiedText=text, modifiers=modifiers)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, modifiers=modifiers)

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])


async def forward(listen_port: int, to_port: int) -> asyncio.AbstractServer:
    """A TCP forwarder on 127.0.0.1, the stand-in for `ssh -L listen_port:127.0.0.1:to_port`."""
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", to_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(accept, "127.0.0.1", listen_port)


async def drive(app_port: int, cdp_port: int, deadline: float, page_port: int) -> tuple[bytes, bytes, Cdp]:
    forwarder = await forward(page_port, app_port)
    async with forwarder, aiohttp.ClientSession() as http:
        while True:  # the browser's DevTools endpoint (the process is up, the port may not be yet)
            try:
                async with http.get(f"http://127.0.0.1:{cdp_port}/json/list") as r:
                    targets = await r.json()
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    break
            except aiohttp.ClientError:
                pass
            assert time.monotonic() < deadline, "Chromium's DevTools endpoint never answered"
            await asyncio.sleep(0.1)
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = Cdp(ws)
            await cdp.send("Network.enable")
            await cdp.send("Page.enable")
            await cdp.send("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1,
                           mobile=False)
            await cdp.send("Page.navigate", url=f"http://127.0.0.1:{page_port}/")

            async def first_byte():
                res = await cdp.send("Runtime.evaluate",
                                     expression="document.body && document.body.classList.contains('-first-byte')")
                return res["result"].get("value")

            await cdp.until(first_byte, "the app's first bytes in the page", deadline)
            await cdp.until(lambda: cdp.received("small_ctx128"), "the file's name on the first screen", deadline)
            await cdp.until(lambda: cdp.received("step_N"), "the range tree", deadline)
            await cdp.until(lambda: cdp.received("loaded in"), "the GPU work loaded (the header says so)", deadline)
            before = await cdp.screenshot()
            mark = len(cdp.frames)
            await cdp.send("Input.dispatchMouseEvent", type="mousePressed", x=640, y=400, button="left", clickCount=1)
            await cdp.send("Input.dispatchMouseEvent", type="mouseReleased", x=640, y=400, button="left", clickCount=1)
            await cdp.key("?", "Slash", "?", modifiers=8)
            await cdp.until(lambda: cdp.received("nsight-tui keys", mark), "the help screen after `?`", deadline)
            shots: list[bytes] = []

            async def repainted():  # the page has painted what arrived: its pixels changed
                shots.append(await cdp.screenshot())
                return shots[-1] != before

            await cdp.until(repainted, "the page to repaint with the help", deadline)
            after = shots[-1]
            cdp.reader.cancel()
            return before, after, cdp


def test_serve_in_headless_chromium(tmp_path):
    app_port, cdp_port, page_port = free_port(), free_port(), free_port()
    deadline = time.monotonic() + DEADLINE_S
    server = subprocess.Popen([sys.executable, "-m", "nsight_tui", "serve", "sample_traces/small_ctx128.sqlite",
                               "--port", str(app_port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    browser = None
    try:
        wait_port(app_port, server, deadline)
        if shutil.which("ss"):  # loopback only: every listening socket's local address is 127.0.0.1
            listening = subprocess.run(["ss", "-ltnH", f"sport = :{app_port}"], capture_output=True, text=True)
            local = [line.split()[3] for line in listening.stdout.splitlines() if line.strip()]
            assert local and all(a == f"127.0.0.1:{app_port}" for a in local), listening.stdout
        browser = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
             f"--user-data-dir={tmp_path / 'profile'}",
             f"--remote-debugging-port={cdp_port}", "--remote-allow-origins=*", "--window-size=1280,800",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        before, after, cdp = asyncio.run(drive(app_port, cdp_port, deadline, page_port))
        assert before[:8] == after[:8] == b"\x89PNG\r\n\x1a\n"
        assert any(url.startswith(f"ws://127.0.0.1:{page_port}/") for url in cdp.requested), cdp.requested
        elsewhere = [url for url in cdp.requested if not url.startswith((f"http://127.0.0.1:{page_port}/",
                                                                         f"ws://127.0.0.1:{page_port}/"))]
        assert elsewhere == [], elsewhere  # not the server's own port, not the internet
        assert before != after  # the help screen is drawn over the tree
        keep = os.environ.get("NSIGHT_TUI_SCREENSHOT")
        if keep:
            Path(keep).write_bytes(after)
            Path(keep).with_name(Path(keep).stem + "_before.png").write_bytes(before)
    finally:
        for proc in (browser, server):  # each in a session of its own: its group is this test's processes
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
