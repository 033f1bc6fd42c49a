"""KV-cache memory of a model on a GPU profile: ``gpu_memory_utilization × memory − weights −
activations`` (see :mod:`kvlab.sizing.gpu_memory` for the estimate and its worked example)."""

from __future__ import annotations

from kvlab.hardware import GPUProfile, get_gpu
from kvlab.models.model import ModelKV
from kvlab.sizing.gpu_memory import (
    GPUMemoryEstimate,
    estimate_activation_bytes,
    kv_cache_memory_from_gpu,
    require_utilization,
)
from kvlab.sizing.weight_bytes import weight_bytes_by_part
from kvlab.validation import require_positive_int


def estimate_kv_cache_memory(
    gpu: str | GPUProfile,
    model: ModelKV,
    weight_dtype: str = "bf16",
    gpu_memory_utilization: float = 0.9,
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int = 8192,
    pipeline_parallel_size: int = 1,
    moe_kernel: str = "marlin",
) -> GPUMemoryEstimate:
    """The KV-cache memory one GPU of the group has left (an estimate, bytes).

    The hidden size of the activation estimate is the model's ``hidden_size`` when its config gives
    one, else query heads × head size (which overstates it for MLA: 128 × 576 for DeepSeek-V3,
    whose residual is 7,168 wide). With ``pipeline_parallel_size`` stages each GPU holds
    ``1 / (tp × pp)`` of the weights. A model whose routed experts are stored apart (gpt-oss's
    MXFP4) has them counted in their own format, padded as vLLM's ``moe_kernel`` pads them
    (see :mod:`kvlab.sizing.weight_bytes`).

    Raises:
        ValueError: an unknown GPU, utilization outside (0, 1], a model without a parameter count,
            or weights and activations that do not fit (by how much).
    """
    profile = get_gpu(gpu)
    require_positive_int(pipeline_parallel_size, "pipeline_parallel_size")
    require_utilization(gpu_memory_utilization)
    if model.num_parameters is None:
        raise ValueError(
            f"model {model.name!r} has no parameter count, so its weights cannot be subtracted; add "
            '"num_parameters" to its config.json or give --kv-cache-memory instead'
        )
    hidden = model.hidden_size or (model.num_attention_heads or 1) * model.layers[0].head_size
    weights = weight_bytes_by_part(
        model.num_parameters,
        weight_dtype,
        tensor_parallel_size,
        model.experts,
        moe_kernel,
        pipeline_parallel_size,
    )
    return kv_cache_memory_from_gpu(
        profile.memory_bytes,
        gpu_memory_utilization,
        weights.total,
        estimate_activation_bytes(max_num_batched_tokens, hidden, tensor_parallel_size),
        weights.describe() if model.experts is not None else "",
    )
