"""The configured secrets of this program, and what an agent hands in with them taken out.

A model, a tool or a script may echo what it was given: a provider's key, the learn_code
token, a store's password. Each place that reads such a value keeps it here (`keep`), and
the engine passes every entry through `redacted` before it settles it, so the journal and
everything derived from it (events, todos, learnings, the log, the report, status) hold
`MARKER` where the secret was. Redaction covers exact occurrences: a secret encoded,
split or transformed on the way is not recognised. A value shorter than `SHORTEST` is
not taken for a secret (it would match ordinary words of the journal).

Secrets live as long as the program (a set of a few strings); the core imports nothing
for this but the node helpers.
"""

from __future__ import annotations

from typing import Any, TypeVar

from todoflow.dsl.nodes import replace

MARKER = "[redacted]"
SHORTEST = 4
T = TypeVar("T")

_SECRETS: list[tuple[str, ...]] = [()]  # longest first: a secret inside another goes after it


def keep(*values: str | None) -> None:
    """Remember secrets to redact from now on (empty and short values are not secrets)."""
    known = set(_SECRETS[0])
    new = {value for value in values if value and len(value) >= SHORTEST and value not in known}
    if new:
        _SECRETS[0] = tuple(sorted(known | new, key=lambda value: (-len(value), value)))


def redact(text: str) -> str:
    """`text` with every kept secret replaced by `MARKER`."""
    for secret in _SECRETS[0]:
        if secret in text:
            text = text.replace(secret, MARKER)
    return text


def redacted(value: T) -> T:
    """`value` (text, a container, a frozen node such as an entry) with every kept secret
    in its text replaced by `MARKER`; the very same object when nothing changed."""
    if not _SECRETS[0]:
        return value
    return _walk(value)  # type: ignore[no-any-return]


_PLAIN = (int, float, bool, type(None))  # values that hold no text


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (tuple, list)):
        items = [_walk(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        pairs = {_walk(key): _walk(item) for key, item in value.items()}
        same = all(k in value and pairs[k] is value[k] for k in pairs) and len(pairs) == len(value)
        return value if same else pairs
    fields = getattr(type(value), "_node_fields", None)
    return value if fields is None else _node(value, fields)


def _node(value: Any, fields: tuple[str, ...]) -> Any:
    changes = {}
    for name in fields:
        old = getattr(value, name)
        if not isinstance(old, _PLAIN) and (new := _walk(old)) is not old:
            changes[name] = new
    return replace(value, **changes) if changes else value
