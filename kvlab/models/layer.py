"""One attention layer as the KV cache sees it, and the per-GPU spec it produces.

A layer is full, sliding-window, chunked-local or MLA (one latent "head" of
``kv_lora_rank + qk_rope_head_dim`` per token, K only, the same on every GPU). A layer can also
*reuse* an earlier layer's cache (``kv_shared_with``): it then costs no memory.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.models.parallel import kv_heads_per_gpu
from kvlab.sizing.mla_spec import MLAAttentionSpec
from kvlab.sizing.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
)
from kvlab.validation import require_choice, require_positive_int

LAYER_KINDS = ("full", "sliding_window", "chunked_local", "mla")


@dataclass(frozen=True)
class LayerKV:
    """One attention layer as the KV cache sees it (whole model, before tensor parallelism).

    Attributes:
        name: layer name, e.g. ``"layers.5"``.
        kind: ``"full"``, ``"sliding_window"``, ``"chunked_local"`` or ``"mla"``.
        num_kv_heads: KV heads of the whole model (1 for MLA: the latent is not split by TP).
        head_size: K head size (elements).
        head_size_v: V head size (elements); ``None`` = ``head_size``.
        sliding_window: window (tokens) of a sliding-window layer.
        attention_chunk_size: chunk (tokens) of a chunked-local layer.
        kv_shared_with: name of the earlier layer whose cache this layer reads (it stores nothing).
        element_bytes: bytes per cached element when the layer fixes it whatever ``kv_cache_dtype``
            (DeepSeek V3.2's indexer keys: 1-byte fp8 with their scales counted in ``head_size``).
    """

    name: str
    kind: str
    num_kv_heads: int
    head_size: int
    head_size_v: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    kv_shared_with: str | None = None
    element_bytes: int | None = None

    def __post_init__(self) -> None:
        require_choice(self.kind, LAYER_KINDS, f"kind of layer {self.name!r}")
        require_positive_int(self.num_kv_heads, f"num_kv_heads of layer {self.name!r}")
        require_positive_int(self.head_size, f"head_size of layer {self.name!r}")
        if self.kind == "sliding_window":
            require_positive_int(self.sliding_window, f"sliding_window of layer {self.name!r}")
        if self.kind == "chunked_local":
            require_positive_int(self.attention_chunk_size, f"attention_chunk_size of layer {self.name!r}")

    def kv_heads_per_gpu(self, tensor_parallel_size: int) -> int:
        """KV heads on one GPU: ``heads / tp``, or 1 (replicated) when ``tp > heads``; MLA keeps its
        one latent head whole. Raises ``ValueError`` for splits vLLM refuses."""
        if self.kind == "mla":
            return self.num_kv_heads
        return kv_heads_per_gpu(self.num_kv_heads, tensor_parallel_size, f"layer {self.name!r}")

    def spec(
        self,
        block_size: int,
        kv_cache_dtype: str = "auto",
        model_dtype: str = "bfloat16",
        tensor_parallel_size: int = 1,
        extra_retained_tokens: int = 0,
        decode_context_parallel_size: int = 1,
    ) -> AttentionSpec:
        """This layer's spec on one GPU (``extra_retained_tokens``: kept beyond a sliding window;
        ``decode_context_parallel_size``: GPUs a full-attention layer's tokens are spread over).

        Raises:
            ValueError: decode context parallelism on a sliding-window or chunked layer (vLLM asserts).
        """
        dcp = decode_context_parallel_size
        if dcp > 1 and self.kind in ("sliding_window", "chunked_local"):
            raise ValueError(
                f"layer {self.name!r} is {self.kind}: vLLM does not support decode context parallelism "
                "with sliding-window or chunked attention (decode_context_parallel_size must be 1)"
            )
        if self.kind == "mla":
            return MLAAttentionSpec(
                block_size=block_size,
                num_kv_heads=self.num_kv_heads,
                head_size=self.head_size,
                kv_cache_dtype=kv_cache_dtype,
                model_dtype=model_dtype,
                element_bytes=self.element_bytes,
                dcp_world_size=dcp,
            )
        common = dict(
            block_size=block_size,
            num_kv_heads=self.kv_heads_per_gpu(tensor_parallel_size),
            head_size=self.head_size,
            head_size_v=self.head_size_v,
            kv_cache_dtype=kv_cache_dtype,
            model_dtype=model_dtype,
        )
        if self.kind == "sliding_window":
            return SlidingWindowSpec(
                **common, sliding_window=self.sliding_window, extra_retained_tokens=extra_retained_tokens
            )
        if self.kind == "chunked_local":
            return ChunkedLocalAttentionSpec(**common, attention_chunk_size=self.attention_chunk_size)
        return FullAttentionSpec(**common, dcp_world_size=dcp)
