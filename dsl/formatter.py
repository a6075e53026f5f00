"""The formatter: an AST (and the comments and blank lines of its source) -> canonical text.

Canonical layout: 4-space indent, one item per line, one blank line before every
top-level step, block strings re-indented under their item, and the author's
comments kept beside the code they were written beside. Blank lines the author left
between items are kept (at most one). Formatting is idempotent, and parsing the
output gives back the same tree (ignoring spans).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from . import ast
from .parser import parse
from .spans import Span
from .strings import quote, quote_block

INDENT = "    "
LineKind = Literal["open", "close", "item", "step"]


@dataclass
class _Line:
    depth: int
    text: str
    first: int  # the source lines this line stands for
    last: int
    kind: LineKind = "item"
    leading: list[ast.Comment] = field(default_factory=list)
    trailing: ast.Comment | None = None


def format_source(text: str, path: str | None = None) -> str:
    """The canonical form of a source; raises `TodoflowError` when it does not parse."""
    workflow = parse(text, path)
    blank = frozenset(n for n, line in enumerate(text.split("\n"), start=1) if not line.strip())
    return render(workflow, blank)


def render(workflow: ast.Workflow, blank_lines: frozenset[int] = frozenset()) -> str:
    """Canonical text for a workflow; `blank_lines` are the source's empty lines."""
    lines = _Layout().workflow(workflow)
    tail = _attach(lines, workflow.comments)
    return _emit(lines, tail, blank_lines)


class _Layout:
    """Walks the tree into lines, rendering each construct as canonical text."""

    def __init__(self) -> None:
        self.lines: list[_Line] = []

    def workflow(self, node: ast.Workflow) -> list[_Line]:
        self._open(0, f"workflow {node.id.value} {self._text(node.title, 0)} {{", node.span, node.title)
        for member in node.members:
            if isinstance(member, ast.Step):
                self.step(member, 1, "step")
            else:
                self._item(member, 1)
        self._close(0, node.span)
        return self.lines

    def step(self, node: ast.Step, depth: int, kind: LineKind) -> None:
        header = f"{node.kind} {node.id.value} {self._text(node.title, depth)} {{"
        self._open(depth, header, node.span, node.title, kind)
        for item in node.items:
            self._item(item, depth + 1)
        self._close(depth, node.span)

    def _item(self, item: ast.Item, depth: int) -> None:
        if isinstance(item, ast.Route):
            text = self._text(item.condition, depth)
            header = f"route {item.id.value} {self._text(item.name, depth)} when {text} {{"
            self._open(depth, header, item.span, item.condition)
            self.step(item.step, depth + 1, "item")
            self._close(depth, item.span)
        elif isinstance(item, ast.Tasks):
            self._open(depth, "tasks {", item.span, None)
            for entry in item.entries:
                self._add(depth + 1, self._entry(entry, depth + 1), entry.span.line, entry.span.end_line)
            self._close(depth, item.span)
        else:
            self._add(depth, self._simple(item, depth), item.span.line, item.span.end_line)

    def _simple(self, item: ast.Item, depth: int) -> str:
        match item:
            case ast.Description(text=text) | ast.Success(text=text):
                return f"{item.keyword} {self._text(text, depth)}"
            case ast.Needs(paths=paths):
                return "needs " + ", ".join(quote(p.value) for p in paths)
            case ast.Output(path=path):
                return f"output {quote(path.value)}"
            case ast.Expect(path=path):
                return f"expect file {quote(path.value)}"
            case ast.Next(target=target):
                return f"next {target.value}"
            case ast.Llm(provider=provider, model=model) | ast.ConditionalLlm(provider=provider, model=model):
                return f"{item.keyword} {provider.value} {quote(model.value)}"
            case ast.MaxTurns(value=value):
                return f"max_turns {value}"
            case ast.Mode(value=value):
                return f"mode {value}"
            case ast.Prompt(kind=kind, template=template, path=path):
                body = (
                    self._text(template, depth) if template else f"from {quote(path.value if path else '')}"
                )
                return f"prompt {kind.value} {body}"
            case ast.Generic(enabled=enabled):
                return "generic on" if enabled else "generic off"
        raise AssertionError(f"no layout for {type(item).__name__}")

    def _entry(self, entry: ast.Task | ast.Constraint, depth: int) -> str:
        if isinstance(entry, ast.Constraint):
            targets = "all" if entry.on_all else ", ".join(t.value for t in entry.targets)
            return f"constraint {self._text(entry.text, depth)} on {targets}"
        label = f"{entry.label.value}: " if entry.label else ""
        text = f"{label}{self._text(entry.action, depth)} => {self._text(entry.expected, depth)}"
        if entry.after:
            text += " after " + ", ".join(a.value for a in entry.after)
        return text

    @staticmethod
    def _text(text: ast.Text, depth: int) -> str:
        if text.block and text.value:
            return quote_block(text.value, INDENT * (depth + 1))
        return quote(text.value)

    def _open(
        self, depth: int, text: str, span: Span, head: ast.Text | None, kind: LineKind = "open"
    ) -> None:
        last = head.span.end_line if head else span.line
        self.lines.append(_Line(depth, text, span.line, last, kind))

    def _close(self, depth: int, span: Span) -> None:
        self.lines.append(_Line(depth, "}", span.end_line, span.end_line, "close"))

    def _add(self, depth: int, text: str, first: int, last: int) -> None:
        self.lines.append(_Line(depth, text, first, last))


def _attach(lines: list[_Line], comments: tuple[ast.Comment, ...]) -> list[ast.Comment]:
    """Give each comment to the line it trails or precedes; return those after the end.

    A comment trails a line only when written at the end of that line's last source
    line; one written inside a construct that spans lines goes before it, so the
    comments keep their order."""
    tail: list[ast.Comment] = []
    for comment in comments:
        number = comment.span.line
        if comment.trailing:
            owner = next((ln for ln in reversed(lines) if ln.first <= number <= ln.last), None)
            if owner is not None and owner.last == number and owner.trailing is None:
                owner.trailing = comment
                continue
        following = next((ln for ln in lines if ln.last >= number), None)
        if following is None:
            tail.append(comment)
        else:
            following.leading.append(comment)
    return tail


def _emit(lines: list[_Line], tail: list[ast.Comment], blank_lines: frozenset[int]) -> str:
    out: list[str] = []
    after_open = True  # no blank line at the top of the file or right after a `{`
    for line in lines:
        comment_depth = line.depth + 1 if line.kind == "close" else line.depth
        forced = line.kind == "step"
        for comment in line.leading:
            blank = forced or comment.span.line - 1 in blank_lines
            _put(out, comment_depth, comment.text, blank and not after_open)
            forced = after_open = False
        blank = forced or (line.kind != "close" and line.first - 1 in blank_lines)
        text = line.text + (f"  {line.trailing.text}" if line.trailing else "")
        _put(out, line.depth, text, blank and not after_open)
        after_open = line.kind in ("open", "step")
    for comment in tail:
        _put(out, 0, comment.text, comment.span.line - 1 in blank_lines)
    return "\n".join(out) + "\n"


def _put(out: list[str], depth: int, text: str, blank: bool) -> None:
    if blank and out:
        out.append("")
    out.append(INDENT * depth + text)
