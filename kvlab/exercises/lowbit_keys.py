"""Check of exercise 13: quantize one block of keys per channel, KIVI style (a kvlab scheme).

The answer key is kvlab's own reference quantizer (:func:`kvlab.quantization.lowbit.quantize_key_block`
and :func:`kvlab.quantization.lowbit.pack_codes`): per (head, channel), over the block's tokens,
``z = fp16(min)``, ``s = fp16(max((max − z) / Q, 2**-14))``, ``q = round_half_even(clamp((x − z)·fl(1/s),
0, Q))``, codes packed ``8 / bits`` to a byte, low bits first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.compare import same_tensor
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.quantization.lowbit import pack_codes, quantize_asymmetric, quantize_key_block

_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def key_block_answer(keys: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """kvlab's answer: ``(packed codes [B, H, D·bits/8] uint8, scale [H, D] fp16, zero [H, D] fp16)``."""
    codes, scale, zero = quantize_key_block(keys, bits)
    return pack_codes(codes, bits), scale, zero


def _random_block(gen: torch.Generator) -> dict[str, Any]:
    shape = (choice(gen, (2, 4, 16, 32)), randint(gen, 1, 4), choice(gen, (8, 32, 64, 128)))
    magnitude = 10.0 ** (float(torch.rand((), generator=gen)) * 4 - 2)
    x = torch.randn(shape, generator=gen) * magnitude + float(torch.randn((), generator=gen)) * magnitude
    if choice(gen, (True, False)):
        x[..., randint(gen, 0, shape[-1] - 1)] += 20 * magnitude  # an outlier channel
    return {"keys": x.to(choice(gen, _DTYPES)), "bits": choice(gen, (2, 4))}


def _edge_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(13)
    # channel 0 holds 0, 1, 2, 3 (z = 0, s = 1 at 2 bits); channel 1 is constant (zero range)
    ladder = torch.zeros(4, 1, 4)
    ladder[:, 0, 0] = torch.tensor([0.0, 1.0, 2.0, 3.0])
    ladder[:, 0, 1] = -1.5
    ladder[:, 0, 2:] = torch.randn(4, 2, generator=gen)
    outlier = torch.randn(16, 2, 32, generator=gen)
    outlier[:, :, 5] += 40.0
    return [
        Case("codes 0..3 in one channel, a constant channel", {"keys": ladder, "bits": 2}, edge=True),
        Case("an outlier channel (+40), 4 bits", {"keys": outlier, "bits": 4}, edge=True),
        Case("all values negative", {"keys": -torch.rand(16, 1, 8, generator=gen) - 1, "bits": 2}, edge=True),
        Case("bfloat16 keys, 32 tokens x 8 heads x 128",
             {"keys": torch.randn(32, 8, 128, generator=gen).bfloat16(), "bits": 4}, edge=True),
    ]


def _compare(expected, got: Any) -> str | None:
    if not isinstance(got, tuple) or len(got) != 3:
        return f"return a tuple (packed, scale, zero); got {type(got).__name__}"
    want_packed, want_scale, want_zero = expected
    packed, scale, zero = got
    return (same_tensor(want_scale, scale, "scale") or same_tensor(want_zero, zero, "zero")
            or same_tensor(want_packed, packed, "packed"))


def _diagnose(case: Case, expected, got: Any) -> str | None:
    """Name the likely mistake: the wrong axis, unpacked codes, the nibble order, fp32 scales."""
    if not isinstance(got, tuple) or len(got) != 3 or not all(isinstance(t, torch.Tensor) for t in got):
        return None
    keys, bits = case.args["keys"], case.args["bits"]
    packed, scale, zero = got
    b, h, d = keys.shape
    _, per_token, _ = quantize_asymmetric(keys, bits, -1)
    if tuple(scale.shape) in {(b, h), (b, h, 1)} or (scale.numel() == per_token.numel()
                                                       and torch.equal(scale.reshape(-1).float(),
                                                                       per_token.reshape(-1).float())):
        return ("you quantized along the wrong axis: keys are quantized per channel, so min and max run "
                "over the tokens of the block (dim 0), giving one scale and zero point per (head, channel), "
                "shape [heads, head_size]")
    if scale.dtype != torch.float16 or zero.dtype != torch.float16:
        return "scale and zero point are stored as float16: round them (.half()) before computing the codes"
    want_packed, want_scale, _ = expected
    if tuple(packed.shape) == (b, h, d):
        return f"pack the codes: {8 // bits} codes per byte, shape [block, heads, head_size * {bits} / 8]"
    codes = quantize_key_block(keys, bits)[0]
    per = 8 // bits
    flipped = pack_codes(codes.reshape(b, h, d // per, per).flip(-1).reshape(b, h, d), bits)
    if packed.shape == want_packed.shape and torch.equal(packed, flipped):
        return "code k of a byte sits at bits [k*bits, (k+1)*bits): the first channel goes in the low bits"
    return None


def check_quantize_key_block(
    quantize_key_block: Callable[[torch.Tensor, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]],
    *,
    seed: int | None = None,
    num_random: int = 100,
) -> CheckResult:
    """Check ``quantize_key_block(keys, bits) -> (packed, scale, zero)`` against kvlab's quantizer.

    Args:
        quantize_key_block: the learner's function; ``keys`` is ``[block_size, heads, head_size]``
            float32/float16/bfloat16 and ``bits`` is 2 or 4.
        seed: seed of the random cases (default: fresh each call).
        num_random: random cases, tried after the edge cases.

    Returns:
        A :class:`~kvlab.exercises.CheckResult`: scale and zero point (fp16) and packed codes (uint8)
        bit-exact.
    """
    return check_learner(
        quantize_key_block, "quantize_key_block", "check_quantize_key_block", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_block),
        trial=lambda fn: function_trial(fn, key_block_answer, _compare, _diagnose),
        verified="per-channel fp16 scales and zero points and packed codes bit-exact", general_first=True,
    )
