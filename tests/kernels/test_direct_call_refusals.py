"""``kvlab.kernels.paged_attention`` called directly (not through ``kvlab.attention``) refuses the same
bad inputs with the same one-line messages, before anything is launched: the output it was handed
keeps its NaN poison."""

from __future__ import annotations

import math

import pytest
import torch

import kvlab
from kvlab.cache import AttentionBatch, PagedKVCache
from kvlab.kernels import paged_attention, prepare_paged_attention

from .conftest import poisoned


def _call(target, block_size=16):
    """One sequence of 5 tokens (1 new) in block 1 of a 4-block bf16 cache; 4 query heads over 2 KV heads."""
    cache = PagedKVCache.allocate("bfloat16", 4, block_size, 2, 8, device=target.device)
    batch = AttentionBatch.from_lengths([1], [5], [[1]], device=target.device)
    query = torch.randn(1, 4, 8, dtype=torch.bfloat16, device=target.device)
    return query, cache, batch


def _refusals(target, block_size=16, **options):
    """The messages of the direct call and of ``kvlab.attention(..., backend="triton")``."""
    query, cache, batch = _call(target, block_size)
    out = poisoned((1, 4, 8), torch.bfloat16, target.device)
    messages = []
    for run in (lambda: paged_attention(query, cache, batch, out=out, **options),
                lambda: kvlab.attention(query, cache, batch, backend="triton", **options)):
        with pytest.raises(ValueError) as caught:
            run()
        messages.append(str(caught.value))
    assert torch.isnan(out).all(), "a refused call must not write its output"
    return messages


@pytest.mark.parametrize(("block_size", "nearest"), [(7, "4 and 8"), (24, "16 and 32")])
def test_a_block_size_that_is_not_a_power_of_two(target, block_size, nearest):
    direct, public = _refusals(target, block_size)
    assert direct == public == (
        f"block_size must be a power of two (the Triton kernels tile whole blocks), got {block_size}; "
        f"the nearest are {nearest}"
    )


@pytest.mark.parametrize("scale", [math.nan, -1.0, 0.0, math.inf, "0.1", True])
def test_a_scale_that_is_not_finite_and_positive(target, scale):
    direct, public = _refusals(target, scale=scale)
    assert direct == public
    assert direct.startswith("scale must be a finite number > 0 (multiplies q.k; None for 1/sqrt(head_size))")
    assert direct.endswith(f"got {scale!r}")


@pytest.mark.parametrize("softcap", [math.inf, math.nan, -1.0, 0.0])
def test_a_softcap_that_is_not_finite_and_positive(target, softcap):
    direct, public = _refusals(target, softcap=softcap)
    assert direct == public == f"softcap must be None (no cap) or a finite number > 0, got {softcap!r}"


def test_prepare_refuses_like_the_call(target):
    """The launcher used by benchmarks shares the checks: no tiling is chosen for a 24-token block."""
    query, cache, batch = _call(target, 24)
    message = r"block_size must be a power of two .* got 24; the nearest are 16 and 32"
    with pytest.raises(ValueError, match=message):
        prepare_paged_attention(query, cache, batch)
