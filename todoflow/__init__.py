"""todoflow: a checked language, compiler and durable runtime for todo-task agent workflows.

The public Python API. Names are imported lazily, so `import todoflow` stays cheap
for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["Diagnostic", "ParseResult", "Span", "TodoflowError", "parse", "try_parse"]
__version__ = "0.1.0"

if TYPE_CHECKING:
    from todoflow.dsl import Diagnostic, ParseResult, Span, TodoflowError, parse, try_parse


def __getattr__(name: str) -> object:
    if name in __all__:
        from todoflow import dsl

        return getattr(dsl, name)
    raise AttributeError(f"module 'todoflow' has no attribute {name!r}")
