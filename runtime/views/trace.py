"""A run as OpenTelemetry spans, derived from its journal: `todoflow trace RUN` after the
fact, and the same spans exported live while `todoflow run --trace otlp` drives it.

The journal holds when everything happened (`at`) and what model calls cost, so the spans
are a view of it, like the log: a span for the run, one per step, one per orchestrator
turn (the log's iterations), one per delegation (with its prevalidation) and one per model
call (the GenAI semantic conventions: `gen_ai.request.model`, `gen_ai.usage.input_tokens`,
`gen_ai.usage.output_tokens`; no prompt or completion text unless asked for, and then the
directive's prompt, rendered again from the state, and the accepted reply — both as
redacted as the journal is). Ids are derived, not drawn: the trace id from the process id,
a span's id from the process id and the entry that opened it, so a span exported live and
the same span exported later are one span, and a run and its trace find each other
(`trace_id(process_id)`; every span carries `todoflow.process_id`).

`Spans` folds entries one at a time and returns the spans each entry ends, which is what
a live exporter sends; `finish` ends what is still open (a run that stopped: its step and
turn end at the last entry, marked `todoflow.open`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from todoflow.dsl.nodes import node

from ..entries import (
    ORCHESTRATOR,
    Delegate,
    Entry,
    LlmCall,
    SubAgentDone,
    SubAgentFailed,
    ToolCalled,
    to_json,
)
from ..plan import RunPlan
from ..state import Applied, ProcessState, initial_state, replay
from .log import iteration_of

SCOPE = "todoflow"
Attributes = dict[str, str | int | bool | float]


def trace_id(process_id: str) -> str:
    """The run's trace id: 32 hex digits derived from its process id."""
    return hashlib.sha256(f"trace:{process_id}".encode()).hexdigest()[:32]


def _span_id(process_id: str, *key: object) -> str:
    return hashlib.sha256(":".join(map(str, (process_id, *key))).encode()).hexdigest()[:16]


def nanoseconds(at: str) -> int:
    """A journal time (`2026-01-31T12:00:00.000Z`) in nanoseconds since the epoch."""
    return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000) * 1_000_000


@node
class Span:
    name: str
    span_id: str
    parent_id: str | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, str | int | bool | float]
    failed: bool = False  # the status: an error (a failed delegation, a failed fast path)


class _Open:
    """A span begun and not ended yet."""

    def __init__(
        self, name: str, span_id: str, parent_id: str | None, start_ns: int, **attributes: Any
    ) -> None:
        self.name, self.span_id, self.parent_id, self.start_ns = name, span_id, parent_id, start_ns
        self.attributes: Attributes = {k: v for k, v in attributes.items() if v is not None}

    def end(self, end_ns: int, failed: bool = False, said: Mapping[str, Any] | None = None) -> Span:
        self.attributes.update({k: v for k, v in (said or {}).items() if v is not None})
        return Span(self.name, self.span_id, self.parent_id, self.start_ns, end_ns, self.attributes, failed)


class Spans:
    """The spans of one run, built entry by entry."""

    def __init__(self, plan: RunPlan, process_id: str, started_at: str, content: bool = False) -> None:
        self.plan, self.process_id, self.content = plan, process_id, content
        self.state = initial_state(plan, started_at)
        self.last_ns = nanoseconds(started_at)
        self.run = _Open(
            f"todoflow run {plan.workflow_id}",
            _span_id(process_id, "run"),
            None,
            self.last_ns,
            **{"todoflow.process_id": process_id, "todoflow.workflow_id": plan.workflow_id},
        )
        self.step: _Open | None = None
        self.turn: tuple[int, _Open] | None = None
        self.delegation: _Open | None = None
        self.steps_begun = 0

    def feed(self, entries: Iterable[Entry]) -> list[Span]:
        """The spans the entries end, in the order they end."""
        ended: list[Span] = []
        for applied in replay(self.plan, self.state, entries):
            ended += self._add(applied)
            self.state = applied.after(self.plan)
        return ended

    def finish(self) -> list[Span]:
        """End what is still open: at the run's last entry, marked open unless it finished."""
        ended: list[Span] = []
        still = not self.state.finished
        for span in (self.delegation, self.turn[1] if self.turn else None, self.step):
            if span is not None:
                ended.append(span.end(self.last_ns, said={"todoflow.open": True}))
        self.delegation = self.turn = self.step = None
        if still:  # a finished run's span ended with its last entry
            ended.append(self.run.end(self.last_ns, said={"todoflow.open": True}))
        return ended

    # -- one entry ---------------------------------------------------------------------

    def _add(self, applied: Applied) -> list[Span]:
        before, settled, entry = applied
        at = nanoseconds(entry.at)
        ended = self._begin_step(before, at)
        assert self.step is not None
        turn = self._turn(iteration_of(before, settled, entry), at, ended)
        if isinstance(entry, LlmCall | ToolCalled):  # under the delegation of the sub-agent that made it
            parent = self.delegation if self.delegation is not None and entry.agent != ORCHESTRATOR else turn
            if isinstance(entry, LlmCall):
                ended.append(self._model_call(entry, parent.span_id, at, before))
            else:
                ended.append(self._tool_call(entry, parent.span_id, at))
        elif isinstance(entry, Delegate):
            self.delegation = _Open(
                f"delegate todo_{entry.position} to {entry.agent}",
                _span_id(self.process_id, entry.seq),
                turn.span_id,
                at,
                **{"todoflow.agent": entry.agent, "todoflow.todo_id": f"todo_{entry.position}"},
            )
        elif isinstance(entry, SubAgentDone | SubAgentFailed) and self.delegation is not None:
            ended.append(self._delegated(entry, at))
        if self.content and not isinstance(entry, LlmCall):
            turn.attributes[f"todoflow.entry.{entry.seq}"] = str(to_json(entry))
        self.last_ns = at
        if settled.step_complete:
            ended += self._end_step(at, settled)
        if applied.after(self.plan).finished:
            ended.append(self.run.end(at))
        return ended

    def _begin_step(self, before: ProcessState, at: int) -> list[Span]:
        if self.step is not None:
            return []
        self.steps_begun += 1
        step = self.plan.step(before.step_id or "")
        self.step = _Open(
            f"step {step.id}",
            _span_id(self.process_id, "step", self.steps_begun),
            self.run.span_id,
            self.last_ns if self.steps_begun > 1 else self.run.start_ns,
            **{
                "todoflow.step_id": step.id,
                "todoflow.step_kind": step.kind,
                "todoflow.step_index": step.index,
            },
        )
        return []

    def _turn(self, number: int, at: int, ended: list[Span]) -> _Open:
        assert self.step is not None
        if self.turn is not None and self.turn[0] == number:
            return self.turn[1]
        if self.turn is not None:
            ended.append(self.turn[1].end(self.last_ns))
        name = "intake" if number == 0 else f"turn {number}"
        key = (self.steps_begun, number)
        opened = _Open(
            name,
            _span_id(self.process_id, "turn", *key),
            self.step.span_id,
            min(self.last_ns, at),
            **{"todoflow.iteration": number},
        )
        self.turn = (number, opened)
        return opened

    def _model_call(self, entry: LlmCall, parent: str, at: int, before: ProcessState) -> Span:
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": entry.provider,
            "gen_ai.request.model": entry.model_id,
            "gen_ai.usage.input_tokens": entry.prompt_tokens,
            "gen_ai.usage.output_tokens": entry.completion_tokens,
            "todoflow.agent": entry.agent,
            "todoflow.llm_rule": entry.rule,
        }
        if self.content:
            attributes["gen_ai.prompt"] = self._prompt(before)
        start = at - entry.latency_ms * 1_000_000
        span_id = _span_id(self.process_id, entry.seq)
        return Span(f"chat {entry.model_id}", span_id, parent, start, at, attributes)

    def _tool_call(self, entry: ToolCalled, parent: str, at: int) -> Span:
        """A tool call beside the decisions (GenAI's `execute_tool`): what the audit holds,
        the command line only with content (it may say what the work is)."""
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": entry.tool,
            "todoflow.agent": entry.agent,
            "todoflow.tool.arguments_bytes": entry.arguments_bytes,
            "todoflow.tool.result_bytes": entry.result_bytes,
            "todoflow.tool.refused": entry.refused,
        }
        if entry.todo is not None:
            attributes["todoflow.todo_id"] = entry.todo
        if entry.file is not None:
            attributes["todoflow.tool.file"] = entry.file
        if entry.exit_code is not None:
            attributes["todoflow.tool.exit_code"] = entry.exit_code
        if self.content and entry.command is not None:
            attributes["todoflow.tool.command"] = entry.command
        start = at - entry.duration_ms * 1_000_000
        span_id = _span_id(self.process_id, entry.seq)
        return Span(
            f"execute_tool {entry.tool}", span_id, parent, start, at, attributes, failed=entry.refused
        )

    def _prompt(self, state: ProcessState) -> str:
        """The prompt the agent read at `state`, rendered again (the engine is deterministic)."""
        from ..directive import Directive, PromptError
        from ..state import attempt_id

        step = self.plan.step(state.step_id) if state.step_id else None
        workflow = {"id": self.plan.workflow_id, "title": self.plan.title}
        directive = Directive(self.process_id, attempt_id(self.process_id, state.seq), state, step, workflow)
        try:
            return directive.prompt()
        except PromptError as error:
            return f"(the prompt cannot be rendered again: {error})"

    def _delegated(self, entry: SubAgentDone | SubAgentFailed, at: int) -> Span:
        assert self.delegation is not None
        delegation, self.delegation = self.delegation, None
        if isinstance(entry, SubAgentFailed):
            return delegation.end(at, failed=True, said={"todoflow.failure": entry.failed})
        checked = entry.agent != "generic"
        said = {
            "todoflow.prevalidation.passed": entry.passed if checked else None,
            "todoflow.prevalidation.reason": entry.reason,
            "todoflow.prevalidation.files": len(entry.files) if checked else None,
        }
        return delegation.end(at, failed=not entry.passed, said=said)

    def _end_step(self, at: int, settled: ProcessState) -> list[Span]:
        assert self.step is not None
        ended = []
        if self.turn is not None:
            ended.append(self.turn[1].end(at))
        ended.append(
            self.step.end(at, said={"todoflow.turns": settled.turns, "todoflow.todos": settled.total})
        )
        self.step, self.turn, self.delegation = None, None, None
        return ended


def run_spans(
    plan: RunPlan, process_id: str, started_at: str, entries: Iterable[Entry], content: bool = False
) -> list[Span]:
    """Every span of a run whose journal is `entries` (what is open ends at the last entry)."""
    spans = Spans(plan, process_id, started_at, content)
    return spans.feed(entries) + spans.finish()


# -- OTLP's JSON encoding (the OTLP/HTTP protocol's `application/json`) ----------------------


def otlp_json(spans: Iterable[Span], trace: str, service: str = "todoflow") -> dict[str, Any]:
    """`ExportTraceServiceRequest` as OTLP/JSON (`trace`: the trace id, 32 hex digits): what
    `todoflow trace --format otlp-json` prints and what the live exporter posts."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service})},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE},
                        "spans": [_otlp_span(span, trace) for span in spans],
                    }
                ],
            }
        ]
    }


def _otlp_span(span: Span, trace: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": span.span_id,
        "name": span.name,
        "kind": 1,  # SPAN_KIND_INTERNAL
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": _attributes(span.attributes),
        "status": {"code": 2} if span.failed else {"code": 1},  # ERROR, OK
    }
    if span.parent_id is not None:
        out["parentSpanId"] = span.parent_id
    return out


def _attributes(values: Mapping[str, str | int | bool | float]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            typed: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            typed = {"intValue": str(value)}
        elif isinstance(value, float):
            typed = {"doubleValue": value}
        else:
            typed = {"stringValue": value}
        out.append({"key": key, "value": typed})
    return out
