"""Every consumer of the journal's entries has one handler per kind: a kind added to
`entries.KINDS` without its handlers fails here, not in a run."""

from __future__ import annotations

import pytest

from todoflow.runtime.entries import KINDS
from todoflow.runtime.events import derived_kinds
from todoflow.runtime.state import settled_kinds
from todoflow.runtime.views.log import described_kinds


@pytest.mark.parametrize(
    ("consumer", "kinds"),
    [("state.settle", settled_kinds), ("events.entry_events", derived_kinds), ("views.log", described_kinds)],
)
def test_every_entry_kind_has_a_handler(consumer: str, kinds: object) -> None:
    handled = kinds()  # type: ignore[operator]
    missing = sorted(kind.__name__ for kind in set(KINDS.values()) - handled)
    assert not missing, f"{consumer} has no handler for {', '.join(missing)}"
    assert handled <= set(KINDS.values())
