"""A script as the agent: replies from a YAML file, in order (tests and demos)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from todoflow.compiler.files import write_atomically
from todoflow.dsl.diagnostics import TodoflowError

from ..directive import Directive
from ..llm_choice import Usage
from ..replies import READS, InvalidReply, check_reply, read_call
from ..workspace import confined
from .base import Answer, Blocked, Stop, read_todos


class ScriptError(TodoflowError):
    """A replies file that cannot be used."""


class ScriptedAgent:
    """Replies from a list, in order: reply n answers the n-th directive the agent sees.

    The position in the list is the number of agent replies the process has applied
    (a `blocked:` reply is applied too: it marks the todo blocked), so a resumed run
    picks up where it stopped. A reply may carry `files` (a mapping of workspace paths
    to contents) written before it is sent: the work it reports. Paths stay inside the
    workspace, symlinks included. A reply with `expect_refused: TEXT` must be refused
    with a reason containing TEXT (it is sent, refused, and the script goes on); one
    that is applied instead, or any other refusal, stops the run: a script fails loudly
    rather than drift from the run it was written for.
    """

    def __init__(self, replies: list[Mapping[str, Any]], workspace: Path) -> None:
        self.replies, self.workspace = replies, workspace
        # per applied reply: the expected refusals sent before it, then the reply itself
        self.turns: list[list[Mapping[str, Any]]] = [[]]
        for reply in replies:
            self.turns[-1].append(reply)
            if "expect_refused" not in reply and not _reads(reply):  # reads are not applied
                self.turns.append([])
        self._turn, self._sent = -1, 0
        self._expecting: str | None = None

    @classmethod
    def from_file(cls, path: Path, workspace: Path) -> ScriptedAgent:
        import yaml

        try:
            text = path.read_bytes().decode("utf-8")
        except OSError as error:
            raise ScriptError(f"cannot read the replies file {path}: {error.strerror or error}") from None
        except UnicodeDecodeError as error:
            raise ScriptError(f"{path} is not UTF-8 text (byte {error.start})") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ScriptError(f"{path} is not YAML: {error}") from None
        replies = data.get("replies") if isinstance(data, dict) else data
        if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
            raise ScriptError(f"{path}: expected a list of replies (or `replies:` holding one)")
        for number, reply in enumerate(replies, start=1):
            _check_reply(reply, f"{path}: reply {number}")
        return cls(replies, workspace)

    def reply(self, directive: Directive) -> Answer:
        index = directive.state.agent_replies
        if index >= len(self.turns) or not self.turns[index]:
            return Stop(f"the script has no reply {sum(len(t) for t in self.turns[:index]) + 1}")
        if index != self._turn:
            self._turn, self._sent = index, 0
        turn = self.turns[index]
        reply = dict(turn[min(self._sent, len(turn) - 1)])
        self._sent += 1
        while _reads(reply):  # answered here: the engine journals no read
            read = read_call(_sent(reply))
            assert read is not None  # the file was checked when it was read
            _answer(read, reply, directive)
            if self._sent >= len(turn):
                return Stop(f"the script has no reply after its {read[0]}")
            reply = dict(turn[self._sent])
            self._sent += 1
        self._expecting = reply.pop("expect_refused", None)
        if "blocked" in reply:
            return Blocked(str(reply["blocked"]))
        for name, content in (reply.pop("files", None) or {}).items():
            self._write(name, content)
        return reply

    def _write(self, name: str, content: Any) -> None:
        target = confined(self.workspace, name)
        if isinstance(target, str):
            raise ScriptError(f"the script writes {target}")
        try:
            write_atomically(target, str(content))
        except OSError as error:
            raise ScriptError(
                f"the script cannot write `{name}` in the workspace: {error.strerror or error}"
            ) from None

    def refused(self, reason: str) -> bool:
        """An expected refusal lets the script go on; any other stops it (resumable once the
        script is fixed): a script cannot correct itself."""
        expected, self._expecting = self._expecting, None
        return expected is not None and expected in reason

    def applied(self) -> None:
        if self._expecting is not None:
            expected, self._expecting = self._expecting, None
            raise ScriptError(
                f"the script expected its reply to be refused ({expected!r}), but it was applied"
            )

    def spent(self) -> list[Usage]:
        return []  # a script calls no model

    def unused(self, directive: Directive) -> int:
        """How many replies are left when the run completes (a script that drifted)."""
        return sum(len(turn) for turn in self.turns[directive.state.agent_replies :])


_SCRIPT_KEYS = ("files", "expect_refused", "expect")  # the script's own, never sent


def _check_reply(reply: dict[str, Any], where: str) -> None:
    """A reply of the file, checked before any run is made: its form and that form's rules
    (which node it answers is known only when it is sent)."""
    _check_files(reply.get("files"), where)
    for key in ("expect_refused", "expect"):
        if not isinstance(reply.get(key, ""), str):
            raise ScriptError(
                f"{where}: `{key}` is the text the {'refusal' if key != 'expect' else 'read'} contains"
            )
    if "expect" in reply and not _reads(reply):
        raise ScriptError(f"{where}: `expect` goes with a `list_todos` or `get_todo` call")
    sent = _sent(reply)
    if _reads(reply) and "expect_refused" in reply:
        raise ScriptError(f"{where}: a read is never refused; `expect` says what its answer holds")
    if "blocked" in sent:
        if len(sent) > 1:
            raise ScriptError(f"{where}: `blocked: REASON` stands alone")
        return
    try:
        check_reply(sent)
    except InvalidReply as error:
        if "expect_refused" not in reply:  # a reply meant to be refused may break any rule
            raise ScriptError(f"{where}: {error.reason}") from None


def _sent(reply: Mapping[str, Any]) -> dict[str, Any]:
    """What of a script's reply is sent: its own keys (`files`, `expect`...) left out."""
    return {k: v for k, v in reply.items() if k not in _SCRIPT_KEYS}


def _reads(reply: Mapping[str, Any]) -> bool:
    return any(name in reply for name in READS)


def _answer(read: tuple[str, str | None], reply: dict[str, Any], directive: Directive) -> None:
    """A `list_todos` or `get_todo` of the script, read from the directive's step; with
    `expect: TEXT` the answer must contain TEXT (a script fails loudly, never drifts)."""
    tool, todo_id = read
    answer = read_todos(directive, todo_id)
    if isinstance(answer, str):
        raise ScriptError(f"the script's {tool}: {answer}")
    expected = reply.get("expect")
    if expected is not None and expected not in json.dumps(answer, ensure_ascii=False):
        raise ScriptError(f"the script's {tool} expected {expected!r} in its answer: {json.dumps(answer)}")


def _check_files(files: Any, where: str) -> None:
    """`files` is a mapping of plain workspace paths to text."""
    if files is None:
        return
    if not isinstance(files, dict):
        raise ScriptError(f"{where}: `files` maps workspace paths to contents, not {type(files).__name__}")
    for name, content in files.items():
        if not isinstance(name, str) or not name.strip() or "\0" in name:
            raise ScriptError(f"{where}: `files` has a name that is not a path: {name!r}")
        if isinstance(content, dict | list):
            raise ScriptError(
                f"{where}: `files.{name}` is the content of a file, not a {type(content).__name__}"
            )
