"""Task ordering: stable topological order, moves explained, cycles named."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from todoflow.compiler.ordering import order_tasks


@st.composite
def acyclic(draw: st.DrawFn) -> list[list[int]]:
    """Random DAGs over tasks 0..n-1 whose edges point either way in written order."""
    count = draw(st.integers(1, 8))
    rank = draw(st.permutations(range(count)))  # a hidden order that every edge respects
    needs: list[list[int]] = [[] for _ in range(count)]
    for a, b in itertools.permutations(range(count), 2):
        if rank[b] < rank[a] and draw(st.integers(0, 3)) == 0:
            needs[a].append(b)
    return needs


def _smallest_topological_order(needs: list[list[int]]) -> tuple[int, ...]:
    for order in itertools.permutations(range(len(needs))):
        place = {task: i for i, task in enumerate(order)}
        if all(place[dep] < place[task] for task in range(len(needs)) for dep in needs[task]):
            return order
    raise AssertionError("acyclic by construction")


@settings(max_examples=300, deadline=None)
@given(acyclic())
def test_dependencies_first_and_written_order_kept_where_possible(needs: list[list[int]]) -> None:
    result = order_tasks(needs)
    assert result.cycles == ()
    place = {task: i for i, task in enumerate(result.order)}
    assert sorted(result.order) == list(range(len(needs)))
    assert all(place[dep] < place[task] for task in range(len(needs)) for dep in needs[task])
    # "kept wherever the dependencies allow": the lexicographically smallest valid order
    assert result.order == _smallest_topological_order(needs)
    for move in result.moves:
        assert move.because in needs[move.task]
        assert any(other > move.task and place[other] < place[move.task] for other in range(len(needs)))


@st.composite
def cyclic(draw: st.DrawFn) -> list[list[int]]:
    needs = draw(acyclic())
    count = len(needs)
    cycle = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=count, unique=True))
    for a, b in itertools.pairwise([*cycle, cycle[0]]):
        needs[a].append(b)
    return needs


@settings(max_examples=300, deadline=None)
@given(cyclic())
def test_cycles_are_rejected_naming_a_real_cycle(needs: list[list[int]]) -> None:
    result = order_tasks(needs)
    assert result.order == ()
    assert result.cycles
    for cycle in result.cycles:
        assert len(set(cycle)) == len(cycle)
        for a, b in itertools.pairwise([*cycle, cycle[0]]):
            assert b in needs[a]


def test_written_order_is_kept_without_dependencies() -> None:
    assert order_tasks([[], [], []]).order == (0, 1, 2)
    assert order_tasks([[], [], []]).moves == ()


def test_the_release_example_order_and_its_move() -> None:
    # tag after build, notes; build; notes after build; announce after tag
    result = order_tasks([[1, 2], [], [1], [0]])
    assert result.order == (1, 2, 0, 3)
    assert [(m.task, m.because) for m in result.moves] == [(0, 2)]
