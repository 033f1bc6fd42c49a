"""Checks for the quantization exercises: per-token-head INT8 (exercise 2) and truncation versus
round-to-nearest (exercise 3). kvlab's :func:`~kvlab.quantize_per_token_head` is the answer key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.compare import close_float, same_tensor
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.quantization import INT8_QMAX, dequantize_per_token_head, quantize_per_token_head
from kvlab.reference import relative_error

INT8 = "int8_per_token_head"
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# -- inputs -------------------------------------------------------------------------------------------


def _random_kv(gen: torch.Generator) -> dict[str, Any]:
    """K- or V-like values ``[tokens, kv_heads, head_size]``: normal, uniform or with an outlier channel."""
    shape = (randint(gen, 1, 8), randint(gen, 1, 4), choice(gen, (1, 2, 8, 16, 64, 128)))
    magnitude = 10.0 ** (float(torch.rand((), generator=gen)) * 6 - 3)
    kind = choice(gen, ("normal", "uniform", "outlier channel"))
    if kind == "uniform":
        x = (torch.rand(shape, generator=gen) * 2 - 1) * magnitude
    else:
        x = torch.randn(shape, generator=gen) * magnitude
        if kind == "outlier channel":
            x[..., randint(gen, 0, shape[-1] - 1)] *= 20
    return {"x": x.to(choice(gen, _DTYPES))}


def _edge_cases_int8() -> list[Case]:
    gen = torch.Generator().manual_seed(0)
    zero_head = torch.randn(3, 2, 8, generator=gen)
    zero_head[1, 0] = 0.0
    negative_peak = torch.tensor([[-4.0, 1.0, 2.0, 3.0], [0.5, -0.25, 0.125, -1.5]])
    # max|x| = 127 gives s = 1 exactly, so these values land on .5 and must round half to even
    ties = torch.tensor([127.0, 2.5, -3.5, 0.5, -0.5, 1.5, -2.5, 6.5])
    return [
        Case("all-zero head vector", {"x": zero_head}, edge=True),
        Case("tiny values below the scale floor", {"x": torch.randn(2, 3, 16, generator=gen) * 1e-5},
             edge=True),
        Case("largest magnitude is negative", {"x": negative_peak}, edge=True),
        Case("halfway values (x.5 steps)", {"x": ties}, edge=True),
        Case("head size 1", {"x": torch.randn(4, 3, 1, generator=gen)}, edge=True),
        Case("float16 input, large values", {"x": (torch.randn(5, 2, 32, generator=gen) * 300).half()},
             edge=True),
        Case("bfloat16 input", {"x": torch.randn(6, 4, 64, generator=gen).bfloat16()}, edge=True),
    ]


# -- exercise 2: per-token-head INT8 ------------------------------------------------------------------


def _int8_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return quantize_per_token_head(x, INT8, "nearest")


def _compare_int8(expected: tuple[torch.Tensor, torch.Tensor], got: Any) -> str | None:
    if not isinstance(got, tuple) or len(got) != 2:
        return f"return a tuple (codes, scales); got {type(got).__name__}"
    want_codes, want_scales = expected
    codes, scales = got
    return same_tensor(want_scales, scales, "scales") or same_tensor(want_codes, codes, "codes")


def _same(a: torch.Tensor, b: Any) -> bool:
    return isinstance(b, torch.Tensor) and a.shape == b.shape and bool((a.float() == b.float()).all())


def _diagnose_int8(case: Case, expected: tuple[torch.Tensor, torch.Tensor], got: Any) -> str | None:
    """Name the likely mistake when the learner's output matches a known wrong variant."""
    if not isinstance(got, tuple) or len(got) != 2:
        return None
    x = case.args["x"]
    codes, scales = got
    want_codes, want_scales = expected
    if isinstance(scales, torch.Tensor) and scales.dim() == 0 and want_scales.dim() > 0:
        return "one scale per tensor is per-tensor quantization; take max|x| over the last dimension only"
    if _same(want_scales, scales):
        if _same(quantize_per_token_head(x, INT8, "truncate")[0], codes):
            return "your codes match rounding toward zero (truncation); round to nearest with torch.round"
        halfway = torch.floor(x.float() * (1.0 / want_scales).unsqueeze(-1) + 0.5).clamp(-128, 127)
        if _same(halfway, codes):
            return "halfway values round to the even neighbour (2.5 → 2, -3.5 → -4); torch.round does that"
        if isinstance(codes, torch.Tensor) and codes.shape == want_codes.shape:
            diff = (codes.float() - want_codes.float()).abs()
            if float(diff.max()) == 1.0 and float((diff > 0).float().mean()) < 0.05:
                return ("a few codes are one step off: compute y = x * (1/s) with the fp32 reciprocal, "
                        "as the kernel does, rather than x / s")
        return None
    if not isinstance(scales, torch.Tensor) or scales.shape != want_scales.shape:
        return None
    xf = x.float()
    uniform = scales.numel() > 1 and bool((scales == scales.reshape(-1)[0]).all())
    if uniform and bool((want_scales != want_scales.reshape(-1)[0]).any()):
        return "every head vector got the same scale (per-tensor); take max|x| over the last dimension only"
    signed_max = xf.amax(dim=-1) / INT8_QMAX
    if _same(signed_max, scales) or _same(signed_max.clamp(min=1e-6), scales):
        return "the scale comes from the largest magnitude, max(|x|), not the largest value max(x)"
    if _same(xf.abs().amax(dim=-1) / INT8_QMAX, scales):
        return "an all-zero (or tiny) head vector needs the floor: s = max(max|x| / 127, 1e-6)"
    if x.dtype != torch.float32 and _same((x.abs().amax(dim=-1) / INT8_QMAX).clamp(min=1e-6).float(), scales):
        return f"the input is {x.dtype}; compute the scale in float32 (x.float()) as the kernel does"
    return None


def check_quantize_int8(
    quantize_int8: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    *,
    seed: int | None = None,
    num_random: int = 200,
) -> CheckResult:
    """Check ``quantize_int8(x) -> (codes, scales)`` against ``kvlab.quantize_per_token_head``.

    Per head vector (last dimension of ``x``): ``s = max(max|x| / 127, 1e-6)`` in fp32,
    ``codes = round_half_even(clamp(x * fl(1/s), -128, 127))`` as int8. Scales and codes must be
    bit-exact.

    Args:
        quantize_int8: the learner's function; ``x`` is ``[..., head_size]`` float16/bfloat16/float32.
        seed: seed of the random cases (default: fresh each call).
        num_random: number of random cases, tried after the edge cases.

    Returns:
        A :class:`~kvlab.exercises.CheckResult`.
    """
    return check_learner(
        quantize_int8, "quantize_int8", "check_quantize_int8", seed=seed,
        cases=lambda s: _edge_cases_int8() + random_cases(num_random, s, _random_kv),
        trial=lambda fn: function_trial(fn, _int8_reference, _compare_int8, _diagnose_int8),
        verified="scales (fp32) and codes (int8) bit-exact", general_first=True,
    )


# -- exercise 3: truncation versus nearest rounding ---------------------------------------------------


def rounding_comparison(x: torch.Tensor) -> tuple[float, float, float]:
    """kvlab's answer to exercise 3, from its own quantizer and error measure.

    Returns:
        ``(error_nearest, error_truncate, fraction_differ)``: the relative error
        ``‖dequantize(quantize(x)) − x‖ / ‖x‖`` (float64) with each rounding, and the fraction of int8
        codes on which the two roundings disagree.
    """
    reference = x.double()
    errors = []
    codes = []
    for rounding in ("nearest", "truncate"):
        c, s = quantize_per_token_head(x, INT8, rounding)
        errors.append(relative_error(dequantize_per_token_head(c, s, torch.float64), reference))
        codes.append(c)
    differ = float((codes[0] != codes[1]).double().mean()) if x.numel() else 0.0
    return errors[0], errors[1], differ


def _random_normal_kv(gen: torch.Generator) -> dict[str, Any]:
    shape = (randint(gen, 1, 16), randint(gen, 1, 4), choice(gen, (8, 32, 64, 128)))
    scale = 10.0 ** (float(torch.rand((), generator=gen)) * 4 - 2)
    return {"x": (torch.randn(shape, generator=gen) * scale).to(choice(gen, _DTYPES))}


def _edge_cases_rounding() -> list[Case]:
    gen = torch.Generator().manual_seed(1)
    on_grid = torch.randint(-127, 128, (4, 2, 16), generator=gen).float()
    on_grid[..., 0] = 127.0  # s = 1: every value is already a code, both roundings agree
    return [
        Case("all-zero tensor", {"x": torch.zeros(2, 2, 8)}, edge=True),
        Case("values already on the int8 grid", {"x": on_grid}, edge=True),
        Case("only negative values", {"x": -torch.rand(3, 2, 32, generator=gen) - 0.1}, edge=True),
        Case("one head vector of 128 values", {"x": torch.randn(128, generator=gen)}, edge=True),
        Case("float16 keys, 64 tokens × 8 heads × 128", {"x": torch.randn(64, 8, 128, generator=gen).half()},
             edge=True),
    ]


def _compare_rounding(expected: tuple[float, float, float], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return f"return a tuple (error_nearest, error_truncate, fraction_differ); got {type(got).__name__}"
    names = ("error_nearest", "error_truncate", "fraction_differ")
    for what, want, value in zip(names, expected, got, strict=True):
        problem = close_float(want, value, what, rel_tol=1e-4, abs_tol=1e-7)
        if problem:
            return problem
    return None


def _diagnose_rounding(case: Case, expected: tuple[float, float, float], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 3:
        return None
    try:
        values = [float(v) for v in got]
    except (TypeError, ValueError):
        return None
    if any(v != v for v in values) and not case.args["x"].any():
        return "‖x‖ is 0 here; kvlab.relative_error returns the plain norm of the difference in that case"
    if values[0] == values[0] and abs(values[0] - expected[1]) <= 1e-4 * max(expected[1], 1e-12):
        return "error_nearest looks like the truncation error: are the roundings swapped?"
    if values[2] > 1:
        return "fraction_differ is a fraction: divide the number of differing codes by the number of codes"
    count = values[2] * case.args["x"].numel()
    if 0 < values[2] < 1 and abs(count - round(count)) > 1e-6:
        return "fraction_differ is (number of codes that differ) / (number of codes)"
    return None


def check_rounding_comparison(
    compare_roundings: Callable[[torch.Tensor], tuple[float, float, float]],
    *,
    seed: int | None = None,
    num_random: int = 50,
) -> CheckResult:
    """Check ``compare_roundings(x) -> (error_nearest, error_truncate, fraction_differ)``.

    The errors are ``relative_error(dequantized, x)`` in float64 after int8 per-token-head quantization
    with ``rounding="nearest"`` and ``"truncate"``; the fraction counts codes that differ between the
    two. Compared with :func:`rounding_comparison` to a relative 1e-4.
    """
    return check_learner(
        compare_roundings, "compare_roundings", "check_rounding_comparison", seed=seed,
        cases=lambda s: _edge_cases_rounding() + random_cases(num_random, s, _random_normal_kv),
        trial=lambda fn: function_trial(fn, rounding_comparison, _compare_rounding, _diagnose_rounding),
        verified="both relative errors and the fraction of differing codes match kvlab", general_first=True,
    )
