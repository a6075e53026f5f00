"""The execution log: the journal as the seed's execution-logs view, grouped by step and
iteration.

An iteration is one turn of a step's orchestrator (its decision, a confirmation, a
revision, a todo tool call) with what it caused: a delegation's sub-agent answer, its
prevalidation, the learning it recorded. A step's intake is its iteration 0; a regular
step's confirmation is its iteration 1. Built from the journal alone by replaying it
(a pure function of the plan and the entries), so it is the same for every store and
needs no derived file. `todoflow log` prints it; `--json` gives `log_json`'s shape,
documented in docs/runtime.md. Each step also carries its checklist as it stands after
its last entry (`todos`: todos.json's items, each with the confirmation that completed
it), which the run report shows.

A learn_code fast path's attempt is one iteration of its own (`action: fast_path`, by
the `script`): its start, each delegation the script made (`delegations`, each as a
delegation's iteration would say it) and its end. An attempt that failed ends the step's
section: the step started afresh is a section of its own, so the orchestrator's turns
never mix with the script's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..entries import (
    ORCHESTRATOR,
    CommandStarted,
    Confirm,
    Continue,
    CreateTodo,
    Delegate,
    Entry,
    FastPathFailed,
    FastPathStarted,
    LlmCall,
    RaiseTurns,
    Revise,
    SubAgentDone,
    SubAgentFailed,
    SubmitTasks,
    Teleport,
    ToolCalled,
    UpdateTodo,
    to_json,
)
from ..events import learning_id, todos
from ..plan import RunPlan, RunStep
from ..state import ProcessState, actor, initial_state, replay, unchanged_prefix

LOG_VERSION = 1


def log_json(plan: RunPlan, process_id: str, started_at: str, journal: Iterable[Entry]) -> dict[str, Any]:
    """The log of a run whose journal is `journal` (its entries, in order)."""
    steps: list[dict[str, Any]] = []
    last: list[tuple[RunStep, ProcessState, Confirmations]] = []  # per step: what its todos are made of
    finished = False
    for applied in replay(plan, initial_state(plan, started_at), journal):
        state, settled, entry = applied
        step = plan.step(entry.step)
        section = steps[-1] if steps else None
        if section is None or section["step_id"] != step.id or section["completed"] or _afresh(section):
            steps.append(
                {
                    "step_id": step.id,
                    "step_index": step.index,
                    "title": step.title,
                    "kind": step.kind,
                    "completed": False,
                    "iterations": [],
                }
            )
            last.append((step, settled, {}))
        if _attempting(state, entry):
            number = _add_to_attempt(steps[-1]["iterations"], state, settled, entry, process_id)
        else:
            number = _add(steps[-1]["iterations"], state, settled, entry, process_id)
        last[-1] = (step, settled, _confirmations(last[-1][2], state, entry, number))
        steps[-1]["completed"] = settled.step_complete
        if settled.step_complete:
            steps[-1]["turns"] = settled.turns
        finished = applied.after(plan).finished
    for found, (step, settled, confirmed) in zip(steps, last, strict=True):
        found["todos"] = _todos(step, settled, confirmed)
    return {"version": LOG_VERSION, "process_id": process_id, "completed": finished, "steps": steps}


Confirmations = dict[int, dict[str, Any]]  # position -> the confirmation that completed it
FAST_PATH = "fast_path"  # the action of a fast path's attempt, the one iteration it is


def _attempting(before: ProcessState, entry: Entry) -> bool:
    """Whether `entry` belongs to a fast path's attempt: it starts one, or one is running."""
    running = before.fast_path == "running" and before.step_id == entry.step
    return isinstance(entry, FastPathStarted) or running


def _afresh(section: Mapping[str, Any]) -> bool:
    """Whether the section's last iteration is a failed fast path: the step starts afresh."""
    last = section["iterations"][-1] if section["iterations"] else {}
    return last.get("action") == FAST_PATH and "failed" in last.get(FAST_PATH, {})


def _add_to_attempt(
    iterations: list[dict[str, Any]],
    before: ProcessState,
    settled: ProcessState,
    entry: Entry,
    process_id: str,
) -> int:
    """Fold an entry into the attempt's iteration: the start and the end describe the
    attempt; a delegation opens an item of `delegations`, and what answers it joins it."""
    if isinstance(entry, FastPathStarted):
        number = 1 + max((i["iteration"] for i in iterations), default=0)
        iterations.append(
            {"iteration": number, "at": entry.at, "entries": [], "action": FAST_PATH, "agent": "script"}
        )
    attempt = iterations[-1]
    attempt["entries"].append(to_json(entry))
    if isinstance(entry, FastPathStarted | FastPathFailed):
        _describe(attempt, before, settled, entry, process_id)
        return int(attempt["iteration"])
    delegations = attempt.setdefault("delegations", [])
    if isinstance(entry, Delegate) or not delegations:
        delegations.append({})
    todo = _todo(before, entry)
    if todo is not None and "todo_id" not in delegations[-1]:
        delegations[-1]["todo_id"], delegations[-1]["todo_title"] = todo
    _describe(delegations[-1], before, settled, entry, process_id)
    return int(attempt["iteration"])


def _confirmations(done: Confirmations, before: ProcessState, entry: Entry, iteration: int) -> Confirmations:
    """Who completed each position of the current list, and how, after `entry`."""
    match entry:
        case Confirm():
            return done | {entry.position: _confirmation(entry, iteration, ORCHESTRATOR)}
        case SubAgentDone() if entry.passed:
            return done | {entry.position: _confirmation(entry, iteration, entry.agent)}
        case Revise():  # positions past the prefix it keeps start again (as `settle` resets their results)
            kept = unchanged_prefix(before, entry.tasks, entry.resume_from_task)
            return {position: found for position, found in done.items() if position <= kept}
        case SubmitTasks():
            return {}
    return done


def _confirmation(entry: Confirm | SubAgentDone, iteration: int, agent: str) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "at": entry.at,
        "iteration": iteration,
        "agent": agent,
        "evidence": entry.evidence,
    }


def _todos(step: RunStep, settled: ProcessState, confirmed: Confirmations) -> list[dict[str, Any]]:
    """The step's checklist as todos.json holds it, each item with its task's `constraints`
    (when it has any: todos.json has no place for them) and its `confirmation` (None: not
    confirmed; a revision may count a task done that nobody confirmed)."""
    items: list[dict[str, Any]] = json.loads(todos(step, settled))["todos"]
    return [
        item
        | ({"constraints": list(task.constraints)} if task.constraints else {})
        | {"confirmation": confirmed.get(index)}
        for index, (item, task) in enumerate(zip(items, settled.tasks, strict=True), start=1)
    ]


def _add(
    iterations: list[dict[str, Any]],
    before: ProcessState,
    settled: ProcessState,
    entry: Entry,
    process_id: str,
) -> int:
    """Fold one entry into its step's iterations; the number of the iteration it joined."""
    number = iteration_of(before, settled, entry)
    found = next((i for i in iterations if i["iteration"] == number), None)
    if found is None:
        found = {"iteration": number, "at": entry.at, "entries": []}
        iterations.append(found)
    found["entries"].append(to_json(entry))
    todo = _todo(before, entry)
    if todo is not None and "todo_id" not in found:
        found["todo_id"], found["todo_title"] = todo
    _describe(found, before, settled, entry, process_id)
    return number


def _describe(
    found: dict[str, Any], before: ProcessState, settled: ProcessState, entry: Entry, process_id: str
) -> None:
    """What an entry says, in its iteration's words."""
    _DESCRIBE[type(entry)](found, _Around(before, settled, process_id), entry)


class _Around(NamedTuple):
    before: ProcessState
    settled: ProcessState
    process_id: str


Describe = Callable[[dict[str, Any], _Around, Any], None]
_DESCRIBE: dict[type[Any], Describe] = {}  # one handler per entry kind: what it adds to its iteration


def _describes(kind: type[Any]) -> Callable[[Describe], Describe]:
    def add(handler: Describe) -> Describe:
        _DESCRIBE[kind] = handler
        return handler

    return add


def described_kinds() -> frozenset[type[Any]]:
    """The entry kinds the log describes (a test holds it equal to `entries.KINDS`)."""
    return frozenset(_DESCRIBE)


@_describes(SubmitTasks)
def _submit_tasks(found: dict[str, Any], around: _Around, entry: SubmitTasks) -> None:
    found |= {"action": "submit_tasks", "agent": _who(entry), "tasks": _tasks(around.settled)}
    found["progress_summary"] = entry.progress_checklist_outcome


@_describes(Confirm)
def _confirm(found: dict[str, Any], around: _Around, entry: Confirm) -> None:
    found |= {"action": "confirm", "agent": ORCHESTRATOR, "evidence": entry.evidence}
    found["outcome"] = entry.progress_execution_outcome


@_describes(Teleport)
def _teleport(found: dict[str, Any], around: _Around, entry: Teleport) -> None:
    found |= {"action": "teleport", "agent": ORCHESTRATOR}


@_describes(Revise)
def _revise(found: dict[str, Any], around: _Around, entry: Revise) -> None:
    found |= {
        "action": "revise",
        "agent": ORCHESTRATOR,
        "before": _tasks(around.before),
        "after": _tasks(around.settled),
        "resume_from_task": entry.resume_from_task,
        "progress_summary": entry.progress_checklist_outcome,
    }


@_describes(Delegate)
def _delegate(found: dict[str, Any], around: _Around, entry: Delegate) -> None:
    found |= {
        "action": "delegate",
        "agent": entry.agent,
        "selected_route_id": entry.selected_route_id,
        "use_generic_agent": entry.use_generic_agent,
        "reasoning": entry.selection_reasoning,
        "instructions": entry.instructions_to_sub_agent,
        "success_criteria": entry.success_criteria_for_sub_agent,
        "progress_summary": entry.progress_summary,
    }


@_describes(Continue)
def _continue(found: dict[str, Any], around: _Around, entry: Continue) -> None:
    found |= {"action": "continue", "agent": ORCHESTRATOR, "reasoning": entry.selection_reasoning}
    found["progress_summary"] = entry.progress_summary


@_describes(SubAgentDone)
def _sub_agent_done(found: dict[str, Any], around: _Around, entry: SubAgentDone) -> None:
    found |= {"evidence": entry.evidence, "outcome": entry.progress_execution_outcome}
    found["result"] = "done" if entry.passed else "failed"
    if entry.agent == "generic":
        return
    files = [{"path": path, "sha256": digest} for path, digest in entry.files]
    found["validation"] = {"passed": entry.passed, "reason": entry.reason, "files": files}
    if entry.passed:
        found["learning_id"] = learning_id(around.process_id, entry.seq)


@_describes(SubAgentFailed)
def _sub_agent_failed(found: dict[str, Any], around: _Around, entry: SubAgentFailed) -> None:
    found |= {"result": "failed", "failure": entry.failed}


@_describes(CreateTodo)
def _create_todo(found: dict[str, Any], around: _Around, entry: CreateTodo) -> None:
    found |= {"action": "create_todo", "agent": ORCHESTRATOR, "created": {"title": entry.title}}


@_describes(UpdateTodo)
def _update_todo(found: dict[str, Any], around: _Around, entry: UpdateTodo) -> None:
    update = {"status": entry.status, "notes": entry.notes, "agent": entry.agent}
    if entry.agent == ORCHESTRATOR:
        found |= {"action": "update_todo", "agent": ORCHESTRATOR, "update": update}
    else:
        found.setdefault("updates", []).append(update)


@_describes(RaiseTurns)
def _raise_turns(found: dict[str, Any], around: _Around, entry: RaiseTurns) -> None:
    found.setdefault("caller", []).append({"raise_turns": entry.execution_max_turns})


@_describes(FastPathStarted)
def _fast_path_started(found: dict[str, Any], around: _Around, entry: FastPathStarted) -> None:
    found.setdefault("fast_path", {})["script_sha256"] = entry.script_sha256


@_describes(FastPathFailed)
def _fast_path_failed(found: dict[str, Any], around: _Around, entry: FastPathFailed) -> None:
    found.setdefault("fast_path", {})["failed"] = entry.reason


@_describes(LlmCall)
def _llm_call(found: dict[str, Any], around: _Around, entry: LlmCall) -> None:
    call = {k: v for k, v in to_json(entry).items() if k not in ("seq", "by", "step", "type")}
    found.setdefault("llm_calls", []).append(call)


@_describes(ToolCalled)
def _tool_called(found: dict[str, Any], around: _Around, entry: ToolCalled) -> None:
    call = {
        k: v for k, v in to_json(entry).items() if k not in ("seq", "by", "step", "type") and v is not None
    }
    found.setdefault("tool_calls", []).append(call)


@_describes(CommandStarted)
def _command_started(found: dict[str, Any], around: _Around, entry: CommandStarted) -> None:
    started = {"at": entry.at, "agent": entry.agent, "todo": entry.todo, "command": entry.command}
    found.setdefault("commands_started", []).append(started)


def iteration_of(before: ProcessState, settled: ProcessState, entry: Entry) -> int:
    """The orchestrator turn an entry belongs to: its own, or the delegation's it answers."""
    if isinstance(entry, SubmitTasks):
        return 0
    if isinstance(entry, LlmCall | ToolCalled | CommandStarted):  # a call prepares the turn it answers with
        if entry.agent != ORCHESTRATOR and before.delegation is not None:
            return before.delegation.iteration
        return 0 if before.node == "intake" else before.turns + 1
    if actor(entry, before) != ORCHESTRATOR and before.delegation is not None:
        return before.delegation.iteration
    if isinstance(entry, RaiseTurns):
        return before.turns
    return max(settled.turns, 1)


def _todo(state: ProcessState, entry: Entry) -> tuple[str, str] | None:
    position = getattr(entry, "position", None)
    if not isinstance(position, int) or not 1 <= position <= state.total:
        return None
    return f"todo_{position}", state.tasks[position - 1].action


def _tasks(state: ProcessState) -> list[dict[str, Any]]:
    return [{"position": i + 1, **task.as_dict()} for i, task in enumerate(state.tasks)]


def _who(entry: Entry) -> str:
    return "caller" if entry.by == "caller" else ORCHESTRATOR


def log_text(log: Mapping[str, Any]) -> str:
    """The log for people: a section per step, a paragraph per iteration."""
    lines = [f"Execution log of {log['process_id']}" + (" (complete)" if log["completed"] else "")]
    for step in log["steps"]:
        state = "complete" if step["completed"] else "fast path failed" if _afresh(step) else "in progress"
        lines += ["", f"== {step['step_id']} — {step['title']} ({step['kind']}, {state})"]
        for iteration in step["iterations"]:
            lines += _iteration_text(iteration)
    return "\n".join(lines) + "\n"


def _iteration_text(iteration: Mapping[str, Any]) -> list[str]:
    if iteration.get("action") == FAST_PATH:
        return _attempt_text(iteration)
    head = f"-- iteration {iteration['iteration']}: {iteration.get('action', 'answer')}"
    if iteration.get("agent") and iteration.get("agent") != ORCHESTRATOR:
        head += f" -> {iteration['agent']}"
    if "todo_id" in iteration:
        head += f" [{iteration['todo_id']}: {iteration['todo_title']}]"
    out = [head]
    fields = [
        ("reasoning", "reasoning"),
        ("instructions", "instructions"),
        ("success_criteria", "success criteria"),
        ("progress_summary", "progress"),
        ("evidence", "evidence"),
        ("outcome", "outcome"),
        ("failure", "failed"),
    ]
    for key, label in fields:
        if iteration.get(key):
            out.append(f"   {label}: {iteration[key]}")
    if "created" in iteration:
        out.append(f"   created: {iteration['created']['title']}")
    for update in [iteration.get("update"), *iteration.get("updates", [])]:
        if update:
            out.append(
                f"   {update['agent']} marked it {update['status'] or 'with notes'}: {update['notes'] or ''}"
            )
    validation = iteration.get("validation")
    if validation is not None:
        verdict = "passed" if validation["passed"] else f"failed — {validation['reason']}"
        out.append(f"   prevalidation: {verdict}")
    for call in iteration.get("llm_calls", []):
        tokens = f"{call['prompt_tokens']}+{call['completion_tokens']} tokens"
        model = f"{call['provider']}:{call['model_id']} ({call['rule']})"
        out.append(f"   model: {call['agent']} asked {model}, {tokens}")
    for started in iteration.get("commands_started", []):
        out.append(f"   command: {started_line(started)}")
    for call in iteration.get("tool_calls", []):
        out.append(f"   tool: {tool_line(call)}")
    if "learning_id" in iteration:
        out.append(f"   learning recorded: {iteration['learning_id']}")
    if "after" in iteration:
        sizes = f"{len(iteration['before'])} -> {len(iteration['after'])} tasks"
        out.append(f"   revised: {sizes}, resume at {iteration['resume_from_task']}")
    return out


def tool_line(call: Mapping[str, Any]) -> str:
    """`generic called write_file (312 bytes in, 40 out, 3 ms): dist/app sha256 1a2b3c4d…`."""
    sizes = f"{call['arguments_bytes']} bytes in, {call['result_bytes']} out, {call['duration_ms']} ms"
    line = f"{call['agent']} called {call['tool']} ({sizes})"
    if call.get("refused"):
        line += ": refused"
    if "file" in call:
        line += f": {call['file']} sha256 {str(call.get('file_sha256', ''))[:12]}"
    if "command" in call:
        line += f": `{call['command']}` exited {call.get('exit_code')}"
    return line


def started_line(started: Mapping[str, Any]) -> str:
    """`generic started `make test` for todo_2`: a command as it started (a runner killed
    while it ran never journaled the call that ends it)."""
    todo = f" for {started['todo']}" if started.get("todo") else ""
    return f"{started['agent']} started `{started['command']}`{todo}"


def _attempt_text(iteration: Mapping[str, Any]) -> list[str]:
    """A fast path's attempt: the script, each delegation it made (as a delegation's
    iteration says it, indented), and how it ended."""
    number, attempt = iteration["iteration"], iteration[FAST_PATH]
    out = [f"-- iteration {number}: fast path, main.py (sha256 {attempt['script_sha256'][:12]}…)"]
    for delegation in iteration.get("delegations", []):
        head, *rest = _iteration_text({"iteration": number, **delegation})
        out += ["   " + head.replace(f"-- iteration {number}: ", "script: ", 1)]
        out += ["   " + line for line in rest]
    if "failed" in attempt:
        out.append(f"   fast path failed: {attempt['failed']}; the step starts afresh")
    return out
