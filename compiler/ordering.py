"""Task ordering: a stable topological order of a checklist, and the cycles that forbid one.

Pure functions over task indices (the written order) and their `after` edges; the
checker turns the results into notes and diagnostics. The order is the
lexicographically smallest topological order by written index: prerequisites
first, and the written order kept wherever the dependencies allow.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple


class Move(NamedTuple):
    """Task `task` ends up later than written because it needs `because`."""

    task: int
    because: int


class Ordering(NamedTuple):
    order: tuple[int, ...]  # written indices in final order; empty when there are cycles
    moves: tuple[Move, ...]
    cycles: tuple[tuple[int, ...], ...]  # each: t0 needs t1 needs ... needs t0


def order_tasks(needs: Sequence[Sequence[int]]) -> Ordering:
    """`needs[i]` lists the tasks task i must come after."""
    count = len(needs)
    waiting = [len(set(deps)) for deps in needs]
    needed_by: list[list[int]] = [[] for _ in range(count)]
    for task, deps in enumerate(needs):
        for dep in set(deps):
            needed_by[dep].append(task)
    ready = [task for task in range(count) if waiting[task] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        task = heapq.heappop(ready)
        order.append(task)
        for other in needed_by[task]:
            waiting[other] -= 1
            if waiting[other] == 0:
                heapq.heappush(ready, other)
    if len(order) < count:
        stuck = {task for task in range(count) if waiting[task] > 0}
        return Ordering((), (), tuple(_cycles(needs, stuck)))
    return Ordering(tuple(order), tuple(_moves(needs, order)), ())


def _moves(needs: Sequence[Sequence[int]], order: list[int]) -> list[Move]:
    place = {task: position for position, task in enumerate(order)}
    moves = []
    for task in range(len(order)):
        pushed_later = any(
            other > task and place[other] < place[task] for other in range(task + 1, len(order))
        )
        if pushed_later and needs[task]:
            moves.append(Move(task, max(needs[task], key=place.__getitem__)))
    return moves


def _cycles(needs: Sequence[Sequence[int]], stuck: set[int]) -> list[tuple[int, ...]]:
    """One simple cycle per strongly connected group of the tasks that could not be placed."""
    cycles = []
    for group in _strong_components(needs, stuck):
        members = set(group)
        if len(group) == 1 and group[0] not in needs[group[0]]:
            continue  # blocked only by a cycle elsewhere
        cycles.append(_cycle_within(needs, members, min(group)))
    return sorted(cycles)


def _cycle_within(needs: Sequence[Sequence[int]], members: set[int], start: int) -> tuple[int, ...]:
    """A shortest cycle through `start` inside a strongly connected group (breadth first)."""
    parents: dict[int, int] = {}
    frontier = [start]
    while frontier:
        following = []
        for task in frontier:
            for dep in sorted(set(needs[task])):
                if dep == start:
                    path = [task]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return tuple(reversed(path))
                if dep in members and dep not in parents:
                    parents[dep] = task
                    following.append(dep)
        frontier = following
    raise AssertionError("a strongly connected group always holds a cycle")


def _strong_components(needs: Sequence[Sequence[int]], nodes: set[int]) -> list[list[int]]:
    """Tarjan's algorithm, iteratively, over the subgraph of `nodes`."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    groups: list[list[int]] = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(d for d in set(needs[root]) if d in nodes)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            task, deps = work[-1]
            dep = next(deps, None)
            if dep is not None:
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, iter(sorted(d for d in set(needs[dep]) if d in nodes))))
                elif dep in on_stack:
                    low[task] = min(low[task], index[dep])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[task])
            if low[task] == index[task]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == task:
                        break
                groups.append(sorted(group))
    return groups
