"""Diagnostics for CI: SARIF 2.1.0 (code scanning) and GitHub workflow commands (annotations).

`todoflow check --format sarif` writes one SARIF log: one run of the `todoflow` tool,
whose rules are the codes that occur, each with its title and a link to its section of
the docs (`codes.py`), and one result per diagnostic with its region (1-based lines and
columns, counted in code points as our spans are). `--format github` writes one
`::error`/`::warning`/`::notice` command per diagnostic, as ruff's `--output-format
github` does, escaped as GitHub's toolkit escapes them. Help and notes travel in the
message; a note that points elsewhere is a related location in SARIF. Imports only the
diagnostics and the code catalogue.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from .codes import help_uri, title
from .diagnostics import Diagnostic, JsonDict, Severity
from .spans import Span

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/todoflow/todoflow"
_COMMANDS: dict[Severity, str] = {"error": "error", "warning": "warning", "note": "notice"}


def sarif_log(diagnostics: Sequence[Diagnostic], version: str) -> JsonDict:
    codes = sorted({d.code for d in diagnostics})
    driver: JsonDict = {
        "name": "todoflow",
        "version": version,
        "informationUri": INFORMATION_URI,
        "rules": [_rule(code, diagnostics) for code in codes],
    }
    results = [_result(d, codes.index(d.code)) for d in diagnostics]
    run: JsonDict = {"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _rule(code: str, diagnostics: Sequence[Diagnostic]) -> JsonDict:
    level = next(d.severity for d in diagnostics if d.code == code)
    text = title(code) or code
    rule: JsonDict = {
        "id": code,
        "shortDescription": {"text": text},
        "defaultConfiguration": {"level": level},
    }
    uri = help_uri(code)
    if uri is not None:
        rule["helpUri"] = uri
        rule["help"] = {
            "text": f"{code}: {text}. See {uri}",
            "markdown": f"**{code}**: {text}. [Docs]({uri})",
        }
    return rule


def _result(diagnostic: Diagnostic, rule_index: int) -> JsonDict:
    result: JsonDict = {
        "ruleId": diagnostic.code,
        "ruleIndex": rule_index,
        "level": diagnostic.severity,
        "message": {"text": _message(diagnostic, placed=True)},
        "locations": [_location(diagnostic.span)],
    }
    related = [n for n in diagnostic.notes if n.span is not None]
    if related:
        result["relatedLocations"] = [
            _location(n.span, {"id": i, "message": {"text": n.message}})
            for i, n in enumerate(related, 1)
            if n.span is not None
        ]
    return result


def _message(diagnostic: Diagnostic, placed: bool) -> str:
    """The message with its help, and its notes (those with a place only when `placed`
    cannot show them as related locations)."""
    lines = [diagnostic.message]
    if diagnostic.help:
        lines.append(f"help: {diagnostic.help}")
    for note in diagnostic.notes:
        if note.span is None or not placed:
            lines.append(f"note: {note.message}" + (f" ({note.span})" if note.span else ""))
    return "\n".join(lines)


def _location(span: Span, extra: JsonDict | None = None) -> JsonDict:
    physical: JsonDict = {"artifactLocation": {"uri": _uri(span.path)}}
    if span.line:
        physical["region"] = {
            "startLine": span.line,
            "startColumn": span.column,
            "endLine": span.end_line,
            "endColumn": span.end_column,
        }
    return {**(extra or {}), "physicalLocation": physical}


def _uri(path: str) -> str:
    """A relative path as a relative URI reference; an absolute one as a file URI."""
    if Path(path).is_absolute():
        return Path(path).as_uri()
    return quote(PurePosixPath(Path(path).as_posix()).as_posix())


def github_annotations(diagnostics: Sequence[Diagnostic]) -> str:
    """One workflow command per diagnostic: `::error file=F,line=L,col=C,endLine=..,
    endColumn=..,title=CODE::message` (`::warning`, `::notice` for the others)."""
    return "".join(_command(d) + "\n" for d in diagnostics)


def _command(diagnostic: Diagnostic) -> str:
    span = diagnostic.span
    properties = [("file", span.path)]
    if span.line:
        properties += [
            ("line", str(span.line)),
            ("col", str(span.column)),
            ("endLine", str(span.end_line)),
            ("endColumn", str(span.end_column)),
        ]
    properties.append(("title", diagnostic.code))
    shown = ",".join(f"{key}={_escape_property(value)}" for key, value in properties)
    return f"::{_COMMANDS[diagnostic.severity]} {shown}::{_escape_data(_message(diagnostic, placed=False))}"


def _escape_data(text: str) -> str:
    """As `escapeData` of GitHub's actions toolkit: what would end the command is encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """As `escapeProperty`: also `:` and `,`, which separate the properties."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
