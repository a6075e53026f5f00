"""What the CLI writes to a terminal: colour when it is one, and `--quiet`'s errors only.

**Colour.** Diagnostics are coloured when stderr is a terminal (and `TERM` is not
`dumb`), never when it is a pipe or a file; `NO_COLOR` (set, not empty) turns colour off
everywhere and `FORCE_COLOR` (set, not empty, not `0`) turns it on for pipes too — the
conventions of no-color.org and of the many tools that read `FORCE_COLOR`.

**`--quiet`**: what a verb says on stderr, errors only.

Every verb reports to stderr: its errors (`todoflow: error: ...`), source diagnostics
(`file:line:col: error[E0102]: ...` with their excerpt, help and notes, up to a blank
line), and what is merely for information — warnings, notes, summaries, `wrote ...`,
`resume with: ...`. Under `--quiet` stderr is wrapped in `ErrorsOnly`, which keeps the
first two and drops the rest, so every verb, present and future, honours the option
without a flag of its own. What a verb prints on stdout is its result and is kept.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

_ERROR = "todoflow: error:"
# the first line of a rendered diagnostic: `path[:line:col]: severity[CODE]: message`
_DIAGNOSTIC = re.compile(r"^.+?: (error|warning|note)\[[A-Z]\d{4}\]: ")
_STYLE = re.compile(r"\x1b\[[0-9;]*m")


def colour(stream: TextIO) -> bool:
    """Whether to colour what is written to `stream`."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "0") not in ("", "0"):
        return True
    return stream.isatty() and os.environ.get("TERM") != "dumb"


class ErrorsOnly:
    """A text stream that passes on the errors written to it, line by line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.encoding = stream.encoding
        self.pending = ""
        self.keeping = False  # inside an error's block (up to the next blank line)

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self._line(line)
        return len(text)

    def _line(self, line: str) -> None:
        starts = _DIAGNOSTIC.match(_STYLE.sub("", line))
        if line.startswith(_ERROR) or starts is not None:
            self.keeping = line.startswith(_ERROR) or (starts is not None and starts.group(1) == "error")
        if self.keeping:
            self.stream.write(line + "\n")
        if not line:
            self.keeping = False

    def flush(self) -> None:
        if self.pending:
            line, self.pending = self.pending, ""
            self._line(line)
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()
