"""Widgets of the TUI: the virtual grid, info bar, key bar, prompt, ratios panel."""
