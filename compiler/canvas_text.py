"""Text in our own SVG drawings (the plan canvas, the run card): measured, wrapped, escaped.

There is no browser at drawing time, so widths are estimated from Arial's metrics
(Liberation Sans, which the SVGs ask for first, has the same widths), bold a little
wider, every other character as wide as a wide letter; a margin covers the rest. Text
that does not fit in its lines is cut with an ellipsis, and the whole text goes into a
`<title>` (the tooltip), so nothing is cut silently. The browser tests check the
estimate: no text leaves its box. Bidirectional controls (U+202A–U+202E, U+2066–U+2069),
which would reorder what a reader sees around them, are shown escaped (`\u202e`), as
compilers show them in source text; widths are measured on the text as shown.
"""

from __future__ import annotations

from html import escape

from todoflow.dsl.nodes import node

FONT = "'Liberation Sans', Arial, Helvetica, sans-serif"
MONO = "'Liberation Mono', 'DejaVu Sans Mono', monospace"
LINE_HEIGHT = 1.3  # times the font size

# Arial's advance widths in 1/1000 em, for the printable ASCII characters from the space
_ARIAL = (
    "278 278 355 556 556 889 667 191 333 333 389 584 278 333 278 278 556 556 556 556 556 556 556 556 "
    "556 556 278 278 584 584 584 556 1015 667 667 722 722 667 611 778 722 278 500 667 556 833 722 778 "
    "667 778 722 667 611 722 667 944 667 667 611 278 278 278 469 556 333 556 556 500 556 556 278 556 "
    "556 222 222 500 222 833 556 556 556 556 333 500 278 556 500 722 500 500 500 334 260 334 584"
)
_WIDTHS = {chr(32 + i): int(w) / 1000 for i, w in enumerate(_ARIAL.split())}
_BOLD = 1.1
_MARGIN = 1.06
_WIDE = 1.0  # CJK and other full-width characters
_OTHER = 0.72  # any other character: a wide letter, or a symbol from a fallback font
ELLIPSIS = "…"
_BIDI_SHOWN = {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def shown(text: str) -> str:
    """`text` with its bidirectional controls written out as escapes, visible."""
    return text.translate(_BIDI_SHOWN)


def width(text: str, size: float, bold: bool = False, mono: bool = False) -> float:
    """The estimated width of `text` at `size` px, a little more than it will take."""
    text = shown(text)
    if mono:
        return len(text) * 0.61 * size
    ems = sum(_WIDTHS.get(c) or (_WIDE if ord(c) >= 0x2E80 else _OTHER) for c in text)
    return ems * size * (_BOLD if bold else 1) * _MARGIN


@node
class Lines:
    lines: tuple[str, ...]
    cut: bool  # True when the text did not fit: the last line ends in an ellipsis


def wrap(text: str, room: float, size: float, most: int, bold: bool = False, mono: bool = False) -> Lines:
    """`text` in at most `most` lines no wider than `room` px; words longer than a line break."""
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        current = ""
        for word in paragraph.split():
            candidate = f"{current} {word}" if current else word
            if width(candidate, size, bold, mono) <= room:
                current = candidate
                continue
            if current:
                lines.append(current)
            while width(word, size, bold, mono) > room:
                cut = _fit(word, room, size, bold, mono)
                lines.append(word[:cut])
                word = word[cut:]
            current = word
        lines.append(current)
    if len(lines) <= most:
        return Lines(tuple(lines), False)
    kept = lines[:most]
    kept[-1] = shorten(f"{kept[-1]} {lines[most]}", room, size, bold, mono)
    if not kept[-1].endswith(ELLIPSIS):  # the next line fitted whole: what follows it is cut
        kept[-1] = shorten(kept[-1] + ELLIPSIS, room, size, bold, mono)
    return Lines(tuple(kept), True)


def shorten(text: str, room: float, size: float, bold: bool = False, mono: bool = False) -> str:
    """`text` as it is if it fits in `room`, else cut to fit with an ellipsis."""
    if width(text, size, bold, mono) <= room:
        return text
    keep = _fit(text, room - width(ELLIPSIS, size, bold, mono), size, bold, mono)
    return text[:keep].rstrip() + ELLIPSIS


def _fit(text: str, room: float, size: float, bold: bool, mono: bool) -> int:
    """How many leading characters of `text` fit in `room` (at least one)."""
    count = 1
    while count < len(text) and width(text[: count + 1], size, bold, mono) <= room:
        count += 1
    return count


def xml(text: str) -> str:
    """Text for SVG or HTML: `&`, `<`, `>` and quotes escaped; control characters dropped;
    bidirectional controls shown as escapes."""
    return escape(shown("".join(c for c in text if c >= " " or c == "\n")), quote=True)


def text_block(
    x: float,
    y: float,
    lines: Lines,
    full: str,
    size: float,
    *,
    bold: bool = False,
    mono: bool = False,
    color: str = "#0f172a",
    css: str = "",
) -> str:
    """A `<text>` of `lines` whose first baseline is `y`; a `<title>` holds `full` if it was cut."""
    weight = ' font-weight="bold"' if bold else ""
    family = MONO if mono else FONT
    parts = [
        f'<text x="{x:g}" y="{y:g}" font-size="{size:g}" font-family="{family}" fill="{color}"{weight}'
        + (f' class="{css}"' if css else "")
        + ">"
    ]
    if lines.cut:
        parts.append(f"<title>{xml(full)}</title>")
    for index, line in enumerate(lines.lines):
        dy = "0" if index == 0 else f"{size * LINE_HEIGHT:g}"
        parts.append(f'<tspan x="{x:g}" dy="{dy}">{xml(line)}</tspan>')
    parts.append("</text>")
    return "".join(parts)
