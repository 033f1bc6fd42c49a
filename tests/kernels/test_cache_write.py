"""The Triton cache writer against the reference writer, bit for bit: codes, scales and report.

Both writers start from identically poisoned caches (NaN, or NaN scales for int8), so comparing the
whole cache also proves that padding tokens (negative slots) and every slot not in the mapping were
left alone.

The reference always runs on CPU tensors: its definition is correctly rounded fp32 division, and
PyTorch on CUDA divides a tensor by a Python number through multiplication with the reciprocal
(seen on an H100: the reference's ``max|x| / 127`` then differs from the CPU's in the last bit for
some rows), so a CUDA run of the reference is not the definition.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.cache import PagedKVCache
from kvlab.kernels import write_kv_cache
from kvlab.quantization import VLLM_SCHEME_NAMES, get_scheme
from kvlab.quantization.schemes import QuantMode


def _bits(t: torch.Tensor) -> torch.Tensor:
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.view(view)


def _assert_same_cache(a: PagedKVCache, b: PagedKVCache) -> None:
    for name in ("key", "value", "key_scale", "value_scale"):
        x, y = getattr(a, name), getattr(b, name)
        if x is None:
            assert y is None
            continue
        differ = (_bits(x.cpu()) != _bits(y.cpu())).nonzero()
        assert differ.numel() == 0, f"{name}: {differ.shape[0]} differ, first at {differ[0].tolist()}"


def _inputs(num_tokens, num_kv_heads, head_size, dtype, device, gen, *, head_size_v=None, spread=3.0):
    """Random K/V with a few rows that stress the quantizer: an all-zero head, a tiny head (the
    1e-6 scale floor decides), a head with one large outlier."""
    hv = head_size if head_size_v is None else head_size_v
    k = torch.randn(num_tokens, num_kv_heads, head_size, generator=gen) * spread
    v = torch.randn(num_tokens, num_kv_heads, hv, generator=gen)
    if num_tokens >= 3:
        k[0, 0] = 0.0
        v[1, -1] = torch.randn(hv, generator=gen) * 1e-7
        k[2, 0, 1] = 250.0
    return k.to(device=device, dtype=dtype), v.to(device=device, dtype=dtype)


def _slots(num_tokens, num_slots, device, gen, num_padding=2):
    slots = torch.randperm(num_slots, generator=gen)[:num_tokens]
    slots[torch.randperm(num_tokens, generator=gen)[:num_padding]] = -1
    return slots.to(device)


def _pair(scheme, shape, device, model_dtype, **kw):
    """(reference cache on the CPU, Triton cache on ``device``), identically poisoned."""
    return (PagedKVCache.allocate(scheme, *shape, device="cpu", model_dtype=model_dtype, **kw),
            PagedKVCache.allocate(scheme, *shape, device=device, model_dtype=model_dtype, **kw))


def _on_cpu(*tensors):
    return tuple(t.cpu() for t in tensors)


_PER_TENSOR_SCALES = dict(k_scale=0.02, v_scale=0.003)


@pytest.mark.parametrize("scheme", VLLM_SCHEME_NAMES)  # low-bit schemes: test_lowbit_kernels.py
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64],
                         ids=["bf16", "fp16", "fp32", "fp64"])
def test_every_scheme_writes_the_reference_bits(target, scheme, dtype, gen):
    tokens = 300 if target.large else 12
    heads, head_size, block = (8, 128, 16) if target.large else (2, 80, 16)
    num_blocks = tokens // block + 3
    kw = _PER_TENSOR_SCALES if get_scheme(scheme).mode == QuantMode.FP8_PER_TENSOR else {}
    model_dtype = dtype if dtype != torch.float64 else torch.float32
    ref, tri = _pair(scheme, (num_blocks, block, heads, head_size), target.device, model_dtype, **kw)
    k, v = _inputs(tokens, heads, head_size, dtype, target.device, gen)
    slots = _slots(tokens, num_blocks * block, target.device, gen)
    want = ref.write(*_on_cpu(k, v, slots))
    got = write_kv_cache(tri, k, v, slots)
    _assert_same_cache(ref, tri)
    assert got == want


@pytest.mark.parametrize("head_size,block", [(64, 32), (128, 64), (256, 16), (512, 16), (96, 16)])
@pytest.mark.parametrize("scheme,rounding", [("int8_per_token_head", "nearest"),
                                             ("int8_per_token_head", "truncate"),
                                             ("fp8_per_token_head", "nearest")])
def test_per_token_head_bits_for_head_and_block_sizes(target, head_size, block, scheme, rounding, gen):
    tokens, heads = (200, 8) if target.large else (6, 2)
    num_blocks = tokens // block + 2
    ref, tri = _pair(scheme, (num_blocks, block, heads, head_size), target.device, torch.bfloat16)
    k, v = _inputs(tokens, heads, head_size, torch.bfloat16, target.device, gen)
    slots = _slots(tokens, num_blocks * block, target.device, gen, num_padding=1)
    want = ref.write(*_on_cpu(k, v, slots), rounding=rounding)
    assert write_kv_cache(tri, k, v, slots, rounding=rounding) == want
    _assert_same_cache(ref, tri)


def test_truncation_and_nearest_rounding_differ(target, gen):
    """The two int8 roundings are really different paths (not one rounding under two names)."""
    _, ref_n = _pair("int8_per_token_head", (4, 16, 2, 64), target.device, torch.bfloat16)
    _, tri_t = _pair("int8_per_token_head", (4, 16, 2, 64), target.device, torch.bfloat16)
    k, v = _inputs(20, 2, 64, torch.float32, target.device, gen)
    slots = torch.arange(20, device=target.device)
    write_kv_cache(ref_n, k, v, slots, rounding="nearest")
    write_kv_cache(tri_t, k, v, slots, rounding="truncate")
    codes_n, codes_t = ref_n.key.flatten(0, 1)[:20], tri_t.key.flatten(0, 1)[:20]
    assert (codes_n != codes_t).float().mean() > 0.2
    assert (codes_t.abs() <= codes_n.abs()).all()  # truncation rounds toward zero


def test_different_k_and_v_head_sizes(target, gen):
    tokens = 64 if target.large else 8
    ref, tri = _pair("int8_per_token_head", (6, 16, 2, 64), target.device, torch.bfloat16, head_size_v=96)
    k, v = _inputs(tokens, 2, 64, torch.bfloat16, target.device, gen, head_size_v=96)
    slots = _slots(tokens, 96, target.device, gen)
    assert write_kv_cache(tri, k, v, slots) == ref.write(*_on_cpu(k, v, slots))
    _assert_same_cache(ref, tri)


@pytest.mark.parametrize("scheme", ["fp8", "fp8_e5m2"])
def test_per_tensor_fp8_saturates_and_counts_like_the_reference(target, scheme, gen):
    """Values beyond ±FMAX·scale, ±Inf included, become ±FMAX, never NaN, and are counted."""
    ref, tri = _pair(scheme, (4, 16, 2, 64), target.device, torch.float32, k_scale=1e-3, v_scale=1e-4)
    k, v = _inputs(10, 2, 64, torch.float32, target.device, gen, spread=1.0)
    k[3, 1, :4] = torch.tensor([1e9, -1e9, float("inf"), float("-inf")])
    v = v * 10.0  # |v| / 1e-4 reaches far past e4m3's 448
    slots = _slots(10, 64, target.device, gen, num_padding=1)
    want = ref.write(*_on_cpu(k, v, slots), check_finite=False)
    got = write_kv_cache(tri, k, v, slots, check_finite=False)
    assert got == want and got.key_saturated > 0 and got.value_saturated > 0
    _assert_same_cache(ref, tri)
    assert not torch.isnan(tri.key.flatten(0, 1)[slots[slots >= 0]].float()).any()


def test_an_empty_write_changes_nothing(target):
    ref, tri = _pair("fp8_per_token_head", (2, 16, 2, 64), target.device, torch.bfloat16)
    empty = torch.zeros(0, 2, 64, dtype=torch.bfloat16, device=target.device)
    slots = torch.zeros(0, dtype=torch.int64, device=target.device)
    assert write_kv_cache(tri, empty, empty, slots).num_written == 0
    _assert_same_cache(ref, tri)


# -- refusals ---------------------------------------------------------------------------------------------


def test_bad_inputs_are_refused_with_one_clear_error(target, gen):
    cache = PagedKVCache.allocate("int8_per_token_head", 2, 16, 2, 64, device=target.device)
    k, v = _inputs(4, 2, 64, torch.bfloat16, target.device, gen)
    slots = torch.arange(4, device=target.device)
    with pytest.raises(ValueError, match="rounding"):
        write_kv_cache(cache, k, v, slots, rounding="up")
    with pytest.raises(ValueError, match="same slot twice"):
        write_kv_cache(cache, k, v, torch.zeros(4, dtype=torch.int64, device=target.device))
    with pytest.raises(ValueError, match="non-finite"):
        bad = k.clone()
        bad[1, 1, 3] = float("nan")
        write_kv_cache(cache, bad, v, slots)
    with pytest.raises(ValueError, match="key must be"):
        write_kv_cache(cache, k[:, :1], v, slots)
    fp8 = PagedKVCache.allocate("fp8_per_token_head", 2, 16, 2, 64, device=target.device)
    with pytest.raises(ValueError, match="int8 only"):
        write_kv_cache(fp8, k, v, slots, rounding="truncate")


def test_tensors_on_the_wrong_device_are_refused(target):
    if target.device.type == "cpu":
        wrong = torch.device("meta")  # any non-CPU device will do, and "meta" exists everywhere
        message = "interpreter runs on CPU tensors"
    else:
        wrong = torch.device("cpu")
        message = "needs CUDA tensors"
    cache = PagedKVCache.allocate("bfloat16", 2, 16, 2, 64, device=wrong)
    k = torch.randn(3, 2, 64, device=wrong)
    with pytest.raises(ValueError, match=message):
        write_kv_cache(cache, k, k, torch.arange(3, device=wrong))


@pytest.mark.parametrize("rows_per_program", [1, 2, 8, 64])
@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8_e4m3"])
def test_rows_per_program_do_not_change_the_bits(target, scheme, rows_per_program, gen):
    """Programs take several (token, head) rows; 3 KV heads make programs end inside a token, and a
    row count past the last token leaves programs half empty. The bits and the saturation counts
    must not depend on how the rows are cut."""
    from kvlab.kernels.cache_write import launch_cache_write

    tokens, heads, head_size, block = (301, 3, 128, 16) if target.large else (7, 3, 40, 16)
    num_blocks = tokens // block + 2
    kw = _PER_TENSOR_SCALES if get_scheme(scheme).mode == QuantMode.FP8_PER_TENSOR else {}
    ref, tri = _pair(scheme, (num_blocks, block, heads, head_size), target.device, torch.bfloat16, **kw)
    k, v = _inputs(tokens, heads, head_size, torch.bfloat16, target.device, gen)
    slots = _slots(tokens, num_blocks * block, target.device, gen, num_padding=2)
    if slots[2] < 0:  # keep the outlier's token (see _inputs): the saturation count must count it
        kept = int((slots[3:] >= 0).nonzero()[0]) + 3
        slots[2], slots[kept] = slots[kept].clone(), slots[2].clone()
    want = ref.write(*_on_cpu(k, v, slots))
    saturated = torch.zeros(2 * tokens * heads, dtype=torch.int32, device=target.device)
    launch_cache_write(tri, k, v, slots, saturated=saturated, rows_per_program=rows_per_program)
    _assert_same_cache(ref, tri)
    k_sat, v_sat = saturated.view(-1, 2).sum(dim=0).tolist()
    assert (k_sat, v_sat) == (want.key_saturated, want.value_saturated)
    if kw:
        assert want.key_saturated > 0  # the 250.0 outlier over k_scale 0.02 saturates: the count is tested
