"""What a model contributes to the KV cache: its attention layers and their shapes."""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.sizing.specs import (
    MODEL_DTYPES,
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    SlidingWindowSpec,
)
from kvlab.validation import require_choice, require_positive_int

LAYER_KINDS = ("full", "sliding_window", "chunked_local")


@dataclass(frozen=True)
class LayerKV:
    """One attention layer as the KV cache sees it (whole model, before tensor parallelism).

    Attributes:
        name: layer name, e.g. ``"layers.5"``.
        kind: ``"full"``, ``"sliding_window"`` or ``"chunked_local"``.
        num_kv_heads: KV heads of the whole model.
        head_size: K head size (elements).
        head_size_v: V head size (elements); ``None`` = ``head_size``.
        sliding_window: window (tokens) of a sliding-window layer.
        attention_chunk_size: chunk (tokens) of a chunked-local layer.
    """

    name: str
    kind: str
    num_kv_heads: int
    head_size: int
    head_size_v: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None

    def __post_init__(self) -> None:
        require_choice(self.kind, LAYER_KINDS, f"kind of layer {self.name!r}")
        require_positive_int(self.num_kv_heads, f"num_kv_heads of layer {self.name!r}")
        require_positive_int(self.head_size, f"head_size of layer {self.name!r}")
        if self.kind == "sliding_window":
            require_positive_int(self.sliding_window, f"sliding_window of layer {self.name!r}")
        if self.kind == "chunked_local":
            require_positive_int(self.attention_chunk_size, f"attention_chunk_size of layer {self.name!r}")

    def kv_heads_per_gpu(self, tensor_parallel_size: int) -> int:
        """KV heads on one GPU: ``max(1, heads // tp)`` (replicated when heads < tp)."""
        return max(1, self.num_kv_heads // tensor_parallel_size)

    def spec(
        self,
        block_size: int,
        kv_cache_dtype: str = "auto",
        model_dtype: str = "bfloat16",
        tensor_parallel_size: int = 1,
    ) -> AttentionSpec:
        """This layer's spec on one GPU."""
        common = dict(
            block_size=block_size,
            num_kv_heads=self.kv_heads_per_gpu(tensor_parallel_size),
            head_size=self.head_size,
            head_size_v=self.head_size_v,
            kv_cache_dtype=kv_cache_dtype,
            model_dtype=model_dtype,
        )
        if self.kind == "sliding_window":
            return SlidingWindowSpec(**common, sliding_window=self.sliding_window)
        if self.kind == "chunked_local":
            return ChunkedLocalAttentionSpec(**common, attention_chunk_size=self.attention_chunk_size)
        return FullAttentionSpec(**common)


@dataclass(frozen=True)
class ModelKV:
    """The KV-relevant facts of a model.

    Attributes:
        name: display name.
        layers: attention layers in order.
        max_position_embeddings: the longest context the model supports (tokens).
        dtype: the model dtype (what ``kv_cache_dtype="auto"`` stores).
        source: where the facts come from (model id, revision or date).
        num_attention_heads: query heads of the whole model (``None`` = unknown); the step-time
            model needs them for attention FLOPs.
        num_parameters: all weights (parameters), ``None`` = unknown.
        num_active_parameters: weights one token runs through (parameters; smaller than
            ``num_parameters`` for mixture-of-experts models); ``None`` = ``num_parameters``.
    """

    name: str
    layers: tuple[LayerKV, ...]
    max_position_embeddings: int
    dtype: str = "bfloat16"
    source: str = ""
    num_attention_heads: int | None = None
    num_parameters: int | None = None
    num_active_parameters: int | None = None

    def __post_init__(self) -> None:
        for field in ("num_attention_heads", "num_parameters", "num_active_parameters"):
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
        if not self.layers:
            raise ValueError(f"model {self.name!r} has no attention layers")
        require_positive_int(self.max_position_embeddings, "max_position_embeddings")
        require_choice(self.dtype, MODEL_DTYPES, "dtype")

    def layer_specs(
        self, block_size: int = 16, kv_cache_dtype: str = "auto", tensor_parallel_size: int = 1
    ) -> dict[str, AttentionSpec]:
        """``{layer name: spec}`` on one GPU of a ``tensor_parallel_size``-way group."""
        require_positive_int(tensor_parallel_size, "tensor_parallel_size")
        return {
            layer.name: layer.spec(block_size, kv_cache_dtype, self.dtype, tensor_parallel_size)
            for layer in self.layers
        }

    def count(self, kind: str) -> int:
        """Number of layers of ``kind``."""
        return sum(1 for layer in self.layers if layer.kind == kind)
