"""What a model contributes to the KV cache: its attention layers, their shapes, and its state layers.

Attention layers (:class:`LayerKV`) are full, sliding-window, chunked-local or MLA (one latent
"head" of ``kv_lora_rank + qk_rope_head_dim`` per token, K only, the same on every GPU). A layer can
also *reuse* an earlier layer's cache (``kv_shared_with``, Gemma 3n / Gemma 4 E2B/E4B): it costs no
memory. Mamba and linear-attention layers keep a fixed per-request state instead
(:class:`~kvlab.models.state_layers.StateLayerKV`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.models.experts import ExpertWeights
from kvlab.models.layer import LAYER_KINDS, LayerKV
from kvlab.models.parallel import check_tensor_parallel
from kvlab.models.state_layers import StateLayerKV
from kvlab.sizing.mla_spec import MLAAttentionSpec
from kvlab.sizing.pipeline import layer_index
from kvlab.sizing.specs import MODEL_DTYPES, AttentionSpec
from kvlab.sizing.state_spec import MambaSpec
from kvlab.sizing.state_unification import HybridBlockChoice, hybrid_block_size
from kvlab.validation import require_choice, require_positive_int

__all__ = ["LAYER_KINDS", "KVCacheSpec", "LayerKV", "ModelKV"]

#: Any per-layer spec a model produces.
KVCacheSpec = AttentionSpec | MambaSpec


@dataclass(frozen=True)
class ModelKV:
    """The KV-relevant facts of a model.

    Attributes:
        name: display name.
        layers: attention layers in order.
        max_position_embeddings: the longest context the model supports (tokens).
        dtype: the model dtype (what ``kv_cache_dtype="auto"`` stores).
        source: where the facts come from (model id, revision or date).
        num_attention_heads: query heads of the whole model (``None`` = unknown): checked against
            tensor parallelism; the step-time model needs them for attention FLOPs.
        num_parameters: all weights (parameters), ``None`` = unknown.
        num_active_parameters: weights one token runs through (parameters; smaller than
            ``num_parameters`` for mixture-of-experts models); ``None`` = ``num_parameters``.
        state_layers: Mamba / linear-attention layers (a fixed state per request).
        mtp_layers: multi-token-prediction modules shipped with the model (used only when
            speculative decoding with ``method="mtp"`` is on).
        mamba_chunk_size: the state kernel's chunk (tokens), used to align blocks in ``"align"`` mode.
        hidden_size: the residual width (elements), ``None`` = unknown (MLA and hybrid models'
            width is not query heads × head size).
        num_hidden_layers: decoder layers, attention, state and MLP-only ones alike (what pipeline
            parallelism splits); ``None`` = one more than the highest ``layers.N`` index.
        experts: routed experts stored in their own format (gpt-oss: MXFP4), counted apart from
            the rest of the weights; ``None`` = every weight in one dtype.
    """

    name: str
    layers: tuple[LayerKV, ...]
    max_position_embeddings: int
    dtype: str = "bfloat16"
    source: str = ""
    num_attention_heads: int | None = None
    num_parameters: int | None = None
    num_active_parameters: int | None = None
    state_layers: tuple[StateLayerKV, ...] = ()
    mtp_layers: int = 0
    mamba_chunk_size: int | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    experts: ExpertWeights | None = None

    def __post_init__(self) -> None:
        for field in ("num_attention_heads", "num_parameters", "num_active_parameters", "hidden_size",
                      "num_hidden_layers"):
            if getattr(self, field) is not None:
                require_positive_int(getattr(self, field), f"{field} of model {self.name!r}")
        if (
            self.num_active_parameters is not None
            and self.num_parameters is not None
            and self.num_active_parameters > self.num_parameters
        ):
            raise ValueError(
                f"num_active_parameters ({self.num_active_parameters:,}) of model {self.name!r} exceeds "
                f"num_parameters ({self.num_parameters:,})"
            )
        experts, total = self.experts, self.num_parameters
        if experts is not None and total is not None and experts.num_parameters > total:
            raise ValueError(
                f"the routed experts of model {self.name!r} ({experts.num_parameters:,} weights) "
                f"exceed num_parameters ({total:,})"
            )
        if not self.layers and not self.state_layers:
            raise ValueError(f"model {self.name!r} has neither attention nor state layers")
        names = {layer.name for layer in self.layers}
        for layer in self.layers:
            if layer.kv_shared_with is not None and layer.kv_shared_with not in names:
                raise ValueError(
                    f"layer {layer.name!r} shares the cache of {layer.kv_shared_with!r}, which is not a layer"
                )
        require_positive_int(self.max_position_embeddings, "max_position_embeddings")
        require_choice(self.dtype, MODEL_DTYPES, "dtype")

    def layer_specs(
        self,
        block_size: int = 16,
        kv_cache_dtype: str = "auto",
        tensor_parallel_size: int = 1,
        *,
        mamba_cache_mode: str = "none",
        mamba_chunk_size: int | None = None,
        block_alignment: int | None = None,
        num_speculative_tokens: int = 0,
        extra_layers: tuple[LayerKV, ...] = (),
        extra_retained_tokens: int = 0,
        decode_context_parallel_size: int = 1,
    ) -> dict[str, KVCacheSpec]:
        """``{layer name: spec}`` on one GPU of a ``tensor_parallel_size``-way group.

        Layers that reuse another layer's cache get no spec (vLLM allocates nothing for them). With
        state layers, the attention block size is raised and the state pages padded so that all
        pages are equal (:func:`kvlab.sizing.state_unification.hybrid_block_size`).

        Args:
            block_size: requested tokens per block (raised for hybrid state models when too small).
            kv_cache_dtype: ``--kv-cache-dtype``.
            tensor_parallel_size: GPUs the heads are split over.
            mamba_cache_mode: ``"none"``, ``"align"`` or ``"all"`` (state prefix caching).
            mamba_chunk_size: in ``"align"`` mode, round blocks to this chunk (older vLLM); ``None`` =
                plain alignment.
            block_alignment: attention kernel block alignment (default 16, 64 for MLA).
            num_speculative_tokens: speculative tokens (extra state pages and conv rows).
            extra_layers: draft-model / MTP attention layers added by speculative decoding.
            extra_retained_tokens: tokens sliding-window layers keep beyond the window (MTP's
                proposed tokens in vLLM's new manager).
            decode_context_parallel_size: GPUs of the TP group a request's tokens are spread over
                (full-attention and MLA layers only).

        Raises:
            ValueError: a split vLLM refuses (query or KV heads not divisible by the TP size).
        """
        require_positive_int(tensor_parallel_size, "tensor_parallel_size")
        check_tensor_parallel(self.num_attention_heads, tensor_parallel_size, f"model {self.name!r}")
        require_positive_int(decode_context_parallel_size, "decode_context_parallel_size")
        if tensor_parallel_size % decode_context_parallel_size:
            raise ValueError(
                f"decode_context_parallel_size ({decode_context_parallel_size}) must divide "
                f"tensor_parallel_size ({tensor_parallel_size}): vLLM spreads a request's tokens over "
                "GPUs of the tensor-parallel group"
            )
        layers = [layer for layer in (*self.layers, *extra_layers) if layer.kv_shared_with is None]

        def attention(block: int) -> dict[str, KVCacheSpec]:
            return {
                layer.name: layer.spec(
                    block, kv_cache_dtype, self.dtype, tensor_parallel_size, extra_retained_tokens,
                    decode_context_parallel_size,
                )
                for layer in layers
            }

        if not self.state_layers:
            return attention(block_size)
        choice = self._hybrid_choice(
            attention(1), block_size, tensor_parallel_size, mamba_cache_mode, mamba_chunk_size,
            block_alignment, num_speculative_tokens,
        )
        specs = attention(choice.block_size)
        for state in self.state_layers:
            state_bytes = state.state_bytes(tensor_parallel_size, self.dtype, num_speculative_tokens)
            specs[state.name] = MambaSpec(
                block_size=choice.block_size,
                state_bytes=state_bytes,
                page_size_padded=choice.page_size_bytes if choice.page_size_bytes != state_bytes else None,
                mamba_cache_mode=mamba_cache_mode,
                num_speculative_blocks=num_speculative_tokens,
            )
        return specs

    def _hybrid_choice(
        self,
        one_token_specs: dict[str, KVCacheSpec],
        block_size: int,
        tensor_parallel_size: int,
        mamba_cache_mode: str,
        mamba_chunk_size: int | None,
        block_alignment: int | None,
        num_speculative_tokens: int,
    ) -> HybridBlockChoice:
        if not one_token_specs:
            raise ValueError(f"model {self.name!r} has only state layers; kvlab sizes hybrid models only")
        first = next(iter(one_token_specs.values()))
        is_mla = isinstance(first, MLAAttentionSpec)
        return hybrid_block_size(
            first.page_size_bytes,
            max(s.state_bytes(tensor_parallel_size, self.dtype, num_speculative_tokens)
                for s in self.state_layers),
            block_size,
            alignment=block_alignment or (64 if is_mla else 16),
            mamba_cache_mode=mamba_cache_mode,
            chunk_size=mamba_chunk_size,
        )

    def hybrid_block_choice(
        self,
        block_size: int = 16,
        kv_cache_dtype: str = "auto",
        tensor_parallel_size: int = 1,
        *,
        mamba_cache_mode: str = "none",
        mamba_chunk_size: int | None = None,
        block_alignment: int | None = None,
        num_speculative_tokens: int = 0,
    ) -> HybridBlockChoice | None:
        """The block size, common page and state padding of a hybrid state model (``None`` without
        state layers), with the lines vLLM logs about them."""
        if not self.state_layers:
            return None
        one_token = {
            layer.name: layer.spec(1, kv_cache_dtype, self.dtype, tensor_parallel_size)
            for layer in self.layers
            if layer.kv_shared_with is None
        }
        return self._hybrid_choice(
            one_token, block_size, tensor_parallel_size, mamba_cache_mode, mamba_chunk_size,
            block_alignment, num_speculative_tokens,
        )

    @property
    def decoder_layers(self) -> int:
        """Decoder layers pipeline parallelism splits: ``num_hidden_layers``, or one more than the
        highest ``layers.N`` index when the model does not say."""
        if self.num_hidden_layers is not None:
            return self.num_hidden_layers
        indices = [layer_index(x.name) for x in (*self.layers, *self.state_layers)]
        return max((i for i in indices if i is not None), default=-1) + 1 or len(self.layers)

    @property
    def num_kv_shared_layers(self) -> int:
        """Layers that reuse an earlier layer's cache."""
        return sum(1 for layer in self.layers if layer.kv_shared_with is not None)

    def count(self, kind: str) -> int:
        """Number of layers of ``kind``."""
        return sum(1 for layer in self.layers if layer.kind == kind)
