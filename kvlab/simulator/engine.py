"""Run a workload through a KV-cache manager and a scheduler, step by step."""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.allocator.kv_cache_manager import KVCacheManager
from kvlab.simulator.request import SimRequest
from kvlab.simulator.scheduler import Scheduler, SchedulerConfig
from kvlab.simulator.timeline import SimulationResult, SimulationSummary, StepRecord
from kvlab.simulator.workload import RequestSpec
from kvlab.validation import require_choice, require_positive_int

#: Safety net: a run stops (and says so) after this many steps unless told otherwise.
DEFAULT_MAX_STEPS = 200_000


def run_simulation(
    manager: KVCacheManager,
    scheduler_config: SchedulerConfig,
    workload: Sequence[RequestSpec],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    record_blocks: bool = False,
    detail: str = "ids",
) -> SimulationResult:
    """Simulate until every request finished or was rejected, a stall is detected, or ``max_steps``.

    Args:
        manager: a fresh manager (its pool is used as is).
        scheduler_config: budgets and limits.
        workload: the requests (any order; they are taken by arrival step).
        max_steps: hard step cap.
        record_blocks: store every block's state after each step (small runs only).
        detail: ``"ids"`` records request ids per step; ``"counts"`` only queue lengths (faster).
    """
    require_positive_int(max_steps, "max_steps")
    require_choice(detail, ("ids", "counts"), "detail")
    if not workload:
        raise ValueError("workload must contain at least one request")
    ids = [r.request_id for r in workload]
    if len(set(ids)) != len(ids):
        raise ValueError("workload request ids must be unique")
    hash_block_size = manager.coordinator.hash_block_size
    pending = sorted(workload, key=lambda r: r.arrival_step)
    scheduler = Scheduler(manager, scheduler_config)
    timeline: list[StepRecord] = []
    pool_size = manager.num_usable_blocks
    next_arrival = 0
    peak_running = peak_blocks = 0
    step = 0
    while step < max_steps:
        record = StepRecord(step=step, pool_size=pool_size)
        while next_arrival < len(pending) and pending[next_arrival].arrival_step <= step:
            scheduler.add_request(SimRequest(pending[next_arrival], hash_block_size), record)
            next_arrival += 1
        scheduler.step(record)
        record.num_running = len(scheduler.running)
        record.num_waiting = len(scheduler.waiting)
        if detail == "ids":
            record.running = [r.request_id for r in scheduler.running]
            record.waiting = [r.request_id for r in scheduler.waiting]
        record.blocks_in_use = tuple(manager.blocks_in_use_per_group())
        record.free_blocks = manager.num_free_blocks()
        if record_blocks:
            record.block_states = manager.block_states()
        timeline.append(record)
        peak_running = max(peak_running, record.num_running + len(record.finished))
        peak_blocks = max(peak_blocks, sum(record.blocks_in_use))
        step += 1
        if scheduler.stall is not None or (next_arrival == len(pending) and scheduler.idle):
            break
    finished = len(scheduler.finished_ids)
    rejected = len(scheduler.rejections)
    summary = SimulationSummary(
        steps=step,
        finished=finished,
        rejected=rejected,
        unfinished=len(workload) - finished - rejected,
        preemptions=scheduler.num_preemptions,
        peak_running=peak_running,
        peak_blocks_in_use=peak_blocks,
        stalled=scheduler.stall,
        step_cap_reached=scheduler.stall is None and finished + rejected < len(workload),
    )
    return SimulationResult(
        timeline=timeline,
        summary=summary,
        rejections=scheduler.rejections,
        finished_ids=scheduler.finished_ids,
        policy=manager.policy.name,
        group_kinds=tuple(g.kind for g in manager.config.groups),
    )
