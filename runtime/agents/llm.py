"""The LLM agent: a model behind OpenAI-compatible Chat Completions with tool calls plays
every role of a run, one conversation per role.

- A step's **orchestrator** (intake, its turns, a revision) is one conversation: the
  step's `orchestrator_system` template is its system message, each directive's
  `orchestrator_user` and `work` parts a user message (or the intake's, the revision's).
- Each **delegation** gets a conversation of its own, holding only the sub-agent's small
  context: its prompt (the route's `sub_agent` template), nothing of the orchestrator's.

The model answers through tools (names other programs rely on): `submit_tasks`,
`submit_todo_task_result` (the seed's TodoTaskResponse), the todo tools `create_todo`,
`update_todo`, `complete_todo`, `list_todos`, `get_todo`, `revise_checklist` (the
teleport and the revision in one call), and for a sub-agent `complete_todo` and
`report_failure`. A tool call becomes a reply the engine validates; its result is what
happened (the engine's refusal, word for word, or the next directive). One action per
model message: further calls in the same message are answered "not run". Known quirks
of local servers are handled: `arguments` sent as an object (llama.cpp), no tool call at
all (the model "says" it will act: it is told to call one), several tool calls in one
message, `tool_choice` ignored. After `MAX_REFUSALS` refused or tool-less answers in a
row the agent stops (resumable). The model each agent uses is the directive's (the
selection rules); every call's tokens and latency go to the driver, which journals them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from ..directive import Directive
from ..entries import ORCHESTRATOR, redact
from ..events import todos
from ..llm_choice import Spent, Usage
from ..plan import Llm
from ..replies import (
    CompleteTodoReply,
    ContinueReply,
    CreateTodoReply,
    DelegateReply,
    IntakeReply,
    RevisionReply,
    UpdateTodoReply,
    model_properties,
)
from .base import Answer, Stop
from .llm_config import LlmConfig, endpoint
from .llm_tools import MAX_CALLS_PER_MESSAGE, Tools, oversized
from .toolbox import Started, StartsCommands, Toolset

MAX_REFUSALS = 5  # refused (or tool-less) answers in a row before the agent stops
MAX_ROUNDS = 100  # model calls for one directive before the agent stops (tool calls take rounds)
REQUEST_DEADLINE_S = 300.0  # one model request, its retries included, ends by then
KEEP_PROMPTS = 4  # a conversation keeps its system message and its last few directives
# (each directive's prompt restates the checklist, so older turns only fill the context)


class _Reason(BaseModel):
    reason: str = Field(description="Why the todo could not be done (1-500 characters).")


class _TodoId(BaseModel):
    todo_id: str = Field(description="The todo, `todo_<N>`.")


def _schema(model: type[BaseModel] | None, *more: type[BaseModel]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for each in (model, *more) if model is not None else more:
        fields, needed = model_properties(each)
        for name, value in fields.items():
            properties.setdefault(name, value)
        required = required or needed
    return {"type": "object", "properties": properties, "required": required}


def _decision_schema() -> dict[str, Any]:
    schema = _schema(DelegateReply, ContinueReply)
    schema["properties"]["next_action"] = {
        "type": "string",
        "enum": ["delegate", "continue", "complete"],
        "description": "`delegate` the current todo to a route's sub-agent (selected_route_id) or "
        "the generic agent (use_generic_agent); `continue`: you worked on your own and take another "
        "turn; `complete`: accepted only when every todo is confirmed.",
    }
    schema["required"] = ["next_action"]
    return schema


TOOLS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "submit_tasks": (
        "Submit the checklist: 1 to 100 tasks, each an action and an expected result.",
        lambda: _schema(IntakeReply),
    ),
    "submit_todo_task_result": (
        "Your decision for the current todo (the TodoTaskResponse).",
        _decision_schema,
    ),
    "create_todo": ("Append a todo at the end of the checklist.", lambda: _schema(CreateTodoReply)),
    "update_todo": (
        "Set a todo's status (in_progress or blocked) and notes.",
        lambda: _schema(UpdateTodoReply),
    ),
    "complete_todo": (
        "Confirm the current todo as done and checked, with concrete evidence (`result` is a short summary).",
        lambda: _schema(CompleteTodoReply),
    ),
    "list_todos": ("The checklist's todos and their statuses.", lambda: {"type": "object", "properties": {}}),
    "get_todo": ("One todo.", lambda: _schema(_TodoId)),
    "revise_checklist": (
        "Replace the checklist when it is wrong: the full corrected list and the position to resume from.",
        lambda: _schema(RevisionReply),
    ),
    "report_failure": ("Give the todo back, undone, with the reason.", lambda: _schema(_Reason)),
}
READS = ("list_todos", "get_todo")


def offered(directive: Directive) -> list[str]:
    """The tools a directive's agent may call."""
    if directive.node == "intake":
        return ["submit_tasks"]
    if directive.node == "revise":
        return ["revise_checklist", *READS]
    if directive.node == "delegated":
        return ["complete_todo", "update_todo", "report_failure"]
    if directive.orchestrated:
        return [
            "submit_todo_task_result",
            "complete_todo",
            "create_todo",
            "update_todo",
            *READS,
            "revise_checklist",
        ]
    return ["complete_todo", "update_todo"]


@lru_cache(maxsize=16)  # a handful of tool sets, asked at every model call
def _specs(names: tuple[str, ...]) -> str:
    return json.dumps(
        [
            {
                "type": "function",
                "function": {"name": n, "description": TOOLS[n][0], "parameters": TOOLS[n][1]()},
            }
            for n in names
        ]
    )


def tool_specs(names: list[str]) -> list[dict[str, Any]]:
    specs: list[dict[str, Any]] = json.loads(_specs(tuple(names)))
    return specs


class _Conversation:
    def __init__(self, agent: str, system: str | None) -> None:
        self.agent = agent
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        self.pending: list[str] = []  # tool calls whose result is owed
        self.queued: list[Any] = []  # tool calls of the last message, not yet run
        self.carry: dict[str, Any] | None = None  # a revision waiting for the revise node
        self.shown: str | None = None  # the last user prompt sent

    def answer(self, content: str) -> None:
        for call_id in self.pending:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        self.pending = []

    def trim(self) -> None:
        """Keep the system message and the last `KEEP_PROMPTS` directives with what
        followed each (a cut at a user message never splits a call from its result)."""
        prompts = [i for i, m in enumerate(self.messages) if m["role"] == "user"]
        if len(prompts) > KEEP_PROMPTS:
            head = 1 if self.messages and self.messages[0]["role"] == "system" else 0
            del self.messages[head : prompts[-KEEP_PROMPTS]]


Client = Any  # an `openai.OpenAI`
ClientFactory = Callable[[str | None, str], Client]


def openai_client(base_url: str | None, key: str) -> Client:
    from openai import OpenAI

    return OpenAI(base_url=base_url, api_key=key, max_retries=2, timeout=600)


class LlmAgent:
    """The LLM agent; `config` names the providers, `make_client` builds a client."""

    def __init__(
        self,
        config: LlmConfig,
        make_client: ClientFactory = openai_client,
        toolsets: tuple[Toolset, ...] = (),
    ) -> None:
        self.config, self.make_client = config, make_client
        self.tools = Tools(toolsets, frozenset(TOOLS))
        self._clients: dict[str, Client] = {}
        self._conversations: dict[tuple[str, ...], _Conversation] = {}
        self._spent: list[Spent] = []
        self._refusal: tuple[tuple[str, ...], str] | None = None
        self._strikes = 0
        self._last: tuple[str, ...] | None = None

    # -- the driver's side -------------------------------------------------------------

    def reply(self, directive: Directive) -> Answer:
        key = self._key(directive)
        self._last = key
        conversation = self._conversation(key, directive)
        if conversation.carry is not None and directive.node == "revise":
            revision, conversation.carry = conversation.carry, None
            return revision
        self._tell(conversation, directive, key)
        self.tools.begin_turn(key[0])
        for _ in range(MAX_ROUNDS):
            answer = self._run_queued(conversation, directive)
            if answer is not None:
                return answer
            if self._strikes > MAX_REFUSALS:
                return Stop(f"the model's answers were refused {self._strikes} times in a row")
            stop = self.tools.exhausted() or self._ask(conversation, directive)
            if stop is not None:
                return Stop(stop)
        return Stop(f"the model made {MAX_ROUNDS} calls without an action the engine could take")

    def _run_queued(self, conversation: _Conversation, directive: Directive) -> Answer | None:
        """The calls of the model's last message, in order, up to the first action (the
        rest are answered "not run"); at most `MAX_CALLS_PER_MESSAGE` of them run."""
        ran = 0
        while conversation.queued:
            call = conversation.queued.pop(0)
            if ran == MAX_CALLS_PER_MESSAGE:
                skipped = f"not run: at most {MAX_CALLS_PER_MESSAGE} tool calls run per message"
                _skip(conversation, [call], skipped)
                continue
            ran += 1
            answer = self._run(call, directive, conversation)
            if answer is not None:
                _skip(
                    conversation,
                    conversation.queued,
                    "not run: one action per message; call it again if it is still needed",
                )
                return answer
        return None

    def refused(self, reason: str) -> bool:
        """The engine's refusal goes back to the model as the tool's result, word for word."""
        self._strikes += 1
        if self._last is not None:
            self._refusal = (self._last, reason)
        return self._strikes <= MAX_REFUSALS

    def applied(self) -> None:
        self._strikes = 0

    def spent(self) -> list[Spent]:
        """The model and tool calls made since the driver last asked (it journals them)."""
        spent, self._spent = self._spent, []
        return spent

    # -- conversations -------------------------------------------------------------------

    def _key(self, directive: Directive) -> tuple[str, ...]:
        step = directive.state.step_id or ""
        if directive.node == "delegated" and directive.state.delegation is not None:
            return (step, "delegation", str(directive.state.delegation.seq))
        return (step, ORCHESTRATOR)

    def _conversation(self, key: tuple[str, ...], directive: Directive) -> _Conversation:
        found = self._conversations.get(key)
        if found is None:
            delegation = directive.state.delegation
            if key[1] == "delegation" and delegation is not None:
                found = _Conversation(delegation.agent, None)  # its own, holding its small context only
            else:
                found = _Conversation(ORCHESTRATOR, directive.system_prompt())
            self._conversations = {
                k: v for k, v in self._conversations.items() if k[0] == key[0]
            }  # a finished step's go
            self._conversations[key] = found
        return found

    def _tell(self, conversation: _Conversation, directive: Directive, key: tuple[str, ...]) -> None:
        """Answer what is owed (a refusal, or what the last action led to), then show the
        directive's prompt if it is new to this conversation."""
        prompt = "\n".join(text for kind, text in directive.prompt_parts() if kind != "orchestrator_system")
        prompt = f"{prompt.rstrip()}\n\n{self.offered_tools(directive)}\n"
        if self._refusal is not None and self._refusal[0] == key:
            conversation.answer(f"refused: {self._refusal[1]}")
            self._refusal = None
        elif conversation.pending:
            conversation.answer("accepted. " + _situation(directive))
        if prompt != conversation.shown:
            conversation.messages.append({"role": "user", "content": prompt})
            conversation.shown = prompt
            conversation.trim()

    def _ask(self, conversation: _Conversation, directive: Directive) -> str | None:
        """One model request; None, or why the agent stops (the server failed, its answer
        is malformed, the request's deadline passed)."""
        selection = directive.llm
        if selection is None or selection.llm is None:
            raise _no_model(directive)
        llm = selection.llm
        client = self._client(llm)
        started = time.perf_counter()
        response = within(
            REQUEST_DEADLINE_S,
            lambda: client.chat.completions.create(
                model=llm.model_id,
                messages=conversation.messages,
                tools=tool_specs(offered(directive)) + self.tools.specs(),
                tool_choice="required",
                timeout=REQUEST_DEADLINE_S,
            ),
        )
        server = f"the model server of provider `{llm.provider}`"
        if isinstance(response, BaseException):
            if isinstance(response, TimeoutError):
                self._clients.pop(llm.provider, None)  # its connection may still be held
                return f"{server} did not answer within the request's deadline of {REQUEST_DEADLINE_S:g} s"
            return redact(_failure(server, response))
        latency = int((time.perf_counter() - started) * 1000)
        usage = getattr(response, "usage", None)
        self._spent.append(
            Usage(
                conversation.agent,
                llm,
                selection.rule,
                _count(usage, "prompt_tokens"),
                _count(usage, "completion_tokens"),
                latency,
            )
        )
        message = _message(response)
        if isinstance(message, str):
            return f"{server} sent a malformed response: {message}"
        self._heard(conversation, directive, message)
        return None

    def _heard(self, conversation: _Conversation, directive: Directive, message: Any) -> None:
        calls = list(getattr(message, "tool_calls", None) or [])
        conversation.messages.append(_assistant(message, calls))
        if not calls:  # the model said it would act instead of acting
            self._strikes += 1
            names = ", ".join(self._offered(directive))
            conversation.messages.append(
                {"role": "user", "content": f"Do not describe it: call one of the tools ({names})."}
            )
        conversation.queued = calls

    def _client(self, llm: Llm) -> Client:
        if llm.provider not in self._clients:
            base_url, key = endpoint(self.config.provider(llm))
            self._clients[llm.provider] = self.make_client(base_url, key)
        return self._clients[llm.provider]

    def _offered(self, directive: Directive) -> list[str]:
        return [*offered(directive), *self.tools.names()]

    def offered_tools(self, directive: Directive) -> str:
        """The directive's last lines for the model: its todo, and the tools it may call
        (`--show-prompts` prints them too)."""
        todo = f"todo: {directive.todo_id}\n" if directive.todo_id else ""
        return f"{todo}tools: [{', '.join(self._offered(directive))}]"

    def close(self) -> None:
        """Releases the toolsets (a command still running is killed with its group)."""
        self.tools.close()

    def on_command(self, started: Started) -> None:
        for toolset in self.tools.toolsets:
            if isinstance(toolset, StartsCommands):
                toolset.on_start(started)

    # -- a tool call --------------------------------------------------------------------------

    def _run(self, call: Any, directive: Directive, conversation: _Conversation) -> Answer | None:
        """The reply a tool call asks for, or None when it was answered here (a read, a
        toolset's tool, a malformed call) and the model is asked again."""
        name = call.function.name
        arguments = oversized(call.function.arguments) or _arguments(call.function.arguments)
        if isinstance(arguments, str):
            conversation.messages.append(_tool_result(call, f"refused: {arguments}"))
            self._strikes += 1
            return None
        if self.tools.has(name):
            result, use = self.tools.call(name, arguments, conversation.agent, directive.todo_id)
            self._spent.append(use)
            conversation.messages.append(_tool_result(call, result))
            return None
        if name not in offered(directive):
            conversation.messages.append(
                _tool_result(
                    call,
                    f"refused: `{name}` is not a tool here; use one of {', '.join(self._offered(directive))}",
                )
            )
            self._strikes += 1
            return None
        if name in READS:
            conversation.messages.append(_tool_result(call, _read(name, arguments, directive)))
            return None
        conversation.pending = [call.id]
        reply = _reply(name, arguments, directive)
        if name == "revise_checklist" and directive.node == "work":
            conversation.carry = reply
            return {"teleportTo": "teleport-revise-tasks"}
        return reply


def within(seconds: float, request: Callable[[], Any]) -> Any:
    """`request()`'s result or the exception it raised, or a `TimeoutError` once `seconds`
    pass: a total deadline, which a server trickling its answer a byte at a time cannot
    stretch as it can a read timeout. The request runs on a thread of its own, left to end
    when its client is dropped."""
    found: list[Any] = []
    worker = threading.Thread(target=lambda: found.append(_outcome(request)), daemon=True)
    worker.start()
    worker.join(seconds)
    return found[0] if found else TimeoutError()


def _outcome(request: Callable[[], Any]) -> Any:
    try:
        return request()
    except Exception as error:  # handed to the agent, which says what failed
        return error


def _failure(server: str, error: BaseException) -> str:
    """Why a model request failed, in one line: the API's error, or a body it could not read."""
    from openai import OpenAIError

    if isinstance(error, OpenAIError):
        return f"the model call failed: {error}"
    if isinstance(error, ValueError):  # a body that says JSON and is not
        return f"{server} sent a malformed response: the body is not JSON ({error})"
    return f"the model call to {server} failed: {type(error).__name__}: {error}"


def _message(response: Any) -> Any:
    """The message of a chat completion, or what is wrong with the response."""
    if isinstance(response, str | bytes) or not hasattr(response, "choices"):
        return "the body is not a chat completion (not JSON: an HTML page or text?)"
    if not response.choices:
        return "its `choices` is empty"
    message = getattr(response.choices[0], "message", None)
    if message is None:
        return "its message is null"
    return message


def _count(usage: Any, name: str) -> int:
    value = getattr(usage, name, 0)
    return value if isinstance(value, int) else 0


def _skip(conversation: _Conversation, calls: list[Any], why: str) -> None:
    conversation.messages += [_tool_result(call, why) for call in calls]
    calls.clear()


def _arguments(raw: Any) -> dict[str, Any] | str:
    """A tool call's arguments: a JSON string (as the API says), or an object as some
    local servers send; or why they cannot be read."""
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw or "{}")
    except (TypeError, ValueError) as error:
        return f"the arguments are not JSON ({error})"
    return parsed if isinstance(parsed, dict) else "the arguments are a JSON object"


def _reply(name: str, arguments: dict[str, Any], directive: Directive) -> dict[str, Any]:
    if name in ("submit_tasks", "submit_todo_task_result", "revise_checklist"):
        return arguments
    if name == "report_failure":
        return {"failed": arguments.get("reason")}
    if name == "complete_todo" and directive.todo_id is not None:
        arguments = {"todo_id": directive.todo_id, **arguments}
    return {name: arguments}


def _read(name: str, arguments: dict[str, Any], directive: Directive) -> str:
    if directive.step is None or not directive.state.tasks:
        return "there is no checklist yet"
    listed = json.loads(todos(directive.step, directive.state))
    if name == "list_todos":
        return json.dumps(listed, ensure_ascii=False)
    found = next((t for t in listed["todos"] if t["id"] == arguments.get("todo_id")), None)
    return json.dumps(found, ensure_ascii=False) if found else f"there is no `{arguments.get('todo_id')}`"


def _situation(directive: Directive) -> str:
    if directive.completed:
        return "The workflow is complete."
    if directive.node == "delegated":
        return f"{directive.role}: the sub-agent has the todo."
    return f"Now: {directive.role}."


def _assistant(message: Any, calls: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": _as_text(call.function.arguments)},
            }
            for call in calls
        ]
    return out


def _as_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _tool_result(call: Any, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def _no_model(directive: Directive) -> Exception:
    from .llm_config import LlmConfigError

    step = directive.step.id if directive.step else "?"
    return LlmConfigError(
        f"no model for the agents of step `{step}`: "
        "give `llm` in the workflow, --llm PROVIDER:MODEL or $TODOFLOW_LLM"
    )
