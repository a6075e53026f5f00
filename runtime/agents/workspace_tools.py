"""The workspace tools an LLM agent calls beside its decisions: `read_file`, `write_file`,
`edit_file`, `list_files`, `search_files` and, when the shell is on, `run_command` (the
names are a contract: models and programs are written against them).

A `Toolset` (`toolbox.py`). Every path is confined as prevalidation confines it
(`runtime/workspace.py`'s `workspace_file`: `..`, absolute paths, links out, hard links,
NUL, devices and FIFOs refused); a refused call changes nothing and says why in one
line. Every call is bounded (`Bounds`, documented in docs/llm.md). A command runs in the
workspace with a clean environment (`CLEAN_ENV`: no provider key, no store URL, no
learn_code token reaches it), in a process group of its own that is killed at its
timeout, at the call's deadline, or when the run stops; the driver is told of it as it
starts (`on_start`: it journals it, so a resume kills it if the runner was killed).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from todoflow.compiler.files import write_atomically

from ..replies import model_properties
from ..workspace import Located, workspace_file
from .offer import SHELL_TOOL, workspace_tools
from .process_groups import kill, starting
from .toolbox import Started, ToolOutcome, ToolSpec

BINARY_HEAD = 8192  # a NUL in a file's first bytes: it is binary, not shown nor searched
SKIPPED_PIECE = 64 * 1024  # bytes read at a time while skipping to read_file's offset (>= BINARY_HEAD)
NUMBERS_PAGE = 2000  # read_file's line numbers are made this many at a time, and kept
CLEAN_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL")
# the environment a command sees: an allow-list, so a secret added tomorrow stays out


@dataclass(frozen=True)
class Bounds:
    """What one call may read, write, list, find or print (docs/llm.md lists them)."""

    read_lines: int = 2000  # lines of one read_file
    read_bytes: int = 256 * 1024  # bytes of one read_file
    write_bytes: int = 1024 * 1024  # content of write_file, a file edit_file edits
    listed: int = 1000  # names of one list_files
    found: int = 200  # matches of one search_files
    searched_bytes: int = 1024 * 1024  # larger files are skipped by search_files
    line_chars: int = 300  # a search match's line is cut here
    output_bytes: int = 32 * 1024  # stdout and stderr of run_command, each (head and tail kept)
    shell_timeout_s: int = 120  # run_command's default timeout
    shell_max_s: int = 600  # the longest timeout a call may ask for


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadFile(_Strict):
    path: str = Field(description="A file of the workspace, relative to it.")
    offset: int = Field(1, ge=1, description="The first line to read (1 is the first).")
    limit: int = Field(2000, ge=1, description="How many lines to read (at most 2,000; 256 KB).")


class WriteFile(_Strict):
    path: str = Field(description="A file of the workspace, relative to it; parent folders are made.")
    content: str = Field(description="The file's whole new text (at most 1 MB).")


class EditFile(_Strict):
    path: str = Field(description="A file of the workspace, relative to it.")
    old_string: str = Field(min_length=1, description="The exact text to replace.")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence (else it must be unique).")


class ListFiles(_Strict):
    pattern: str = Field("**/*", description="A glob relative to the workspace (`**` spans folders).")


class SearchFiles(_Strict):
    pattern: str = Field(description="A regular expression (Python syntax), matched per line.")
    glob: str = Field("**/*", description="Which files to search, a glob relative to the workspace.")


class RunCommand(_Strict):
    command: str = Field(min_length=1, description="A shell command line, run in the workspace.")
    timeout_s: int | None = Field(
        None, ge=1, description="Seconds before it is killed (default 120, at most 600)."
    )


_TOOLS: dict[str, tuple[type[_Strict], str]] = {
    "read_file": (
        ReadFile,
        "Read a workspace file's text with line numbers (`offset`, `limit` to page through it).",
    ),
    "write_file": (WriteFile, "Create or replace a workspace file with `content`."),
    "edit_file": (
        EditFile,
        "Replace `old_string` with `new_string` in a workspace file; `old_string` must occur "
        "exactly once unless `replace_all`.",
    ),
    "list_files": (ListFiles, "List the workspace's files matching a glob, sorted; folders end in `/`."),
    "search_files": (SearchFiles, "Search workspace files for a regular expression: `path:line: text`."),
    "run_command": (
        RunCommand,
        "Run a shell command in the workspace; returns its exit code, stdout and stderr.",
    ),
}


def _spec(name: str) -> ToolSpec:
    model, description = _TOOLS[name]
    properties, required = model_properties(model)
    return ToolSpec(name, description, {"type": "object", "properties": properties, "required": required})


class WorkspaceTools:
    """The workspace tools of one run; `shell` offers `run_command`."""

    def __init__(
        self,
        workspace: Path,
        *,
        shell: bool = False,
        bounds: Bounds = Bounds(),
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.root, self.shell, self.bounds = workspace.resolve(), shell, bounds
        source = os.environ if environ is None else environ
        self.environ = {key: source[key] for key in CLEAN_ENV if key in source}
        self.running: dict[int, subprocess.Popen[bytes]] = {}
        self.started: Started | None = None  # told of each command as it starts
        self._specs = tuple(_spec(name) for name in workspace_tools(shell))  # the names `plan` shows

    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def call(self, name: str, arguments: Mapping[str, Any], deadline: float) -> ToolOutcome:
        if name == SHELL_TOOL and not self.shell:
            return _refused(
                "`run_command` is off: the shell is enabled by `[tools] shell = true` or --allow-shell"
            )
        if name not in _TOOLS:
            return _refused(f"`{name}` is not a workspace tool")
        model = _TOOLS[name][0]
        try:
            parsed = model.model_validate(dict(arguments))
        except ValidationError as error:
            return _refused(_invalid(error))
        try:
            outcome: ToolOutcome = _HANDLERS[name](self, parsed, deadline)
            return outcome
        except OSError as error:
            return _refused(f"{name} failed: {error.strerror or error}")

    def on_start(self, started: Started) -> None:
        self.started = started

    def close(self) -> None:
        for child in list(self.running.values()):
            kill(child)
        self.running.clear()

    def file(self, name: str) -> Located | str:
        return workspace_file(self.root, name)

    def existing(self, name: str) -> Existing | str:
        """A confined workspace file that is there, or why not (a read or an edit needs one)."""
        found = self.file(name)
        if isinstance(found, str):
            return found
        if found.status is None:
            return f"`{name}` does not exist in the workspace"
        return Existing(found.path, found.name, found.status)


class Existing(NamedTuple):
    """A confined regular file of the workspace, with the status it was found with."""

    path: str
    name: str
    status: os.stat_result

    def open(self) -> IO[bytes]:
        """The file opened for reading."""
        return open(self._descriptor(), "rb")

    def head(self, size: int) -> bytes:
        """Its first `size` bytes, or all it has: one `read` on a local file system, more
        where a read may come back short (a network file system)."""
        handle = self._descriptor()
        try:
            data = os.read(handle, size)
            while len(data) < min(size, self.status.st_size):
                more = os.read(handle, size - len(data))
                if not more:
                    break
                data += more
            return data
        finally:
            os.close(handle)

    def _descriptor(self) -> int:
        """The file opened for reading, refused (OSError) if the name no longer holds a
        regular file with one name: one swapped since it was found for a symbolic link is
        not followed, for a FIFO not waited on, for a hard link not read."""
        handle = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        opened = os.fstat(handle)
        if not stat.S_ISREG(opened.st_mode) or opened.st_nlink != 1:
            os.close(handle)
            raise OSError(errno.ESTALE, "it changed while it was opened")
        return handle


def _refused(reason: str) -> ToolOutcome:
    return ToolOutcome(f"refused: {reason}", refused=True)


def _invalid(error: ValidationError) -> str:
    problems = []
    for each in error.errors(include_url=False)[:3]:
        where = ".".join(str(part) for part in each["loc"]) or "arguments"
        problems.append(f"`{where}`: {each['msg']}")
    return "invalid arguments: " + "; ".join(problems)


# -- the tools ---------------------------------------------------------------------------


def _read_file(tools: WorkspaceTools, call: ReadFile, deadline: float) -> ToolOutcome:
    found = tools.existing(call.path)
    if isinstance(found, str):
        return _refused(found)
    bounds = tools.bounds
    room = min(found.status.st_size, bounds.read_bytes) + 1  # what it held when found, no more
    chunk = found.head(room) if call.offset == 1 else _from_line(found, call.path, call.offset, room)
    if isinstance(chunk, str):
        return ToolOutcome(chunk)
    if _binary(chunk):
        return ToolOutcome(f"`{call.path}` is a binary file ({found.status.st_size:,} bytes); not shown")
    lines, more, long_line = _lines(chunk, min(call.limit, bounds.read_lines), bounds.read_bytes)
    if not lines:
        return ToolOutcome(
            f"`{call.path}` is empty" if call.offset == 1 else f"`{call.path}` ends before line {call.offset}"
        )
    text = _numbered(lines, call.offset)
    following = call.offset + len(lines)
    if long_line:  # a reader told to read on from the next line would never see the rest
        text += (
            f"\n[cut: line {call.offset} is longer than {bounds.read_bytes:,} bytes and only its start"
            f" is shown; search_files finds text in the rest of it; call read_file with"
            f" offset={following} for any lines after it]"
        )
    elif more:
        text += f"\n[cut: the file goes on; call read_file with offset={following} to read on]"
    return ToolOutcome(text)


def _from_line(found: Existing, name: str, offset: int, room: int) -> bytes | str:
    """At most `room` bytes of the file from line `offset` on; its head when it is
    binary; or why there is nothing to read. The lines before it are skipped a piece at
    a time, their ends counted in C (a `readline` per line cost a Python call each)."""
    with found.open() as handle:
        piece, skipped, wanted = handle.read(SKIPPED_PIECE), 0, offset - 1
        if _binary(piece):
            return piece
        while (ends := piece.count(b"\n")) < wanted - skipped:
            skipped += ends
            following = handle.read(SKIPPED_PIECE)
            if not following:  # a last line without its end is a line too
                lines = skipped + (piece != b"" and not piece.endswith(b"\n"))
                return (
                    b"" if lines == wanted else f"`{name}` has {lines} lines; offset {offset} is past its end"
                )
            piece = following
        rest = piece.split(b"\n", wanted - skipped)[-1]
        return rest[:room] if len(rest) >= room else rest + handle.read(room - len(rest))


def _binary(data: bytes) -> bool:
    """Whether a file whose first bytes are `data` is binary: a NUL in its head."""
    return data.find(b"\0", 0, BINARY_HEAD) >= 0


def _lines(chunk: bytes, limit: int, size: int) -> tuple[list[bytes], bool, bool]:
    """The whole lines of `chunk` within `size` bytes and `limit` lines, without their
    line ends; whether the file goes on after them; whether the first line, longer than
    `size`, was cut (then it is all there is). Bytes are split, not text, and at most
    `limit` times: a line costs one object, and what lies past the limit is not split."""
    more = len(chunk) > size
    if more:
        cut = chunk.rfind(b"\n", 0, size)
        if cut < 0:
            return [chunk[:size].removesuffix(b"\r")], True, True
        chunk = chunk[: cut + 1]
    if b"\r" in chunk:  # Windows line ends: shown without their carriage return
        chunk = chunk.replace(b"\r\n", b"\n").removesuffix(b"\r")
    lines = chunk.split(b"\n", limit)
    if len(lines) > limit:  # the rest after `limit` lines: the file goes on if it holds any
        more = lines.pop() != b"" or more
    elif lines[-1] == b"":
        lines.pop()
    return lines, more, False


def _numbered(lines: list[bytes], first: int) -> str:
    """`     7\tline` for each line, numbered from `first`: the numbers are slotted
    between the lines and joined once, then decoded once (a number and a line end are
    ASCII, so a line decodes as it would alone: an invalid byte stays where it was)."""
    count = len(lines)
    parts = [b""] * (2 * count)
    parts[::2] = _FIRST_NUMBERS[:count] if first == 1 and count <= NUMBERS_PAGE else _numbers(first, count)
    parts[1::2] = lines
    parts[0] = parts[0].removeprefix(b"\n")
    return b"".join(parts).decode("utf-8", errors="replace")


def _numbers(first: int, count: int) -> tuple[bytes, ...]:
    """`\n     7\t` for each line from `first` on, `count` of them, cut from the pages of
    numbers kept (a read spans one page, or two)."""
    page, start = divmod(first - 1, NUMBERS_PAGE)
    kept = _numbers_page(page)
    while len(kept) < start + count:
        page += 1
        kept += _numbers_page(page)
    return kept[start : start + count]


@lru_cache(maxsize=32)  # bounded: about 80 KB a page; a read from the top uses the first
def _numbers_page(page: int) -> tuple[bytes, ...]:
    """The numbers of lines `page * NUMBERS_PAGE + 1` on, made once (formatting them
    cost more than numbering the lines with them)."""
    first = page * NUMBERS_PAGE + 1
    return tuple(map(b"\n%6d\t".__mod__, range(first, first + NUMBERS_PAGE)))


_FIRST_NUMBERS = _numbers_page(0)  # a read from the top, the most frequent, asks no cache


def _write_file(tools: WorkspaceTools, call: WriteFile, deadline: float) -> ToolOutcome:
    data = call.content.encode()
    if len(data) > tools.bounds.write_bytes:
        return _refused(f"content is {len(data):,} bytes; at most {tools.bounds.write_bytes:,}")
    found = tools.file(call.path)
    if isinstance(found, str):
        return _refused(found)
    return _written(found, data, "wrote")


def _edit_file(tools: WorkspaceTools, call: EditFile, deadline: float) -> ToolOutcome:
    found = tools.existing(call.path)
    if isinstance(found, str):
        return _refused(found)
    if found.status.st_size > tools.bounds.write_bytes:
        return _refused(f"`{call.path}` is over {tools.bounds.write_bytes:,} bytes; rewrite it in parts")
    with found.open() as handle:
        data = handle.read()
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return _refused(f"`{call.path}` is not UTF-8 text")
    count = text.count(call.old_string)
    if count == 0:
        return _refused(f"old_string is not in `{call.path}`")
    if count > 1 and not call.replace_all:
        return _refused(
            f"old_string occurs {count} times in `{call.path}`: give more context to make it "
            "unique, or replace_all"
        )
    new = text.replace(call.old_string, call.new_string).encode()
    if len(new) > tools.bounds.write_bytes:
        return _refused(f"the edited file would be over {tools.bounds.write_bytes:,} bytes")
    return _written(found, new, f"replaced {count} occurrence{'s' if count > 1 else ''} in")


def _written(found: Located | Existing, data: bytes, verb: str) -> ToolOutcome:
    """Replace the file atomically (a hard link's other name keeps the old content) with
    the permissions it had."""
    mode = None if found.status is None else stat.S_IMODE(found.status.st_mode)
    write_atomically(Path(found.path), data, mode=mode)
    digest = hashlib.sha256(data).hexdigest()
    return ToolOutcome(
        f"{verb} `{found.name}` ({len(data):,} bytes)", detail={"file": found.name, "sha256": digest}
    )


def _list_files(tools: WorkspaceTools, call: ListFiles, deadline: float) -> ToolOutcome:
    matcher = _glob(call.pattern)
    if isinstance(matcher, str):
        return _refused(matcher)
    names = sorted(name for name in _walk(tools.root) if matcher.fullmatch(name.rstrip("/")))
    limit = tools.bounds.listed
    if not names:
        return ToolOutcome(f"no file matches `{call.pattern}`")
    text = "\n".join(names[:limit])
    if len(names) > limit:
        text += f"\n[cut: {len(names):,} names, the first {limit:,} shown; give a narrower pattern]"
    return ToolOutcome(text)


def _search_files(tools: WorkspaceTools, call: SearchFiles, deadline: float) -> ToolOutcome:
    matcher = _glob(call.glob)
    if isinstance(matcher, str):
        return _refused(matcher)
    try:
        wanted = re.compile(call.pattern)
    except re.error as error:
        return _refused(f"pattern is not a regular expression: {error}")
    bounds, found = tools.bounds, []
    files = sorted(n for n in _walk(tools.root) if not n.endswith("/") and matcher.fullmatch(n))
    for name in files:
        if time.monotonic() > deadline:
            found.append("[cut: the call's deadline came]")
            break
        found += _matches(tools, name, wanted, bounds.found + 1 - len(found))
        if len(found) > bounds.found:
            found = [
                *found[: bounds.found],
                f"[cut at {bounds.found} matches; give a narrower pattern or glob]",
            ]
            break
    return ToolOutcome("\n".join(found) or f"no line matches `{call.pattern}`")


def _matches(tools: WorkspaceTools, name: str, wanted: re.Pattern[str], room: int) -> list[str]:
    found = tools.existing(name)
    if isinstance(found, str) or found.status.st_size > tools.bounds.searched_bytes:
        return []
    with found.open() as handle:
        data = handle.read()
    if _binary(data):
        return []
    out = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if wanted.search(line):
            out.append(f"{name}:{number}: {line[: tools.bounds.line_chars]}")
            if len(out) >= room:
                break
    return out


def _walk(root: Path) -> Iterator[str]:
    """Every name under `root`, folders ending in `/`; links are not followed."""
    for folder, folders, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else f"{base}/"
        for each in folders:
            yield f"{prefix}{each}/"
        for each in files:
            yield f"{prefix}{each}"


def _glob(pattern: str) -> re.Pattern[str] | str:
    """A glob (`*`, `?`, `**` spanning folders) as a regular expression over relative names."""
    if pattern.startswith("/") or ".." in pattern.split("/") or "\0" in pattern:
        return f"`{pattern}` is not a pattern inside the workspace"
    out, rest = "", pattern
    while rest:
        if rest.startswith("**/"):
            out, rest = out + "(?:.*/)?", rest[3:]
        elif rest.startswith("**"):
            out, rest = out + ".*", rest[2:]
        elif rest[0] == "*":
            out, rest = out + "[^/]*", rest[1:]
        elif rest[0] == "?":
            out, rest = out + "[^/]", rest[1:]
        else:
            out, rest = out + re.escape(rest[0]), rest[1:]
    return re.compile(out)


# -- the shell ---------------------------------------------------------------------------


def _run_command(tools: WorkspaceTools, call: RunCommand, deadline: float) -> ToolOutcome:
    bounds = tools.bounds
    asked = min(call.timeout_s or bounds.shell_timeout_s, bounds.shell_max_s)
    timeout = max(0.0, min(float(asked), deadline - time.monotonic()))
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        with starting():  # a stop signal meanwhile waits until `close()` can find it
            child = subprocess.Popen(
                ["/bin/sh", "-c", call.command],
                cwd=tools.root,
                env=tools.environ,
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group, killed whole
            )
            tools.running[child.pid] = child
        try:
            if tools.started is not None:  # journaled, so a resume kills it if its runner is killed
                tools.started(call.command, child.pid)
            code = child.wait(timeout=timeout)
            killed = False
        except subprocess.TimeoutExpired:
            code, killed = kill(child), True
        finally:  # the run stops (an interrupt) or the call ends: nothing of it lives on
            kill(child)
            tools.running.pop(child.pid, None)
        head = (
            f"killed at its timeout of {timeout:g} s (exit code {code})" if killed else f"exit code: {code}"
        )
        printed = _cut(stdout, bounds.output_bytes), _cut(stderr, bounds.output_bytes)
        text = f"{head}\n--- stdout ---\n{printed[0]}\n--- stderr ---\n{printed[1]}"
    return ToolOutcome(text, detail={"command": call.command, "exit_code": code})


def _cut(output: IO[bytes], limit: int) -> str:
    """What a command printed, its head and tail when over `limit` bytes."""
    size = output.seek(0, os.SEEK_END)
    output.seek(0)
    if size <= limit:
        return output.read().decode("utf-8", errors="replace")
    head = output.read(limit // 2).decode("utf-8", errors="replace")
    output.seek(size - limit // 2)
    tail = output.read().decode("utf-8", errors="replace")
    return f"{head}\n[... {size - limit:,} bytes cut ...]\n{tail}"


_HANDLERS: dict[str, Any] = {
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "list_files": _list_files,
    "search_files": _search_files,
    "run_command": _run_command,
}
