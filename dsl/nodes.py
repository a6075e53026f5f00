"""`@node`: frozen value classes for the syntax tree, cheap to define and to build.

`dataclasses.dataclass(frozen=True)` costs ~0.6 ms per class at import (every
`todoflow check` pays it for the whole tree) and sets each field through
`object.__setattr__` at construction (every parse pays it per node). A node class
here gets a generated `__init__` that writes the instance dict directly, and shared
`__eq__`/`__hash__`/`__repr__`; assignment after construction raises. Fields are
declared as in a dataclass, and `dataclasses.field(compare=False)` leaves a field
(a span, a layout fact) out of equality. Type checkers read it as a frozen dataclass.
"""

from __future__ import annotations

import inspect
from dataclasses import MISSING, Field, FrozenInstanceError, field
from typing import Any, TypeVar, dataclass_transform

_C = TypeVar("_C", bound=type)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def node(cls: _C) -> _C:
    names: list[str] = []
    compared: list[str] = []
    defaults: dict[str, Any] = {}
    for name, hint in inspect.get_annotations(cls).items():
        if str(hint).startswith("ClassVar"):
            continue
        names.append(name)
        declared = cls.__dict__.get(name, MISSING)
        compare = True
        if isinstance(declared, Field):
            compare, declared = declared.compare, declared.default
        if declared is not MISSING:
            defaults[name] = declared
            setattr(cls, name, declared)
        if compare:
            compared.append(name)
    params = ", ".join(f"{n}=_default_{n}" if n in defaults else n for n in names)
    body = "".join(f"    d[{n!r}] = {n}\n" for n in names)
    namespace: dict[str, Any] = {f"_default_{n}": v for n, v in defaults.items()}
    exec(f"def __init__(self, {params}):\n    d = self.__dict__\n{body}", namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    type.__setattr__(cls, "__init__", init)
    type.__setattr__(cls, "_node_fields", tuple(names))
    type.__setattr__(cls, "_node_compared", tuple(compared))
    type.__setattr__(cls, "__match_args__", tuple(names))
    for name, method in _METHODS.items():
        type.__setattr__(cls, name, method)
    return cls


def _key(self: Any) -> tuple[Any, ...]:
    values = self.__dict__
    return tuple(values[n] for n in type(self)._node_compared)


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented  # type: ignore[no-any-return]
    return _key(self) == _key(other)


def _hash(self: Any) -> int:
    return hash((type(self).__name__, _key(self)))


def _repr(self: Any) -> str:
    values = self.__dict__
    fields = ", ".join(f"{n}={values[n]!r}" for n in type(self)._node_fields)
    return f"{type(self).__name__}({fields})"


def _setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


_METHODS = {
    "__eq__": _eq,
    "__hash__": _hash,
    "__repr__": _repr,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
}
