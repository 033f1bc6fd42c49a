"""Refused quantization inputs get one exact message naming the argument, the rule and the value.

Written out in full (not a ``match`` on a fragment): a message that loses the argument's name or
the allowed values fails. Beside the refusals, the edge cases that must still be accepted.
"""

from __future__ import annotations

import math

import pytest
import torch

from kvlab.quantization import get_scheme
from kvlab.quantization.lowbit import pack_codes, quantize_asymmetric, quantize_int4_per_token_head
from kvlab.quantization.lowbit_schemes import parse_low_bit_scheme
from kvlab.quantization.per_tensor import as_fp32_scale, calibrate_scale, quantize_per_tensor
from kvlab.quantization.per_token_head import dequantize_per_token_head, quantize_per_token_head

NAN = torch.tensor([1.0, math.nan])
NOT_FLOAT = "x must be float16, bfloat16, float32 or float64, got torch.int64"
NOT_TENSOR = "x must be a torch.Tensor, got list"
NON_FINITE = "x contains 1 non-finite value(s) (NaN or Inf); the first is nan at index (1,)"

CASES = [
    (lambda: calibrate_scale([1.0]), NOT_TENSOR),
    (lambda: calibrate_scale(torch.tensor([1])), NOT_FLOAT),
    (lambda: calibrate_scale(NAN), NON_FINITE),
    (lambda: quantize_per_tensor([1.0], 1.0), NOT_TENSOR),
    (lambda: quantize_per_tensor(torch.tensor([1]), 1.0), NOT_FLOAT),
    (lambda: quantize_per_tensor(NAN, 1.0), NON_FINITE),
    (lambda: quantize_per_token_head([1.0], "int8_per_token_head"), NOT_TENSOR),
    (lambda: quantize_per_token_head(NAN, "int8_per_token_head"), NON_FINITE),
    (lambda: quantize_per_token_head(torch.tensor(1.0), "int8_per_token_head"),
     "x must have a non-empty last (head) dimension, got shape ()"),
    (lambda: quantize_per_token_head(torch.ones(2, 0), "int8_per_token_head"),
     "x must have a non-empty last (head) dimension, got shape (2, 0)"),
    (lambda: quantize_per_token_head(torch.ones(2, 4), "fp8_per_token_head", rounding="truncate"),
     "rounding='truncate' applies to int8 only; fp8 codes always round to nearest even"),
    (lambda: dequantize_per_token_head([1], torch.ones(1)), "codes must be a torch.Tensor, got list"),
    (lambda: dequantize_per_token_head(torch.ones(2, 4), [1.0]), "scales must be a torch.Tensor, got list"),
    (lambda: dequantize_per_token_head(torch.ones(2, 3, 4), torch.ones(3, 2)),
     "scales must have the shape of codes without its last dimension, (2, 3), got (3, 2)"),
    (lambda: quantize_asymmetric([1.0], 4, -1), NOT_TENSOR),
    (lambda: quantize_asymmetric(torch.tensor([1]), 4, -1), NOT_FLOAT),
    (lambda: quantize_asymmetric(NAN, 4, -1), NON_FINITE),
    (lambda: quantize_asymmetric(torch.tensor([1e6, 0.0]), 4, -1),
     "x holds |x| = 1e+06 > 65504: KIVI stores scales and zero points in fp16, so values must lie within "
     "the fp16 range"),
    (lambda: quantize_int4_per_token_head([1.0]), NOT_TENSOR),
    (lambda: quantize_int4_per_token_head(torch.tensor([1])), NOT_FLOAT),
    (lambda: quantize_int4_per_token_head(NAN), NON_FINITE),
    (lambda: pack_codes(torch.zeros(2, 3, dtype=torch.uint8), 4),
     "the last dimension (3) must be a multiple of 2 to pack 4-bit codes"),
    (lambda: pack_codes(torch.zeros(3, 6, dtype=torch.uint8), 2),
     "the last dimension (6) must be a multiple of 4 to pack 2-bit codes"),
    (lambda: as_fp32_scale(torch.ones(2)), "scale must be a single number, got a tensor of shape (2,)"),
    (lambda: as_fp32_scale(math.inf), "scale must be a positive finite number, got inf"),
    (lambda: as_fp32_scale(math.nan, "k_scale"), "k_scale must be a positive finite number, got nan"),
    (lambda: as_fp32_scale(-1.0), "scale must be a positive finite number, got -1.0"),
    # 1e-50 is a positive double but 0 in float32, the precision the scale is stored in
    (lambda: as_fp32_scale(1e-50), "scale must be a positive finite number, got 1e-50"),
    (lambda: get_scheme("int3"),
     "unknown kv_cache_dtype 'int3'; valid names are: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, "
     "int8_per_token_head, fp8_per_token_head (vLLM) and int4_per_token_head, kivi4, kivi2, kivi4_g64, "
     "kivi4_g128, kivi2_g64, kivi2_g128 (kvlab schemes, not in vLLM; kivi names also take a residual "
     "suffix _r<blocks>, e.g. kivi2_g32_r8)"),
    # check_shape: 2-bit codes fill a byte 4 at a time, 4-bit codes 2 at a time
    (lambda: parse_low_bit_scheme("kivi2").check_shape(6, 32, 16),
     "head_size 6 does not fill whole bytes at 2 bits per code: it must be a multiple of 4 for scheme "
     "'kivi2'"),
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 6, 16),
     "head_size_v 6 does not fill whole bytes at 2 bits per code: it must be a multiple of 4 for scheme "
     "'kivi2'"),
    (lambda: parse_low_bit_scheme("int4_per_token_head").check_shape(3, 4, 16),
     "head_size 3 does not fill whole bytes at 4 bits per code: it must be a multiple of 2 for scheme "
     "'int4_per_token_head'"),
    # G=32 does not divide 48, nor do 64 and 128; G=64 does not divide 96, but 32 does
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 48, 16),
     "group size G=32 does not divide the V head size 48; allowed G for this head: none (scheme 'kivi2')"),
    (lambda: parse_low_bit_scheme("kivi4_g64").check_shape(32, 96, 16),
     "group size G=64 does not divide the V head size 96; allowed G for this head: [32] "
     "(scheme 'kivi4_g64')"),
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 32, 1),
     "block_size must be a power of two >= 2 for scheme 'kivi2' (one block is one key group, reduced in one "
     "tile), got 1"),
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 32, 24),
     "block_size must be a power of two >= 2 for scheme 'kivi2' (one block is one key group, reduced in one "
     "tile), got 24"),
    # key scales and zero points: head_size x 2 values x 2 bytes = 8 x 4 = 32 B, which 64 does not divide
    (lambda: parse_low_bit_scheme("kivi2").check_shape(8, 32, 64),
     "block_size 64 must divide the 32 bytes of key scales and zero points per head and block "
     "(scheme 'kivi2')"),
]


@pytest.mark.parametrize("make, message", CASES, ids=[m[:50] for _, m in CASES])
def test_each_refusal_has_its_exact_message(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_shape_edges_that_are_accepted():
    """int4 with 2-element heads (2 x 4 = 8 bits, one byte); kivi2 with blocks of 2 (the smallest power of
    two allowed); kivi2 with 16-element keys in blocks of 64: 16 x 2 x 2 = 64 B of key scales, divided
    exactly. A 1-D tensor is one token-head for per-token-head quantization."""
    parse_low_bit_scheme("int4_per_token_head").check_shape(2, 2, 16)
    parse_low_bit_scheme("kivi2").check_shape(32, 32, 2)
    parse_low_bit_scheme("kivi2").check_shape(16, 32, 64)
    codes, scales = quantize_per_token_head(torch.tensor([0.5, -1.0, 0.25, 0.0]), "int8_per_token_head")
    # absmax 1.0 -> scale 1/127; -1.0 -> -127, 0.5 -> 63.5 -> 64 (nearest, ties to even: 63.5 -> 64)
    assert scales.shape == () and codes.tolist() == [64, -127, 32, 0]


def test_non_finite_inputs_are_refused_by_default_and_allowed_when_asked():
    """``check_finite`` defaults to True for every quantizer; with False the NaN passes through."""
    with pytest.raises(ValueError):
        quantize_int4_per_token_head(NAN)
    with pytest.raises(ValueError):
        quantize_asymmetric(NAN, 4, -1)
    quantize_int4_per_token_head(NAN, check_finite=False)
    quantize_asymmetric(NAN, 4, -1, check_finite=False)


def test_low_bit_schemes_by_name():
    """kivi<b>_g<G>_r<R>: b-bit codes (2**b - 1 levels above zero), value groups of G (default 32),
    R residual blocks (default 1); int4_per_token_head: 4-bit symmetric codes, qmax 7."""
    from kvlab.quantization.schemes import QuantMode

    int4 = parse_low_bit_scheme("int4_per_token_head")
    assert (int4.name, int4.mode, int4.storage_dtype, int4.qmax, int4.bits) == (
        "int4_per_token_head", QuantMode.INT4_PER_TOKEN_HEAD, torch.uint8, 7.0, 4)
    k2 = parse_low_bit_scheme("kivi2")
    assert (k2.name, k2.mode, k2.storage_dtype, k2.qmax, k2.bits, k2.group_size, k2.residual_blocks) == (
        "kivi2", QuantMode.KIVI, torch.uint8, 3.0, 2, 32, 1)
    k4 = parse_low_bit_scheme("kivi4_g64_r4")
    assert (k4.name, k4.qmax, k4.bits, k4.group_size, k4.residual_blocks) == ("kivi4_g64_r4", 15.0, 4, 64, 4)
    assert parse_low_bit_scheme("int8_per_token_head") is None
    assert k2.describe() == (
        "kivi2: 2-bit keys per channel per block, values per token in groups of 32, fp16 scales and zero "
        "points, bf16 residual of 1 block(s) (kvlab scheme, not a vLLM --kv-cache-dtype)")
    assert int4.describe() == (
        "int4_per_token_head: 4-bit symmetric codes, one fp32 scale per token and KV head (kvlab scheme, "
        "not a vLLM --kv-cache-dtype)")


@pytest.mark.parametrize(
    "name, message",
    [
        ("kivi3", "scheme 'kivi3': KIVI codes have 4 or 2 bits, got 3"),
        ("kivi2_g48", "scheme 'kivi2_g48': value group size must be one of 32, 64, 128, got 48"),
        ("kivi2_r0", "scheme 'kivi2_r0': the residual is at least the block being filled (_r1), got _r0"),
    ],
)
def test_kivi_name_refusals(name, message):
    with pytest.raises(ValueError) as err:
        parse_low_bit_scheme(name)
    assert str(err.value) == message


def test_two_bit_codes_pack_low_bits_first():
    """Codes 1, 2, 3, 0 at 2 bits: 1 + 2 x 4 + 3 x 16 + 0 x 64 = 57 in one byte, and back."""
    from kvlab.quantization.lowbit import unpack_codes

    packed = pack_codes(torch.tensor([[1, 2, 3, 0]], dtype=torch.uint8), 2)
    assert packed.dtype == torch.uint8 and packed.tolist() == [[57]]
    codes = unpack_codes(torch.tensor([[57, 255]], dtype=torch.uint8), 2)
    assert codes.dtype == torch.uint8 and codes.tolist() == [[1, 2, 3, 0, 3, 3, 3, 3]]
    # 4-bit: 0x5A = 90 holds 10 (low nibble) then 5
    assert unpack_codes(torch.tensor([90], dtype=torch.uint8), 4).tolist() == [10, 5]


def test_more_refusals_word_for_word():
    from kvlab.quantization import memory
    from kvlab.quantization.lowbit import quantize_value_groups
    from kvlab.quantization.per_tensor import dequantize_per_tensor

    for make, message in [
        (lambda: quantize_value_groups(torch.ones(2, 1, 48), 2, 32),
         "group size G=32 does not divide the V head size 48"),
        (lambda: dequantize_per_tensor([1], 1.0), "codes must be a torch.Tensor, got list"),
        (lambda: memory.token_footprint("kivi2", 1, 32, block_size=0), "block_size must be >= 1, got 0"),
        (lambda: memory.token_footprint("kivi2", 1, 32, head_size_v=0), "head_size_v must be >= 1, got 0"),
        (lambda: memory.residual_bytes_per_sequence("kivi2", 0, 1, 32), "block_size must be >= 1, got 0"),
    ]:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == message
