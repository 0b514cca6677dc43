"""Names from a profile are untrusted data: made safe here before they reach any output.

A shared profile can name a kernel, an NVTX range or a thread `\\x1b]0;title\\x07\\x1b[2J`
(set the terminal's title, clear the screen), `[bold red]` (Rich markup) or
`[text](http://…)` / `<script>` (Markdown and HTML). Every renderer goes through this module:

- `visible(text)`: THE function. Control characters (C0 incl. NUL, ESC, BEL, CR, LF, TAB; DEL;
  C1 U+0080-U+009F) and the Unicode bidirectional overrides become visible escapes
  (`\\x1b`, `\\r`, `\\u202e`), so nothing a profile says can move the cursor, reorder text or
  end a line. Everything else, backslashes included, is kept as it is (CSV output stays
  NVIDIA's, byte for byte, for every name that has no control character).
- `markdown(text)`: `visible`, then Markdown/HTML syntax escaped (`\\ | < > [ ]`, and `&` where it
  would start an entity) so a name reads as the same text once rendered: never a link, an
  image, an HTML tag or a table cell break. (Backticks and `*`/`_` are left alone: at worst
  they change a name's typeface, and headers use code spans of their own.)
- `rich_text(text)`: a `rich.text.Text` of `visible(text)`: never parsed as markup.
- `short(text)`: `visible`, cut to LINE_NAME_MAX characters (names in one-line notes).
- `document(text)`: the last pass over a whole output (stdout, `-o` files, the TUI's exports:
  `render.output` applies it to everything it writes). Whatever a renderer let through, no
  control or bidi character but a newline or tab reaches the terminal or the file: each left
  becomes `\\uXXXX`, which is also how JSON writes it (these characters only ever occur inside
  JSON strings, so a JSON document stays valid and means the same). JSON needs nothing else:
  `json.dumps` escapes C0 controls itself, and `document` the C1 and bidi ones it keeps.

Each is linear in the name's length and returns the very same string when nothing needs doing
(the common case), so calling it on every repaint costs one regex scan.
"""
from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; bidi embeddings/overrides/isolates (U+202A-E, U+2066-9) and
# the line/paragraph separators U+2028/9, which some terminals and editors treat as newlines.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text) -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`, `\\n`, `\\u202e`)."""
    if text is None:
        return ""
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


# A name in a line of prose (a note, a header): cut past this many characters. Tables and
# JSON keep names whole; a 1 MB thread name in one `note:` line helps no one.
LINE_NAME_MAX = 200


def short(text, limit: int = LINE_NAME_MAX) -> str:
    """`visible(text)`, cut to `limit` characters with `…(+N characters)` saying how much went."""
    shown = visible(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}…(+{len(shown) - limit:,} characters)"


# Every character `visible` escapes, but the newline and tab a document's own layout uses.
_UNSAFE_IN_DOCUMENT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def document(text: str) -> str:
    """`text` (a whole output: a report, a table, a JSON document) with every control or bidi
    character other than newline and tab written `\\uXXXX`: the guard behind every renderer."""
    if not _UNSAFE_IN_DOCUMENT.search(text):
        return text
    return _UNSAFE_IN_DOCUMENT.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# Backslash first in the class so `\|` in the output always means a literal `|`.
_MARKDOWN = re.compile(r"[\\|<>\[\]]|&(?=#?\w+;)")


def markdown(text) -> str:
    """`visible(text)` escaped for Markdown (a table cell or a line of prose): renders as the
    same characters, never as a link, an HTML tag, an entity or a cell break."""
    return _MARKDOWN.sub(lambda m: "\\" + m.group(), visible(text))


def rich_text(text, style: str = ""):
    """A Rich `Text` showing `visible(text)` literally (Rich markup in names is not parsed)."""
    from rich.text import Text

    return Text(visible(text), style=style)
