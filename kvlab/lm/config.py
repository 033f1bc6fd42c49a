"""The shape of a llama-architecture model, read from its GGUF metadata (nothing hard-coded)."""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class LlamaConfig:
    """Hyper-parameters of a llama model.

    Attributes:
        num_layers: transformer blocks.
        hidden_size: width of the residual stream.
        intermediate_size: width of the SwiGLU MLP.
        num_q_heads, num_kv_heads: attention heads (grouped-query when they differ).
        head_size: channels per head.
        rope_base: RoPE frequency base θ (frequencies ``θ^(-2i/rope_dim)``).
        rope_dim: channels rotated per head (the GGUF ``rope.dimension_count``).
        rms_norm_eps: ε of RMSNorm.
        vocab_size: tokens in the vocabulary.
        context_length: the longest sequence the model was trained on, in tokens.
    """

    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_q_heads: int
    num_kv_heads: int
    head_size: int
    rope_base: float
    rope_dim: int
    rms_norm_eps: float
    vocab_size: int
    context_length: int

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "intermediate_size", "num_q_heads", "num_kv_heads",
                     "head_size", "rope_dim", "vocab_size", "context_length"):
            require_positive_int(getattr(self, name), name)
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"num_q_heads ({self.num_q_heads}) must be a multiple of num_kv_heads "
                             f"({self.num_kv_heads})")
        if self.rope_dim > self.head_size or self.rope_dim % 2:
            raise ValueError(f"rope_dim must be even and <= head_size ({self.head_size}), "
                             f"got {self.rope_dim}")
        if not (self.rope_base > 1 and self.rms_norm_eps > 0):
            raise ValueError(f"rope_base must be > 1 and rms_norm_eps > 0, got {self.rope_base}, "
                             f"{self.rms_norm_eps}")

    @property
    def kv_bytes_per_token_fp32(self) -> int:
        """Bytes of K and V of one token over all layers in an fp32 cache."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_size * 4
