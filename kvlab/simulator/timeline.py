"""What a simulation records: plain dataclasses and lists that plotting code can read directly."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvlab.allocator.kv_cache_manager import BlockState
from kvlab.simulator.metrics import RunMetrics


@dataclass(frozen=True)
class AdmissionAttempt:
    """One try to admit the head of the waiting queue.

    Attributes:
        request_id: the request.
        per_group: blocks the gate asked of each group.
        need: their sum (blocks).
        free: free blocks when asked (over all pools).
        gate_passed: the gate said yes.
        admitted: the request was admitted (the gate passed and the step's allocation succeeded).
    """

    request_id: str
    per_group: tuple[int, ...]
    need: int
    free: int
    gate_passed: bool
    admitted: bool


@dataclass(frozen=True)
class StallReport:
    """Why a run stopped before every request finished.

    Attributes:
        step: the step at which the stall was detected.
        request_id: the request that can never proceed.
        need: blocks it asks for (over all groups).
        pool_size: usable blocks of the pool(s).
        reason: one sentence.
    """

    step: int
    request_id: str
    need: int
    pool_size: int
    reason: str


@dataclass(frozen=True)
class Rejection:
    """A request refused before scheduling."""

    request_id: str
    reason: str


@dataclass
class StepRecord:
    """One scheduler step (lists hold request ids; they stay empty under ``detail="counts"``).

    Attributes:
        step: step index (0-based).
        num_running / num_waiting: queue lengths after scheduling.
        running / waiting: their request ids.
        scheduled: ``{request id: tokens}`` scheduled this step.
        admitted / preempted / finished / rejected / arrived: request ids of these events.
        attempts: admission attempts of the step (gate need vs free blocks).
        blocks_in_use: distinct blocks held, per group, after the step.
        free_blocks: free blocks over all pools after the step.
        pool_size: usable blocks over all pools.
        block_states: every block's owner and state after the step (``record_blocks=True`` only).
        time_s: clock when the step started (seconds; runs with a step-time model only).
        duration_s: the step's predicted time (seconds; runs with a step-time model only).
    """

    step: int
    num_running: int = 0
    num_waiting: int = 0
    running: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    scheduled: dict[str, int] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    arrived: list[str] = field(default_factory=list)
    attempts: list[AdmissionAttempt] = field(default_factory=list)
    blocks_in_use: tuple[int, ...] = ()
    free_blocks: int = 0
    pool_size: int = 0
    block_states: list[BlockState] | None = None
    time_s: float = 0.0
    duration_s: float = 0.0

    @property
    def num_scheduled_tokens(self) -> int:
        return sum(self.scheduled.values())


@dataclass(frozen=True)
class SimulationSummary:
    """Totals of a run.

    Attributes:
        steps: steps simulated.
        finished / rejected: requests that finished / were refused.
        unfinished: requests neither finished nor rejected (non-zero only when stalled or capped).
        preemptions: preemption events.
        peak_running: most requests running at once.
        peak_blocks_in_use: most blocks in use at once (over all groups).
        stalled: the stall report, or ``None``.
        step_cap_reached: the run hit ``max_steps``.
    """

    steps: int
    finished: int
    rejected: int
    unfinished: int
    preemptions: int
    peak_running: int
    peak_blocks_in_use: int
    stalled: StallReport | None
    step_cap_reached: bool


@dataclass
class SimulationResult:
    """A run: the per-step timeline, the summary, and the rejected requests with their reasons;
    with a step-time model, ``metrics`` holds latencies and throughputs (else ``None``)."""

    timeline: list[StepRecord]
    summary: SimulationSummary
    rejections: list[Rejection]
    finished_ids: list[str]
    policy: str
    group_kinds: tuple[str, ...]
    metrics: RunMetrics | None = None
