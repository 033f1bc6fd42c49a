"""Mamba and linear-attention layers: a fixed state per request instead of a growing cache.

The state shapes follow vLLM's ``MambaStateShapeCalculator``
(``vllm/model_executor/layers/mamba/mamba_utils.py``); every size is per GPU of a tensor-parallel
group of ``tp`` GPUs:

* ``mamba1`` (Jamba): conv ``(intermediate / tp, conv_kernel - 1)``, SSM ``(intermediate / tp, state)``.
* ``mamba2`` (Nemotron-H, Granite 4.0-H, Falcon-H1): groups are first padded so that they split
  (``n_groups += tp - n_groups`` when ``tp`` does not divide them); conv
  ``((intermediate + 2 × n_groups × state) / tp, conv_kernel - 1 + spec)``, SSM
  ``(heads / tp, head_dim, state)``.
* ``gated_delta_net`` (Qwen3-Next, Qwen3.5/3.6): conv ``((2 × k_heads × k_dim + v_heads × v_dim) / tp,
  conv_kernel - 1 + spec)``, recurrent ``(v_heads / tp, v_dim, k_dim)``.

``spec`` is the number of speculative tokens (the conv window keeps that many more rows). The conv
state is stored in the model dtype; the SSM/recurrent state in ``ssm_dtype`` when it is set
(``mamba_ssm_cache_dtype``), else the model dtype.

Example: Qwen3-Next-80B-A3B layer (16 k-heads × 128, 32 v-heads × 128, kernel 4), TP 1, bf16:
conv 3 × 8,192 × 2 = 49,152 B, recurrent 32 × 128 × 128 × 2 = 1,048,576 B: 1,097,728 B per request.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from kvlab.validation import require_choice, require_positive_int

STATE_KINDS = ("mamba1", "mamba2", "gated_delta_net")
STATE_DTYPE_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "float32": 4}
_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def _split(value: int, tp: int, what: str, layer: str) -> int:
    if value % tp:
        raise ValueError(
            f"state layer {layer!r}: {what} ({value}) does not split evenly over tensor_parallel_size={tp}"
        )
    return value // tp


@dataclass(frozen=True)
class StateLayerKV:
    """One Mamba / linear-attention layer as the cache sees it (whole model, before TP).

    Attributes:
        name: layer name.
        kind: ``"mamba1"``, ``"mamba2"`` or ``"gated_delta_net"``.
        conv_kernel: causal-convolution width (the conv state keeps ``conv_kernel - 1`` rows).
        state_size: SSM state size N (mamba) / unused for gated DeltaNet.
        intermediate_size: mamba inner width (``expand × hidden`` or ``heads × head_dim``).
        n_groups: mamba2 B/C groups.
        num_heads: mamba2 heads.
        head_dim: mamba2 head size.
        num_k_heads, num_v_heads, head_k_dim, head_v_dim: gated-DeltaNet key/value heads and sizes.
        ssm_dtype: dtype of the SSM/recurrent state (``"auto"`` = the model dtype).
    """

    name: str
    kind: str
    conv_kernel: int
    state_size: int = 0
    intermediate_size: int = 0
    n_groups: int = 1
    num_heads: int = 0
    head_dim: int = 0
    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0
    ssm_dtype: str = "auto"

    def __post_init__(self) -> None:
        require_choice(self.kind, STATE_KINDS, f"kind of state layer {self.name!r}")
        require_positive_int(self.conv_kernel, f"conv_kernel of state layer {self.name!r}")
        require_choice(self.ssm_dtype, tuple(STATE_DTYPE_BYTES), f"ssm_dtype of state layer {self.name!r}")
        needed = {
            "mamba1": ("intermediate_size", "state_size"),
            "mamba2": ("intermediate_size", "state_size", "n_groups", "num_heads", "head_dim"),
            "gated_delta_net": ("num_k_heads", "num_v_heads", "head_k_dim", "head_v_dim"),
        }[self.kind]
        for field in needed:
            require_positive_int(getattr(self, field), f"{field} of state layer {self.name!r}")

    def state_shapes(
        self, tensor_parallel_size: int = 1, num_speculative_tokens: int = 0
    ) -> tuple[tuple[int, ...], ...]:
        """``(conv shape, ssm/recurrent shape)`` on one GPU (elements)."""
        tp, spec, name = tensor_parallel_size, num_speculative_tokens, self.name
        require_positive_int(tp, "tensor_parallel_size")
        if self.kind == "mamba1":
            inner = _split(self.intermediate_size, tp, "intermediate_size", name)
            return (inner, self.conv_kernel - 1), (inner, self.state_size)
        if self.kind == "mamba2":
            groups = self.n_groups if self.n_groups % tp == 0 else tp  # vLLM pads groups to split them
            conv_dim = self.intermediate_size + 2 * groups * self.state_size
            return (
                (_split(conv_dim, tp, "conv dimension", name), self.conv_kernel - 1 + spec),
                (_split(self.num_heads, tp, "mamba heads", name), self.head_dim, self.state_size),
            )
        conv_dim = 2 * self.num_k_heads * self.head_k_dim + self.num_v_heads * self.head_v_dim
        return (
            (_split(conv_dim, tp, "conv dimension", name), self.conv_kernel - 1 + spec),
            (_split(self.num_v_heads, tp, "value heads", name), self.head_v_dim, self.head_k_dim),
        )

    def state_element_bytes(self, model_dtype: str) -> tuple[int, int]:
        """Bytes per element of the conv state and of the SSM/recurrent state."""
        conv = _MODEL_DTYPE_BYTES[model_dtype]
        return conv, STATE_DTYPE_BYTES[self.ssm_dtype] or conv

    def state_bytes(
        self, tensor_parallel_size: int = 1, model_dtype: str = "bfloat16", num_speculative_tokens: int = 0
    ) -> int:
        """Bytes of one request's state in this layer on one GPU."""
        shapes = self.state_shapes(tensor_parallel_size, num_speculative_tokens)
        sizes = self.state_element_bytes(model_dtype)
        return sum(prod(s) * b for s, b in zip(shapes, sizes, strict=True))
