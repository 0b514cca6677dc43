"""Two kernel sequences aligned: Myers' shortest edit script (O((n+m)·D), D the number of kernels one
side has and the other not), which is fast where two captures differ by a few kernels per step;
difflib's matcher where they differ by many (an optimizer of 2,000 kernels against one of 20)."""
from __future__ import annotations

import difflib
from collections.abc import Sequence

# Beyond this many insertions and deletions, Myers' walk costs more than difflib's block matching.
MYERS_MAX_D = 400


def _myers_matches(a: Sequence, b: Sequence, max_d: int) -> list[tuple[int, int]] | None:
    """Matched (i, j) pairs of a shortest edit script, or None when it needs more than max_d edits."""
    n, m = len(a), len(b)
    v: dict[int, int] = {1: 0}
    history: list[dict[int, int]] = []
    for d in range(max_d + 1):
        history.append(dict(v))
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[k - 1] < v[k + 1]):
                x = v[k + 1]
            else:
                x = v[k - 1] + 1
            y = x - k
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            v[k] = x
            if x >= n and y >= m:
                return _backtrack(history, a, b, d, k, n, m)
    return None


def _backtrack(history, a, b, d_end, k_end, n, m) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(d_end, -1, -1):
        v = history[d]
        k = x - y
        if d == 0:
            while x > 0 and y > 0:
                x, y = x - 1, y - 1
                pairs.append((x, y))
            break
        if k == -d or (k != d and v[k - 1] < v[k + 1]):
            prev_k = k + 1
        else:
            prev_k = k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y and x > 0 and y > 0 and (x - 1 >= (prev_x if prev_k == k + 1 else prev_x + 1)):
            x, y = x - 1, y - 1
            pairs.append((x, y))
        x, y = prev_x, prev_y
    pairs.reverse()
    return pairs


def opcodes(a: Sequence, b: Sequence, max_d: int = MYERS_MAX_D,
            fallback: bool = True) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes ('equal', 'replace', 'delete', 'insert', i1, i2, j1, j2) aligning b to a;
    where they differ by more than `max_d` items, difflib's, or none without `fallback`."""
    pairs = _myers_matches(a, b, max_d)
    if pairs is None and not fallback:
        return []
    if pairs is None:
        return [(str(t), i1, i2, j1, j2) for t, i1, i2, j1, j2 in
                difflib.SequenceMatcher(None, list(a), list(b), autojunk=False).get_opcodes()]
    out: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    run_start: tuple[int, int] | None = None
    for x, y in pairs + [(len(a), len(b))]:
        if (x, y) != (len(a), len(b)) and x == i and y == j:
            if run_start is None:
                run_start = (i, j)
            i, j = i + 1, j + 1
            continue
        if run_start is not None:
            out.append(("equal", run_start[0], i, run_start[1], j))
            run_start = None
        if x > i or y > j:
            tag = "replace" if x > i and y > j else ("delete" if x > i else "insert")
            out.append((tag, i, x, j, y))
        i, j = x, y
        if (x, y) != (len(a), len(b)):
            run_start = (i, j)
            i, j = i + 1, j + 1
    if run_start is not None:
        out.append(("equal", run_start[0], i, run_start[1], j))
    return out
