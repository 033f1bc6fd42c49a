"""Page-size unification for hybrid attention + Mamba / linear-attention models.

State layers and attention layers share one pool of blocks, so their pages must be equal. vLLM
(``_align_hybrid_block_size`` in ``vllm/platforms/interface.py``; earlier
``HybridAttentionMambaModelConfig`` in ``vllm/model_executor/models/config.py``) does it before the
specs exist:

1. ``attn_1`` = bytes one token costs in an attention layer (K+V, or the MLA latent);
2. without state prefix caching, the attention block size becomes the smallest multiple of the
   kernel alignment (16; 64 for FlashMLA) whose page holds a state:
   ``B = align × cdiv(state, align × attn_1)``; with state prefix caching (``"align"``) older vLLM
   rounded to a multiple of ``lcm(chunk, align)`` instead (``chunk`` = the mamba kernel chunk; pass
   ``chunk_size`` for that) — v0.24 start-up logs of Qwen3.6 with prefix caching match the plain
   alignment, which is the default here;
3. a user block size is kept only when it is at least that large;
4. the state page is padded to exactly ``B × attn_1`` (vLLM logs "Padding mamba page size by x%").

Example: Qwen3-Next-80B-A3B at TP 4, bf16: attention 1 KV head × 256 × 2 (K, V) × 2 B = 1,024 B per
token; state 274,432 B → ``B = 16 × cdiv(274,432, 16,384) = 272`` tokens, page 278,528 B
(state padded by 1.49 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

from kvlab.sizing.specs import cdiv
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class HybridBlockChoice:
    """The block size and padding vLLM settles on for a hybrid model.

    Attributes:
        block_size: attention block size (tokens).
        page_size_bytes: the common page (bytes) of attention and state layers.
        state_bytes: one request's state in one layer, unpadded (bytes).
        raised: True when the block size was raised above the requested one (vLLM logs it).
        log_lines: the lines vLLM prints about it.
    """

    block_size: int
    page_size_bytes: int
    state_bytes: int
    raised: bool
    log_lines: tuple[str, ...]

    @property
    def padding_percent(self) -> float:
        """How much the state page was padded, in percent of the state."""
        return 100 * (self.page_size_bytes - self.state_bytes) / self.state_bytes


def hybrid_block_size(
    attention_bytes_per_token: int,
    state_bytes: int,
    requested_block_size: int | None = None,
    *,
    alignment: int = 16,
    mamba_cache_mode: str = "none",
    chunk_size: int | None = None,
) -> HybridBlockChoice:
    """Choose the attention block size so that one attention page holds one state page.

    Args:
        attention_bytes_per_token: bytes one token costs in one attention layer on one GPU.
        state_bytes: bytes of one request's state in one state layer on one GPU.
        requested_block_size: ``--block-size`` (tokens), or ``None`` when not given.
        alignment: the attention kernel's block alignment (16; 64 for FlashMLA).
        mamba_cache_mode: ``"none"``, ``"align"`` or ``"all"``.
        chunk_size: in ``"align"`` mode, round to ``lcm(chunk_size, alignment)`` (older vLLM); ``None``
            keeps the plain alignment.
    """
    require_positive_int(attention_bytes_per_token, "attention_bytes_per_token")
    require_positive_int(state_bytes, "state_bytes")
    require_positive_int(alignment, "alignment")
    if mamba_cache_mode == "align" and chunk_size is not None:
        require_positive_int(chunk_size, "chunk_size")
        step = lcm(chunk_size, alignment)
        needed = step * cdiv(cdiv(state_bytes, attention_bytes_per_token), step)
    else:
        needed = alignment * cdiv(state_bytes, alignment * attention_bytes_per_token)
    raised = requested_block_size is None or requested_block_size < needed
    block = needed if raised else requested_block_size
    page = block * attention_bytes_per_token
    lines = []
    if raised:
        lines.append(
            f"Setting attention block size to {block} tokens to ensure that attention page size is "
            ">= mamba page size."
        )
    if page != state_bytes:
        lines.append(
            f"Padding mamba page size by {100 * (page - state_bytes) / state_bytes:.2f}% to ensure that "
            "mamba page size and attention page size are exactly equal."
        )
    return HybridBlockChoice(block, page, state_bytes, raised, tuple(lines))
