"""Scheme fields, byte counts, scales and code dtypes, against values worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from kvlab.quantization import get_scheme
from kvlab.quantization.lowbit import (
    dequantize_value_groups,
    pack_codes,
    quantize_asymmetric,
    quantize_int4_per_token_head,
    quantize_key_block,
    quantize_value_groups,
)
from kvlab.quantization.memory import kv_bytes_per_token, page_size_bytes, residual_bytes_per_sequence
from kvlab.quantization.per_tensor import as_fp32_scale, calibrate_scale, quantize_per_tensor
from kvlab.quantization.per_token_head import dequantize_per_token_head, token_head_scales
from kvlab.quantization.schemes import QuantMode


@pytest.mark.parametrize(
    "name, mode, dtype, qmax, fmt",
    [
        ("fp8", QuantMode.FP8_PER_TENSOR, torch.float8_e4m3fn, 448.0, "e4m3"),
        ("fp8_e4m3", QuantMode.FP8_PER_TENSOR, torch.float8_e4m3fn, 448.0, "e4m3"),
        ("fp8_e5m2", QuantMode.FP8_PER_TENSOR, torch.float8_e5m2, 57344.0, "e5m2"),
        ("fp8_per_token_head", QuantMode.FP8_PER_TOKEN_HEAD, torch.float8_e4m3fn, 448.0, "e4m3"),
        ("int8_per_token_head", QuantMode.INT8_PER_TOKEN_HEAD, torch.int8, 127.0, None),
        ("bfloat16", QuantMode.NONE, torch.bfloat16, None, None),
    ],
)
def test_scheme_fields(name, mode, dtype, qmax, fmt):
    s = get_scheme(name)
    assert (s.name, s.mode, s.storage_dtype, s.qmax, s.fp8_format) == (name, mode, dtype, qmax, fmt)


def test_a_scheme_name_must_be_a_string():
    with pytest.raises(ValueError) as err:
        get_scheme(3)
    assert str(err.value) == "kv_cache_dtype must be a string, got int"


def test_kivi_bytes():
    """kivi2 (G = 32), one KV head of 32 + 32 elements. A 16-token block: codes 16 x 64 x 2 bits = 256 B;
    fp16 scale + zero pairs: 16 value pairs (one group per token) + 32 key pairs (one per channel) =
    48 x 4 B = 192 B; 448 B, 28 B a token (the default block is 16). A 32-token block: 512 + (32 + 32)
    x 4 = 768 B. The bf16 residual: 1 block x 16 tokens x 64 x 2 B = 2,048 B; 3,072 B with 64-element V;
    int4 keeps none."""
    assert kv_bytes_per_token("kivi2", 1, 32) == 28
    assert (page_size_bytes("kivi2", 16, 1, 32), page_size_bytes("kivi2", 32, 1, 32)) == (448, 768)
    assert residual_bytes_per_sequence("kivi2", 16, 1, 32) == 2048
    assert residual_bytes_per_sequence("kivi2", 16, 1, 32, 64) == 3072
    assert residual_bytes_per_sequence("int4_per_token_head", 16, 1, 32) == 0


def test_per_token_head_scales():
    """max|x| / 127: 2.54 / 127 = 0.02; an all-zero row gets the 1e-6 floor."""
    s = token_head_scales(torch.tensor([[1.27, -2.54], [0.0, 0.0]]), "int8_per_token_head")
    assert s.dtype == torch.float32
    torch.testing.assert_close(s, torch.tensor([0.02, 1e-6]), rtol=1e-6, atol=0)


def test_per_tensor_scales():
    """fp8 (e4m3, FMAX 448) by default: max|x| = 448 gives exactly 1.0 (448 / 1.0 is not above 448, so no
    nudge); nothing to measure gives the 1e-6 floor (in fp32); a one-element tensor is a scale."""
    assert calibrate_scale(torch.tensor([448.0, -3.0])) == 1.0
    assert calibrate_scale(torch.empty(0)) == torch.tensor(1e-6, dtype=torch.float32).item()
    assert as_fp32_scale(torch.tensor([0.5])) == 0.5
    assert quantize_per_tensor(torch.tensor([448.0, 1.0]), 1.0).codes.dtype == torch.float8_e4m3fn


def test_code_dtypes_and_shapes():
    """int4 codes are int8; KIVI codes uint8; value groups of 32 over 64 elements and 1 head: scale and
    zero of shape [tokens, heads, 2]; dequantized values in the dtype asked for (float64 by default)."""
    assert quantize_int4_per_token_head(torch.tensor([[0.5, -1.0]]))[0].dtype == torch.int8
    codes, scale, zero = quantize_value_groups(torch.linspace(-1, 1, 3 * 64).reshape(3, 1, 64), 2, 32)
    assert (codes.dtype, codes.shape, scale.shape, zero.shape) == (torch.uint8, (3, 1, 64), (3, 1, 2),
                                                                   (3, 1, 2))
    assert dequantize_value_groups(codes, scale, zero).dtype == torch.float64
    assert dequantize_value_groups(codes, scale, zero, dtype=torch.bfloat16).dtype == torch.bfloat16
    codes8 = torch.tensor([[3, -5]], dtype=torch.int8)
    out = dequantize_per_token_head(codes8, torch.tensor([0.5]), dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16 and out.tolist() == [[1.5, -2.5]]


def test_fp16_range_edge_and_bits():
    """65,504 (the largest fp16) is allowed: 4-bit codes 15 and 0. Only 2 and 4 bits exist; a 3-D code
    tensor names its last dimension."""
    assert quantize_asymmetric(torch.tensor([65504.0, 0.0]), 4, -1)[0].tolist() == [15, 0]
    for make, message in [
        (lambda: pack_codes(torch.zeros(2, 4, dtype=torch.uint8), 3), "bits must be 2 or 4, got 3"),
        (lambda: pack_codes(torch.zeros(1, 2, 3, dtype=torch.uint8), 4),
         "the last dimension (3) must be a multiple of 2 to pack 4-bit codes"),
    ]:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == message


def test_check_finite_is_passed_through():
    """Keys and value groups with a NaN: refused by default, quantized when the check is switched off."""
    bad = torch.tensor([[[1.0, math.nan] * 16]])  # [1 token, 1 head, 32]
    with pytest.raises(ValueError):
        quantize_value_groups(bad, 2, 32)
    quantize_value_groups(bad, 2, 32, check_finite=False)
    with pytest.raises(ValueError):
        quantize_key_block(bad, 2)
    quantize_key_block(bad, 2, check_finite=False)
