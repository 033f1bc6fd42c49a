"""Rotary position embedding (RoPE) on *adjacent* channel pairs, as GGUF llama weights need.

For channel pair ``i`` of a head (channels ``2i`` and ``2i + 1``) and absolute position ``p``::

    θ_i = base^(-2i / rope_dim),   a = p · θ_i
    x'_{2i}     = x_{2i} cos a − x_{2i+1} sin a
    x'_{2i+1}   = x_{2i} sin a + x_{2i+1} cos a

The original Hugging Face checkpoint pairs channel ``i`` with ``i + D/2`` instead; the GGUF converter
permuted the Q and K rows so that adjacent pairing gives the same result. Rotating the wrong pairs
still runs and produces plausible-looking text, but perplexity rises and agreement with llama.cpp
drops, which is how the tests catch it.
"""

from __future__ import annotations

import torch


def rope_angles(positions: torch.Tensor, rope_dim: int, base: float) -> torch.Tensor:
    """``exp(i·a)`` per token and channel pair: complex64 ``[num_tokens, rope_dim // 2]``."""
    inv_freq = base ** (-torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    angles = positions.to(torch.float64).cpu()[:, None] * inv_freq[None, :]
    return torch.polar(torch.ones_like(angles), angles).to(torch.complex64).to(positions.device)


def apply_rope(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotate adjacent channel pairs of ``x [num_tokens, num_heads, head_size]`` by ``rotation``.

    A pair ``(x_{2i}, x_{2i+1})`` read as the complex number ``x_{2i} + i·x_{2i+1}`` and multiplied
    by ``exp(i·a)`` gives exactly the two formulas above. Only the first ``2 * rotation.shape[1]``
    channels rotate; the rest pass through.
    """
    rot = 2 * rotation.shape[1]
    pairs = torch.view_as_complex(x[..., :rot].float().unflatten(-1, (-1, 2)).contiguous())
    out = torch.view_as_real(pairs * rotation[:, None, :]).flatten(-2).to(x.dtype)
    return out if rot == x.shape[-1] else torch.cat((out, x[..., rot:]), dim=-1)
