"""Exercise 13's check: passes the right answer, fails each common mistake with a hint naming it."""

from __future__ import annotations

import pytest
import torch

from kvlab.exercises import check_quantize_key_block


def _quantize(keys, bits, *, dim=0, pack=True, flip=False, half=True):
    """A hand-written quantizer with switchable mistakes (the right one with the defaults)."""
    x = keys.float()
    q = torch.tensor(float(2**bits - 1))
    lo, hi = x.amin(dim=dim, keepdim=True), x.amax(dim=dim, keepdim=True)
    zero = lo.half() if half else lo
    scale = torch.clamp((hi - zero.float()) / q, min=2.0**-14)
    scale = scale.half() if half else scale
    inv = torch.ones_like(scale, dtype=torch.float32) / scale.float()
    codes = torch.round(torch.clamp((x - zero.float()) * inv, 0.0, float(2**bits - 1))).to(torch.int32)
    if dim == 0:
        scale, zero = scale.squeeze(0), zero.squeeze(0)
    else:
        scale, zero = scale.squeeze(-1), zero.squeeze(-1)
    if not pack:
        return codes.to(torch.uint8), scale, zero
    per = 8 // bits
    b, h, d = keys.shape
    c = codes.reshape(b, h, d // per, per)
    if flip:
        c = c.flip(-1)
    shifts = torch.arange(per, dtype=torch.int32) * bits
    return (c << shifts).sum(-1).to(torch.uint8), scale, zero


def test_right_answer_passes(seed):
    result = check_quantize_key_block(_quantize, seed=seed, num_random=30)
    assert result.passed, result.message


@pytest.mark.parametrize("mistake, hint", [
    (dict(dim=-1), "wrong axis"),
    (dict(pack=False), "pack the codes"),
    (dict(flip=True), "low bits"),
    (dict(half=False), "float16"),
])
def test_mistakes_get_a_hint(seed, mistake, hint):
    result = check_quantize_key_block(lambda keys, bits: _quantize(keys, bits, **mistake), seed=seed,
                                      num_random=10)
    assert not result.passed
    assert hint in result.message, result.message
