"""Answers sized for an agent: a client gets each answer twice (the structured content and its
compact JSON text) and coding agents cap a tool result around 25k tokens, so one copy stays under
ANSWER_CHARS (both together under 50,000 characters).

Three levers, each saying in the answer what it left out and which argument brings it back:
- a table paged by size (`page_by_size`): the rows that fit, `next_offset` where the rest begin;
- the report's sections by size (`pick_sections`): the most useful first, the others named with
  their size, for `sections` to ask;
- a last resort for answers with no argument of their own (`shrink`): the longest lists cut to fit,
  each cut said with where the whole list is.
No MCP SDK here: the server (nsight_tui.mcp.server) applies these to what the tools return.
"""
from __future__ import annotations

import json
from typing import Any

ANSWER_CHARS = 22_000  # one copy (compact JSON); the client's whole result is about twice this
TOTAL_CHARS = 50_000  # the whole result a client receives: structured content + its text

SIZED = "_sized"  # a page's marker, naming the argument that moves it on: its rows are cut to the answer's size


def compact(doc: Any) -> str:
    """The JSON text a client receives: no indentation, no spaces, characters as they are."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


def size(doc: Any) -> int:
    return len(compact(doc))


def fit_pages(doc: Any, budget: int = ANSWER_CHARS) -> Any:
    """`doc` with each page marked SIZED cut to the rows that fit in `budget` characters (at least
    one row, so paging always moves on), saying where the rest begin."""
    for page in list(_sized_pages(doc)):
        rows = page["rows"]
        moves_on = page.pop(SIZED)
        page["rows"] = []
        room = budget - size(doc) - 200  # the note below and the paging fields' digits
        kept, used = 0, 0
        for row in rows:
            used += size(row) + 1
            if kept and used > room:
                break
            kept += 1
        page["rows"] = rows[:kept]
        if kept < len(rows):
            start = page["offset"]
            page["returned"] = kept
            page["next_offset"] = start + kept
            page["cut"] = (f"rows {start + kept}.. left out to keep the answer under {budget:,} characters: "
                           f"call again with {moves_on}={start + kept}")
    return doc


def fit(doc: dict, where: str, keep: tuple[str, ...] = (), budget: int = ANSWER_CHARS) -> dict:
    """`doc` under `budget`: its lists outside its pages cut first (leaving its pages a third of the
    budget, or what their rows need if less; the lists under `keep` last), then its pages to what is
    left."""
    pages = list(_sized_pages(doc))
    held = [page.pop("rows") for page in pages]
    rows = sum(size(r) for r in held)
    doc = shrink(doc, where, budget - min(rows, budget // 3), keep)
    for page, rows in zip(_sized_pages(doc), held):  # shrink copies: the same pages, in the same order
        page["rows"] = rows
    return fit_pages(doc, budget)


def _sized_pages(doc: Any):
    if isinstance(doc, dict):
        if doc.get(SIZED):
            yield doc
        for v in doc.values():
            yield from _sized_pages(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _sized_pages(v)


def pick_sections(doc: dict, keep: tuple[str, ...], priority: tuple[str, ...], budget: int = ANSWER_CHARS) -> dict:
    """The report's sections that fit in `budget`: `keep` always, then `priority`'s order, then the
    rest in the document's order, each taken if it still fits; the others named with their size."""
    chosen = {k: doc[k] for k in keep if k in doc}
    used = size(chosen) + 600  # the note on what was left out
    order = [k for k in priority if k in doc] + [k for k in doc if k not in priority]
    left: dict[str, int] = {}
    for key in order:
        if key in chosen:
            continue
        n = size(doc[key]) + len(key) + 4
        if used + n <= budget:
            chosen[key] = doc[key]
            used += n
        else:
            left[key] = n
    out = {k: chosen[k] for k in doc if k in chosen}  # the document's own order
    if left:
        out["left_out"] = {
            "sections": left,
            "why": f"the sections that did not fit in {budget:,} characters (each with its size in characters)",
            "how": "report(sections=[...]) with one or a few of them answers them whole",
        }
    return out


def shrink(doc: Any, where: str, budget: int = ANSWER_CHARS, keep: tuple[str, ...] = ()) -> Any:
    """A last resort for an answer over `budget` with no paging of its own: its longest lists cut
    to the items that fit, longest first (those under the top-level keys `keep` only when no other
    is left), each cut said in `left_out` (`where` tells where the whole list is)."""
    if size(doc) <= budget or not isinstance(doc, dict):
        return doc
    doc = json.loads(compact(doc))  # cut a copy: the answer may be a cached one
    cuts: dict[str, str] = {}
    while size(doc) > budget:
        found = _longest_list(doc, keep) or _longest_list(doc, ())
        if found is None:
            break
        path, items = found
        over = size(doc) - budget + 300
        kept, drop = len(items), 0
        while kept > 1 and drop < over:
            kept -= 1
            drop += size(items[kept]) + 1
        if kept == len(items):
            break
        _set(doc, path, items[:kept])
        name = ".".join(str(p) for p in path)
        cuts[name] = f"{len(items) - kept} of {len(items)} items left out"
    if cuts:
        said = {"lists": cuts, "why": f"the answer is kept under {ANSWER_CHARS:,} characters", "how": where}
        if isinstance(doc.get("left_out"), dict):  # the report's sections left out already
            doc["left_out"]["lists"] = said
        else:
            doc["left_out"] = said
    return doc


def _longest_list(doc: dict, skip: tuple[str, ...]) -> tuple[tuple, list] | None:
    """The longest list with more than one item, and its path, outside the top-level keys `skip`."""
    best: tuple[int, tuple, list] | None = None
    stack: list[tuple[tuple, Any]] = [((k,), v) for k, v in doc.items() if k not in skip]
    while stack:
        at, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((at + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            if len(value) > 1:
                n = size(value)
                if best is None or n > best[0]:
                    best = (n, at, value)
            stack.extend((at + (i,), v) for i, v in enumerate(value))
    return None if best is None else (best[1], best[2])


def _set(doc: Any, path: tuple, value: Any) -> None:
    for p in path[:-1]:
        doc = doc[p]
    doc[path[-1]] = value
