"""Per-token-head INT8/FP8 quantization against an independent NumPy computation of the formulas."""

import numpy as np
import pytest
import torch

from kvlab import (
    build_paged_example,
    dequantize_per_token_head,
    paged_attention_reference,
    quantize_per_token_head,
    reference_attention,
    relative_error,
)
from kvlab.quantization import SCALE_FLOOR
from tests.quantization.fp8_tables import round_to_fp8


def _independent(x: torch.Tensor, qmax: float, qmin: float):
    """s = max(absmax/QMAX, 1e-6); y = clamp(x * fl(1/s)) in float32 NumPy arithmetic."""
    xf = x.float().numpy()
    s = np.maximum(np.abs(xf).max(axis=-1) / np.float32(qmax), np.float32(SCALE_FLOOR)).astype(np.float32)
    inv = (np.float32(1.0) / s).astype(np.float32)
    y = np.clip(xf * inv[..., None], np.float32(qmin), np.float32(qmax)).astype(np.float32)
    return s, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_int8_nearest_matches_the_formula(gen, dtype):
    x = (torch.randn(257, 4, 128, generator=gen) * 3).to(dtype)
    codes, scales = quantize_per_token_head(x, "int8_per_token_head", "nearest")
    s, y = _independent(x, 127.0, -128.0)
    assert codes.dtype == torch.int8 and scales.dtype == torch.float32
    np.testing.assert_array_equal(scales.numpy(), s)
    np.testing.assert_array_equal(codes.numpy(), np.rint(y).astype(np.int8))  # rint: half to even
    assert int(codes.min()) >= -127  # -128 is never produced


def test_int8_truncate_is_vllms_store_bit_for_bit(gen):
    x = torch.randn(300, 8, 64, generator=gen) * 0.7
    codes, scales = quantize_per_token_head(x, "int8_per_token_head", "truncate")
    s, y = _independent(x, 127.0, -128.0)
    np.testing.assert_array_equal(scales.numpy(), s)
    np.testing.assert_array_equal(codes.numpy(), np.trunc(y).astype(np.int8))


def test_fp8_per_token_head_rounds_to_nearest_even_e4m3(gen):
    x = torch.randn(200, 4, 128, generator=gen) * 5
    codes, scales = quantize_per_token_head(x, "fp8_per_token_head")
    s, y = _independent(x, 448.0, -448.0)
    assert codes.dtype == torch.float8_e4m3fn
    np.testing.assert_array_equal(scales.numpy(), s)
    np.testing.assert_array_equal(codes.float().numpy(), round_to_fp8(y, "e4m3").astype(np.float32))


def test_nearest_int8_error_is_at_most_half_a_step_and_truncation_reaches_a_full_step(gen):
    """The codes are made from ``x · fl(1/s)`` in fp32: two roundings of relative size <= 2^-24 on a value
    of at most 127 steps, so a code may sit ``delta <= 127 · 2 · 2^-24 = 1.51e-5`` steps off the exact
    quotient. Near a half step, nearest can then err by 0.5 + delta while truncation errs by
    0.5 - delta: element-wise, nearest is never worse by more than 2 delta (seed 28 of 0-49 reaches
    1.08e-5, more than one delta)."""
    x = torch.randn(2048, 8, 128, generator=gen)
    codes_n, scales = quantize_per_token_head(x, "int8_per_token_head", "nearest")
    codes_t, _ = quantize_per_token_head(x, "int8_per_token_head", "truncate")
    step = scales.double().unsqueeze(-1)
    err_near = (dequantize_per_token_head(codes_n, scales, torch.float64) - x.double()).abs() / step
    err_trunc = (dequantize_per_token_head(codes_t, scales, torch.float64) - x.double()).abs() / step
    delta = 127 * 2 * 2.0**-24  # fp32 rounding of x·(1/s), in steps
    assert float(err_near.max()) <= 0.5 + delta
    assert float(err_trunc.max()) > 0.9  # truncation's worst case is a whole step, twice nearest's
    assert bool((err_near <= err_trunc + 2 * delta).all())  # element-wise never worse beyond rounding


def test_nearest_int8_attention_error_is_at_most_half_of_truncation(seed):
    """Truncation biases every code toward zero, so its errors add up in the attention output."""
    errors = {}
    for rounding in ("nearest", "truncate"):
        ex = build_paged_example([1] * 8, [512] * 8, num_q_heads=8, num_kv_heads=2, head_size=128,
                                 scheme="int8_per_token_head", rounding=rounding, seed=seed)
        out = paged_attention_reference(ex.query, ex.cache, ex.batch)
        errors[rounding] = relative_error(out, reference_attention(ex.query, ex.keys, ex.values, ex.batch))
    assert errors["nearest"] <= 0.5 * errors["truncate"], errors


@pytest.mark.parametrize("scheme,rounding", [("int8_per_token_head", "nearest"),
                                             ("int8_per_token_head", "truncate"),
                                             ("fp8_per_token_head", "nearest")])
def test_round_trip_error_is_bounded_by_the_scale(gen, scheme, rounding):
    x = torch.randn(512, 4, 128, generator=gen) * 2
    codes, scales = quantize_per_token_head(x, scheme, rounding)
    err = (dequantize_per_token_head(codes, scales, torch.float64) - x.double()).abs()
    s = scales.double().unsqueeze(-1)
    slack = 1e-5 * s  # fp32 rounding of x * fl(1/s), far below a step
    if scheme.startswith("int8"):
        step = 0.5 if rounding == "nearest" else 1.0
        assert bool((err <= step * s + slack).all())
    else:
        # e4m3, 3 mantissa bits: half a spacing is 2^-4 of the value (normals), 2^-10 (subnormals)
        y = (x.double() / s).abs()
        bound = torch.maximum(y * 2.0**-4, torch.full_like(y, 2.0**-10)) * s
        assert bool((err <= bound + slack).all())


@pytest.mark.parametrize("scheme", ["int8_per_token_head", "fp8_per_token_head"])
def test_all_zero_rows_get_the_floor_and_come_back_exactly(gen, scheme):
    x = torch.randn(6, 3, 64, generator=gen)
    x[2] = 0.0
    x[4, 1] = 0.0
    codes, scales = quantize_per_token_head(x, scheme)
    floor = torch.tensor(SCALE_FLOOR, dtype=torch.float32)  # the floor as the fp32 it is stored in
    assert bool((scales[2] == floor).all()) and bool(scales[4, 1] == floor)
    back = dequantize_per_token_head(codes, scales)
    assert bool((back[2] == 0).all()) and bool((back[4, 1] == 0).all())


def test_tiny_rows_are_scaled_by_the_floor_without_clipping(gen):
    x = torch.rand(10, 2, 64, generator=gen) * 1e-4  # max|x| < 1.27e-4 → the floor decides
    codes, scales = quantize_per_token_head(x, "int8_per_token_head")
    assert bool((scales == np.float32(SCALE_FLOOR)).all())
    assert int(codes.abs().max()) < 127


def test_nan_and_inf_are_refused_with_count_and_first_position(gen):
    x = torch.randn(5, 2, 64, generator=gen)
    x[1, 0, 3] = float("nan")
    x[3, 1, 0] = float("inf")
    with pytest.raises(ValueError, match=r"2 non-finite value\(s\).*index \(1, 0, 3\)"):
        quantize_per_token_head(x, "int8_per_token_head")


def test_bad_inputs_are_named():
    x = torch.randn(4, 2, 64)
    with pytest.raises(ValueError, match="not per-token-head"):
        quantize_per_token_head(x, "fp8")
    with pytest.raises(ValueError, match="rounding must be one of"):
        quantize_per_token_head(x, "int8_per_token_head", "floor")
    with pytest.raises(ValueError, match="applies to int8 only"):
        quantize_per_token_head(x, "fp8_per_token_head", "truncate")
    with pytest.raises(ValueError, match="x must be float16, bfloat16, float32 or float64"):
        quantize_per_token_head(x.to(torch.int32), "int8_per_token_head")
    with pytest.raises(ValueError, match="non-empty last"):
        quantize_per_token_head(torch.randn(4, 0), "int8_per_token_head")
    with pytest.raises(ValueError, match="scales must have the shape"):
        dequantize_per_token_head(torch.zeros(4, 2, 64, dtype=torch.int8), torch.ones(4, 3))
