"""`@node`: frozen value classes for the syntax tree, cheap to define and to build.

`dataclasses.dataclass(frozen=True)` costs ~0.6 ms per class at import (every
`todoflow check` pays it for the whole tree) and sets each field through
`object.__setattr__` at construction (every parse pays it per node). A node class
here gets a generated `__init__` that writes its slots directly, and shared
`__eq__`/`__hash__`/`__repr__`; assignment after construction raises. Fields are
declared as in a dataclass, and `dataclasses.field(compare=False)` leaves a field
(a span, a layout fact) out of equality. Type checkers read it as a frozen dataclass.
A `functools.cached_property` (a view derived from the fields, like a workflow's
steps) is computed on first use and kept in a slot of its own, outside equality.
`replace(obj, **changes)` copies a node through a `__replace__` generated for its class
(the protocol of Python 3.13's `copy.replace`): keyword parameters and direct slot
writes, no dict of every field built per copy (the runtime copies its state at every
step). A derived view is not copied: the copy computes its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, field
from functools import cached_property
from typing import Any, TypeVar, dataclass_transform

_C = TypeVar("_C", bound=type)
_N = TypeVar("_N")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def node(cls: _C) -> _C:
    names: list[str] = []
    compared: list[str] = []
    defaults: dict[str, Any] = {}
    body = dict(cls.__dict__)
    for name, hint in inspect.get_annotations(cls).items():
        if str(hint).startswith("ClassVar"):
            continue
        names.append(name)
        declared = body.pop(name, MISSING)
        compare = True
        if isinstance(declared, Field):
            compare, declared = declared.compare, declared.default
        if declared is not MISSING:
            defaults[name] = declared
        if compare:
            compared.append(name)
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    cached = {n: v.func for n, v in body.items() if isinstance(v, cached_property)}
    for name in cached:
        del body[name]
    body["__slots__"] = (*names, *(f"_cached_{n}" for n in cached))
    slotted = type(cls)(cls.__name__, cls.__bases__, body)
    setters = {f"_set_{n}": getattr(slotted, n).__set__ for n in names}
    params = ", ".join(f"{n}=_default_{n}" if n in defaults else n for n in names)
    lines = "".join(f"    _set_{n}(self, {n})\n" for n in names) or "    pass\n"
    namespace: dict[str, Any] = {f"_default_{n}": v for n, v in defaults.items()} | setters
    exec(f"def __init__(self, {params}):\n{lines}", namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    attributes = {
        "__init__": init,
        "__replace__": _replacer(slotted, names, setters),
        "_node_fields": tuple(names),
        "_node_compared": tuple(compared),
        "__match_args__": tuple(names),
        **_METHODS,
    }
    for name, compute in cached.items():
        attributes[name] = _Cached(getattr(slotted, f"_cached_{name}"), compute)
    for name, value in attributes.items():
        type.__setattr__(slotted, name, value)
    return slotted


_KEEP: Any = object()  # a field `__replace__` was not asked to change


def _replacer(cls: type, names: list[str], setters: dict[str, Any]) -> Callable[..., Any]:
    """The class's `__replace__(self, **changes)`: a new node written slot by slot, each
    field the change given or the field as it is."""
    if not names:
        return lambda self: self
    params = ", ".join(f"{n}=_KEEP" for n in names)
    lines = "".join(f"    _set_{n}(new, self.{n} if {n} is _KEEP else {n})\n" for n in names)
    namespace: dict[str, Any] = {"_KEEP": _KEEP, "_new": object.__new__, "_cls": cls} | setters
    exec(f"def __replace__(self, /, *, {params}):\n    new = _new(_cls)\n{lines}    return new\n", namespace)
    function: Callable[..., Any] = namespace["__replace__"]
    function.__qualname__ = f"{cls.__qualname__}.__replace__"
    return function


class _Cached:
    """A derived view computed once per node and kept in its slot (frozen nodes have no
    `__dict__` for `cached_property` to use)."""

    def __init__(self, slot: Any, compute: Callable[[Any], Any]) -> None:
        self.slot, self.compute = slot, compute
        self.__doc__ = compute.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        try:
            return self.slot.__get__(instance, owner)
        except AttributeError:
            value = self.compute(instance)
            self.slot.__set__(instance, value)
            return value


def _key(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, n) for n in type(self)._node_compared)


def _eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented  # type: ignore[no-any-return]
    return _key(self) == _key(other)


def _hash(self: Any) -> int:
    return hash((type(self).__name__, _key(self)))


def _repr(self: Any) -> str:
    fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self)._node_fields)
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


def replace(obj: _N, **changes: Any) -> _N:
    """A copy of node `obj` with some fields changed."""
    try:
        return obj.__replace__(**changes)  # type: ignore[attr-defined,no-any-return]
    except TypeError:
        unknown = set(changes) - set(type(obj)._node_fields)  # type: ignore[attr-defined]
        if unknown:
            raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}") from None
        raise
