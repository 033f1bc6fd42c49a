"""A simulation's per-step records rearranged for pictures: request states as spans, blocks in use per
group, and the admission gate's need against the free blocks at each attempt.

Everything is read from :class:`kvlab.simulator.SimulationResult` (recorded with ``detail="ids"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.simulator import SimulationResult

#: Request states drawn on a timeline.
REQUEST_STATES: tuple[str, ...] = ("waiting", "prefill", "decode", "preempted")


@dataclass(frozen=True)
class StateSpan:
    """Steps ``start … end - 1`` during which a request was in one state.

    Attributes:
        request_id: the request.
        state: one of :data:`REQUEST_STATES`.
        start, end: first step and one past the last (steps).
    """

    request_id: str
    state: str
    start: int
    end: int

    @property
    def steps(self) -> int:
        """Length of the span (steps)."""
        return self.end - self.start


def request_state_spans(result: SimulationResult) -> list[StateSpan]:
    """Each request's states over the run, merged into spans.

    A running request is in ``prefill`` while it is scheduled for more than one token and in
    ``decode`` for one token per step (a running request left out of a step keeps its last phase); a
    request waiting after a preemption is ``preempted`` until it runs again.
    """
    state: dict[str, str] = {}
    start: dict[str, int] = {}
    spans: list[StateSpan] = []
    was_preempted: set[str] = set()
    phase: dict[str, str] = {}

    def move(rid: str, new: str | None, step: int) -> None:
        old = state.get(rid)
        if old == new:
            return
        if old is not None:
            spans.append(StateSpan(rid, old, start[rid], step))
        if new is None:
            state.pop(rid, None)
        else:
            state[rid], start[rid] = new, step

    for rec in result.timeline:
        step = rec.step
        for rid in rec.preempted:
            was_preempted.add(rid)
            phase.pop(rid, None)
        for rid in rec.waiting:
            move(rid, "preempted" if rid in was_preempted else "waiting", step)
        for rid in rec.running:
            n = rec.scheduled.get(rid)
            if n is not None:
                phase[rid] = "prefill" if n > 1 else "decode"
                was_preempted.discard(rid)
            move(rid, phase.get(rid, "prefill"), step)
        for rid in (*rec.finished, *rec.rejected):
            if rid in state and rid not in rec.running:
                move(rid, None, step + 1 if rid in rec.scheduled else step)
            elif rid in state:
                move(rid, None, step + 1)
    end = (result.timeline[-1].step + 1) if result.timeline else 0
    for rid in list(state):
        move(rid, None, end)
    return spans


@dataclass(frozen=True)
class BlockSeries:
    """Blocks in use after every step.

    Attributes:
        steps: step indices.
        per_group: one list per group: distinct blocks the group holds after each step.
        pool_size: usable blocks of the pool(s) (constant).
        group_kinds: the kind of each group.
    """

    steps: list[int]
    per_group: list[list[int]]
    pool_size: int
    group_kinds: tuple[str, ...]

    @property
    def total(self) -> list[int]:
        """Blocks in use over all groups, per step."""
        return [sum(v) for v in zip(*self.per_group, strict=True)] if self.per_group else []


def blocks_in_use(result: SimulationResult) -> BlockSeries:
    """Blocks held per group after each step (from ``StepRecord.blocks_in_use``)."""
    groups = len(result.group_kinds)
    per_group = [[rec.blocks_in_use[g] if g < len(rec.blocks_in_use) else 0 for rec in result.timeline]
                 for g in range(groups)]
    pool = result.timeline[0].pool_size if result.timeline else 0
    return BlockSeries([rec.step for rec in result.timeline], per_group, pool, tuple(result.group_kinds))


@dataclass(frozen=True)
class GatePoint:
    """One admission attempt: what the gate asked and what was free.

    Attributes:
        step: the step (steps).
        request_id: the head of the waiting queue.
        need: blocks the gate asked for, over all groups.
        free: free blocks at that moment.
        admitted: the request started.
        gate_passed: the gate said yes (the step's allocation may still have failed).
    """

    step: int
    request_id: str
    need: int
    free: int
    admitted: bool
    gate_passed: bool


def gate_points(result: SimulationResult) -> list[GatePoint]:
    """Every admission attempt of the run, in order."""
    return [GatePoint(rec.step, a.request_id, a.need, a.free, a.admitted, a.gate_passed)
            for rec in result.timeline for a in rec.attempts]
