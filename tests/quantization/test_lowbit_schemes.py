"""kvlab's low-bit schemes: registry entries, exact bytes, packing and the reference quantizers.

Expected values are worked by hand in each test (or are bounds derived from the formulas), never a
second call of the function under test.
"""

from __future__ import annotations

import pytest
import torch

from kvlab.quantization import (
    KVLAB_SCHEME_NAMES,
    SCHEME_NAMES,
    VLLM_SCHEME_NAMES,
    get_scheme,
    page_size_bytes,
    residual_bytes_per_sequence,
    token_footprint,
)
from kvlab.quantization.lowbit import (
    pack_codes,
    quantize_asymmetric,
    quantize_int4_per_token_head,
    quantize_key_block,
    quantize_value_groups,
    unpack_codes,
)


def test_registry_marks_kvlab_schemes():
    assert SCHEME_NAMES == VLLM_SCHEME_NAMES + KVLAB_SCHEME_NAMES
    assert {"int4_per_token_head", "kivi4", "kivi2"} <= set(KVLAB_SCHEME_NAMES)
    for name in VLLM_SCHEME_NAMES:
        assert get_scheme(name).is_vllm and get_scheme(name).origin_note == ""
    for name in KVLAB_SCHEME_NAMES:
        sch = get_scheme(name)
        assert not sch.is_vllm
        assert "not a vLLM --kv-cache-dtype" in sch.origin_note
        assert "not a vLLM" in sch.describe()


def test_kivi_names_and_parameters():
    k2 = get_scheme("kivi2")
    assert (k2.bits, k2.group_size, k2.residual_blocks, k2.levels) == (2, 32, 1, 3)
    k = get_scheme("kivi4_g128_r8")
    assert (k.bits, k.group_size, k.residual_blocks, k.levels) == (4, 128, 8, 15)
    assert get_scheme("int4_per_token_head").levels == 7


@pytest.mark.parametrize("bad, words", [
    ("kivi3", "4 or 2 bits"), ("kivi2_g48", "32, 64, 128"), ("kivi2_r0", "_r1"),
    ("int2_per_token_head", "kivi2_g32_r8"),
])
def test_bad_names_say_what_is_allowed(bad, words):
    with pytest.raises(ValueError, match=words):
        get_scheme(bad)


def test_unknown_name_lists_both_kinds():
    with pytest.raises(ValueError) as err:
        get_scheme("int3")
    for name in ("int8_per_token_head", "kivi2", "int4_per_token_head"):
        assert name in str(err.value)


def test_bytes_per_token_worked_by_hand():
    """8 KV heads, head 128. Per (token, head): bf16 2*128*2 = 512 B.
    int4_per_token_head: codes 2*128/2 = 128, scales 2*4 = 8 -> 136 -> x8 heads = 1088 B.
    kivi2, G=32, block 16: codes 2*128/4 = 64; V pairs 128/32 = 4 groups * 2 * 2 B = 16;
    K pairs per block 128 channels * 2 * 2 B = 512 B / 16 tokens = 32 -> 112 -> 896 B.
    kivi4: codes 128 + 16 + 32 = 176 -> 1408 B.  kivi2 at block 32: 64 + 16 + 16 = 96 -> 768 B.
    kivi2_g128: 64 + 4 + 32 = 100 -> 800 B."""
    assert token_footprint("bfloat16", 8, 128).total_bytes == 4096
    fp = token_footprint("int4_per_token_head", 8, 128)
    assert (fp.data_bytes, fp.scale_bytes) == (1024, 64)
    assert token_footprint("kivi2", 8, 128).total_bytes == 896
    assert token_footprint("kivi4", 8, 128).total_bytes == 1408
    assert token_footprint("kivi2", 8, 128, block_size=32).total_bytes == 768
    assert token_footprint("kivi2_g128", 8, 128).total_bytes == 800
    assert page_size_bytes("kivi2", 16, 8, 128) == 16 * 896
    assert page_size_bytes("int4_per_token_head", 16, 8, 128) == 16 * 1088


def test_residual_bytes():
    """kivi2_g32_r8, block 16, 8 heads, head 128: 128 tokens * 8 * 256 * 2 B = 524,288 B."""
    assert residual_bytes_per_sequence("kivi2_g32_r8", 16, 8, 128) == 524288
    assert residual_bytes_per_sequence("int4_per_token_head", 16, 8, 128) == 0
    assert residual_bytes_per_sequence("int8_per_token_head", 16, 8, 128) == 0


@pytest.mark.parametrize("scheme, head, block, words", [
    ("kivi2_g64", 96, 16, "does not divide the V head size 96"),
    ("kivi2", 128, 24, "power of two"),
    ("kivi4", 128, 1, "power of two"),
    ("int4_per_token_head", 127, 16, "multiple of 2"),
])
def test_bad_shapes_refused(scheme, head, block, words):
    with pytest.raises(ValueError, match=words):
        page_size_bytes(scheme, block, 8, head)


def test_packing_worked_by_hand():
    assert pack_codes(torch.tensor([3, 10], dtype=torch.uint8), 4).tolist() == [0xA3]
    # 2 bits: 1 | 2 << 2 | 3 << 4 | 0 << 6 = 1 + 8 + 48 = 57
    assert pack_codes(torch.tensor([1, 2, 3, 0], dtype=torch.uint8), 2).tolist() == [57]
    assert unpack_codes(torch.tensor([57], dtype=torch.uint8), 2).tolist() == [1, 2, 3, 0]


@pytest.mark.parametrize("bits", [2, 4])
def test_pack_round_trip_random(gen, bits):
    codes = torch.randint(0, 2**bits, (5, 3, 64), generator=gen, dtype=torch.uint8)
    packed = pack_codes(codes, bits)
    assert packed.shape == (5, 3, 64 * bits // 8)
    assert torch.equal(unpack_codes(packed, bits), codes)


def test_int4_worked_by_hand():
    """max|x| = 7 -> s = 1; -3.5 rounds half to even -> -4; 0.5 -> 0; 1.4999 -> 1."""
    codes, scales = quantize_int4_per_token_head(torch.tensor([[7.0, -3.5, 0.5, 1.4999]]))
    assert scales.tolist() == [1.0]
    assert codes.tolist() == [[7, -4, 0, 1]]


def test_asymmetric_worked_by_hand():
    """Channel [0, 1, 2, 3] at 2 bits: z = 0, s = 3/3 = 1, codes 0..3; channel [-1, -1, -1, -1]:
    zero range -> s = 2**-14, z = -1, codes 0 (exact)."""
    x = torch.tensor([[0.0, -1.0], [1.0, -1.0], [2.0, -1.0], [3.0, -1.0]])  # [tokens, channels]
    codes, scale, zero = quantize_asymmetric(x, 2, 0)
    assert codes[:, 0].tolist() == [0, 1, 2, 3] and codes[:, 1].tolist() == [0, 0, 0, 0]
    assert scale.dtype == zero.dtype == torch.float16
    assert scale.tolist() == [[1.0, 2.0**-14]] and zero.tolist() == [[0.0, -1.0]]


@pytest.mark.parametrize("bits", [2, 4])
def test_asymmetric_error_bound(gen, bits):
    """|x - (q s + z)| <= s/2 + Q s 2**-11 (fp16 scale rounded down) + 2**-11 |min| (zero rounded)."""
    x = torch.randn(16, 4, 128, generator=gen) * 3 + 1
    codes, scale, zero = quantize_key_block(x, bits)
    restored = codes.double() * scale.double() + zero.double()
    q = 2**bits - 1
    bound = scale.double() / 2 + q * scale.double() * 2**-11 + 2**-11 * x.double().amin(0).abs() + 1e-12
    assert ((restored - x.double()).abs() <= bound).all()
    assert codes.max() <= q


def test_value_groups_are_per_token(gen):
    """A value group holding one huge element only coarsens its own group's step."""
    v = torch.randn(4, 2, 64, generator=gen)
    v[1, 0, 5] = 50.0  # group 0 of token 1, head 0
    codes, scale, zero = quantize_value_groups(v, 4, 32)
    assert scale.shape == (4, 2, 2)
    assert scale[1, 0, 0] > 3.0 and float(scale[1, 0, 1]) < 1.0 and float(scale[0, 0, 0]) < 1.0


def test_keys_per_channel_isolate_outlier_channels(gen):
    """KIVI's point: an outlier *channel* ruins per-token scales but not per-channel ones."""
    k = torch.randn(16, 1, 128, generator=gen)
    k[:, :, 7] += 40.0
    codes, scale, zero = quantize_key_block(k, 4)
    per_channel = codes.double() * scale.double() + zero.double()
    q, s = quantize_int4_per_token_head(k)
    per_token = q.double() * s.double().unsqueeze(-1)
    normal = torch.ones(128, dtype=torch.bool)
    normal[7] = False
    err_c = (per_channel - k.double())[..., normal].norm()
    err_t = (per_token - k.double())[..., normal].norm()
    assert err_c * 5 < err_t


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 70000.0])
def test_non_finite_and_out_of_fp16_refused(bad):
    x = torch.randn(16, 1, 32)
    x[3, 0, 4] = bad
    with pytest.raises(ValueError, match="non-finite|fp16"):
        quantize_key_block(x, 2)
