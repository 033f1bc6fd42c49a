"""The quantization explorer converts each sample tensor to float64 once and checks it finite once;
every scheme's round trip shares that copy. Checked against the input converted here and against
round trips made without sharing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kvlab.analysis import log_error_histogram, round_trip
from kvlab.widgets import quantization_explorer as qe


@pytest.mark.parametrize("scheme", qe.COMPARED_SCHEMES)
def test_a_shared_original_gives_the_same_trip(scheme, gen):
    x = torch.randn(50, 2, 16, generator=gen) * 7
    alone = round_trip(x, scheme, role="v")
    shared = round_trip(x, scheme, role="v", original=x.double(), check_finite=False)
    assert torch.equal(shared.original, x.double())
    assert torch.equal(shared.restored, alone.restored)
    assert torch.equal(shared.abs_error, (alone.restored - x.double()).abs())


def test_an_original_of_another_shape_or_dtype_is_refused(gen):
    x = torch.randn(10, 2, 8, generator=gen)
    with pytest.raises(ValueError, match=r"original must be x as float64, shape \(10, 2, 8\)"):
        round_trip(x, "fp8_e4m3", original=x[:5].double())
    with pytest.raises(ValueError, match="original must be x as float64"):
        round_trip(x, "fp8_e4m3", original=x.clone())


@pytest.mark.parametrize("scheme", ["bfloat16", "fp8_e4m3", "int8_per_token_head"])
def test_non_finite_input_is_refused_once_checked(scheme, gen):
    x = torch.randn(10, 2, 8, generator=gen)
    x[3, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"x contains 1 non-finite value\(s\).*\(3, 1, 2\)"):
        round_trip(x, scheme)


def test_the_float64_copy_is_made_once_per_tensor(seed, monkeypatch):
    key = ("synthetic", 0, 48, 32, 6.0, seed)
    sample = qe._sample(*key)
    x, x64 = qe._as_float64(key, "k")
    assert x is sample.keys and torch.equal(x64, sample.keys.double())
    assert qe._as_float64(key, "k")[1] is x64  # reused
    k_trip, v_trip = qe._round_trips(key, "fp8_e4m3", "nearest")
    assert k_trip.original is x64 and v_trip.original is qe._as_float64(key, "v")[1]
    # a different tensor under the same key gets its own copy
    other = type(sample)(sample.queries, sample.keys + 1.0, sample.values, sample.source, sample.label)
    monkeypatch.setattr(qe, "_sample", lambda *k: other)
    y, y64 = qe._as_float64(key, "k")
    assert y is other.keys and torch.equal(y64, other.keys.double())


def test_a_sample_with_nan_is_refused_with_its_name(seed, monkeypatch):
    key = ("synthetic", 0, 40, 32, 4.0, seed + 1)
    sample = qe._sample(*key)
    values = sample.values.clone()
    values[5, 0, 1] = float("inf")
    poisoned = type(sample)(sample.queries, sample.keys, values, sample.source, sample.label)
    monkeypatch.setattr(qe, "_sample", lambda *k: poisoned)
    with pytest.raises(ValueError, match=r"values contains 1 non-finite value\(s\)"):
        qe._as_float64(key, "v")


def test_histogram_of_signed_errors_zeros_and_nan_by_hand():
    # |e| > 0: 0.01, 0.1 (twice, one negative), 1, 10 -> 5 counted; 0, -0.0 and NaN are not binned
    errors = torch.tensor([0.01, -0.1, 0.1, 1.0, -10.0, 0.0, -0.0, float("nan")], dtype=torch.float64)
    h = log_error_histogram(errors, bins=3)
    assert h.total == 8 and h.num_exact == 3
    # bins over log10 in [-2, 1]: [-2, -1), [-1, 0), [0, 1]
    assert h.counts == [1, 2, 2]
    np.testing.assert_allclose(h.edges, [0.01, 0.1, 1.0, 10.0], rtol=1e-12)
