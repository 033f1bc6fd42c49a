"""Run a workload through a KV-cache manager and a scheduler, step by step."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tqdm.auto import tqdm

from kvlab.allocator.kv_cache_manager import KVCacheManager
from kvlab.simulator.arrivals import ArrivalQueue
from kvlab.simulator.clock import SimClock, StepTimer
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
    record_blocks: bool | Collection[int] = False,
    detail: str = "ids",
    step_time: StepTimer | None = None,
    max_concurrency: int | None = None,
    progress: bool = False,
) -> SimulationResult:
    """Simulate until every request finished or was rejected, a stall is detected, or ``max_steps``.

    Args:
        manager: a fresh manager (its pool is used as is).
        scheduler_config: budgets and limits.
        workload: the requests (any order; they are taken by arrival step, or by arrival time).
        max_steps: hard step cap.
        record_blocks: store every block's state after each step (small runs only); or only after
            the steps in a collection of step indexes (a block map of one step costs one snapshot).
        detail: ``"ids"`` records request ids per step; ``"counts"`` only queue lengths (faster).
        step_time: a step-time model (``[(new tokens, context), …]`` → seconds, e.g. a
            :class:`~kvlab.timing.StepTimeModel`); with it requests arrive by ``arrival_time_s``,
            the clock skips idle gaps, and the result carries :class:`~kvlab.simulator.RunMetrics`.
        max_concurrency: most requests in the engine at once; the rest wait at the client
            (closed loop, like ``vllm bench serve --max-concurrency``).
        progress: show a progress bar (finished requests) once the run takes more than a second.
    """
    require_positive_int(max_steps, "max_steps")
    require_choice(detail, ("ids", "counts"), "detail")
    if not workload:
        raise ValueError("workload must contain at least one request")
    ids = [r.request_id for r in workload]
    if len(set(ids)) != len(ids):
        raise ValueError("workload request ids must be unique")
    every_step = record_blocks is True
    record_steps = frozenset() if isinstance(record_blocks, bool) else frozenset(record_blocks)
    hash_block_size = manager.coordinator.hash_block_size
    arrivals = ArrivalQueue(workload, timed=step_time is not None, max_concurrency=max_concurrency)
    clock = SimClock(step_time) if step_time is not None else None
    scheduler = Scheduler(manager, scheduler_config)
    live: dict[str, SimRequest] = {}
    timeline: list[StepRecord] = []
    pool_size = manager.num_usable_blocks
    peak_running = peak_blocks = 0
    step = 0
    bar = tqdm(total=len(workload), disable=not progress, delay=1.0, unit="req", leave=False)
    while step < max_steps:
        now = clock.now if clock is not None else step
        record = StepRecord(step=step, pool_size=pool_size)
        in_system = len(scheduler.waiting) + len(scheduler.running)
        for spec in arrivals.release(now, in_system):
            live[spec.request_id] = req = SimRequest(spec, hash_block_size)
            if clock is not None:
                clock.arrived(spec.request_id)
            scheduler.add_request(req, record)
        for rid in record.rejected:
            arrivals.finished(rid, now)
        if clock is not None and scheduler.idle and not record.arrived:
            due = arrivals.next_arrival()
            if due is None:
                break
            clock.now = max(clock.now, due)  # nothing to run until the next arrival
            continue
        scheduler.step(record)
        if clock is not None:
            clock.advance(record, live)
        for rid in record.finished:
            arrivals.finished(rid, clock.now if clock is not None else step)
            del live[rid]
        if record.finished or record.rejected:
            bar.update(len(record.finished) + len(record.rejected))
        record.num_running = len(scheduler.running)
        record.num_waiting = len(scheduler.waiting)
        if detail == "ids":
            record.running = [r.request_id for r in scheduler.running]
            record.waiting = [r.request_id for r in scheduler.waiting]
        record.blocks_in_use = tuple(manager.blocks_in_use_per_group())
        record.free_blocks = manager.num_free_blocks()
        if every_step or step in record_steps:
            record.block_states = manager.block_states()
        timeline.append(record)
        peak_running = max(peak_running, record.num_running + len(record.finished))
        peak_blocks = max(peak_blocks, sum(record.blocks_in_use))
        step += 1
        if scheduler.stall is not None or (arrivals.exhausted and scheduler.idle):
            break
    bar.close()
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
        metrics=clock.metrics() if clock is not None else None,
    )
