"""todoflow: a checked language, compiler and durable runtime for todo-task agent workflows.

The public Python API. Names are imported lazily, so `import todoflow` stays cheap
for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = [
    "Compiled",
    "Diagnostic",
    "ParseResult",
    "Span",
    "TodoflowError",
    "compile",
    "parse",
    "resume",
    "run",
    "start",
    "try_parse",
]

if TYPE_CHECKING:
    from todoflow.api import Compiled, compile, resume, run, start
    from todoflow.dsl import Diagnostic, ParseResult, Span, TodoflowError, parse, try_parse

_HOMES = {
    "Compiled": "todoflow.api",
    "compile": "todoflow.api",
    "start": "todoflow.api",
    "resume": "todoflow.api",
    "run": "todoflow.api",
}


def __getattr__(name: str) -> object:
    if name == "__version__":  # one place holds the version: pyproject.toml, read from the install
        from importlib.metadata import version

        return version("todoflow")
    if name in __all__:
        import importlib

        return getattr(importlib.import_module(_HOMES.get(name, "todoflow.dsl")), name)
    raise AttributeError(f"module 'todoflow' has no attribute {name!r}")
