"""Bad attention options get one clear ValueError at the public API, before any arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

import kvlab
from kvlab.cache import AttentionBatch, PagedKVCache
from kvlab.reference import reference_attention


def _inputs(gen, v_heads=2):
    batch = AttentionBatch.from_lengths([2], [5], [[0, 1]])
    q = torch.randn(2, 4, 8, generator=gen)
    k = [torch.randn(5, 2, 8, generator=gen)]
    v = [torch.randn(5, v_heads, 8, generator=gen)]
    return q, k, v, batch


@pytest.mark.parametrize("softcap", [math.inf, math.nan, -1.0, 0.0, True])
def test_softcap_must_be_finite_and_positive(gen, softcap):
    """c = inf would give inf * tanh(S / inf) = inf * 0 = NaN in every score."""
    q, k, v, batch = _inputs(gen)
    with pytest.raises(ValueError, match=r"softcap must be None \(no cap\) or a finite number > 0"):
        reference_attention(q, k, v, batch, softcap=softcap)


@pytest.mark.parametrize("scale", [math.nan, -1.0, 0.0, math.inf, "0.1"])
def test_softmax_scale_must_be_finite_and_positive(gen, scale):
    q, k, v, batch = _inputs(gen)
    with pytest.raises(ValueError, match=r"scale must be a finite number > 0"):
        reference_attention(q, k, v, batch, scale=scale)


def test_a_valid_softcap_and_scale_still_work(gen):
    """One query row, one key: softmax over a single score is 1, so the output is that key's value,
    whatever the (finite, positive) scale and cap."""
    batch = AttentionBatch.from_lengths([1], [1], [[0]])
    q = torch.randn(1, 2, 4, generator=gen)
    k, v = torch.randn(1, 1, 4, generator=gen), torch.randn(1, 1, 4, generator=gen)
    out = reference_attention(q, [k], [v], batch, scale=0.3, softcap=30.0)
    torch.testing.assert_close(out, v.double().expand(1, 2, 4), rtol=0, atol=0)


def test_values_with_another_head_count_than_keys_are_named(gen):
    q, k, v, batch = _inputs(gen, v_heads=1)
    message = r"values\[0\] must be \[seq_len, 2, head_size_v\] \(as many heads as keys\), got \(5, 1, 8\)"
    with pytest.raises(ValueError, match=message):
        reference_attention(q, k, v, batch)


def test_a_cache_with_another_head_count_for_v_is_refused():
    key = torch.zeros(2, 4, 2, 8, dtype=torch.bfloat16)
    value = torch.zeros(2, 4, 1, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="key and value must agree on"):
        PagedKVCache("bfloat16", key, value)


@pytest.mark.parametrize(("block_size", "nearest"), [(7, "4 and 8"), (24, "16 and 32")])
def test_kernel_block_sizes_must_be_powers_of_two(block_size, nearest):
    """The reference takes any block size; the Triton path refuses 7 and 24 before compiling anything."""
    from kvlab.kernels.devices import INTERPRET

    # where the Triton kernels read (else the device check refuses first)
    device = "cpu" if INTERPRET else "cuda"
    cache = PagedKVCache.allocate("bfloat16", 4, block_size, 2, 8, device=device)
    batch = AttentionBatch.from_lengths([1], [5], [[1]], device=device)
    q = torch.randn(1, 4, 8, dtype=torch.bfloat16, device=device)
    message = f"block_size must be a power of two .*got {block_size}; the nearest are {nearest}"
    with pytest.raises(ValueError, match=message):
        kvlab.attention(q, cache, batch, backend="triton")
