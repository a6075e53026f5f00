"""The typed syntax tree: one frozen node class per construct, each with its span.

Built by `dsl.builder` straight from the parser's tokens; read by the formatter and
the compiler. Spans and layout facts (block or plain string, comments) are excluded
from equality, so two trees compare equal when they mean the same thing.
Imports nothing but `dsl.spans` and `dsl.nodes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from functools import cached_property
from typing import ClassVar, Literal, TypeAlias

from .nodes import node
from .spans import Span

StepKind: TypeAlias = Literal["regular", "todo_task"]
PromptKind: TypeAlias = Literal[
    "orchestrator_system", "orchestrator_user", "intake", "work", "revise", "sub_agent"
]
PROMPT_KINDS: tuple[PromptKind, ...] = (
    "orchestrator_system",
    "orchestrator_user",
    "intake",
    "work",
    "revise",
    "sub_agent",
)


# Leaves keep their position inline rather than in a Span of their own: they are most
# of the tree, and this halves what each costs in memory. `Name(value, *span)` builds one.


@node
class Name:
    """An identifier as written: a step, route, task label or provider."""

    value: str
    path: str = field(compare=False)
    line: int = field(compare=False)
    column: int = field(compare=False)
    end_line: int = field(compare=False)
    end_column: int = field(compare=False)

    @property
    def span(self) -> Span:
        return Span(self.path, self.line, self.column, self.end_line, self.end_column)


@node
class Text:
    """A decoded string; `block` records that it was written as a `\"\"\"` block."""

    value: str
    path: str = field(compare=False)
    line: int = field(compare=False)
    column: int = field(compare=False)
    end_line: int = field(compare=False)
    end_column: int = field(compare=False)
    block: bool = field(default=False, compare=False)

    @property
    def span(self) -> Span:
        return Span(self.path, self.line, self.column, self.end_line, self.end_column)


@node
class Comment:
    """A `#` comment; `trailing` when code stands before it on its line."""

    text: str
    span: Span
    trailing: bool


@node
class Description:
    keyword: ClassVar[str] = "description"
    text: Text
    span: Span = field(compare=False)


@node
class Success:
    keyword: ClassVar[str] = "success"
    text: Text
    span: Span = field(compare=False)


@node
class Needs:
    keyword: ClassVar[str] = "needs"
    paths: tuple[Text, ...]
    span: Span = field(compare=False)


@node
class Output:
    keyword: ClassVar[str] = "output"
    path: Text
    span: Span = field(compare=False)


@node
class Expect:
    keyword: ClassVar[str] = "expect"
    path: Text
    span: Span = field(compare=False)


@node
class Next:
    """`next ID` or `next end`; the target `end` is never a step id."""

    keyword: ClassVar[str] = "next"
    target: Name
    span: Span = field(compare=False)

    @property
    def is_end(self) -> bool:
        return self.target.value == "end"


@node
class Llm:
    keyword: ClassVar[str] = "llm"
    provider: Name
    model: Text
    span: Span = field(compare=False)


@node
class ConditionalLlm:
    keyword: ClassVar[str] = "conditional_llm"
    provider: Name
    model: Text
    span: Span = field(compare=False)


@node
class MaxTurns:
    keyword: ClassVar[str] = "max_turns"
    value: int
    span: Span = field(compare=False)


@node
class Mode:
    keyword: ClassVar[str] = "mode"
    value: Literal["learn_code"]
    span: Span = field(compare=False)


@node
class Prompt:
    """`prompt KIND TEXT` (inline `template`) or `prompt KIND from "file"` (`path`)."""

    keyword: ClassVar[str] = "prompt"
    kind: Name
    template: Text | None
    path: Text | None
    span: Span = field(compare=False)


@node
class Generic:
    keyword: ClassVar[str] = "generic"
    enabled: bool
    span: Span = field(compare=False)


@node
class Task:
    label: Name | None
    action: Text
    expected: Text
    after: tuple[Name, ...]

    @property
    def span(self) -> Span:
        first = self.label.span if self.label else self.action.span
        return first.to(self.after[-1].span if self.after else self.expected.span)


@node
class Constraint:
    """A rule attached to the tasks it names; `targets` is empty for `on all`."""

    text: Text
    targets: tuple[Name, ...]
    on_all: bool
    span: Span = field(compare=False)


@node
class Tasks:
    keyword: ClassVar[str] = "tasks"
    entries: tuple[Task | Constraint, ...]
    span: Span = field(compare=False)

    @cached_property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(e for e in self.entries if isinstance(e, Task))

    @cached_property
    def constraints(self) -> tuple[Constraint, ...]:
        return tuple(e for e in self.entries if isinstance(e, Constraint))


@node
class Route:
    keyword: ClassVar[str] = "route"
    id: Name
    name: Text
    condition: Text
    step: Step
    span: Span = field(compare=False)


Item: TypeAlias = (
    Description
    | Success
    | Needs
    | Output
    | Expect
    | Next
    | Llm
    | ConditionalLlm
    | MaxTurns
    | Mode
    | Prompt
    | Route
    | Generic
    | Tasks
)
Default: TypeAlias = Llm | ConditionalLlm | MaxTurns | Prompt


@node
class Step:
    kind: StepKind
    id: Name
    title: Text
    items: tuple[Item, ...]
    span: Span = field(compare=False)

    def walk(self) -> Iterator[Step]:
        """This step, then every sub-agent step inside its routes, depth first."""
        yield self
        for item in self.items:
            if isinstance(item, Route):
                yield from item.step.walk()


@node
class Workflow:
    id: Name
    title: Text
    members: tuple[Default | Step, ...]
    span: Span = field(compare=False)
    comments: tuple[Comment, ...] = field(default=(), compare=False)

    @cached_property
    def steps(self) -> tuple[Step, ...]:
        return tuple(m for m in self.members if isinstance(m, Step))

    @cached_property
    def defaults(self) -> tuple[Default, ...]:
        return tuple(m for m in self.members if not isinstance(m, Step))
