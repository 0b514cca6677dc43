"""The ratios beside a range's kernel table: family shares, GPU busy vs CPU, and so on,
each with what it divides by. Wide screens get a column with the basis; narrow ones a
compact flow of `label value` pairs."""
from __future__ import annotations

import re

from rich.text import Text
from textual.widgets import Static

from nsight_tui.render.numbers import quantity
from nsight_tui.render.safe import visible


def short_label(label: str) -> str:
    """`GEMM (matmul) share` -> `GEMM`: the compact flow has no room for the words."""
    label = re.sub(r"\s*\([^)]*\)", "", label)
    return label[:-6] if label.endswith(" share") else label


class RatioPanel(Static):
    DEFAULT_CSS = """
    RatioPanel { height: auto; padding: 0 1; background: $panel; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ratios: list = []
        self.compact = True

    def on_resize(self) -> None:
        if self.ratios and not self.compact:
            self.update(self._table())

    def show(self, ratios: list, compact: bool | None = None) -> None:
        self.ratios = list(ratios)
        if compact is not None:
            self.compact = compact
        if not self.ratios:
            self.update("")
            return
        self.update(self._compact() if self.compact else self._table())

    def _compact(self) -> Text:
        text = Text()
        for i, r in enumerate(self.ratios):
            if i:
                text.append("  ·  ", style="dim")
            text.append(f"{visible(short_label(r.label))} ")
            text.append(quantity(r.value, r.unit), style="bold")
        return text

    def _table(self) -> Text:
        """One line `label ... value`, then the basis, dimmed, wrapping under it."""
        width = max(self.content_size.width, 30)
        text = Text()
        for i, r in enumerate(self.ratios):
            if i:
                text.append("\n")
            value, label = quantity(r.value, r.unit), visible(r.label)
            room = max(width - len(value) - 1, 8)
            label = label if len(label) <= room else label[: room - 1] + "…"
            text.append(label.ljust(room) + " ")
            text.append(value, style="bold")
            text.append(f"\n  {visible(r.basis)}", style="dim")
        return text
