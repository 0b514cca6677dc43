"""`nsight-tui mcp FILE|DIR...`: a Model Context Protocol server over stdio for agents.

Serves only the profiles named here (files, or the exports inside a folder), read-only.
Needs the `mcp` extra: pip install 'nsight-tui[mcp]'.
"""
from __future__ import annotations

import argparse
import importlib.util

from nsight_tui.parsers import TraceError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR",
                        help="the profiles the server may read: nsys SQLite exports, parquetdir/arrowdir "
                        "exports, or folders of them (nothing else is ever read)")


def sdk_present() -> bool:
    """Whether the official SDK, version 2 (mcp.server.mcpserver), can be imported."""
    try:
        return importlib.util.find_spec("mcp") is not None and importlib.util.find_spec("mcp.server.mcpserver") is not None
    except ImportError:  # an `mcp` that is not the SDK, or version 1 (no mcp.server.mcpserver)
        return False


def run(args: argparse.Namespace) -> int:
    if not sdk_present():
        raise TraceError("the MCP server needs the mcp package, version 2: pip install 'nsight-tui[mcp]'")
    from nsight_tui.mcp.server import serve

    serve(args.paths)
    return 0
