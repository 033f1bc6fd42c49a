"""A new outlier strength reuses the round trips of V: synthetic values do not depend on it.

Checked against ``int8`` per-(token, head) restored from the format's definition (computed here),
so the reused trip is the right one for the new sample, not just the cached object.
"""

from __future__ import annotations

import torch

from kvlab.widgets import quantization_explorer as qe


def _int8_restore(x: torch.Tensor) -> torch.Tensor:
    """s = max|x| / 127 per (token, head), q = round(x / s), restored q·s (float64)."""
    xf = x.float()
    s = torch.clamp(xf.abs().amax(-1) / 127.0, min=1e-6)
    q = torch.round(torch.clamp(xf * (1.0 / s).unsqueeze(-1), -128, 127))
    return q.double() * s.double().unsqueeze(-1)


def test_values_do_not_depend_on_the_outlier_strength(seed):
    weak = qe._sample("synthetic", 0, 64, 32, 3.0, seed)
    strong = qe._sample("synthetic", 0, 64, 32, 40.0, seed)
    assert torch.equal(weak.values, strong.values)
    assert not torch.equal(weak.keys, strong.keys)


def test_new_outlier_strength_reuses_the_value_round_trip(seed):
    weak_key = ("synthetic", 0, 96, 32, 5.0, seed)
    strong_key = ("synthetic", 0, 96, 32, 35.0, seed)
    _, v_weak = qe._round_trips(weak_key, "int8_per_token_head", "nearest")
    k_strong, v_strong = qe._round_trips(strong_key, "int8_per_token_head", "nearest")
    assert v_strong is v_weak  # reused
    strong = qe._sample(*strong_key)
    assert torch.equal(v_strong.restored, _int8_restore(strong.values))
    assert torch.equal(k_strong.restored, _int8_restore(strong.keys))


def test_changed_values_are_not_reused(seed, monkeypatch):
    key = ("synthetic", 0, 80, 32, 7.0, seed)
    _, first = qe._round_trips(key, "int8_per_token_head", "nearest")
    sample = qe._sample(*key)
    poisoned = sample.values + 1.0  # same key, other values: the stored copy must not match
    other = type(sample)(sample.queries, sample.keys, poisoned, sample.source, sample.label, sample.note)
    monkeypatch.setattr(qe, "_sample", lambda *k: other)
    again = qe._value_round_trip(key, "int8_per_token_head", "nearest")
    assert again is not first
    assert torch.equal(again.restored, _int8_restore(poisoned))
