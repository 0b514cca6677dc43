"""`nsight-tui serve FILE...`: the TUI in a web browser, with textual-serve.

Each browser tab that opens the page runs `nsight-tui FILE...` (the same command, the same
options) in a subprocess whose terminal is drawn in the page. Bound to 127.0.0.1 by default:
anyone who can reach the port can read the profiles it serves (`--host 0.0.0.0` says so).
Needs the `serve` extra: pip install 'nsight-tui[serve]'.
"""
from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path

from nsight_tui.parsers import TraceError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE", help="what `nsight-tui FILE...` opens: exports or a folder")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--attribution", choices=("process", "nsys"), default="process")
    parser.add_argument("--main-thread", metavar="TID|NAME")


def command(args: argparse.Namespace) -> str:
    """The shell command each page runs: this Python, this package, the same arguments."""
    argv = [sys.executable, "-m", "nsight_tui", *[str(Path(p).resolve()) for p in args.paths],
            "--attribution", args.attribution]
    if args.main_thread:
        argv += ["--main-thread", args.main_thread]
    return " ".join(shlex.quote(a) for a in argv)


def run(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("textual_serve") is None:
        raise TraceError("the browser view needs textual-serve: pip install 'nsight-tui[serve]'")
    missing = next((p for p in args.paths if not Path(p).exists()), None)
    if missing is not None:
        raise TraceError(f"{missing}: no such file or folder")
    if not 0 < args.port < 65536:
        raise TraceError(f"--port {args.port}: not a port number")
    if not args.host.strip():  # the server would listen on every interface under an address-less URL
        raise TraceError("--host '': names no address (127.0.0.1 this machine only, 0.0.0.0 every interface)")
    # What `nsight-tui FILE` refuses, refused here, before serving: an empty, truncated or
    # foreign file served a page per tab that failed only once a browser opened it.
    from nsight_tui.parsers import export_paths
    from nsight_tui.tui.launch import check_readable

    paths = export_paths(args.paths)
    if len(paths) == 1:
        check_readable(paths[0])
    if args.host not in LOOPBACK:
        print(f"note: listening on {args.host}: anyone who reaches port {args.port} can read these profiles",
              file=sys.stderr)
    title = "nsight-tui " + " ".join(Path(p).name for p in args.paths)
    print(f"nsight-tui: open http://{args.host}:{args.port} in a browser (ctrl+c stops)", file=sys.stderr)
    try:
        page_server(command(args), args.host, args.port, title).serve()
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise TraceError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    return 0


TEMPLATES = Path(__file__).with_name("templates")


def page_server(cmd: str, host: str, port: int, title: str):
    """textual-serve's server, with a page whose addresses follow the request and no font from the internet.

    Its own page writes absolute URLs made of the address it listens on (`ws://127.0.0.1:8000/ws`), so
    behind `ssh -L 9000:127.0.0.1:8000` the browser's page at localhost:9000 dialled port 8000 on the
    user's laptop; and it loads Roboto Mono from Google's servers, which a GPU box's browser often
    cannot reach. Here the page's static and websocket addresses are made from the request's own
    Host header, and the font is textual-serve's bundled copy."""
    import aiohttp_jinja2
    from textual_serve.server import Server, to_int

    class PageServer(Server):
        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request):
            scheme = "wss" if request.secure else "ws"
            static = request.app.router["static"].url_for(filename="/")
            return {
                "font_size": to_int(request.query.get("fontsize", "16"), 16),
                "app_websocket_url": f"{scheme}://{request.host}{request.app.router['websocket'].url_for()}",
                "config": {"static": {"url": str(static).rstrip("/") + "/"}},
                "application": {"name": self.title},
            }

    return PageServer(cmd, host=host, port=port, title=title, templates_path=TEMPLATES)
