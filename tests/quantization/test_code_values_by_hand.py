"""Codes converted to wider floats: the e4m3 table against the format's definition, and against
PyTorch's own conversion on fresh random codes."""

from __future__ import annotations

import math

import pytest
import torch

from kvlab.quantization.code_values import code_values


def _e4m3_by_hand(bits: int) -> float:
    """float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN."""
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * 2.0**-6 * mantissa / 8
    return sign * 2.0 ** (exponent - 7) * (1 + mantissa / 8)


def test_every_e4m3_code_has_its_defined_value():
    codes = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn)
    got = code_values(codes, torch.float64).tolist()
    for bits, value in enumerate(got):
        want = _e4m3_by_hand(bits)
        same = (math.isnan(value) and math.isnan(want)) or value == want
        assert same, f"code {bits:#04x}: {value} != {want}"
    assert got[0x7E] == 448.0 and got[0x01] == 2.0**-9  # largest finite and smallest subnormal


@pytest.mark.parametrize("code_dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.float32])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_values_equal_pytorchs_conversion_on_random_codes(code_dtype, dtype, gen):
    raw = torch.randint(0, 256, (37, 3, 16), dtype=torch.uint8, generator=gen)
    if code_dtype == torch.float32:
        codes = torch.randn(37, 3, 16, generator=gen)
    else:
        codes = raw.view(code_dtype)
    codes = codes.transpose(0, 1)  # not contiguous
    want = codes.to(dtype)
    got = code_values(codes, dtype)
    assert got.dtype == dtype and got.shape == codes.shape
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(got), finite)
    assert torch.equal(got[finite], want[finite])


def test_the_result_is_never_a_view_of_the_codes(gen):
    codes = torch.randn(8, 4, generator=gen, dtype=torch.float64)
    kept = codes.clone()
    out = code_values(codes, torch.float64)
    out.fill_(float("nan"))  # writing into the result must leave the codes alone
    assert torch.equal(codes, kept)
