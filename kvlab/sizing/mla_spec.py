"""Multi-head latent attention (DeepSeek V2/V3/R1/V3.2, Kimi K2): one compressed "head" per token.

An MLA layer caches, per token, one latent vector of ``kv_lora_rank`` elements plus the shared RoPE
key of ``qk_rope_head_dim`` elements (512 + 64 = 576 for DeepSeek V3) and **no separate V**: V is
re-projected from the latent. Every GPU of a tensor-parallel group holds the whole latent (it is not
split by TP), so TP does not shrink the per-GPU cache of an MLA model.

Page size, as vLLM's ``MLAAttentionSpec.real_page_size_bytes`` (``vllm/v1/kv_cache_interface.py``):

* bf16 / fp16: ``block_size × num_kv_heads × head_size × 2`` (1,152 B per token for 576 elements);
* ``fp8`` / ``fp8_e4m3``: one byte per element (576 B per token);
* ``fp8_ds_mla`` (FlashMLA sparse layout): a fixed **656 B per token**: 512 fp8 latent values, four
  fp32 tile scales (16 B) and the 64 RoPE values kept in bf16 (128 B).

Example: DeepSeek V3, 61 MLA layers, bf16, block 64: page = 64 × 576 × 2 = 73,728 B per layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from kvlab.sizing.specs import MODEL_DTYPES, FullAttentionSpec
from kvlab.validation import require_choice, require_positive_int

#: ``--kv-cache-dtype`` values an MLA layer accepts, with the bytes of one element.
MLA_ELEMENT_BYTES: dict[str, int | None] = {
    "auto": None,  # the model dtype
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_ds_mla": None,  # fixed 656 B per token
}

#: Bytes one token costs in the ``fp8_ds_mla`` layout: 512 fp8 + 4 fp32 scales + 64 bf16 RoPE values.
FP8_DS_MLA_TOKEN_BYTES = 512 + 4 * 4 + 64 * 2

_MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    """A full-attention MLA layer: K only (the latent + RoPE key), one head, not split by TP.

    Attributes:
        element_bytes: when set, bytes per element whatever ``kv_cache_dtype`` (DeepSeek V3.2's
            indexer keys are always fp8 with their scales folded into ``head_size``).
    """

    kind: ClassVar[str] = "full"

    element_bytes: int | None = None

    def __post_init__(self) -> None:
        require_positive_int(self.block_size, "block_size")
        require_positive_int(self.num_kv_heads, "num_kv_heads")
        require_positive_int(self.head_size, "head_size")
        require_positive_int(self.dcp_world_size, "decode_context_parallel_size")
        object.__setattr__(self, "head_size_v", self.head_size)
        require_choice(self.model_dtype, MODEL_DTYPES, "model_dtype")
        require_choice(self.kv_cache_dtype, tuple(MLA_ELEMENT_BYTES), "kv_cache_dtype of an MLA layer")
        if self.element_bytes is not None:
            require_positive_int(self.element_bytes, "element_bytes")
        if self.page_size_padded is not None and self.page_size_padded < self.real_page_size_bytes:
            raise ValueError(
                f"page_size_padded ({self.page_size_padded} B) must be >= the real page "
                f"({self.real_page_size_bytes} B)"
            )

    @cached_property
    def real_page_size_bytes(self) -> int:
        """Bytes of one block: ``B × heads × head_size × element bytes``, or ``B × 656`` (fp8_ds_mla)."""
        if self.element_bytes is not None:
            return self.block_size * self.num_kv_heads * self.head_size * self.element_bytes
        if self.kv_cache_dtype == "fp8_ds_mla":
            return self.block_size * FP8_DS_MLA_TOKEN_BYTES
        elt = MLA_ELEMENT_BYTES[self.kv_cache_dtype] or _MODEL_DTYPE_BYTES[self.model_dtype]
        return self.block_size * self.num_kv_heads * self.head_size * elt
