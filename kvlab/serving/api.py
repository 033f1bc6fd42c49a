"""The three questions kvlab answers for a configuration: capacity, admission need, simulation."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kvlab.admission.policies import POLICY_NAMES, AdmissionPolicy, GroupBudget, get_policy
from kvlab.hardware import GPUProfile
from kvlab.serving.config import EngineConfig
from kvlab.simulator.engine import DEFAULT_MAX_STEPS, run_simulation
from kvlab.simulator.timeline import SimulationResult
from kvlab.simulator.workload import RequestSpec
from kvlab.sizing.capacity import KVCachePlan
from kvlab.sizing.specs import cdiv, window_of
from kvlab.timing import Efficiencies, StepTimeModel
from kvlab.validation import require_positive_int


def capacity(config: EngineConfig) -> KVCachePlan:
    """Groups, bytes per block, number of blocks, blocks per max-length request, maximum concurrency
    and both "GPU KV cache size" values, as vLLM computes them at startup.

    Raises:
        ValueError: vLLM's startup errors (no memory; a max-length request does not fit, with the
            estimated maximum model length).
    """
    return config.plan()


@dataclass(frozen=True)
class GroupNeed:
    """The gate's need in one group (or, for ``trtllm``, one window pool).

    Attributes:
        group: group index.
        kind: ``"full"``, ``"sliding_window"`` or ``"chunked_local"``.
        block_size: tokens per block.
        window: sliding window (tokens) or ``None``.
        num_layers: layers in the group.
        blocks: blocks the gate asks for.
        bytes: ``blocks × bytes per block of the group`` on one GPU.
        pool_blocks: usable blocks of the pool the group draws from.
        lookahead_blocks: further blocks the request's first step needs for the speculative
            lookahead slots (``cdiv(N + k, B) - cdiv(N, B)``; 0 without speculation and for state
            groups, whose speculative pages are already in ``blocks``).
    """

    group: int
    kind: str
    block_size: int
    window: int | None
    num_layers: int
    blocks: int
    bytes: int
    pool_blocks: int
    lookahead_blocks: int = 0


@dataclass(frozen=True)
class AdmissionNeed:
    """What the admission gate asks of a fresh ``prompt_tokens`` request under one policy.

    Attributes:
        policy: policy name.
        prompt_tokens: the request length (tokens).
        per_group: one :class:`GroupNeed` per group.
        total: blocks over all groups.
        total_bytes: bytes those blocks occupy on one GPU.
        pool_blocks: usable blocks over all pools.
        lookahead_tokens: speculative slots per step (``num_speculative_tokens``).
    """

    policy: str
    prompt_tokens: int
    per_group: tuple[GroupNeed, ...]
    total: int
    total_bytes: int
    pool_blocks: int
    lookahead_tokens: int = 0

    @property
    def total_with_lookahead(self) -> int:
        """Blocks the gate asks for plus those the first step's lookahead slots take."""
        return self.total + sum(g.lookahead_blocks for g in self.per_group)

    @property
    def fits_empty_pool(self) -> bool:
        """True if an empty pool could admit it (each pool checked on its own)."""
        by_pool: dict[int, list[GroupNeed]] = {}
        for g in self.per_group:
            by_pool.setdefault(g.pool_blocks, []).append(g)
        return (
            all(sum(g.blocks for g in gs) <= size for size, gs in by_pool.items())
            if len(by_pool) > 1
            else self.total <= self.pool_blocks
        )


def admission_need(
    config: EngineConfig, prompt_tokens: int, policy: str | AdmissionPolicy | None = None
) -> AdmissionNeed:
    """Blocks the admission gate charges a new ``prompt_tokens``-token request (no prefix hits).

    Args:
        config: the configuration.
        prompt_tokens: prompt length (tokens), at most ``max_model_len``.
        policy: a policy name or object; ``None`` = the configuration's.
    """
    require_positive_int(prompt_tokens, "prompt_tokens")
    if config.decode_context_parallel_size > 1:
        raise ValueError("admission_need does not model decode context parallelism; capacity sizes it")
    pol = get_policy(policy) if policy is not None else config.resolved_policy
    cfg = config if pol.name == config.resolved_policy.name else config.replace(policy=pol.name)
    plan = cfg.plan()
    if prompt_tokens > plan.max_model_len:
        raise ValueError(f"prompt_tokens ({prompt_tokens}) exceeds max_model_len ({plan.max_model_len})")
    kv = cfg.kv_cache_config()
    lagged = cfg.resolved_profile.skip_on == "processed" and cfg.resolved_async_scheduling
    needs = []
    for gid, g in enumerate(kv.groups):
        budget = GroupBudget(
            g.spec, plan.max_model_len, cfg.max_num_batched_tokens, cfg.in_flight_tokens, lagged
        )
        lookahead = 0
        if g.kind == "mamba":  # a fixed state page (plus one per speculative token), whatever N
            blocks = g.spec.max_blocks_per_request(plan.max_model_len, cfg.in_flight_tokens)
        else:
            blocks = pol.required_blocks(budget, prompt_tokens)
            k = cfg.num_lookahead_tokens
            lookahead = cdiv(min(prompt_tokens + k, plan.max_model_len), g.block_size) - cdiv(
                prompt_tokens, g.block_size
            )
        pool = kv.pools[kv.pool_of_group(gid)]
        needs.append(
            GroupNeed(
                gid,
                g.kind,
                g.block_size,
                window_of(g.spec),
                len(g.layer_names),
                blocks,
                blocks * pool.bytes_per_block,
                pool.num_blocks - 1,
                lookahead,
            )
        )
    return AdmissionNeed(
        policy=pol.name,
        prompt_tokens=prompt_tokens,
        per_group=tuple(needs),
        total=sum(n.blocks for n in needs),
        total_bytes=sum(n.bytes for n in needs),
        pool_blocks=sum(p.num_blocks - 1 for p in kv.pools),
        lookahead_tokens=cfg.num_lookahead_tokens,
    )


def compare_policies(
    config: EngineConfig, prompt_tokens: int, policies: Sequence[str] = POLICY_NAMES
) -> dict[str, AdmissionNeed]:
    """:func:`admission_need` under several policies, keyed by name."""
    return {name: admission_need(config, prompt_tokens, name) for name in policies}


def simulate(
    config: EngineConfig,
    workload: Sequence[RequestSpec],
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    record_blocks: bool | Collection[int] = False,
    detail: str = "ids",
    gpu: str | GPUProfile | None = None,
    weight_dtype: str = "bf16",
    efficiencies: Efficiencies | None = None,
    max_concurrency: int | None = None,
    progress: bool = False,
) -> SimulationResult:
    """Serve ``workload`` under ``config`` (its profile, policy and limits), step by step.

    Args:
        config: the configuration.
        workload: requests (see :mod:`kvlab.simulator.workload` and :mod:`kvlab.simulator.sessions`).
        max_steps: hard step cap (reported in the summary when reached).
        record_blocks: keep every block's owner/state per step (small runs only); or only after the
            steps in a collection of step indexes.
        detail: ``"ids"`` or ``"counts"`` in the per-step records.
        gpu: a GPU name or profile: steps then take the time :class:`~kvlab.timing.StepTimeModel`
            predicts, and ``result.metrics`` holds TTFT, TPOT, throughputs and wall time.
        weight_dtype: the weights' dtype for the time model (``bf16``, ``fp8``, ``int4``, ``nvfp4``).
        efficiencies: the time model's efficiencies (default: kvlab's fitted kernels).
        max_concurrency: most requests in the engine at once (closed loop).
        progress: show a progress bar on runs longer than a second.
    """
    timer = None
    if gpu is not None:
        model, tp = config.model_kv, config.tensor_parallel_size
        timer = StepTimeModel(gpu, model, config.kv_cache_dtype, weight_dtype, tp, efficiencies)
    manager = config.build_kv_cache_manager()
    try:
        return run_simulation(
            manager,
            config.scheduler_config(),
            workload,
            max_steps=max_steps,
            record_blocks=record_blocks,
            detail=detail,
            step_time=timer,
            max_concurrency=max_concurrency,
            progress=progress,
        )
    finally:
        manager.close()  # its blocks are freed now, not by the cycle collector
