"""Weight bytes of one GPU, part by part, for checkpoints that store parts in different formats.

gpt-oss keeps its routed experts in MXFP4 (4-bit E2M1 values, one E8M0 scale per 32: 0.53125 B a
weight) and attention, router, embeddings and LM head in bf16, so its weights are
``experts × 0.53125 B + rest × 2 B``; counting all of them as bf16 overstates them 3.6-fold.

vLLM also pads the MXFP4 expert matrices to its MoE kernel's tiles
(``Mxfp4MoEMethod.create_weights`` in vllm/model_executor/layers/quantization/mxfp4.py):

- ``"marlin"``, the weight-only kernel vLLM 0.10-0.11 used on Hopper and Ampere: the hidden size is
  rounded up to 256 and each GPU's expert intermediate size to 128;
- ``"triton"`` (vLLM's default on Hopper once triton_kernels is installed, 0.12 and later): only the
  intermediate size, to 64. Its Hopper layouts are swizzled afterwards, which kvlab does not model.

Worked example, gpt-oss-120b on one GPU with Marlin (36 layers × 128 experts, hidden 2,880 → 3,072,
intermediate 2,880 → 2,944; 116.8e9 weights in all, 114,661,785,600 of them in experts)::

    experts = 36 × 128 × 3 × 3,072 × 2,944 × 0.53125 B     = 66,418,900,992 B
    rest    = (116.8e9 − 114,661,785,600) × 2 B              =  4,276,428,800 B
    total   = 70,695,329,792 B = 65.84 GiB

vLLM 0.11.2 logged "Model loading took 65.97 GiB" with the Marlin fallback (−0.13 GiB here); vLLM
0.14.1 logged 64.38 GiB with the Triton backend, where kvlab's 60.71 GiB leaves 3.67 GiB unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvlab.sizing.gpu_memory import WEIGHT_DTYPE_BYTES, WEIGHT_DTYPES
from kvlab.validation import require_choice, require_positive_int

if TYPE_CHECKING:
    from kvlab.models.experts import ExpertWeights

#: ``(hidden multiple, intermediate multiple)`` vLLM pads MXFP4 experts to, per MoE kernel.
MOE_KERNEL_PADDING: dict[str, tuple[int, int]] = {"marlin": (256, 128), "triton": (1, 64)}
MOE_KERNELS: tuple[str, ...] = tuple(MOE_KERNEL_PADDING)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


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
    hidden_multiple, width_multiple = MOE_KERNEL_PADDING[moe_kernel]
    hidden = _round_up(experts.hidden_size, hidden_multiple)
    width = _round_up(-(-experts.intermediate_size // tensor_parallel_size), width_multiple)
    per_layer = experts.num_experts * 3 * hidden * width
    expert_bytes = int(
        experts.num_layers * per_layer * WEIGHT_DTYPE_BYTES[experts.dtype] / pipeline_parallel_size
    )
    rest = int((num_parameters - experts.num_parameters) * WEIGHT_DTYPE_BYTES[weight_dtype] / gpus)
    return WeightBytes(expert_bytes, rest, weight_dtype, experts.dtype, moe_kernel)
