"""String literals: decoding `"..."` and `\"\"\"...\"\"\"` tokens, and quoting values back.

Decoding belongs to the builder (parse stage); quoting to the formatter and to any
emitter of source. The two are mirror images: `decode(quote(v)) == v` for every value.
Imports nothing but `dsl.spans` and `dsl.diagnostics`.
"""

from __future__ import annotations

import re

from .diagnostics import Diagnostic
from .spans import Span

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|u|.|$)", re.DOTALL)
_SIMPLE = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_QUOTE_PLAIN = re.compile(r'["\\\x00-\x1f\x7f]')
_QUOTE_BLOCK = re.compile(r'"(?="")|[\\\x00-\x09\x0b-\x1f\x7f]')
_ESCAPE_HELP = 'the escapes are \\" \\\\ \\n \\t and \\uXXXX; write \\\\ for a backslash'


def decode_plain(raw: str, path: str, line: int, column: int, problems: list[Diagnostic]) -> str:
    """The value of a plain string token `raw` (quotes included) at line:column."""
    return _unescape(raw[1:-1], path, line, column + 1, problems)


def decode_block(raw: str, path: str, line: int, column: int, problems: list[Diagnostic]) -> str:
    """The value of a block string: drop the opening and closing blank lines, dedent, unescape."""
    body = raw[3:-3]
    first_line = line
    first_column = column + 3
    head = body.find("\n")
    if head >= 0 and not body[:head].strip(" \t"):
        body = body[head + 1 :]
        first_line += 1
        first_column = 1
    tail = body.rfind("\n")
    if tail >= 0 and not body[tail + 1 :].strip(" \t"):
        body = body[:tail]
    lines = body.split("\n")
    margin = _common_margin(lines)
    out = []
    for index, text in enumerate(lines):
        if not text.strip(" \t"):
            out.append("")
            continue
        start = first_column if index == 0 else 1
        out.append(_unescape(text[len(margin) :], path, first_line + index, start + len(margin), problems))
    return "\n".join(out)


def _common_margin(lines: list[str]) -> str:
    margins = [text[: len(text) - len(text.lstrip(" \t"))] for text in lines if text.strip(" \t")]
    if not margins:
        return ""
    shortest, longest = min(margins), max(margins)
    size = 0
    while size < len(shortest) and shortest[size] == longest[size]:
        size += 1
    return shortest[:size]


def _unescape(text: str, path: str, line: int, column: int, problems: list[Diagnostic]) -> str:
    if "\\" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in _SIMPLE:
            return _SIMPLE[code]
        if len(code) == 5:
            point = int(code[1:], 16)
            if not 0xD800 <= point <= 0xDFFF:
                return chr(point)
        where = column + match.start()
        span = Span(path, line, where, line, where + len(match.group(0)))
        problems.append(_bad_escape(match.group(0), span))
        return match.group(0)

    return _ESCAPE.sub(replace, text)


def _bad_escape(escape: str, span: Span) -> Diagnostic:
    if escape == "\\":
        message = "a `\\` at the end of a line escapes nothing"
    elif escape.startswith("\\u") and len(escape) == 6:
        message = f"`{escape}` is a surrogate, not a character"
    elif escape == "\\u":
        message = "`\\u` needs exactly four hexadecimal digits"
    else:
        message = f"unknown escape `{escape}`"
    return Diagnostic("E0006", "error", message, span, _ESCAPE_HELP)


def quote(value: str) -> str:
    """A plain string literal for `value`."""
    return '"' + _QUOTE_PLAIN.sub(_escape_char, value) + '"'


def quote_block(value: str, indent: str) -> str:
    """A block string literal for `value` whose lines are indented by `indent`."""
    lines = [_QUOTE_BLOCK.sub(_escape_char, text) for text in value.split("\n")]
    lines = [_protect_blank(text) for text in lines]
    if all(text.startswith(" ") for text in lines if text):
        first = next((i for i, text in enumerate(lines) if text), None)
        if first is not None:
            lines[first] = "\\u0020" + lines[first][1:]
    body = "\n".join(indent + text if text else "" for text in lines)
    return f'"""\n{body}\n{indent}"""'


def _protect_blank(text: str) -> str:
    """A line of spaces only would be read back as empty: escape its first space."""
    if text and not text.strip(" "):
        return "\\u0020" + text[1:]
    return text


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    return {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}.get(char) or f"\\u{ord(char):04x}"
