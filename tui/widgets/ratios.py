"""The ratios beside a range's kernel table: the family shares under one caption that says
what they divide by, then the other ratios (GPU busy vs CPU, launch overhead, queue delay,
phase ratios). Wide screens give each of those its basis; narrow ones a compact flow."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from nsight_tui.render.numbers import quantity
from nsight_tui.render.safe import visible
from nsight_tui.tui.viewmodels.ratios import RatioPanelView, short_label


class RatioPanel(Static):
    DEFAULT_CSS = """
    RatioPanel { height: auto; padding: 0 1; background: $panel; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = RatioPanelView()
        self._compact = True

    @property
    def compact(self) -> bool:
        return self._compact

    @compact.setter
    def compact(self, value: bool) -> None:
        if value != self._compact:
            self._compact = value
            self._draw()

    def on_resize(self) -> None:
        if not self._compact:
            self._draw()

    def show(self, view: RatioPanelView) -> None:
        self.view = view
        self._draw()

    def _draw(self) -> None:
        if self.view.empty:
            self.update("")
            return
        self.update(self._flow() if self._compact else self._table())

    def _flow(self) -> Text:
        text = Text()
        v = self.view
        if v.shared:
            text.append(f"{visible(v.caption)}: ", style="dim")
            for i, r in enumerate(v.shared):
                text.append("  " if i else "")
                text.append(f"{visible(short_label(r.label))} ")
                text.append(quantity(r.value, r.unit), style="bold")
            if v.own:
                text.append("\n")
        for i, r in enumerate(v.own):
            if i:
                text.append("  ·  ", style="dim")
            text.append(f"{visible(short_label(r.label))} ")
            text.append(quantity(r.value, r.unit), style="bold")
        return text

    def _table(self) -> Text:
        """The caption, the shares as `label ... value`, then each other ratio with its basis
        dimmed and wrapping under it."""
        width = max(self.content_size.width, 30)
        text = Text()

        def row(label: str, value: str) -> None:
            room = max(width - len(value) - 1, 8)
            label = label if len(label) <= room else label[: room - 1] + "…"
            text.append(label.ljust(room) + " ")
            text.append(value, style="bold")

        v = self.view
        if v.shared:
            text.append(visible(v.caption[:1].upper() + v.caption[1:]), style="dim italic")
            for r in v.shared:
                text.append("\n")
                row(visible(short_label(r.label)), quantity(r.value, r.unit))
            if v.own:
                text.append("\n")
        for i, r in enumerate(v.own):
            text.append("\n" if i or v.shared else "")
            row(visible(r.label), quantity(r.value, r.unit))
            text.append(f"\n  {visible(r.basis)}", style="dim")
        return text
