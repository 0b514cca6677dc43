"""Interval arithmetic written plainly, as the reference the vectorised code is tested against."""
from __future__ import annotations


def merged_length(intervals: list[tuple[int, int]]) -> int:
    """Sort by start, merge overlapping or touching intervals, add up the merged lengths."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e is not None else 0)
