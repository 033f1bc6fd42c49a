"""fp8 overflow and NaN/Inf inputs: the kernels (compiled on a GPU, or in the interpreter) behave exactly
as the CPU reference does.

* Refusal: with ``check_finite=True`` both writers refuse NaN/Inf in stored rows with the same message,
  and both accept any value in padding rows (negative slots), which are never stored.
* Overflow: per-tensor fp8 saturates |x| / scale > FMAX to ±FMAX (±Inf included), bit for bit as the
  CPU reference, and counts the saturated values alike.
* NaN kept: with ``check_finite=False`` a NaN input stays NaN in the per-tensor fp8 code (it is not
  turned into a number) on both paths.
* Attention over a cache full of ±FMAX codes stays finite and matches the float64 reference.

The reference always runs on CPU tensors (see test_cache_write.py for why).
"""

from __future__ import annotations

import pytest
import torch

from kvlab.cache import AttentionBatch, PagedKVCache
from kvlab.kernels import paged_attention, write_kv_cache
from kvlab.reference import paged_attention_reference, relative_error

from .conftest import kernel_tolerance

FMAX = {"fp8": 448.0, "fp8_e5m2": 57344.0}


def _pair(scheme, device, *, k_scale=1e-3, v_scale=1e-3, blocks=4, block=16, heads=2, dim=64):
    shape = (scheme, blocks, block, heads, dim)
    kw = dict(model_dtype=torch.float32, k_scale=k_scale, v_scale=v_scale)
    ref = PagedKVCache.allocate(*shape, device="cpu", **kw)
    return ref, PagedKVCache.allocate(*shape, device=device, **kw)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8))


@pytest.mark.parametrize("scheme", ["fp8", "fp8_e5m2"])
def test_overflow_saturates_to_fmax_bit_for_bit(target, scheme, gen):
    """scale 1e-3: x = 1, 10, 1e9, inf give x / scale = 1e3, 1e4, 1e12, inf, all beyond e4m3's 448, so
    on e4m3 every one of them is stored as +448, and -x as -448: 8 saturated values; e5m2 (FMAX 57,344)
    saturates 1e9 and inf (and their negatives) only: 4."""
    ref, tri = _pair(scheme, target.device)
    k = torch.randn(8, 2, 64, generator=gen) * 1e-2
    k[0, 0, :8] = torch.tensor([1.0, 10.0, 1e9, float("inf"), -1.0, -10.0, -1e9, float("-inf")])
    v = torch.randn(8, 2, 64, generator=gen) * 1e-2
    slots = torch.arange(8)
    want = ref.write(k, v, slots, check_finite=False)
    got = write_kv_cache(tri, k.to(target.device), v.to(target.device), slots.to(target.device),
                         check_finite=False)
    assert got == want
    assert _same_bits(ref.key, tri.key) and _same_bits(ref.value, tri.value)
    stored = tri.key[0, 0, 0, :8].cpu().float()  # the codes: x / scale, saturated
    fmax = FMAX[scheme]
    if scheme == "fp8":
        assert stored.tolist() == [fmax] * 4 + [-fmax] * 4 and want.key_saturated == 8
    else:
        assert stored[[2, 3, 6, 7]].tolist() == [fmax, fmax, -fmax, -fmax] and want.key_saturated == 4


@pytest.mark.parametrize("scheme", ["fp8", "fp8_e5m2"])
def test_nan_stays_nan_when_the_finite_check_is_off(target, scheme, gen):
    ref, tri = _pair(scheme, target.device)
    k = torch.randn(4, 2, 64, generator=gen) * 1e-2
    v = torch.randn(4, 2, 64, generator=gen) * 1e-2
    k[1, 1, 5] = float("nan")
    v[2, 0, 0] = float("nan")
    slots = torch.tensor([3, 0, 17, 40])
    want = ref.write(k, v, slots, check_finite=False)
    got = write_kv_cache(tri, k.to(target.device), v.to(target.device), slots.to(target.device),
                         check_finite=False)
    assert got == want
    assert _same_bits(ref.key, tri.key) and _same_bits(ref.value, tri.value)
    assert torch.isnan(tri.key.flatten(0, 1)[0, 1, 5].float().cpu())  # token 1 went to slot 0
    assert torch.isnan(tri.value.flatten(0, 1)[17, 0, 0].float().cpu())  # token 2 went to slot 17


@pytest.mark.parametrize("scheme", ["fp8", "int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_input_is_refused_alike_and_padding_rows_are_not_checked(target, scheme, bad, gen):
    ref, tri = _pair(scheme, target.device)
    k = torch.randn(3, 2, 64, generator=gen)
    v = torch.randn(3, 2, 64, generator=gen)
    k[1, 0, 7] = bad
    slots = torch.tensor([2, 5, 9])
    messages = []
    for cache, dev in ((ref, "cpu"), (tri, target.device)):
        with pytest.raises(ValueError, match="non-finite") as info:
            if cache is tri:
                write_kv_cache(cache, k.to(dev), v.to(dev), slots.to(dev))
            else:
                cache.write(k, v, slots)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    # the same row as padding (slot -1) is never stored, so neither writer refuses it
    pad = torch.tensor([2, -1, 9])
    want = ref.write(k, v, pad)
    got = write_kv_cache(tri, k.to(target.device), v.to(target.device), pad.to(target.device))
    assert got == want and got.num_skipped == 1


def test_attention_over_a_saturated_fp8_cache_is_finite_and_matches_the_reference(target, gen):
    """Every stored K and V code is ±448 (|x| / scale far beyond FMAX): the largest products the kernel
    sums, scaled back, must neither overflow nor differ from the float64 reference on the same cache."""
    cache = PagedKVCache.allocate("fp8", 4, 16, 2, 64, device=target.device, model_dtype=torch.float32,
                                  k_scale=1e-3, v_scale=1e-3)
    n = 40
    sign = torch.where(torch.rand(n, 2, 64, generator=gen) < 0.5, -1.0, 1.0)
    k, v = (sign * 5.0).to(target.device), (-sign * 7.0).to(target.device)
    write_kv_cache(cache, k, v, torch.arange(n, device=target.device))
    batch = AttentionBatch.from_lengths([2], [n], [[0, 1, 2]], device=target.device)
    q = torch.randn(2, 4, 64, generator=gen).to(device=target.device, dtype=torch.bfloat16)
    out = paged_attention(q, cache, batch)
    assert torch.isfinite(out).all()
    ref = paged_attention_reference(q.cpu(), _to_cpu(cache), _to_cpu_batch(batch))
    assert relative_error(out.cpu().double(), ref) <= kernel_tolerance(torch.bfloat16, "fp8")


def _to_cpu(cache: PagedKVCache) -> PagedKVCache:
    return PagedKVCache(cache.scheme, cache.key.cpu(), cache.value.cpu(), k_scale=cache.k_scale,
                        v_scale=cache.v_scale)


def _to_cpu_batch(batch: AttentionBatch) -> AttentionBatch:
    return AttentionBatch.from_lengths(batch.query_lens, batch.seq_lens_list, batch.block_table.cpu())
