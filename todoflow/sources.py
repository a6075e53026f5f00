"""Reading `.todoflow` files at the edge: bytes -> text, or a diagnostic.

A file that cannot be read at all (missing, a folder, no permission) is a usage
problem (`UnreadableError`, exit 2); a file that is read but is not UTF-8 text is a
diagnostic like any other source error (exit 1), pointing at the first bad byte.
"""

from __future__ import annotations

import sys

from todoflow.dsl.diagnostics import Diagnostic, TodoflowError
from todoflow.dsl.encoding import decode

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
