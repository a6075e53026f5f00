"""The workspace tools an LLM agent calls: each tool, its bounds, and every way out of the
workspace refused as a one-line tool result that changes nothing."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from todoflow.runtime.agents.toolbox import ToolOutcome, ToolSpec
from todoflow.runtime.agents.workspace_tools import Bounds, WorkspaceTools

from ...conftest import wait_until
from ...support.runtime_helpers import alive


def _call(tools: WorkspaceTools, name: str, **arguments: object) -> tuple[str, bool, dict[str, object]]:
    outcome = tools.call(name, arguments, time.monotonic() + 30)
    return outcome.content, outcome.refused, dict(outcome.detail)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hello')\nprint('bye')\n")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    return root


def test_the_tools_offered_and_the_shell_only_when_on(workspace: Path) -> None:
    names = [spec.name for spec in WorkspaceTools(workspace).specs()]
    assert names == ["read_file", "write_file", "edit_file", "list_files", "search_files"]
    shell = WorkspaceTools(workspace, shell=True).specs()
    assert [spec.name for spec in shell][-1] == "run_command"
    assert shell[0].parameters["required"] == ["path"]
    content, refused, _ = _call(WorkspaceTools(workspace), "run_command", command="echo hi")
    assert refused and content.startswith("refused: `run_command` is off")


def test_read_file_numbers_lines_pages_and_says_binary(workspace: Path) -> None:
    tools = WorkspaceTools(workspace, bounds=Bounds(read_lines=1))
    content, refused, _ = _call(tools, "read_file", path="src/app.py")
    assert not refused and content.startswith("     1\tprint('hello')")
    assert "call read_file with offset=2 to read on" in content
    content, _, _ = _call(tools, "read_file", path="src/app.py", offset=2)
    assert content == "     2\tprint('bye')"
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    content, refused, _ = _call(tools, "read_file", path="blob.bin")
    assert not refused and content == "`blob.bin` is a binary file (30 bytes); not shown"


@pytest.mark.parametrize(("offset", "limit"), [(1, 2000), (1, 2500), (1498, 5), (1998, 5), (2001, 2500)])
def test_read_file_numbers_every_line_it_shows(workspace: Path, offset: int, limit: int) -> None:
    lines = [f"line {n} ü" for n in range(1, 5001)]
    (workspace / "long.txt").write_text("\n".join(lines) + "\n")
    tools = WorkspaceTools(workspace, bounds=Bounds(read_lines=2500, read_bytes=1 << 20))
    content, _, _ = _call(tools, "read_file", path="long.txt", offset=offset, limit=limit)
    shown = range(offset, offset + limit)
    numbered = "\n".join(f"{n:6}\t{lines[n - 1]}" for n in shown)
    cut = f"[cut: the file goes on; call read_file with offset={shown[-1] + 1} to read on]"
    assert content == f"{numbered}\n{cut}"


def _read_on(line: int) -> str:
    return f"\n[cut: the file goes on; call read_file with offset={line} to read on]"


def _long_line(line: int, size: int) -> str:
    return (
        f"\n[cut: line {line} is longer than {size:,} bytes and only its start is shown;"
        f" search_files finds text in the rest of it; call read_file with offset={line + 1}"
        " for any lines after it]"
    )


@pytest.mark.parametrize(
    ("data", "arguments", "bounds", "shown"),
    [
        (b"a\r\nb\r\n", {}, Bounds(), "     1\ta\n     2\tb"),
        (b"a\r\nb\r", {}, Bounds(), "     1\ta\n     2\tb"),
        (b"a\r\r\nb\rc\n", {}, Bounds(), "     1\ta\r\n     2\tb\rc"),
        (b"a\r\nb\r\nc\r\n", {"offset": 2}, Bounds(), "     2\tb\n     3\tc"),
        (b"a\nb", {}, Bounds(), "     1\ta\n     2\tb"),
        (b"\n", {}, Bounds(), "     1\t"),
        (b"", {}, Bounds(), "`f.txt` is empty"),
        (b"a\nb", {"offset": 3}, Bounds(), "`f.txt` ends before line 3"),
        (b"a\nb\n", {"offset": 3}, Bounds(), "`f.txt` ends before line 3"),
        (b"a\nb", {"offset": 5}, Bounds(), "`f.txt` has 2 lines; offset 5 is past its end"),
        (b"", {"offset": 2}, Bounds(), "`f.txt` has 0 lines; offset 2 is past its end"),
        (b"a\nb\n", {"offset": 4}, Bounds(), "`f.txt` has 2 lines; offset 4 is past its end"),
        (b"a\nb\n", {"limit": 2}, Bounds(), "     1\ta\n     2\tb"),
        (b"a\nb\n", {"limit": 1}, Bounds(), "     1\ta" + _read_on(2)),
        (b"a\nb\nc", {"offset": 2, "limit": 1}, Bounds(), "     2\tb" + _read_on(3)),
        (b"a\nb\n", {"offset": 2, "limit": 5}, Bounds(), "     2\tb"),
        ("é".encode() * 10, {}, Bounds(read_bytes=5), "     1\téé\ufffd" + _long_line(1, 5)),
        (b"ab\n" + "é".encode() * 3 + b"\n", {}, Bounds(read_bytes=6), "     1\tab" + _read_on(2)),
        (b"x" * 100 + b"\ny\n", {}, Bounds(read_bytes=10), "     1\t" + "x" * 10 + _long_line(1, 10)),
        (
            b"a\n" + b"x" * 100,
            {"offset": 2},
            Bounds(read_bytes=10),
            "     2\t" + "x" * 10 + _long_line(2, 10),
        ),
        (b"a\xff\nb", {}, Bounds(), "     1\ta\ufffd\n     2\tb"),
        (b"a\n\0", {"offset": 2}, Bounds(), "`f.txt` is a binary file (3 bytes); not shown"),
        (
            b"".join(b"%d\n" % n for n in range(1, 101)),
            {},
            Bounds(read_lines=10),
            "\n".join(f"{n:6}\t{n}" for n in range(1, 11)) + _read_on(11),
        ),
    ],
)
def test_read_file_edges(
    workspace: Path, data: bytes, arguments: dict[str, int], bounds: Bounds, shown: str
) -> None:
    """Line ends (CRLF, a last line without one), offsets and limits at and past the end,
    a cut inside a multibyte character or a long line, invalid UTF-8, a binary file read
    from an offset."""
    (workspace / "f.txt").write_bytes(data)
    content, refused, _ = _call(
        WorkspaceTools(workspace, bounds=bounds), "read_file", path="f.txt", **arguments
    )
    assert not refused and content == shown


@pytest.mark.parametrize("data", [b"a\nbb\n\nccc\r\ndddd", b"a\nbb\n\nccc\r\ndddd\n", b"\n\n\n"])
def test_read_file_from_any_offset_whatever_the_pieces_skipped(
    workspace: Path, data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Skipping to an offset a piece at a time: every offset, the pieces cutting the file
    anywhere (a line end first or last in a piece, a piece between a CR and its LF), shows
    what the lines from there are."""
    from todoflow.runtime.agents import workspace_tools

    (workspace / "f.txt").write_bytes(data)
    lines = data.decode().removesuffix("\n").split("\n") if data else []
    for piece in (1, 2, 3, 5, 64):
        monkeypatch.setattr(workspace_tools, "SKIPPED_PIECE", piece)
        for offset in range(2, len(lines) + 4):
            content, _, _ = _call(WorkspaceTools(workspace), "read_file", path="f.txt", offset=offset)
            shown = [f"{n:6}\t{line.removesuffix(chr(13))}" for n, line in enumerate(lines, 1)][offset - 1 :]
            if shown:
                expected = "\n".join(shown)
            elif offset == len(lines) + 1:
                expected = f"`f.txt` ends before line {offset}"
            else:
                expected = f"`f.txt` has {len(lines)} lines; offset {offset} is past its end"
            assert content == expected, (piece, offset)


def test_read_file_reads_on_after_a_short_read(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system whose reads come back short (a network one) still shows the whole file."""
    from todoflow.runtime.agents import workspace_tools

    real = os.read
    monkeypatch.setattr(workspace_tools.os, "read", lambda handle, size: real(handle, min(size, 7)))
    content, _, _ = _call(WorkspaceTools(workspace), "read_file", path="src/app.py")
    assert content == "     1\tprint('hello')\n     2\tprint('bye')"


def test_a_file_swapped_after_it_was_found_is_not_read(workspace: Path) -> None:
    """Between the confinement and the read, the name is replaced by a FIFO, a hard link
    or a symbolic link to a file outside: nothing is read, and a FIFO is not waited on."""
    secret = workspace.parent / "secret.txt"
    path = workspace / "src" / "app.py"
    tools = WorkspaceTools(workspace)
    for swap in (os.mkfifo, lambda there: os.link(secret, there), lambda there: there.symlink_to(secret)):
        found = tools.existing("src/app.py")
        assert not isinstance(found, str)
        path.unlink()
        swap(path)
        with pytest.raises(OSError, match=r"changed while it was opened|symbolic links"):
            found.head(100)
        path.unlink()
        path.write_text("print('hello')\n")


def test_write_and_edit_file_keep_the_files_permissions(workspace: Path) -> None:
    tools = WorkspaceTools(workspace)
    script = workspace / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    _call(tools, "edit_file", path="run.sh", old_string="hi", new_string="bye")
    assert script.stat().st_mode & 0o777 == 0o750 and script.read_text() == "echo bye\n"
    private = workspace / "private.txt"
    private.write_text("x")
    private.chmod(0o600)
    _call(tools, "write_file", path="private.txt", content="y")
    assert private.stat().st_mode & 0o777 == 0o600
    _call(tools, "write_file", path="new.txt", content="z")
    umask = os.umask(0)
    os.umask(umask)
    assert (workspace / "new.txt").stat().st_mode & 0o777 == 0o666 & ~umask


def test_write_and_edit_file_report_the_new_digest(workspace: Path) -> None:
    tools = WorkspaceTools(workspace)
    content, refused, detail = _call(
        tools, "write_file", path="dist/app/README.md", content="run it\nrun it\n"
    )
    assert not refused and (workspace / "dist/app/README.md").read_text() == "run it\nrun it\n"
    assert detail == {"file": "dist/app/README.md", "sha256": hashlib.sha256(b"run it\nrun it\n").hexdigest()}
    content, refused, _ = _call(
        tools, "edit_file", path="dist/app/README.md", old_string="run it", new_string="go"
    )
    assert refused and content == (
        "refused: old_string occurs 2 times in `dist/app/README.md`: give more context to make it "
        "unique, or replace_all"
    )
    content, refused, _ = _call(
        tools, "edit_file", path="dist/app/README.md", old_string="walk", new_string="go"
    )
    assert refused and content == "refused: old_string is not in `dist/app/README.md`"
    content, refused, detail = _call(
        tools, "edit_file", path="dist/app/README.md", old_string="run it", new_string="go", replace_all=True
    )
    assert not refused and (workspace / "dist/app/README.md").read_text() == "go\ngo\n"
    assert detail["sha256"] == hashlib.sha256(b"go\ngo\n").hexdigest()


def test_list_and_search_files(workspace: Path) -> None:
    tools = WorkspaceTools(workspace)
    assert _call(tools, "list_files")[0] == "src/\nsrc/app.py"
    assert _call(tools, "list_files", pattern="*.py")[0] == "no file matches `*.py`"
    assert _call(tools, "search_files", pattern="b.e", glob="**/*.py")[0] == "src/app.py:2: print('bye')"
    content, refused, _ = _call(tools, "search_files", pattern="(")
    assert refused and content.startswith("refused: pattern is not a regular expression")


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        ("read_file", {"path": "../secret.txt"}, "`../secret.txt` resolves outside the workspace"),
        ("read_file", {"path": "SECRET"}, "`SECRET` resolves outside the workspace"),
        ("read_file", {"path": "linked/secret.txt"}, "`linked/secret.txt` resolves outside the workspace"),
        ("write_file", {"path": "../x", "content": "x"}, "`../x` resolves outside the workspace"),
        ("write_file", {"path": "linked/new", "content": "x"}, "`linked/new` resolves outside the workspace"),
        (
            "edit_file",
            {"path": "hard", "old_string": "o", "new_string": "x"},
            "`hard` is a hard link to a file outside the workspace",
        ),
        ("read_file", {"path": "fifo"}, "`fifo` is not a regular file"),
        ("read_file", {"path": "a\0b"}, "holds a NUL character"),
        ("list_files", {"pattern": "../*"}, "`../*` is not a pattern inside the workspace"),
        ("write_file", {"path": "big", "content": "x" * 11}, "content is 11 bytes; at most 10"),
        ("read_file", {"path": "src/app.py", "offset": 0}, "invalid arguments: `offset`"),
        ("read_file", {"path": "src/app.py", "mode": "w"}, "invalid arguments: `mode`"),
    ],
)
def test_every_way_out_is_refused_and_changes_nothing(
    workspace: Path, tool: str, arguments: dict[str, object], reason: str
) -> None:
    outside = workspace.parent
    (workspace / "linked").symlink_to(outside)
    os.link(outside / "secret.txt", workspace / "hard")
    os.mkfifo(workspace / "fifo")
    if "SECRET" in str(arguments):
        arguments = {"path": str(outside / "secret.txt")}
        reason = reason.replace("SECRET", str(outside / "secret.txt"))
    before = sorted((p, p.stat().st_mtime_ns) for p in outside.rglob("*") if p.is_file())
    content, refused, detail = _call(
        WorkspaceTools(workspace, bounds=Bounds(write_bytes=10)), tool, **arguments
    )
    assert refused and content.startswith("refused: ") and reason in content and "\n" not in content
    assert detail == {} and "TOPSECRET" not in content
    assert sorted((p, p.stat().st_mtime_ns) for p in outside.rglob("*") if p.is_file()) == before


def test_run_command_runs_in_the_workspace_with_a_clean_environment(workspace: Path) -> None:
    environ = {"PATH": os.environ["PATH"], "HOME": "/nowhere", "OPENAI_API_KEY": "sk-do-not-pass"}
    tools = WorkspaceTools(workspace, shell=True, environ=environ)
    content, refused, detail = _call(tools, "run_command", command="pwd; env; exit 3")
    assert not refused and content.startswith("exit code: 3\n--- stdout ---\n")
    assert str(workspace) in content and "HOME=/nowhere" in content and "sk-do-not-pass" not in content
    assert detail == {"command": "pwd; env; exit 3", "exit_code": 3}


def test_run_command_is_killed_with_its_children_at_its_timeout(workspace: Path) -> None:
    tools = WorkspaceTools(workspace, shell=True)
    started = time.monotonic()
    content, _, detail = _call(
        tools, "run_command", command="sleep 60 & echo $! > child.pid; wait", timeout_s=1
    )
    assert time.monotonic() - started < 10
    assert content.startswith("killed at its timeout of 1 s") and detail["exit_code"] == -9
    child = int((workspace / "child.pid").read_text())
    wait_until(lambda: not alive(child), f"the command's child {child} to be killed with it")


def test_a_child_left_in_the_background_does_not_outlive_its_command(workspace: Path) -> None:
    tools = WorkspaceTools(workspace, shell=True)
    content, _, _ = _call(tools, "run_command", command="sleep 60 & echo $! > child.pid")
    assert content.startswith("exit code: 0")
    child = int((workspace / "child.pid").read_text())
    wait_until(lambda: not alive(child), f"the command's child {child} to be killed with it")


def test_run_command_output_is_cut_to_its_bound(workspace: Path) -> None:
    tools = WorkspaceTools(workspace, shell=True, bounds=Bounds(output_bytes=100))
    content, _, _ = _call(tools, "run_command", command="yes | head -c 10000")
    assert "[... 9,900 bytes cut ...]" in content and len(content) < 400


def test_close_kills_a_command_still_running(workspace: Path) -> None:
    import threading

    tools = WorkspaceTools(workspace, shell=True)
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(_call(tools, "run_command", command="sleep 60")[0]))
    worker.start()
    deadline = time.monotonic() + 10
    while not tools.running and time.monotonic() < deadline:
        time.sleep(0.02)
    tools.close()  # the run stops
    worker.join(10)
    assert done and done[0].startswith("exit code: -9")


def test_a_command_is_told_as_it_starts_with_its_process_group(workspace: Path) -> None:
    tools = WorkspaceTools(workspace, shell=True)
    told: list[tuple[str, int]] = []
    tools.on_start(lambda command, group: told.append((command, group)))
    content, _, _ = _call(tools, "run_command", command="echo $$ > shell.pid")
    assert content.startswith("exit code: 0")
    assert told == [("echo $$ > shell.pid", int((workspace / "shell.pid").read_text()))]


@pytest.mark.parametrize(
    ("stop", "raised"), [(signal.SIGTERM, SystemExit), (signal.SIGINT, KeyboardInterrupt)]
)
def test_a_stop_signal_as_a_command_starts_still_finds_it_to_kill(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals, raised: type[BaseException]
) -> None:
    """The runner is told to stop just as the shell has started, before the call holds
    it: the stop waits until the command is registered, so closing the tools (what the
    run's unwinding does) kills its group."""
    from todoflow.runtime.agents.driver import stopped_by_signals

    real, groups = subprocess.Popen, []

    def started_then_stopped(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child = real(*args, **kwargs)
        groups.append(child.pid)
        signal.raise_signal(stop)  # its handler runs here, inside the start
        return child

    monkeypatch.setattr(subprocess, "Popen", started_then_stopped)
    tools = WorkspaceTools(workspace, shell=True)
    # the handler a terminal's process has, whatever the test run ignores (a background
    # job ignores Ctrl-C): a signal the process was started ignoring stays ignored
    before = signal.signal(stop, signal.default_int_handler if stop == signal.SIGINT else signal.SIG_DFL)
    try:
        with stopped_by_signals(), pytest.raises(raised):
            _call(tools, "run_command", command="sleep 60")
        monkeypatch.undo()
        tools.close()
        wait_until(lambda: not alive(groups[0]), "the command to be killed")
    finally:  # a failing test leaves nothing running
        signal.signal(stop, before)
        with contextlib.suppress(ProcessLookupError, IndexError):
            os.killpg(groups[0], signal.SIGKILL)


def test_the_agent_stops_at_its_tool_call_bounds() -> None:
    from todoflow.runtime.agents import llm_tools
    from todoflow.runtime.agents.llm_tools import Tools

    class Echo:
        def specs(self) -> tuple[ToolSpec, ...]:
            return (ToolSpec("echo", "Echo.", {"type": "object", "properties": {}}),)

        def call(self, name: str, arguments: Mapping[str, Any], deadline: float) -> ToolOutcome:
            return ToolOutcome("echo")

        def close(self) -> None:
            """Nothing held."""

    tools = Tools((Echo(),), frozenset({"complete_todo"}))
    tools.begin_turn("a")
    for _ in range(llm_tools.MAX_CALLS_PER_TURN):
        assert tools.exhausted() is None
        tools.call("echo", {}, "orchestrator", None)
    assert (
        tools.exhausted()
        == f"the model made {llm_tools.MAX_CALLS_PER_TURN} tool calls in one turn without a decision"
    )
    for _ in range(llm_tools.MAX_CALLS_PER_STEP // llm_tools.MAX_CALLS_PER_TURN - 1):
        tools.begin_turn("a")
        for _ in range(llm_tools.MAX_CALLS_PER_TURN):
            tools.call("echo", {}, "orchestrator", None)
    tools.begin_turn("a")
    assert tools.exhausted() == f"the model made {llm_tools.MAX_CALLS_PER_STEP} tool calls in step `a`"
    tools.begin_turn("b")  # another step: counted afresh
    assert tools.exhausted() is None
