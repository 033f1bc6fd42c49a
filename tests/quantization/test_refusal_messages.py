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
     "head_size 6 does not fill whole bytes at 2 bits per code: it must be a multiple of 4 for scheme 'kivi2'"),
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
     "group size G=64 does not divide the V head size 96; allowed G for this head: [32] (scheme 'kivi4_g64')"),
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 32, 1),
     "block_size must be a power of two >= 2 for scheme 'kivi2' (one block is one key group, reduced in one "
     "tile), got 1"),
    (lambda: parse_low_bit_scheme("kivi2").check_shape(32, 32, 24),
     "block_size must be a power of two >= 2 for scheme 'kivi2' (one block is one key group, reduced in one "
     "tile), got 24"),
    # key scales and zero points: head_size x 2 values x 2 bytes = 8 x 4 = 32 B, which 64 does not divide
    (lambda: parse_low_bit_scheme("kivi2").check_shape(8, 32, 64),
     "block_size 64 must divide the 32 bytes of key scales and zero points per head and block (scheme 'kivi2')"),
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
