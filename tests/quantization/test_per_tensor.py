"""Per-tensor fp8 (e4m3 and e5m2): formula, saturation and calibration."""

import numpy as np
import pytest
import torch

from kvlab import calibrate_scale, dequantize_per_tensor, quantize_per_tensor
from kvlab.quantization import K_SCALE_CONSTANT, V_SCALE_CONSTANT
from tests.quantization.fp8_tables import round_to_fp8


@pytest.mark.parametrize("scheme,fmt", [("fp8", "e4m3"), ("fp8_e4m3", "e4m3"), ("fp8_e5m2", "e5m2")])
def test_codes_are_the_nearest_even_fp8_of_x_over_scale(gen, scheme, fmt):
    x = torch.randn(64, 8, 128, generator=gen).to(torch.bfloat16)
    scale = float(torch.rand(1, generator=gen)) * 0.02 + 0.001
    q = quantize_per_tensor(x, scale, scheme)
    y = (x.float().numpy() / np.float32(q.scale)).astype(np.float32)  # fp32 division
    expected = round_to_fp8(y, fmt)
    np.testing.assert_array_equal(q.codes.float().numpy(), expected.astype(np.float32))
    assert q.num_saturated == int((np.abs(y) > {"e4m3": 448.0, "e5m2": 57344.0}[fmt]).sum())


@pytest.mark.parametrize("scheme,fmax", [("fp8", 448.0), ("fp8_e5m2", 57344.0)])
def test_out_of_range_values_saturate_and_are_counted_never_nan(gen, scheme, fmax):
    x = torch.randn(1000, generator=gen)
    scale = float(x.abs().max()) / fmax / 4  # a quarter of the absmax scale: many values overflow
    q = quantize_per_tensor(x, scale, scheme)
    overflow = int((x.abs() / torch.tensor(q.scale) > fmax).sum())
    assert overflow > 0 and q.num_saturated == overflow
    codes = q.codes.float()
    assert bool(torch.isfinite(codes).all())
    assert float(codes.abs().max()) == fmax


def test_round_trip_error_is_bounded_by_the_format(gen):
    x = torch.randn(4096, generator=gen) * 3
    for scheme, man_bits in (("fp8", 3), ("fp8_e5m2", 2)):
        scale = calibrate_scale(x, scheme)
        q = quantize_per_tensor(x, scale, scheme)
        back = dequantize_per_tensor(q.codes, q.scale, torch.float64)
        y = x.double().abs() / q.scale
        min_normal = 2.0**-6 if scheme == "fp8" else 2.0**-14
        subnormal_half_spacing = min_normal * 2.0 ** -(man_bits + 1)
        half_spacing = torch.maximum(y * 2.0 ** -(man_bits + 1), torch.full_like(y, subnormal_half_spacing))
        assert bool(((back - x.double()).abs() <= half_spacing * q.scale * (1 + 1e-6)).all())
        assert q.num_saturated == 0


def test_absmax_calibration_maps_the_largest_value_to_the_format_max(gen):
    x = torch.randn(100, 8, 64, generator=gen)
    for scheme, fmax in (("fp8", 448.0), ("fp8_e5m2", 57344.0)):
        s = calibrate_scale(x, scheme, "absmax")
        assert s == pytest.approx(float(x.abs().max()) / fmax, rel=1e-6)
        assert quantize_per_tensor(x, s, scheme).num_saturated == 0


@pytest.mark.parametrize("scheme", ["fp8", "fp8_e5m2"])
def test_absmax_calibration_never_saturates_whatever_the_rounding_of_the_scale(gen, scheme):
    """fl(max|x| / FMAX) rounds down for about half of all magnitudes; the largest value must still fit."""
    magnitudes = torch.exp(torch.randn(2000, generator=gen) * 8)  # 1e-7 … 1e7
    for a in magnitudes.tolist():
        x = torch.tensor([a, -a / 3], dtype=torch.float32)
        assert quantize_per_tensor(x, calibrate_scale(x, scheme), scheme).num_saturated == 0, a


def test_vllm_calibration_divides_by_200_for_k_and_100_for_v(gen):
    x = torch.randn(100, 8, 64, generator=gen)
    absmax = float(x.abs().max())
    assert calibrate_scale(x, "fp8", "vllm", "k") == pytest.approx(absmax / K_SCALE_CONSTANT, rel=1e-6)
    assert calibrate_scale(x, "fp8", "vllm", "v") == pytest.approx(absmax / V_SCALE_CONSTANT, rel=1e-6)
    assert (K_SCALE_CONSTANT, V_SCALE_CONSTANT) == (200.0, 100.0)


def test_all_zero_data_gets_the_floor_scale_and_exact_zeros():
    x = torch.zeros(16, 4)
    s = calibrate_scale(x, "fp8")
    assert s == pytest.approx(1e-6)
    assert bool((dequantize_per_tensor(quantize_per_tensor(x, s).codes, s) == 0).all())


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), "1", True])
def test_bad_scales_are_refused(bad):
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        quantize_per_tensor(torch.randn(4), bad)


def test_bad_inputs_are_named(gen):
    x = torch.randn(4, 4, generator=gen)
    with pytest.raises(ValueError, match="not per-tensor fp8"):
        quantize_per_tensor(x, 1.0, "int8_per_token_head")
    with pytest.raises(ValueError, match="method must be one of"):
        calibrate_scale(x, "fp8", "percentile")
    with pytest.raises(ValueError, match="role must be one of"):
        calibrate_scale(x, "fp8", "vllm", "q")
    x[0, 0] = float("-inf")
    with pytest.raises(ValueError, match="1 non-finite"):
        quantize_per_tensor(x, 1.0)
