"""Weight bytes of one GPU, part by part, for checkpoints that store parts in different formats.

gpt-oss keeps its routed experts in MXFP4 (4-bit E2M1 values, one E8M0 scale per 32: 0.53125 B a
weight) and attention, router, embeddings and LM head in bf16, so its weights are
``experts × 0.53125 B + rest × 2 B``; counting all of them as bf16 overstates them 3.6-fold.

vLLM also pads the MXFP4 expert matrices to its MoE kernel's tiles:

- ``"marlin"``, the weight-only kernel vLLM 0.10-0.11 used on Hopper and Ampere: the hidden size is
  rounded up to 256 and each GPU's expert intermediate size to 128
  (``Mxfp4MoEMethod.create_weights`` in vllm/model_executor/layers/quantization/mxfp4.py);
- ``"triton"``, vLLM's Hopper default once triton_kernels is installed (0.12 and later): vLLM
  rounds the intermediate size to 64, then triton_kernels swizzles each matrix for Hopper's MMA
  (``HopperMXValueLayout`` / ``HopperMXScaleLayout``, triton python/triton_kernels,
  tensor_details/layout_details): the value bytes, ``reduction/2 × output``, are padded to
  ``64 × 256`` and the scale bytes, ``output × reduction/32``, to ``256 × 2`` (8 warps). Older
  triton_kernels releases padded only to the 16 × 32 MMA tile, so this is the layout of recent ones.

Worked example, gpt-oss-120b on one GPU (36 layers × 128 experts, hidden 2,880, intermediate
2,880; 116.8e9 weights in all, 114,661,785,600 of them in experts; rest 4,276,428,800 B bf16)::

    marlin: experts 36 × 128 × 3 × 3,072 × 2,944 × 0.53125 B          = 66,418,900,992 B
            total 70,695,329,792 B = 65.84 GiB   (vLLM 0.11.2 logged 65.97 GiB)
    triton: per expert, gate+up values 1,472 × 5,888 + scales 5,888 × 90,
            down values 1,472 × 3,072 + scales 3,072 × 90                = 13,995,520 B
            experts 36 × 128 × 13,995,520 = 64,491,356,160 B
            total 68,767,784,960 B = 64.04 GiB   (vLLM 0.14.1 logged 64.38 GiB)

Not modelled: the Triton path keeps expert biases in fp32 (+0.07 GiB for gpt-oss-120b); the rest of
the 0.13 / 0.34 GiB gaps is unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvlab.sizing.gpu_memory import WEIGHT_DTYPE_BYTES, WEIGHT_DTYPES
from kvlab.validation import require_choice, require_positive_int

if TYPE_CHECKING:
    from kvlab.models.experts import ExpertWeights

#: The MoE kernels whose MXFP4 padding kvlab models (see the module docstring).
MOE_KERNELS: tuple[str, ...] = ("marlin", "triton")


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def expert_bytes_per_layer(experts: ExpertWeights, tensor_parallel_size: int, moe_kernel: str) -> int:
    """MXFP4 bytes of one MoE layer's experts on one GPU, padded as ``moe_kernel`` pads them."""
    width = -(-experts.intermediate_size // tensor_parallel_size)
    if moe_kernel == "marlin":
        hidden, width = _round_up(experts.hidden_size, 256), _round_up(width, 128)
        return int(experts.num_experts * 3 * hidden * width * WEIGHT_DTYPE_BYTES[experts.dtype])
    hidden, width = experts.hidden_size, _round_up(width, 64)

    def matrix(reduction: int, output: int) -> int:  # Hopper-swizzled values + scales
        values = _round_up(reduction // 2, 64) * _round_up(output, 256)
        return values + _round_up(output, 256) * _round_up(reduction // 32, 2)

    return experts.num_experts * (matrix(hidden, 2 * width) + matrix(width, hidden))


@dataclass(frozen=True)
class WeightBytes:
    """Weights on one GPU (bytes).

    Attributes:
        experts: the routed experts stored in their own format (0 when the checkpoint has none).
        rest: every other weight.
        weight_dtype: the format of ``rest``.
        expert_dtype: the format of ``experts`` (``None`` = no separate experts).
        moe_kernel: the vLLM MoE kernel whose padding ``experts`` includes.
    """

    experts: int
    rest: int
    weight_dtype: str
    expert_dtype: str | None = None
    moe_kernel: str | None = None

    @property
    def total(self) -> int:
        """All weights on this GPU (bytes)."""
        return self.experts + self.rest

    def describe(self) -> str:
        """``weights 65.84 GiB`` or, with experts apart, their split and the padding assumed."""
        g = 2**30
        if self.expert_dtype is None:
            return f"weights {self.total / g:.2f} GiB ({self.weight_dtype})"
        return (
            f"weights {self.total / g:.2f} GiB (experts {self.experts / g:.2f} GiB {self.expert_dtype}, "
            f"padded for vLLM's {self.moe_kernel} MoE kernel, + rest {self.rest / g:.2f} GiB "
            f"{self.weight_dtype})"
        )


def weight_bytes_by_part(
    num_parameters: int,
    weight_dtype: str = "bf16",
    tensor_parallel_size: int = 1,
    experts: ExpertWeights | None = None,
    moe_kernel: str = "marlin",
    pipeline_parallel_size: int = 1,
) -> WeightBytes:
    """Weights on one GPU of ``tensor_parallel_size × pipeline_parallel_size`` (bytes, estimated).

    Without ``experts``: ``num_parameters × bytes(weight_dtype) / (tp × pp)``. With them, the rest is
    counted that way and the experts in their own format, each GPU holding ``1 / pp`` of the MoE
    layers and ``1 / tp`` of every expert's intermediate width, padded as ``moe_kernel`` pads it.
    Embeddings and LM head are taken to split like the rest (vLLM keeps them on the first and last
    pipeline stage).

    Raises:
        ValueError: an unknown dtype or kernel; experts with more weights than ``num_parameters``.
    """
    require_positive_int(num_parameters, "num_parameters")
    require_choice(weight_dtype, WEIGHT_DTYPES, "weight_dtype")
    require_positive_int(tensor_parallel_size, "tensor_parallel_size")
    require_positive_int(pipeline_parallel_size, "pipeline_parallel_size")
    gpus = tensor_parallel_size * pipeline_parallel_size
    if experts is None:
        return WeightBytes(0, int(num_parameters * WEIGHT_DTYPE_BYTES[weight_dtype] / gpus), weight_dtype)
    require_choice(moe_kernel, MOE_KERNELS, "moe_kernel")
    if experts.num_parameters > num_parameters:
        raise ValueError(
            f"the experts' {experts.num_parameters:,} weights exceed num_parameters ({num_parameters:,})"
        )
    per_layer = expert_bytes_per_layer(experts, tensor_parallel_size, moe_kernel)
    expert_bytes = experts.num_layers * per_layer // pipeline_parallel_size
    rest = int((num_parameters - experts.num_parameters) * WEIGHT_DTYPE_BYTES[weight_dtype] / gpus)
    return WeightBytes(expert_bytes, rest, weight_dtype, experts.dtype, moe_kernel)
