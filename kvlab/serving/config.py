"""``EngineConfig``: one serving configuration, named with vLLM's flags, validated on construction."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kvlab.admission.policies import AdmissionPolicy, get_policy
from kvlab.allocator.kv_cache_manager import KVCacheManager
from kvlab.models.model import KVCacheSpec, ModelKV
from kvlab.models.presets import get_model
from kvlab.models.speculative import SpeculativeConfig
from kvlab.quantization import get_scheme
from kvlab.simulator.scheduler import SchedulerConfig
from kvlab.sizing.capacity import KVCacheConfig, KVCachePlan, plan_kv_cache
from kvlab.sizing.memory_units import parse_memory
from kvlab.sizing.mla_spec import MLA_ELEMENT_BYTES
from kvlab.sizing.pipeline import parse_layer_partition, parse_stage_memory, pipeline_stage_layers
from kvlab.sizing.profiles import Profile, get_profile
from kvlab.sizing.state_spec import MAMBA_CACHE_MODES
from kvlab.sizing.state_unification import HybridBlockChoice
from kvlab.sizing.window_pools import plan_window_pools
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class EngineConfig:
    """A model served with vLLM-style settings on one tensor-parallel group.

    Attributes:
        model: a preset name (see :data:`kvlab.models.PRESET_NAMES`), a ``config.json`` path, or a
            :class:`~kvlab.models.ModelKV`.
        kv_cache_memory: KV-cache memory of *one GPU*, in bytes or as text (``"16GiB"``, ``12e9``).
        kv_cache_dtype: ``--kv-cache-dtype``.
        block_size: ``--block-size`` (tokens per block).
        max_model_len: L (tokens); ``None`` = the model's ``max_position_embeddings``; ``-1`` = auto-fit.
        max_num_batched_tokens: token budget per step (tokens).
        max_num_seqs: most running requests.
        tensor_parallel_size: GPUs the KV heads are split over.
        profile: the vLLM version imitated (:data:`kvlab.sizing.PROFILE_NAMES`).
        policy: admission policy (:data:`kvlab.admission.POLICY_NAMES`); ``None`` = the profile's.
        enable_prefix_caching: prefix caching.
        disable_hybrid_kv_cache_manager: promote sliding/chunked layers to full attention.
        num_gpu_blocks_override: blocks in the pool whatever the memory.
        async_scheduling: ``None`` = the profile's default.
        speculative_config: ``--speculative-config`` (a :class:`~kvlab.models.SpeculativeConfig`, a
            dict or its JSON): the draft's KV layers, lookahead slots, extra state pages.
        mamba_cache_mode: state prefix caching of hybrid models: ``"none"``, ``"align"`` or ``"all"``.
        decode_context_parallel_size: GPUs of the TP group a request's tokens are spread over
            (``--decode-context-parallel-size``; full-attention and MLA models).
        pipeline_parallel_size: pipeline stages the decoder layers are split over
            (``--pipeline-parallel-size``); ``kv_cache_memory`` is then the memory of one GPU of each stage.
        pipeline_layer_partition: layers per stage (``VLLM_PP_LAYER_PARTITION``, e.g. ``"16,32"`` or
            ``(16, 32)``); ``None`` = vLLM's even split.
        pipeline_stage_memory: KV-cache memory of one GPU of each stage when the stages' GPUs differ
            (``"3.18GiB,24GiB"`` or a tuple); replaces ``kv_cache_memory``. ``None`` = the same on all.
    """

    model: str | Path | ModelKV
    kv_cache_memory: int | float | str = "16GiB"
    kv_cache_dtype: str = "auto"
    block_size: int = 16
    max_model_len: int | None = None
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 256
    tensor_parallel_size: int = 1
    profile: str = "vllm-0.33"
    policy: str | None = None
    enable_prefix_caching: bool = True
    disable_hybrid_kv_cache_manager: bool = False
    num_gpu_blocks_override: int | None = None
    async_scheduling: bool | None = None
    speculative_config: SpeculativeConfig | dict | str | None = None
    mamba_cache_mode: str = "none"
    decode_context_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    pipeline_layer_partition: tuple[int, ...] | str | None = None
    pipeline_stage_memory: tuple[int, ...] | str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kv_cache_memory", parse_memory(self.kv_cache_memory, "kv_cache_memory"))
        if self.speculative_config is not None:
            object.__setattr__(self, "speculative_config", SpeculativeConfig.parse(self.speculative_config))
        if self.mamba_cache_mode not in MAMBA_CACHE_MODES:
            raise ValueError(f"mamba_cache_mode must be one of {', '.join(MAMBA_CACHE_MODES)}; "
                             f"got {self.mamba_cache_mode!r}")
        if not (self.kv_cache_dtype in MLA_ELEMENT_BYTES and self._has_mla):
            get_scheme(self.kv_cache_dtype)
        require_positive_int(self.block_size, "block_size")
        require_positive_int(self.max_num_batched_tokens, "max_num_batched_tokens")
        require_positive_int(self.max_num_seqs, "max_num_seqs")
        require_positive_int(self.tensor_parallel_size, "tensor_parallel_size")
        require_positive_int(self.pipeline_parallel_size, "pipeline_parallel_size")
        if self.pipeline_layer_partition is not None:
            object.__setattr__(self, "pipeline_layer_partition", parse_layer_partition(
                self.pipeline_layer_partition))
        if self.pipeline_stage_memory is not None:
            object.__setattr__(self, "pipeline_stage_memory", parse_stage_memory(
                self.pipeline_stage_memory, self.pipeline_parallel_size))
        if self.max_model_len is not None and self.max_model_len != -1:
            require_positive_int(self.max_model_len, "max_model_len (or -1 to auto-fit)")
        if self.num_gpu_blocks_override is not None:
            require_positive_int(self.num_gpu_blocks_override, "num_gpu_blocks_override", minimum=2)
        get_profile(self.profile)
        if self.policy is not None:
            get_policy(self.policy)
        _ = self.model_kv

    # -- resolved choices ---------------------------------------------------------------------------
    @cached_property
    def model_kv(self) -> ModelKV:
        """The model's KV facts."""
        return get_model(self.model)

    @property
    def _has_mla(self) -> bool:
        return any(layer.kind == "mla" for layer in self.model_kv.layers)

    @property
    def num_lookahead_tokens(self) -> int:
        """Speculative slots allocated beyond the verified tokens each step (0 without speculation)."""
        return self.speculative_config.num_speculative_tokens if self.speculative_config else 0

    @property
    def extra_retained_tokens(self) -> int:
        """Tokens sliding-window layers keep beyond their window: with MTP, vLLM's new manager
        (``vllm-0.33``) retains the proposed tokens too (``extra_retained_tokens =
        num_speculative_tokens``), so each sliding group may need one more block per request."""
        spec = self.speculative_config
        if spec is None or spec.method != "mtp" or self.resolved_profile.name != "vllm-0.33":
            return 0
        return spec.num_speculative_tokens

    @property
    def resolved_profile(self) -> Profile:
        return get_profile(self.profile)

    @property
    def resolved_policy(self) -> AdmissionPolicy:
        """The admission policy (the profile's own when ``policy`` is ``None``)."""
        return get_policy(self.policy or self.resolved_profile.default_policy)

    @property
    def resolved_async_scheduling(self) -> bool:
        return (
            self.resolved_profile.async_scheduling_default
            if self.async_scheduling is None
            else self.async_scheduling
        )

    @property
    def in_flight_tokens(self) -> int:
        """T (tokens) of the profile."""
        return self.resolved_profile.in_flight_tokens(
            self.max_num_batched_tokens, self.resolved_async_scheduling
        )

    def layer_specs(self) -> dict[str, KVCacheSpec]:
        """``{layer: spec}`` on one GPU: the model's layers, the draft's, and state pages."""
        spec = self.speculative_config
        return self.model_kv.layer_specs(
            self.block_size,
            self.kv_cache_dtype,
            self.tensor_parallel_size,
            mamba_cache_mode=self.mamba_cache_mode,
            num_speculative_tokens=self.num_lookahead_tokens,
            extra_layers=spec.draft_layers(self.model_kv) if spec else (),
            extra_retained_tokens=self.extra_retained_tokens,
            decode_context_parallel_size=self.decode_context_parallel_size,
        )

    def pipeline_stages(self) -> tuple[tuple[str, ...], ...] | None:
        """Each pipeline stage's layers with a cache or state (``None`` without pipeline parallelism).

        Raises:
            ValueError: a layer partition vLLM refuses, or a stage left without such layers.
        """
        return pipeline_stage_layers(tuple(self.layer_specs()), self.model_kv.decoder_layers,
                                     self.pipeline_parallel_size, self.pipeline_layer_partition)

    def hybrid_block_choice(self) -> HybridBlockChoice | None:
        """For a hybrid state model: the raised block size, the padding and vLLM's lines about them."""
        return self.model_kv.hybrid_block_choice(
            self.block_size,
            self.kv_cache_dtype,
            self.tensor_parallel_size,
            mamba_cache_mode=self.mamba_cache_mode,
            num_speculative_tokens=self.num_lookahead_tokens,
        )

    def replace(self, **changes) -> EngineConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- what the engine builds ---------------------------------------------------------------------
    def plan(self) -> KVCachePlan:
        """vLLM's startup sizing (groups, blocks, concurrency, log lines); raises vLLM's startup errors."""
        return _plan(self)

    def kv_cache_config(self) -> KVCacheConfig:
        """The pools the allocator uses: vLLM's shared pool, or one per window for ``trtllm``."""
        plan = self.plan()
        if self.resolved_policy.pool_layout == "per_window":
            if self.pipeline_parallel_size > 1:
                raise ValueError(
                    "the trtllm policy's per-window pools are not modelled with pipeline parallelism "
                    "(pipeline_parallel_size > 1); use a vLLM policy"
                )
            return plan_window_pools(self.layer_specs(), self.kv_cache_memory, plan.max_model_len)
        return plan.config

    def build_kv_cache_manager(self) -> KVCacheManager:
        """A fresh :class:`KVCacheManager` for this configuration.

        Raises:
            ValueError: decode context parallelism, or ``mamba_cache_mode="all"`` (not simulated).
        """
        if self.decode_context_parallel_size > 1:
            raise ValueError(
                "the block allocator and simulator do not model decode context parallelism; capacity "
                "sizes it (decode_context_parallel_size > 1)"
            )
        prof = self.resolved_profile
        return KVCacheManager(
            self.kv_cache_config(),
            self.plan().max_model_len,
            max_num_batched_tokens=self.max_num_batched_tokens,
            in_flight_tokens=self.in_flight_tokens,
            policy=self.resolved_policy,
            enable_caching=self.enable_prefix_caching,
            prepend_unhashed=prof.prepend_unhashed,
            skip_on=prof.skip_on,
            async_scheduling=self.resolved_async_scheduling,
        )

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs,
            max_model_len=self.plan().max_model_len,
            async_scheduling=self.resolved_async_scheduling,
            num_lookahead_tokens=self.num_lookahead_tokens,
            mamba_align_block_size=self._mamba_align_block_size(),
        )

    def _mamba_align_block_size(self) -> int | None:
        """The state groups' block size when states are prefix-cached in ``"align"`` mode."""
        if self.mamba_cache_mode != "align" or not self.enable_prefix_caching:
            return None
        block = max((g.block_size for g in self.plan().config.groups if g.kind == "mamba"), default=None)
        if block is not None and block > self.max_num_batched_tokens:
            raise ValueError(f"mamba_cache_mode='align' needs max_num_batched_tokens >= the block size "
                             f"({block} tokens): chunks are cut to whole blocks")
        return block


_PLANS: dict[tuple, KVCachePlan] = {}


def _plan(config: EngineConfig) -> KVCachePlan:
    """Plans are pure functions of the sizing fields; keep the last few (widgets re-ask often)."""
    key = (
        config.model_kv,
        config.kv_cache_memory,
        config.kv_cache_dtype,
        config.block_size,
        config.max_model_len,
        config.in_flight_tokens,
        config.profile,
        config.tensor_parallel_size,
        config.disable_hybrid_kv_cache_manager,
        config.num_gpu_blocks_override,
        config.speculative_config,
        config.mamba_cache_mode,
        config.decode_context_parallel_size,
        config.pipeline_parallel_size,
        config.pipeline_layer_partition,
        config.pipeline_stage_memory,
    )
    plan = _PLANS.get(key)
    if plan is None:
        model = config.model_kv
        plan = plan_kv_cache(
            config.layer_specs(),
            config.kv_cache_memory,
            max_model_len=model.max_position_embeddings
            if config.max_model_len is None
            else config.max_model_len,
            max_position_embeddings=model.max_position_embeddings,
            in_flight_tokens=config.in_flight_tokens,
            profile=config.resolved_profile,
            disable_hybrid=config.disable_hybrid_kv_cache_manager,
            num_gpu_blocks_override=config.num_gpu_blocks_override,
            stages=config.pipeline_stages(),
            stage_available_bytes=config.pipeline_stage_memory,
        )
        if len(_PLANS) > 64:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


__all__ = ["EngineConfig"]
