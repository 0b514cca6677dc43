"""The ratios beside a kernel table, with their basis said once.

Family shares all divide by the same thing; the panel states that basis once as a caption
and lists the shares under it, then the other ratios, each with its own basis.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from nsight_tui.parsers.analyses.ratios import Ratio


@dataclass(frozen=True)
class RatioPanelView:
    caption: str = ""  # the basis the `shared` ratios all divide by
    shared: list[Ratio] = field(default_factory=list)
    own: list[Ratio] = field(default_factory=list)  # ratios with a basis of their own

    @property
    def empty(self) -> bool:
        return not self.shared and not self.own

    @property
    def all(self) -> list[Ratio]:
        return [*self.shared, *self.own]


def panel(ratios: list[Ratio]) -> RatioPanelView:
    """Group `ratios` on the basis most of them share (the family shares)."""
    if not ratios:
        return RatioPanelView()
    basis, n = Counter(r.basis for r in ratios).most_common(1)[0]
    if n < 2:
        return RatioPanelView(own=list(ratios))
    return RatioPanelView(caption=f"shares of {basis}", shared=[r for r in ratios if r.basis == basis],
                          own=[r for r in ratios if r.basis != basis])


def short_label(label: str) -> str:
    """`GEMM (matmul) share` -> `GEMM`; `launch overhead (median)` -> `launch overhead`:
    the compact flow has no room for the words the caption or the help already say."""
    label = re.sub(r"\s*\([^)]*\)", "", label)
    return label[:-6] if label.endswith(" share") else label
