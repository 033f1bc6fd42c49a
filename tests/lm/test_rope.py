"""RoPE on adjacent channel pairs, checked against hand-computed rotations."""

import math

import torch

from kvlab.lm.rope import apply_rope, rope_angles


def test_pair_zero_rotates_by_the_position_in_radians():
    # pair 0 has frequency base^0 = 1, so at position 3 the pair (1, 0) becomes (cos 3, sin 3);
    # pair 1 of a 4-channel head has frequency 100^(-2/4) = 0.1: (0, 2) at position 3 becomes
    # (-2 sin 0.3, 2 cos 0.3)
    x = torch.tensor([[[1.0, 0.0, 0.0, 2.0]]])
    out = apply_rope(x, rope_angles(torch.tensor([3]), rope_dim=4, base=100.0))
    expect = torch.tensor([math.cos(3), math.sin(3), -2 * math.sin(0.3), 2 * math.cos(0.3)])
    torch.testing.assert_close(out[0, 0], expect, rtol=0, atol=1e-6)


def test_channels_beyond_rope_dim_pass_through_and_position_zero_is_identity(gen):
    x = torch.randn(2, 3, 8, generator=gen)
    rot = rope_angles(torch.tensor([0, 7]), rope_dim=4, base=10000.0)
    out = apply_rope(x, rot)
    torch.testing.assert_close(out[0], x[0], rtol=0, atol=1e-7)
    torch.testing.assert_close(out[1, :, 4:], x[1, :, 4:], rtol=0, atol=0)
    assert not torch.allclose(out[1, :, :4], x[1, :, :4])


def test_scores_depend_only_on_the_distance(gen):
    # the property RoPE exists for: q at p and k at j give the same dot product for equal p - j
    q, k = torch.randn(1, 1, 64, generator=gen), torch.randn(1, 1, 64, generator=gen)

    def score(p, j):
        rq = apply_rope(q, rope_angles(torch.tensor([p]), 64, 100000.0))
        rk = apply_rope(k, rope_angles(torch.tensor([j]), 64, 100000.0))
        return float((rq * rk).sum())

    assert abs(score(10, 4) - score(1006, 1000)) < 1e-3
    assert abs(score(10, 4) - score(10, 9)) > 1e-3
