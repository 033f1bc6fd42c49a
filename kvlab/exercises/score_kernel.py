"""Check for exercise 4: a Triton kernel that computes attention scores straight from int8 keys.

The learner's kernel reads int8 key codes and their per-token-head scales and applies the scale
*after* the dot product (the fused dequantization of vLLM's per-token-head modes)::

    S[h, j] = (q_h · K̂[j, g]) · (sm_scale · s[j, g])       g = h // GROUP (grouped-query attention)

The answer key dequantizes the keys with :func:`kvlab.dequantize_per_token_head` (exact, float64) and
takes the plain dot product, which is the same number up to fp32 rounding. Kernels run in Triton's
interpreter on CPU tensors (compiled on a GPU when one is present).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import torch

from kvlab.exercises.compare import close_tensor
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    LearnerError,
    choice,
    compare_and_diagnose,
    fresh_seed,
    learner_name,
    not_written_yet,
    randint,
    random_cases,
    run_check,
)
from kvlab.quantization import dequantize_per_token_head, quantize_per_token_head

#: Tolerance of the scores: fp32 dot products against a float64 answer.
RTOL = 1e-4
ATOL = 1e-4
#: What fills ``out`` past its end; a kernel that stores there without a mask overwrites it.
_GUARD = -7777.0
_HEAD_SHAPES = ((1, 1), (2, 1), (4, 1), (4, 2), (8, 2), (8, 8), (6, 3), (12, 4))


def _inputs(num_q_heads: int, num_kv_heads: int, head_size: int, num_keys: int, gen: torch.Generator,
            key_scale: float = 1.0) -> dict[str, Any]:
    keys = torch.randn(num_keys, num_kv_heads, head_size, generator=gen) * key_scale
    codes, scales = quantize_per_token_head(keys, "int8_per_token_head")
    query = torch.randn(num_q_heads, head_size, generator=gen)
    return {"q": query, "k_codes": codes, "k_scales": scales, "sm_scale": head_size**-0.5}


def expected_scores(
    q: torch.Tensor, k_codes: torch.Tensor, k_scales: torch.Tensor, sm_scale: float
) -> torch.Tensor:
    """``[num_q_heads, num_keys]`` float64 scores on the exactly dequantized keys (query head ``h`` reads
    KV head ``h // (num_q_heads / num_kv_heads)``)."""
    keys = dequantize_per_token_head(k_codes, k_scales, torch.float64)  # [keys, kv_heads, head]
    num_q_heads, num_kv_heads = q.shape[0], k_codes.shape[1]
    kv_head_of = torch.arange(num_q_heads) // (num_q_heads // num_kv_heads)
    return sm_scale * torch.einsum("hd,jhd->hj", q.double(), keys[:, kv_head_of])


def _random_case(gen: torch.Generator) -> dict[str, Any]:
    hq, hkv = choice(gen, _HEAD_SHAPES)
    return _inputs(hq, hkv, choice(gen, (16, 32, 64)), randint(gen, 1, 40), gen,
                   key_scale=10.0 ** (float(torch.rand((), generator=gen)) * 2 - 1))


def _edge_cases() -> list[Case]:
    gen = torch.Generator().manual_seed(4)
    outlier = _inputs(4, 2, 32, 9, gen)
    keys = torch.randn(9, 2, 32, generator=gen)
    keys[3] *= 100.0
    outlier["k_codes"], outlier["k_scales"] = quantize_per_token_head(keys, "int8_per_token_head")
    zero_key = _inputs(2, 1, 16, 5, gen)
    zero_key["k_codes"][2] = 0
    zero_key["k_scales"][2] = 1e-6
    return [
        Case("one key", _inputs(2, 1, 16, 1, gen), edge=True),
        Case("13 keys (not a power of two: mask the tail)", _inputs(4, 4, 32, 13, gen), edge=True),
        Case("GQA: 8 query heads share 2 KV heads", _inputs(8, 2, 32, 16, gen), edge=True),
        Case("one key 100× larger than the others", outlier, edge=True),
        Case("an all-zero key (scale 1e-6)", zero_key, edge=True),
        Case("head size 64, 33 keys", _inputs(6, 3, 64, 33, gen), edge=True),
    ]


def _launch(kernel: Any, args: dict[str, Any], triton: Any, device: torch.device) -> torch.Tensor:
    """Run the learner's kernel on padded buffers; returns ``[num_q_heads, num_keys + guard]``."""
    q, codes, scales = args["q"], args["k_codes"], args["k_scales"]
    num_q_heads, head_size = q.shape
    num_keys, num_kv_heads = codes.shape[:2]
    block = max(16, triton.next_power_of_2(num_keys))
    # rows past num_keys exist (so unmasked loads stay in memory) but hold values that spoil a result
    padded_codes = torch.full((block, num_kv_heads, head_size), 127, dtype=torch.int8)
    padded_codes[:num_keys] = codes
    padded_scales = torch.full((block, num_kv_heads), float("nan"))
    padded_scales[:num_keys] = scales
    out = torch.full((num_q_heads * num_keys + block,), _GUARD)
    out[: num_q_heads * num_keys] = float("nan")
    out_dev = out.to(device)
    kernel[(num_q_heads,)](
        q.float().contiguous().to(device), padded_codes.to(device), padded_scales.to(device), out_dev,
        float(args["sm_scale"]), num_keys,
        NUM_KV_HEADS=num_kv_heads, GROUP=num_q_heads // num_kv_heads, HEAD_SIZE=head_size, BLOCK_KEYS=block,
    )
    return out_dev.cpu()


def _diagnose(args: dict[str, Any], got: torch.Tensor, expected: torch.Tensor) -> str | None:
    if bool(torch.isnan(got).all()):
        return "out still holds NaN everywhere: the kernel stored nothing (is its body still empty?)"
    q, codes, scales, sm_scale = args["q"], args["k_codes"], args["k_scales"], args["sm_scale"]
    hq, hkv = q.shape[0], codes.shape[1]

    def matches(alt: torch.Tensor) -> bool:
        return bool(torch.allclose(got.double(), alt, rtol=RTOL, atol=ATOL))

    keys = dequantize_per_token_head(codes, scales, torch.float64)
    interleaved = sm_scale * torch.einsum("hd,jhd->hj", q.double(), keys[:, torch.arange(hq) % hkv])
    if hq != hkv and matches(interleaved):
        return ("query head h must read KV head h // GROUP (consecutive query heads share a KV head), "
                "not h % NUM_KV_HEADS")
    if matches(expected / sm_scale):
        return "the scores are missing the softmax scale sm_scale"
    no_scale = expected_scores(q, codes, torch.ones_like(scales), sm_scale)
    if matches(no_scale):
        return "the scores use the raw int8 codes: multiply each key's dot product by its scale s[j, g]"
    return None


def _body_is_empty(kernel: Any) -> bool:
    """True when the kernel's body holds nothing but ``pass``, ``...``, a docstring or comments."""
    try:  # a compiled kernel (JITFunction) keeps its source; the interpreter's wrapper keeps .fn
        source = textwrap.dedent(inspect.getsource(getattr(kernel, "fn", kernel)))
        source = source[source.index("def "):]
        body = ast.parse(source).body[0].body
    except Exception:  # no source to read: let the cases judge it
        return False
    return all(
        isinstance(statement, ast.Pass)
        or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))
        for statement in body
    )


def check_int8_scores_kernel(kernel: Any, *, seed: int | None = None, num_random: int = 20) -> CheckResult:
    """Check a Triton kernel ``kernel[(num_q_heads,)](q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale,
    num_keys, NUM_KV_HEADS=, GROUP=, HEAD_SIZE=, BLOCK_KEYS=)``.

    Layouts: ``q [num_q_heads, HEAD_SIZE]`` fp32, ``k_codes [num_keys, NUM_KV_HEADS, HEAD_SIZE]`` int8,
    ``k_scales [num_keys, NUM_KV_HEADS]`` fp32, ``out [num_q_heads, num_keys]`` fp32 scores. The buffers
    are padded to ``BLOCK_KEYS`` rows (poisoned), and writes past ``out`` are detected.
    Scores must agree with :func:`expected_scores` to ``1e-4 + 1e-4·|expected|``.
    """
    from kvlab.kernels.runtime import kernel_device, triton

    name = learner_name(kernel, "int8_scores_kernel")
    if not isinstance(kernel, triton.runtime.jit.KernelInterface):
        return CheckResult(name, False, (
            f"✗ {name}: expected a @triton.jit kernel, got {type(kernel).__name__}"
        ))
    if _body_is_empty(kernel):
        return not_written_yet(name, " (its body is still only `pass`)")
    device = kernel_device()
    seed = fresh_seed() if seed is None else seed
    cases = _edge_cases() + random_cases(num_random, seed, _random_case)

    def trial(case: Case) -> str | None:
        args = case.args
        want = expected_scores(**args)
        try:
            raw = _launch(kernel, args, triton, device)
        except Exception as error:  # the learner's kernel failed to compile or run
            raise LearnerError(error, None) from None
        num_q_heads, num_keys = want.shape
        if not bool((raw[num_q_heads * num_keys :] == _GUARD).all()):
            return ("the kernel wrote past the end of out: mask the stores with offsets < num_keys "
                    "(BLOCK_KEYS can be larger than num_keys)")
        got = raw[: num_q_heads * num_keys].view(num_q_heads, num_keys)
        compare = lambda e, g: close_tensor(e, g, "scores", rtol=RTOL, atol=ATOL)
        return compare_and_diagnose(case, want, got, compare, lambda c, e, g: _diagnose(c.args, g, e))

    return run_check(
        name, cases, trial, verified="scores match float64 attention on dequantized keys (GQA included)",
        seed=seed, replay=f"check_int8_scores_kernel({name}, seed={seed})",
    )
