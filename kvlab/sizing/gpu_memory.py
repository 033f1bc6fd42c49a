"""KV-cache memory derived from GPU memory, the way vLLM budgets it at startup (an estimate).

vLLM gives the KV cache what is left of ``gpu_memory_utilization × GPU memory`` after the weights,
the peak activations of a profiling forward pass of ``max_num_batched_tokens`` tokens, and memory
outside PyTorch (CUDA context, NCCL, CUDA graphs). The GPU memory is the total CUDA reports
(``torch.cuda.mem_get_info()``), not the data sheet's decimal GB. vLLM *measures* the weights and
the rest; kvlab estimates them, so the result is labelled an estimate everywhere it is printed.

Worked example (Llama 3.1 8B, bf16 weights, one H100 reporting 79.18 GiB, utilization 0.9)::

    budget      = 0.9 × 79.18 GiB = 0.9 × 85,018,877,624 B  = 76,516,989,861 B
    weights     = 8.03e9 parameters × 2 B                    = 16,060,000,000 B
    activations = 8192 tokens × 4096 × 2 B × 18 + 1 GiB      =  2,281,701,376 B
    KV cache    = 76,516,989,861 − 16.06e9 − 2,281,701,376   = 58,175,288,485 B (54.18 GiB)

(vLLM PR 10511 logged 53.29 GiB for Llama-3-8B on an H100 reporting 79.22 GiB at 0.9: weights
14.96 GiB, activations 1.26 GiB, non-torch 1.79 GiB.)

Mixed-format checkpoints are counted part by part (:func:`weight_bytes_by_part`): gpt-oss keeps its
routed experts in MXFP4 and the rest in bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.validation import require_choice, require_positive_int

#: Bytes per weight of each ``--weight-dtype``: int4 carries one fp16 scale per group of 128
#: weights (GPTQ/AWQ style), nvfp4 one fp8 scale per 16 weights, mxfp4 one 8-bit power-of-two
#: (E8M0) scale per 32 weights (the OCP microscaling format).
WEIGHT_DTYPE_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int4": 0.5 + 2 / 128,
    "nvfp4": 0.5 + 1 / 16,
    "mxfp4": 0.5 + 1 / 32,
}
#: The tensor-core format the weight GEMMs run in: int4 and mxfp4 weights are dequantized to bf16
#: (W4A16, as vLLM's Marlin and Triton MoE kernels do on GPUs without FP4 tensor cores).
WEIGHT_COMPUTE_DTYPE: dict[str, str] = {
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "int4": "bf16",
    "nvfp4": "fp4",
    "mxfp4": "bf16",
}
WEIGHT_DTYPES: tuple[str, ...] = tuple(WEIGHT_DTYPE_BYTES)

#: Activation bytes per batched token and hidden unit in the profiling pass (MLP intermediates,
#: residuals, logits), and the memory outside PyTorch: assumptions of this estimate, not measurements.
ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN = 2 * 18
NON_TORCH_BYTES = 2**30


def weight_bytes(num_parameters: int, weight_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
    """Bytes of the weights on one GPU: ``num_parameters × bytes per weight / tensor_parallel_size``."""
    require_positive_int(num_parameters, "num_parameters")
    require_choice(weight_dtype, WEIGHT_DTYPES, "weight_dtype")
    require_positive_int(tensor_parallel_size, "tensor_parallel_size")
    return int(num_parameters * WEIGHT_DTYPE_BYTES[weight_dtype] / tensor_parallel_size)


def estimate_activation_bytes(
    max_num_batched_tokens: int, hidden_size: int, tensor_parallel_size: int = 1
) -> int:
    """Peak activations of vLLM's profiling pass plus memory outside PyTorch (bytes, estimated):
    ``tokens × hidden × 36 B / tp + 1 GiB``."""
    require_positive_int(max_num_batched_tokens, "max_num_batched_tokens")
    require_positive_int(hidden_size, "hidden_size")
    require_positive_int(tensor_parallel_size, "tensor_parallel_size")
    per_gpu = (
        max_num_batched_tokens * hidden_size * ACTIVATION_BYTES_PER_TOKEN_PER_HIDDEN // tensor_parallel_size
    )
    return per_gpu + NON_TORCH_BYTES


@dataclass(frozen=True)
class GPUMemoryEstimate:
    """How one GPU's memory is split (bytes).

    Attributes:
        gpu_memory_bytes: the GPU's memory.
        gpu_memory_utilization: the fraction vLLM may use.
        budget_bytes: ``gpu_memory_utilization × gpu_memory_bytes``.
        weight_bytes: weights on this GPU.
        activation_bytes: estimated activations and memory outside PyTorch.
        kv_cache_bytes: what is left for the KV cache.
        weight_detail: how the weights were counted (``WeightBytes.describe()``), ``""`` = one dtype.
    """

    gpu_memory_bytes: int
    gpu_memory_utilization: float
    budget_bytes: int
    weight_bytes: int
    activation_bytes: int
    kv_cache_bytes: int
    weight_detail: str = ""

    def describe(self) -> str:
        """One line, e.g. ``KV cache 54.18 GiB (estimate) = 0.90 × 79.18 GiB − weights … − activations …``."""
        g = 2**30
        weights = self.weight_detail or f"weights {self.weight_bytes / g:.2f} GiB"
        return (
            f"KV cache {self.kv_cache_bytes / g:.2f} GiB (estimate) = {self.gpu_memory_utilization:.2f} × "
            f"{self.gpu_memory_bytes / g:.2f} GiB − {weights} − "
            f"activations and non-torch memory {self.activation_bytes / g:.2f} GiB (estimated)"
        )


def require_utilization(value: object) -> float:
    """Return ``value`` if it is a number in (0, 1], else raise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"gpu_memory_utilization must be a number in (0, 1], got {value!r}")
    return float(value)


def kv_cache_memory_from_gpu(
    gpu_memory_bytes: int,
    gpu_memory_utilization: float,
    weight_bytes: int,
    activation_bytes: int,
    weight_detail: str = "",
) -> GPUMemoryEstimate:
    """The KV-cache memory left on one GPU (``gpu_memory_bytes``: the total CUDA reports).

    Raises:
        ValueError: utilization outside (0, 1]; weights and activations that do not fit the budget
            (the message says by how much).
    """
    require_positive_int(gpu_memory_bytes, "gpu_memory_bytes")
    util = require_utilization(gpu_memory_utilization)
    require_positive_int(weight_bytes, "weight_bytes")
    require_positive_int(activation_bytes, "activation_bytes", minimum=0)
    budget = int(util * gpu_memory_bytes)
    left = budget - weight_bytes - activation_bytes
    if left <= 0:
        g = 2**30
        raise ValueError(
            f"the weights ({weight_bytes / g:.2f} GiB per GPU) and estimated activations "
            f"({activation_bytes / g:.2f} GiB) exceed gpu_memory_utilization × GPU memory "
            f"({util:.2f} × {gpu_memory_bytes / g:.2f} GiB = {budget / g:.2f} GiB) by {-left / g:.2f} GiB; "
            "use a GPU with more memory, more tensor parallelism, smaller weights or a higher utilization"
        )
    return GPUMemoryEstimate(
        gpu_memory_bytes, util, budget, weight_bytes, activation_bytes, left, weight_detail
    )
