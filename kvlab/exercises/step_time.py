"""Checks for exercise 12: a decode step's time from the roofline.

A decode step of ``batch`` sequences, each with ``context`` cached tokens, costs (memory bound, every
part at the GPU's peak, no overhead):

* the weight GEMMs: ``max(2 × parameters × batch / peak FLOP/s, weight bytes / bandwidth)``;
* the attention: each sequence reads the K/V of ``context + 1`` tokens (its new token included) in
  every full-attention layer, and of at most ``window`` tokens in a sliding-window layer;
* the cache write: ``batch`` new tokens' K/V in every layer.

``decode_step_ms(model, kv_cache_dtype, gpu, batch, context)`` returns milliseconds. The answer key
is :class:`kvlab.timing.StepTimeModel` with :meth:`kvlab.timing.Efficiencies.pure` (bf16 weights).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.compare import close_float
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.models import get_model
from kvlab.timing import Efficiencies, StepTimeModel

#: Dense models only (a mixture-of-experts model reads only some of its weights per token).
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "mistral-7b-v0.1", "gemma-3-27b")
SCHEMES = ("bfloat16", "fp8", "int8_per_token_head", "fp8_per_token_head")
GPUS = ("h100-sxm", "h200", "b200", "a100-80gb", "l40s", "rtx-4090")


def expected_decode_step_ms(model: str, kv_cache_dtype: str, gpu: str, batch: int, context: int) -> float:
    """kvlab's answer: the pure-roofline time of one decode step (milliseconds, bf16 weights)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the pure roofline has every scheme: no fallback may happen
        timer = StepTimeModel(gpu, get_model(model), kv_cache_dtype, efficiencies=Efficiencies.pure())
    return timer.step_time([(1, context)] * batch).total_s * 1e3


def _random_case(gen: torch.Generator) -> dict[str, Any]:
    return {
        "model": choice(gen, MODELS),
        "kv_cache_dtype": choice(gen, SCHEMES),
        "gpu": choice(gen, GPUS),
        "batch": choice(gen, (1, 8, 64, 256, randint(gen, 1, 512))),
        "context": choice(gen, (0, 100, 1023, 4096, 32767, randint(gen, 0, 131071))),
    }


def _edge_cases() -> list[Case]:
    def case(label: str, model: str, dtype: str, gpu: str, batch: int, context: int) -> Case:
        return Case(
            label,
            {"model": model, "kv_cache_dtype": dtype, "gpu": gpu, "batch": batch, "context": context},
            edge=True,
        )

    return [
        case("one sequence: the weights dominate", "llama-3.1-8b", "bfloat16", "h100-sxm", 1, 1023),
        case(
            "long contexts: the cache dominates", "llama-3.1-8b", "int8_per_token_head", "h100-sxm", 64, 32767
        ),
        case("a batch large enough to be compute bound", "llama-3.1-8b", "bfloat16", "rtx-4090", 512, 0),
        case("sliding layers read at most their window", "gemma-3-27b", "fp8", "b200", 16, 100_000),
        case("every layer sliding (window 4096)", "mistral-7b-v0.1", "bfloat16", "l40s", 8, 20_000),
    ]


def _diagnose(case: Case, expected: float, got: Any) -> str | None:
    if not isinstance(got, (int, float)) or isinstance(got, bool) or got <= 0:
        return None
    if abs(got / expected - 1e3) < 1e-3 or abs(got / expected - 1e-3) < 1e-6:
        return "the answer is in milliseconds: seconds × 1000"
    args = dict(case.args)
    timer = StepTimeModel(
        args["gpu"], get_model(args["model"]), args["kv_cache_dtype"], efficiencies=Efficiencies.pure()
    )
    parts = timer.step_time([(1, args["context"])] * args["batch"])
    missing = (expected - got) / 1e3
    for name, value in (
        ("the cache write (batch new tokens in every layer)", parts.cache_write_s),
        ("the attention's K/V reads", parts.attention_decode_s),
    ):
        if value and abs(missing - value) < 1e-6 * expected:
            return f"your time is short by exactly {name}"
    if timer.gemm_time(args["batch"])[1] == "compute" and got < expected:
        return "at this batch the GEMMs are compute bound: take the larger of compute and weight reading"
    return None


def check_decode_step_time(
    decode_step_ms: Callable[..., float], *, seed: int | None = None, num_random: int = 100
) -> CheckResult:
    """Check ``decode_step_ms(model, kv_cache_dtype, gpu, batch, context) -> float`` (milliseconds)
    against kvlab's pure-roofline step time, to a relative 1e-6."""
    return check_learner(
        decode_step_ms, "decode_step_ms", "check_decode_step_time", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_case),
        trial=lambda fn: function_trial(
            fn, expected_decode_step_ms,
            lambda want, got: close_float(want, got, "step time (ms)", rel_tol=1e-6), _diagnose,
        ),
        verified="step times equal kvlab.timing's pure roofline",
    )
