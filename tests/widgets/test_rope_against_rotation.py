"""RoPE against the 2-D rotation written out in float64 (Llama's half-split pairs), for each input dtype."""

from __future__ import annotations

import pytest
import torch

from kvlab.kvdata.synthetic import rope_rotate

TOLERANCES = [(torch.float64, 1e-12), (torch.float32, 2e-6), (torch.bfloat16, 2e-2)]


@pytest.mark.parametrize(("dtype", "tol"), TOLERANCES)
def test_rope_is_the_pairwise_rotation(dtype, tol, gen):
    tokens, heads, d, base = 33, 3, 12, 500.0
    x = (torch.randn(tokens, heads, d, generator=gen) * 3).to(dtype)
    pos = torch.randperm(4096, generator=gen)[:tokens]
    y = rope_rotate(x, pos, base)
    assert y.dtype == dtype and y.shape == x.shape
    xd = x.double()
    want = torch.empty_like(xd)
    for i in range(d // 2):
        angle = pos.double() * base ** (-2.0 * i / d)
        c, s = angle.cos()[:, None], angle.sin()[:, None]
        want[..., i] = xd[..., i] * c - xd[..., i + d // 2] * s
        want[..., i + d // 2] = xd[..., i] * s + xd[..., i + d // 2] * c
    torch.testing.assert_close(y.double(), want, rtol=tol, atol=tol * 10)
