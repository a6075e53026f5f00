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
import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from ..directive import Directive
from ..entries import ORCHESTRATOR
from ..events import todos
from ..llm_choice import Usage
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
from .llm_config import LlmConfig, endpoint, redact
from .toolbox import Toolset, ToolSpec

MAX_REFUSALS = 5  # refused (or tool-less) answers in a row before the agent stops
MAX_ROUNDS = 20  # model calls for one directive before the agent stops
TOOL_S = 120.0  # how long a toolset's call may take
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
        self.config, self.make_client, self.toolsets = config, make_client, toolsets
        self._routes: dict[str, tuple[Toolset, ToolSpec]] | None = None  # asked when first needed
        self._clients: dict[str, Client] = {}
        self._secrets: list[str] = []
        self._conversations: dict[tuple[str, ...], _Conversation] = {}
        self._spent: list[Usage] = []
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
        for _ in range(MAX_ROUNDS):
            while conversation.queued:
                call = conversation.queued.pop(0)
                answer = self._run(call, directive, conversation)
                if answer is not None:
                    for skipped in conversation.queued:  # one action per message
                        conversation.messages.append(
                            _tool_result(
                                skipped,
                                "not run: one action per message; call it again if it is still needed",
                            )
                        )
                    conversation.queued = []
                    return answer
            if self._strikes > MAX_REFUSALS:
                return Stop(f"the model's answers were refused {self._strikes} times in a row")
            try:
                self._ask(conversation, directive)
            except Exception as error:  # the API's errors: a server down, a timeout, a 4xx/5xx
                if not _api_error(error):
                    raise
                return Stop(f"the model call failed: {self.redact(str(error))}")
        return Stop(f"the model made {MAX_ROUNDS} calls without an action the engine could take")

    def refused(self, reason: str) -> bool:
        """The engine's refusal goes back to the model as the tool's result, word for word."""
        self._strikes += 1
        if self._last is not None:
            self._refusal = (self._last, reason)
        return self._strikes <= MAX_REFUSALS

    def applied(self) -> None:
        self._strikes = 0

    def spent(self) -> list[Usage]:
        """The model calls made since the driver last asked (it journals them)."""
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
        if self._refusal is not None and self._refusal[0] == key:
            conversation.answer(f"refused: {self._refusal[1]}")
            self._refusal = None
        elif conversation.pending:
            conversation.answer("accepted. " + _situation(directive))
        if prompt != conversation.shown:
            conversation.messages.append({"role": "user", "content": prompt})
            conversation.shown = prompt
            conversation.trim()

    def _ask(self, conversation: _Conversation, directive: Directive) -> None:
        selection = directive.llm
        if selection is None or selection.llm is None:
            raise _no_model(directive)
        llm = selection.llm
        started = time.perf_counter()
        response = self._client(llm).chat.completions.create(
            model=llm.model_id,
            messages=conversation.messages,
            tools=tool_specs(offered(directive)) + self._offered_tools(),
            tool_choice="required",
        )
        latency = int((time.perf_counter() - started) * 1000)
        usage = getattr(response, "usage", None)
        self._spent.append(
            Usage(
                conversation.agent,
                llm,
                selection.rule,
                int(getattr(usage, "prompt_tokens", 0) or 0),
                int(getattr(usage, "completion_tokens", 0) or 0),
                latency,
            )
        )
        message = response.choices[0].message
        calls = list(message.tool_calls or [])
        conversation.messages.append(_assistant(message, calls))
        if not calls:  # the model said it would act instead of acting
            self._strikes += 1
            names = ", ".join(offered(directive))
            conversation.messages.append(
                {"role": "user", "content": f"Do not describe it: call one of the tools ({names})."}
            )
        conversation.queued = calls

    def _client(self, llm: Llm) -> Client:
        if llm.provider not in self._clients:
            base_url, key = endpoint(self.config.provider(llm))
            self._secrets.append(key)
            self._clients[llm.provider] = self.make_client(base_url, key)
        return self._clients[llm.provider]

    def redact(self, text: str) -> str:
        return redact(text, self._secrets)

    # -- the toolsets' tools -------------------------------------------------------------

    def _tools(self) -> dict[str, tuple[Toolset, ToolSpec]]:
        if self._routes is None:
            self._routes = {spec.name: (each, spec) for each in self.toolsets for spec in each.specs()}
        return self._routes

    def _offered_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {"name": s.name, "description": s.description, "parameters": dict(s.parameters)},
            }
            for _, s in self._tools().values()
        ]

    # -- a tool call --------------------------------------------------------------------------

    def _run(self, call: Any, directive: Directive, conversation: _Conversation) -> Answer | None:
        """The reply a tool call asks for, or None when it was answered here (a read, a
        malformed call) and the model is asked again."""
        name = call.function.name
        arguments = _arguments(call.function.arguments)
        if isinstance(arguments, str):
            conversation.messages.append(_tool_result(call, f"refused: {arguments}"))
            self._strikes += 1
            return None
        if name in self._tools():  # not a reply: the model is asked again with the result
            toolset = self._tools()[name][0]
            outcome = toolset.call(name, arguments, time.monotonic() + TOOL_S)
            conversation.messages.append(_tool_result(call, outcome.content))
            return None
        if name not in offered(directive):
            conversation.messages.append(
                _tool_result(
                    call, f"refused: `{name}` is not a tool here; use one of {', '.join(offered(directive))}"
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


def _api_error(error: Exception) -> bool:
    from openai import OpenAIError

    return isinstance(error, OpenAIError)


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
