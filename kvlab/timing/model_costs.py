"""What one GPU reads and computes for a model: weights, attention shapes, KV bytes per token."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.models.model import ModelKV
from kvlab.quantization import get_scheme, kv_bytes_per_token
from kvlab.sizing.gpu_memory import WEIGHT_COMPUTE_DTYPE, WEIGHT_DTYPES
from kvlab.sizing.weight_bytes import weight_bytes_by_part
from kvlab.validation import require_choice, require_positive_int


@dataclass(frozen=True)
class LayerGroupCost:
    """Layers of one shape on one GPU.

    Attributes:
        num_layers: how many layers.
        q_heads: query heads per GPU.
        head_size: K head size (elements); attention FLOPs use it for QK and PV.
        kv_bytes_per_token: K, V and scales of one token in one layer (bytes).
        window: the keys a query sees at most (sliding window or local chunk), ``None`` = all.
    """

    num_layers: int
    q_heads: int
    head_size: int
    kv_bytes_per_token: int
    window: int | None

    def keys_attended(self, context: int, new_tokens: int) -> int:
        """Sum over the ``new_tokens`` queries after ``context`` cached tokens of the keys each one
        sees (causal, itself included): ``Σ_{i=1..n} min(c + i, W)``."""
        c, n, w = context, new_tokens, self.window
        if w is None or c + n <= w:
            return n * c + n * (n + 1) // 2
        if c >= w:
            return n * w
        below = w - c  # queries c+1 .. w see fewer than w keys
        return below * c + below * (below + 1) // 2 + (n - below) * w


@dataclass(frozen=True)
class ModelCosts:
    """A model on one GPU of a tensor-parallel group.

    Attributes:
        name: the model.
        active_parameters: weights one token runs through, per GPU.
        total_parameters: all weights, per GPU.
        weight_bytes: bytes of all weights, per GPU.
        weight_dtype: ``--weight-dtype``.
        compute_dtype: the tensor-core format of the weight GEMMs.
        kv_cache_dtype: the KV scheme.
        groups: the attention layers, grouped by shape.
        tensor_parallel_size: GPUs the model is split over.
        hidden_size: the residual width (elements) that tensor parallelism all-reduces twice per
            layer (after attention and after the MLP); 0 = unknown.
    """

    name: str
    active_parameters: int
    total_parameters: int
    weight_bytes: int
    weight_dtype: str
    compute_dtype: str
    kv_cache_dtype: str
    groups: tuple[LayerGroupCost, ...]
    tensor_parallel_size: int = 1
    hidden_size: int = 0

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes of one token over all layers of this GPU."""
        return sum(g.num_layers * g.kv_bytes_per_token for g in self.groups)

    @classmethod
    def from_model(
        cls,
        model: ModelKV,
        kv_cache_dtype: str = "auto",
        weight_dtype: str = "bf16",
        tensor_parallel_size: int = 1,
    ) -> ModelCosts:
        """Costs of ``model`` with this KV scheme and weight dtype on one of ``tensor_parallel_size`` GPUs.

        Raises:
            ValueError: the model lacks ``num_parameters`` or ``num_attention_heads`` (a
                ``config.json`` can add ``num_parameters`` / ``num_active_parameters``).
        """
        require_choice(weight_dtype, WEIGHT_DTYPES, "weight_dtype")
        require_positive_int(tensor_parallel_size, "tensor_parallel_size")
        if model.num_parameters is None:
            raise ValueError(
                f'model {model.name!r} has no parameter count; add "num_parameters" (and, for '
                'mixture-of-experts models, "num_active_parameters") to its config.json'
            )
        if model.num_attention_heads is None:
            raise ValueError(f"model {model.name!r} has no num_attention_heads (needed for attention FLOPs)")
        tp = tensor_parallel_size
        active = model.num_active_parameters or model.num_parameters
        q_heads = max(1, model.num_attention_heads // tp)
        shapes: dict[tuple[int, int, int | None], int] = {}
        scheme = get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
        for layer in model.layers:
            per_token = kv_bytes_per_token(
                scheme, layer.kv_heads_per_gpu(tp), layer.head_size, layer.head_size_v
            )
            window = layer.sliding_window if layer.kind == "sliding_window" else layer.attention_chunk_size
            key = (layer.head_size, per_token, window)
            shapes[key] = shapes.get(key, 0) + 1
        groups = tuple(
            LayerGroupCost(n, q_heads, head, bpt, window) for (head, bpt, window), n in shapes.items()
        )
        return cls(
            name=model.name,
            active_parameters=active // tp,
            total_parameters=model.num_parameters // tp,
            # experts stored apart (gpt-oss MXFP4) are read in their own format
            weight_bytes=weight_bytes_by_part(model.num_parameters, weight_dtype, tp, model.experts).total,
            weight_dtype=weight_dtype,
            compute_dtype=WEIGHT_COMPUTE_DTYPE[weight_dtype],
            kv_cache_dtype=kv_cache_dtype,
            groups=groups,
            tensor_parallel_size=tp,
            # without hidden_size, the attention output width (q heads × head size) stands in for it
            hidden_size=model.hidden_size or model.num_attention_heads * model.layers[0].head_size,
        )
