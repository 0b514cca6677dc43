"""Markdown pipe tables: `table(headers, rows, title, notes)` (kept for the TUI's views;
the implementation, shared with CSV/JSON/terminal, is `nsight_tui.render.tables.markdown`)."""
from __future__ import annotations

from nsight_tui.render.tables import markdown as table

__all__ = ["table"]
