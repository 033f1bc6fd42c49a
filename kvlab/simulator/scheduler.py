"""A step-level FCFS scheduler in vLLM's style (spec §3.7), with stall detection.

Each step: schedule running requests in order (chunked prefill and decode share the token budget);
when one cannot get its blocks, preempt the *last* running request (recompute: its blocks are freed
and it goes back to the head of the waiting queue) and retry. Only if nothing was preempted, admit
waiting requests in order through the admission gate; the first refusal stops admission (strict
head-of-line blocking). With async scheduling, blocks of finished requests return one step late
and, under the ``processed`` skip rule, skipped blocks are freed one step late too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kvlab.allocator.kv_cache_manager import KVCacheManager
from kvlab.simulator.request import FINISHED, PREEMPTED, REJECTED, RUNNING, SimRequest
from kvlab.simulator.timeline import AdmissionAttempt, Rejection, StallReport, StepRecord
from kvlab.sizing.specs import window_of
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class SchedulerConfig:
    """Scheduler limits.

    Attributes:
        max_num_batched_tokens: token budget per step (tokens).
        max_num_seqs: most running requests.
        max_model_len: L (tokens); longer prompts are rejected, outputs stop at L.
        async_scheduling: frees of finished requests lag one step.
        num_lookahead_tokens: speculative slots allocated beyond the verified tokens at every
            step (``num_speculative_tokens``; 0 without speculative decoding).
        mamba_align_block_size: with state prefix caching in ``"align"`` mode, the block size
            (tokens) chunks are aligned to (:meth:`Scheduler.align_chunk`); ``None`` otherwise.
    """

    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    async_scheduling: bool = False
    num_lookahead_tokens: int = 0
    mamba_align_block_size: int | None = None

    def __post_init__(self) -> None:
        require_positive_int(self.max_num_batched_tokens, "max_num_batched_tokens")
        if self.mamba_align_block_size is not None:
            require_positive_int(self.mamba_align_block_size, "mamba_align_block_size")
        require_positive_int(self.max_num_seqs, "max_num_seqs")
        require_positive_int(self.max_model_len, "max_model_len")


class Scheduler:
    """Steps a set of requests through one :class:`KVCacheManager`."""

    def __init__(self, manager: KVCacheManager, config: SchedulerConfig) -> None:
        self.manager = manager
        self.config = config
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.lagged_frees: list[SimRequest] = []
        self.rejections: list[Rejection] = []
        self.finished_ids: list[str] = []
        self.stall: StallReport | None = None
        self.num_preemptions = 0

    def add_request(self, req: SimRequest, record: StepRecord) -> None:
        """Queue an arriving request, or reject one that can never fit."""
        record.arrived.append(req.request_id)
        if req.num_tokens > self.config.max_model_len:
            req.status = REJECTED
            self.rejections.append(
                Rejection(
                    req.request_id,
                    f"prompt of {req.num_tokens} tokens exceeds max_model_len={self.config.max_model_len}",
                )
            )
            record.rejected.append(req.request_id)
            return
        self.waiting.append(req)

    def _preempt(self, req: SimRequest, record: StepRecord) -> None:
        self.manager.free(req)
        req.status = PREEMPTED
        req.num_computed_tokens = 0
        req.last_scheduled_tokens = 0
        req.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(req)
        record.preempted.append(req.request_id)

    def align_chunk(self, req: SimRequest, start: int, n: int) -> int:
        """Shorten a chunk of ``n`` tokens from ``start`` so that states land on block boundaries.

        vLLM's block-aligned split (state prefix caching, ``"align"``): a chunk that stops before the
        last block boundary of the known tokens is cut to whole blocks (0 when less than a block
        fits); a chunk that crosses that boundary stops at it, so that the state there is cached.
        Example (block 16, 100 tokens, budget 8192): 96 tokens, then 4.
        """
        block = self.config.mamba_align_block_size
        if block is None:
            return n
        boundary = req.num_tokens - req.num_tokens % block
        if start + n < boundary:
            return n // block * block
        if start < boundary < start + n:
            return boundary - start
        return n

    def _stall(self, step: int, req: SimRequest, need: int, pool: int, reason: str) -> None:
        self.stall = StallReport(step, req.request_id, need, pool, reason)

    def step(self, record: StepRecord) -> None:
        """Schedule one step and apply its results to ``record``."""
        cfg, manager = self.config, self.manager
        manager.new_step_starts()
        budget = cfg.max_num_batched_tokens
        scheduled: dict[str, int] = record.scheduled

        # 1. running requests, in order
        i = 0
        preempted_self = False
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            # input positions stay below max_model_len (a running request stops once it holds
            # max_model_len tokens, so this only bounds a prompt of exactly max_model_len tokens)
            n = min(
                req.num_tokens - req.num_computed_tokens,
                budget,
                cfg.max_model_len - req.num_computed_tokens,
            )
            n = self.align_chunk(req, req.num_computed_tokens, n)
            if n <= 0:
                i += 1
                continue
            in_flight = req.last_scheduled_tokens if cfg.async_scheduling else 0
            # most decode steps need nothing from the allocator: has_room answers without a call
            while (
                not manager.has_room(req, n, cfg.num_lookahead_tokens, in_flight)
                and manager.allocate_slots(
                    req, n, num_lookahead_tokens=cfg.num_lookahead_tokens, num_in_flight_tokens=in_flight
                )
                is None
            ):
                victim = self.running.pop()
                if victim is req and not self.running and not self.lagged_frees:
                    self._stall_running_alone(record.step, req, n)
                self._preempt(victim, record)
                if victim is req:
                    preempted_self = True
                    break
            if preempted_self:
                break
            scheduled[req.request_id] = n
            budget -= n
            i += 1

        # 2. waiting requests, only when nothing was preempted
        if not record.preempted:
            while self.waiting and budget > 0 and len(self.running) < cfg.max_num_seqs:
                req = self.waiting[0]
                hits, hit_tokens = manager.get_computed_blocks(req)
                n = self.align_chunk(req, hit_tokens, min(req.num_tokens - hit_tokens, budget))
                if n <= 0:
                    break
                new = manager.allocate_slots(
                    req,
                    n,
                    hit_tokens,
                    hits,
                    full_sequence_must_fit=True,
                    num_lookahead_tokens=cfg.num_lookahead_tokens,
                )
                gate = manager.last_gate
                record.attempts.append(
                    AdmissionAttempt(
                        req.request_id, gate.per_group, gate.need, gate.free, gate.admitted, new is not None
                    )
                )
                if new is None:
                    self._check_head_stall(record.step, req, gate, n)
                    break
                self.waiting.popleft()
                req.num_computed_tokens = hit_tokens
                req.status = RUNNING
                self.running.append(req)
                record.admitted.append(req.request_id)
                scheduled[req.request_id] = n
                budget -= n

        # 3. results: tokens computed, outputs generated, finished requests freed
        for req in self.lagged_frees:
            manager.free(req)
        self.lagged_frees = []
        still_running = []
        for req in self.running:
            n = scheduled.get(req.request_id, 0)
            req.last_scheduled_tokens = n
            generated = False
            if n:
                req.num_computed_tokens += n
                if req.num_computed_tokens >= req.num_tokens:
                    req.append_output_token()
                    generated = True
            # stop conditions are checked when a token was generated: output length reached, or the
            # sequence now holds max_model_len tokens (vLLM's "length capped")
            done = req.num_output_tokens >= req.spec.output_tokens or req.num_tokens >= cfg.max_model_len
            if generated and done:
                req.status = FINISHED
                record.finished.append(req.request_id)
                self.finished_ids.append(req.request_id)
                if cfg.async_scheduling:
                    self.lagged_frees.append(req)
                else:
                    manager.free(req)
            else:
                still_running.append(req)
        self.running = still_running

    def _step_need_per_pool(self, req: SimRequest, n: int) -> list[int]:
        """Blocks ``req`` holds plus those it lacks for ``n`` more tokens, per pool."""
        coord = self.manager.coordinator
        need_tokens = min(req.num_computed_tokens + n, self.config.max_model_len)
        extra = coord.get_num_blocks_to_allocate(
            req.request_id, need_tokens, [[] for _ in coord.managers], req.num_computed_tokens
        )
        held = [m.num_blocks_held(req.request_id) for m in coord.managers]
        return coord.pool_needs([e + h for e, h in zip(extra, held, strict=True)])

    def _stall_running_alone(self, step: int, req: SimRequest, n: int) -> None:
        """Report a request that cannot take its next ``n`` tokens although nothing else runs."""
        per_pool = self._step_need_per_pool(req, n)
        pools = self.manager.pools
        idx = max(range(len(pools)), key=lambda i: per_pool[i] - pools[i].num_usable_blocks)
        need, size = per_pool[idx], pools[idx].num_usable_blocks
        self._stall(
            step, req, need, size,
            f"needs {need:,} blocks of {self._pool_label(idx)} for its next {n:,} tokens while running "
            f"alone; that pool has {size:,} usable blocks",
        )

    def _pool_label(self, pool_idx: int) -> str:
        """``"the pool"`` for vLLM's single pool, ``"the window-W pool"`` for per-window pools."""
        pools = self.manager.config.pools
        if len(pools) == 1:
            return "the pool"
        windows = {window_of(self.manager.config.groups[g].spec) for g in pools[pool_idx].group_ids}
        window = windows.pop() if len(windows) == 1 else None
        return "the full-attention pool" if window is None else f"the window-{window} pool"

    def _check_head_stall(self, step: int, req: SimRequest, gate, n: int) -> None:
        """Stop the run if the head of the queue can never be admitted (never loop forever)."""
        pools = self.manager.pools
        for idx, (need, pool) in enumerate(zip(gate.per_pool_need, pools, strict=True)):
            if need > pool.num_usable_blocks:
                self._stall(
                    step, req, gate.need, self.manager.num_usable_blocks,
                    f"admission gate asks {need:,} blocks of {self._pool_label(idx)}, "
                    f"which has {pool.num_usable_blocks:,} usable blocks",
                )
                return
        if gate.admitted:
            # the gate said yes, the allocation of this step's own tokens said no
            for idx, (need, pool) in enumerate(zip(self._step_need_per_pool(req, n), pools, strict=True)):
                if need > pool.num_usable_blocks:
                    self._stall(
                        step, req, need, pool.num_usable_blocks,
                        f"passes the admission gate ({gate.need:,} blocks), but its first {n:,} tokens need "
                        f"{need:,} blocks of {self._pool_label(idx)}, which has {pool.num_usable_blocks:,} "
                        "usable blocks",
                    )
                    return
        if not self.running and not self.lagged_frees:
            self._stall(
                step,
                req,
                gate.need,
                self.manager.num_usable_blocks,
                "refused with nothing running and nothing left to free",
            )

    @property
    def idle(self) -> bool:
        """No request waiting, running or waiting to be freed."""
        return not self.waiting and not self.running and not self.lagged_frees
