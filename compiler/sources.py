"""Reading `.todoflow` files at the edge: bytes -> text, or a diagnostic.

A file that cannot be read at all (missing, a folder, no permission) is a usage
problem (`UnreadableError`, exit 2); a file that is read but is not UTF-8 text is a
diagnostic like any other source error (exit 1), pointing at the first bad byte.
"""

from __future__ import annotations

import sys

from todoflow.dsl.diagnostics import Diagnostic, TodoflowError
from todoflow.dsl.spans import Span

STDIN = "-"


class UnreadableError(TodoflowError):
    """A path that names nothing readable."""


def read_source(path: str) -> tuple[str, Diagnostic | None]:
    """The text of `path` (`-` is standard input), and a diagnostic if it is not UTF-8.

    Text that is not UTF-8 comes back decoded with replacement characters, for excerpts.
    """
    try:
        data = sys.stdin.buffer.read() if path == STDIN else _read_bytes(path)
    except OSError as error:
        raise UnreadableError(f"cannot read {path}: {error.strerror or error}") from error
    return decode(data, display_name(path))


def display_name(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def decode(data: bytes, path: str) -> tuple[str, Diagnostic | None]:
    """The UTF-8 text of `data`, and a diagnostic at the first bad byte if it is not UTF-8
    (the text then comes back decoded with replacement characters, for excerpts)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return data.decode("utf-8", "replace"), _not_utf8(path, data, error)


def _not_utf8(path: str, data: bytes, error: UnicodeDecodeError) -> Diagnostic:
    before = data[: error.start]
    line = before.count(b"\n") + 1
    column = len(before[before.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
    span = Span(path, line, column, line, column + 1)
    byte = data[error.start]
    return Diagnostic(
        "E0007",
        "error",
        f"this file is not UTF-8 text: byte 0x{byte:02x} cannot start a character here",
        span,
        "save the file as UTF-8",
    )
