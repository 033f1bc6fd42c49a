"""Synthetic K/V with the structure of a trained decoder's cache: outlier key channels and RoPE.

Keys of trained LLMs are not i.i.d. noise. Two features matter for quantization:

* **Outlier channels.** A few channels of each key head carry a large, mostly constant offset across
  tokens (a per-channel bias). One per-tensor scale must cover them, which leaves few levels for the
  ordinary channels; a per-token-head scale must still cover them within every row.
* **Rotary position embedding (RoPE).** Keys are rotated pair-wise by ``pos · θ_i`` with
  ``θ_i = base^(-2i/D)``: the pair ``(i, i + D/2)`` turns fast for small ``i`` and slowly for large
  ``i``. An offset on a slow pair stays put over thousands of tokens; on a fast pair it oscillates
  between the two channels, which is visible as stripes in a token × channel picture.

Values get neither (they are not rotated and have no strong channel bias), as in real models.

The generator is exact and seeded: same arguments, same tensors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class SyntheticKVConfig:
    """Knobs of :func:`synthetic_kv`.

    Attributes:
        outlier_strength: offset of the outlier channels in units of the ordinary channels' standard
            deviation (0 = no outliers; real models show 10–50).
        outlier_pairs: rotary pairs per head that carry the offset (each pair = 2 channels).
        rope_base: RoPE base ``θ`` (10,000 in Llama 2, 500,000 in Llama 3).
        rope: apply the rotation (``False`` leaves keys unrotated, to see its effect).
        query_alignment: how much each query head shares the outlier offset of its KV head (0..1);
            real queries do, which makes the outlier channels dominate the attention scores.
    """

    outlier_strength: float = 20.0
    outlier_pairs: int = 2
    rope_base: float = 10_000.0
    rope: bool = True
    query_alignment: float = 0.5


@dataclass(frozen=True)
class SyntheticKV:
    """Generated tensors, all float32.

    Attributes:
        queries: ``[num_tokens, num_q_heads, head_size]``.
        keys, values: ``[num_tokens, num_kv_heads, head_size]``.
        outlier_channels: per KV head, the channel indices that carry the offset.
    """

    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    outlier_channels: list[list[int]]


def rope_rotate(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """Rotate ``x [tokens, heads, D]`` by RoPE (Llama's half-split pairing ``(i, i + D/2)``).

    Args:
        x: the vectors to rotate; ``D`` must be even.
        positions: ``[tokens]`` absolute positions (tokens).
        base: RoPE base θ.
    """
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE needs an even head size, got {d}")
    half = d // 2
    inv_freq = base ** (-torch.arange(half, dtype=torch.float64) * 2 / d)
    angle = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # [tokens, half]
    # angles (large: position × frequency) in float64; the rotation itself in the input's precision
    # when it is float32 or wider (float64 throughout was half of a 1,024-token sample's build time)
    work = torch.promote_types(x.dtype, torch.float32)
    cos, sin = angle.cos().to(work)[:, None, :], angle.sin().to(work)[:, None, :]
    x1, x2 = x[..., :half].to(work), x[..., half:].to(work)
    # both halves written into one new tensor, each as a product then an in-place subtraction or
    # addition: the operations of ``cat([x1·cos − x2·sin, x1·sin + x2·cos])`` with fewer temporaries
    out = torch.empty(x.shape, dtype=work, device=x.device)
    torch.mul(x1, cos, out=out[..., :half]).sub_(x2 * sin)
    torch.mul(x1, sin, out=out[..., half:]).add_(x2 * cos)
    return out.to(x.dtype)


def synthetic_kv(
    num_tokens: int,
    num_kv_heads: int,
    head_size: int,
    *,
    num_q_heads: int | None = None,
    config: SyntheticKVConfig | None = None,
    seed: int = 0,
    generator: torch.Generator | None = None,
) -> SyntheticKV:
    """Queries, keys and values with outlier key channels and RoPE structure.

    Args:
        num_tokens: sequence length (tokens); positions are ``0 .. num_tokens-1``.
        num_kv_heads: KV heads.
        head_size: channels per head (even).
        num_q_heads: query heads (a multiple of ``num_kv_heads``), default ``num_kv_heads``.
        config: the structure knobs (:class:`SyntheticKVConfig`).
        seed: seeds a private generator unless ``generator`` is given.
        generator: draw from this generator instead (advances it).
    """
    require_positive_int(num_tokens, "num_tokens")
    require_positive_int(num_kv_heads, "num_kv_heads")
    require_positive_int(head_size, "head_size", minimum=2)
    if head_size % 2:
        raise ValueError(f"head_size must be even for RoPE, got {head_size}")
    hq = num_kv_heads if num_q_heads is None else require_positive_int(num_q_heads, "num_q_heads")
    if hq % num_kv_heads:
        raise ValueError(f"num_q_heads ({hq}) must be a multiple of num_kv_heads ({num_kv_heads})")
    cfg = config or SyntheticKVConfig()
    if cfg.outlier_strength < 0 or not 0 <= cfg.query_alignment <= 1:
        raise ValueError("outlier_strength must be >= 0 and query_alignment within [0, 1]")
    gen = generator if generator is not None else torch.Generator().manual_seed(seed)
    half = head_size // 2
    pairs = max(0, min(cfg.outlier_pairs, half))

    # per-channel offset: outliers sit on the slowest-turning rotary pairs (the last ones), one
    # random choice among the slowest quarter per head, with a random sign and +-25 % strength
    offset = torch.zeros(num_kv_heads, head_size)
    outliers: list[list[int]] = []
    slow = max(pairs, half // 4)
    for h in range(num_kv_heads):
        chosen = (half - 1 - torch.randperm(slow, generator=gen)[:pairs]).tolist()
        chans = []
        for i in chosen:
            sign = 1.0 if torch.rand(1, generator=gen).item() < 0.5 else -1.0
            size = cfg.outlier_strength * (0.75 + 0.5 * torch.rand(1, generator=gen).item())
            offset[h, i] = sign * size
            offset[h, i + half] = -0.5 * sign * size
            chans += [i, i + half]
        outliers.append(sorted(chans))

    shape = (num_tokens, num_kv_heads, head_size)
    keys = torch.randn(shape, generator=gen).add_(offset)
    values = torch.randn(shape, generator=gen)
    group = hq // num_kv_heads
    q_offset = offset.repeat_interleave(group, dim=0) / max(cfg.outlier_strength, 1.0)
    queries = torch.randn((num_tokens, hq, head_size), generator=gen)
    queries.add_(cfg.query_alignment * 3.0 * q_offset)
    if cfg.rope:
        pos = torch.arange(num_tokens)
        keys = rope_rotate(keys, pos, cfg.rope_base)
        queries = rope_rotate(queries, pos, cfg.rope_base)
    return SyntheticKV(queries.float(), keys.float(), values.float(), outliers)


def synthetic_kv_source(config: SyntheticKVConfig | None = None):
    """A ``kv_source`` for :func:`kvlab.build_paged_example` that draws :func:`synthetic_kv` tensors.

    Each call generates one sequence's K/V from the example's generator.
    """

    def source(num_tokens: int, num_kv_heads: int, head_size: int, generator: torch.Generator):
        data = synthetic_kv(num_tokens, num_kv_heads, head_size, config=config, generator=generator)
        return data.keys, data.values

    return source
