"""Checks for exercise 1: bytes per token of a real model, and how many requests its KV cache holds.

* ``bytes_per_token(model, kv_cache_dtype)``: bytes one token occupies over **all** layers of
  ``model`` on one GPU — K and V of every KV head, plus the two fp32 scales per (token, KV head) of
  the per-token-head schemes. The answer key is the page size of one-token blocks,
  ``model.layer_specs(block_size=1, ...)``, summed over layers.
* ``kv_capacity(model, kv_cache_dtype, available_bytes, max_model_len, block_size)`` for a
  full-attention model: ``(num_blocks, max_concurrency)`` as vLLM's startup computes them. The answer
  key is :func:`kvlab.sizing.plan_kv_cache`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from kvlab.exercises.compare import close_float, same_int
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.models import LayerKV, ModelKV, get_model
from kvlab.quantization import VLLM_SCHEME_NAMES
from kvlab.sizing import plan_kv_cache

GIB = 1 << 30
#: In-flight tokens handed to the planner; full-attention footprints do not depend on it.
_IN_FLIGHT_TOKENS = 2048
#: The vLLM version whose startup the capacity check imitates (no block held back for the null block).
_PROFILE = "vllm-0.21"


def model_summary(model: ModelKV) -> str:
    """``ModelKV 'llama-3.1-8b': 32 layers — 32 × full (8 KV heads × 128), bfloat16``."""
    kinds = Counter()
    for layer in model.layers:
        v = "" if layer.head_size_v in (None, layer.head_size) else f", V {layer.head_size_v}"
        window = f", window {layer.sliding_window}" if layer.kind == "sliding_window" else ""
        kinds[f"{layer.kind} ({layer.num_kv_heads} KV heads × {layer.head_size}{v}{window})"] += 1
    parts = ", ".join(f"{n} × {what}" for what, n in kinds.items())
    layers = "1 layer" if len(model.layers) == 1 else f"{len(model.layers)} layers"
    return f"ModelKV {model.name!r}: {layers} — {parts}, {model.dtype}"


def expected_bytes_per_token(model: ModelKV, kv_cache_dtype: str) -> int:
    """kvlab's answer: bytes one token occupies over all layers (one GPU, scales included)."""
    specs = model.layer_specs(block_size=1, kv_cache_dtype=kv_cache_dtype)
    return sum(spec.page_size_bytes for spec in specs.values())


def expected_kv_capacity(
    model: ModelKV, kv_cache_dtype: str, available_bytes: int, max_model_len: int, block_size: int
) -> tuple[int, float]:
    """kvlab's answer: ``(num_blocks, max_concurrency)`` of vLLM's startup for this memory."""
    plan = plan_kv_cache(
        model.layer_specs(block_size=block_size, kv_cache_dtype=kv_cache_dtype), available_bytes,
        max_model_len=max_model_len, in_flight_tokens=_IN_FLIGHT_TOKENS, profile=_PROFILE,
    )
    return plan.num_blocks, plan.max_concurrency


# -- inputs -------------------------------------------------------------------------------------------


def _random_layer(gen: torch.Generator, index: int, kinds: tuple[str, ...]) -> LayerKV:
    kind = choice(gen, kinds)
    head = choice(gen, (64, 80, 128, 256, 512))
    head_v = choice(gen, (None, None, None, head, 64, 128))
    return LayerKV(
        name=f"layers.{index}", kind=kind, num_kv_heads=choice(gen, (1, 2, 4, 8, 16)), head_size=head,
        head_size_v=head_v, sliding_window=randint(gen, 128, 4096) if kind == "sliding_window" else None,
    )


def _random_model(gen: torch.Generator, kinds: tuple[str, ...]) -> ModelKV:
    """A model of 1–6 distinct layer shapes repeated up to 64 layers."""
    shapes = [_random_layer(gen, i, kinds) for i in range(randint(gen, 1, 4))]
    count = randint(gen, 1, 64)
    layers = tuple(
        LayerKV(f"layers.{i}", s.kind, s.num_kv_heads, s.head_size, s.head_size_v, s.sliding_window)
        for i, s in ((i, shapes[randint(gen, 0, len(shapes) - 1)]) for i in range(count))
    )
    return ModelKV(f"random model ({count} layers)", layers, max_position_embeddings=131072,
                   dtype=choice(gen, ("bfloat16", "float16", "float32")))


def _bytes_case(model: ModelKV, dtype: str, label: str, edge: bool) -> Case:
    args = {"model": model, "kv_cache_dtype": dtype}
    return Case(label, args, edge=edge, shown={"model": model_summary(model)})


def _random_bytes_case(gen: torch.Generator) -> dict[str, Any]:
    model = _random_model(gen, ("full", "sliding_window"))
    return {"model": model, "kv_cache_dtype": choice(gen, VLLM_SCHEME_NAMES)}


def _bytes_cases(num_random: int, seed: int) -> list[Case]:
    llama = get_model("llama-3.1-8b")
    edges = [
        _bytes_case(llama, "auto", "Llama-3.1-8B, bf16 cache", True),
        _bytes_case(llama, "fp8", "Llama-3.1-8B, fp8 per-tensor cache", True),
        _bytes_case(llama, "int8_per_token_head", "Llama-3.1-8B, int8 per-token-head", True),
        _bytes_case(get_model("gemma-4-31b"), "fp8_per_token_head",
                    "Gemma-4-31B (two head shapes), fp8 per-token-head", True),
        _bytes_case(ModelKV("float32 model", (LayerKV("layers.0", "full", 2, 64),), 4096, dtype="float32"),
                    "auto", "a float32 model with the 'auto' cache", True),
        _bytes_case(ModelKV("V head differs", (LayerKV("layers.0", "full", 4, 192, head_size_v=128),), 4096),
                    "bfloat16", "K head 192, V head 128", True),
    ]
    randoms = random_cases(num_random, seed, _random_bytes_case)
    return edges + [_bytes_case(c.args["model"], c.args["kv_cache_dtype"], c.label, False) for c in randoms]


def _capacity_case(label: str, edge: bool, **args: Any) -> Case:
    return Case(label, args, edge=edge, shown={"model": model_summary(args["model"])})


def _random_capacity_args(gen: torch.Generator) -> dict[str, Any]:
    model = _random_model(gen, ("full",))
    dtype = choice(gen, VLLM_SCHEME_NAMES)
    block = choice(gen, (16, 32, 64))
    length = choice(gen, (2048, 4096, 8192, 32768, 131072, randint(gen, 100, 20000)))
    one_request = expected_bytes_per_token(model, dtype) * (length + block)
    available = one_request * randint(gen, 1, 40) + randint(gen, 0, one_request)
    return {"model": model, "kv_cache_dtype": dtype, "available_bytes": available, "max_model_len": length,
            "block_size": block}


def _capacity_cases(num_random: int, seed: int) -> list[Case]:
    llama8, llama70, qwen = get_model("llama-3.1-8b"), get_model("llama-3.1-70b"), get_model("qwen3-8b")
    def edge(label: str, model: ModelKV, dtype: str, available: int, length: int, block: int) -> Case:
        return _capacity_case(label, True, model=model, kv_cache_dtype=dtype, available_bytes=available,
                              max_model_len=length, block_size=block)

    edges = [
        edge("Llama-3.1-8B, 60 GiB, bf16, 128k context", llama8, "auto", 60 * GIB, 131072, 16),
        edge("Llama-3.1-8B, 60 GiB, int8 per-token-head", llama8, "int8_per_token_head", 60 * GIB,
             131072, 16),
        edge("Llama-3.1-70B, 20 GiB, fp8, 32k context", llama70, "fp8", 20 * GIB, 32768, 16),
        edge("Qwen3-8B, block size 32, memory not a multiple of a block", qwen, "auto", 11 * GIB + 12345,
             40960, 32),
        edge("max_model_len not a multiple of the block size", llama8, "auto", 4 * GIB, 1000, 16),
    ]
    randoms = random_cases(num_random, seed, _random_capacity_args)
    return edges + [_capacity_case(c.label, False, **c.args) for c in randoms]


# -- checks -------------------------------------------------------------------------------------------


def _diagnose_bytes(case: Case, expected: int, got: Any) -> str | None:
    model, dtype = case.args["model"], case.args["kv_cache_dtype"]
    if not isinstance(got, int) or isinstance(got, bool):
        return None
    as_bf16 = dataclasses.replace(model, dtype="bfloat16")
    if dtype == "auto" and model.dtype != "bfloat16" and got == expected_bytes_per_token(as_bf16, dtype):
        return f"'auto' stores the model dtype; this model is {model.dtype}"
    k_sized_v = tuple(dataclasses.replace(layer, head_size_v=None) for layer in model.layers)
    same_v = dataclasses.replace(model, layers=k_sized_v)
    if got == expected_bytes_per_token(same_v, dtype) != expected:
        return "a V head can be larger or smaller than a K head: use head_size_v when it is set"
    scales = sum(2 * spec.num_kv_heads * 4 for spec in model.layer_specs(1, dtype).values()
                 if spec.kv_cache_dtype.endswith("per_token_head"))
    if scales and got == expected - scales:
        return "per-token-head schemes also store two fp32 scales (K and V) per token and KV head"
    if got * 2 == expected or (scales and got * 2 == expected - scales):
        return "count both K and V"
    if got * len(model.layers) == expected:
        return "sum over every layer of the model"
    return None


def check_bytes_per_token(
    bytes_per_token: Callable[[ModelKV, str], int], *, seed: int | None = None, num_random: int = 100
) -> CheckResult:
    """Check ``bytes_per_token(model, kv_cache_dtype) -> int`` (bytes per token, all layers, one GPU)."""
    return check_learner(
        bytes_per_token, "bytes_per_token", "check_bytes_per_token", seed=seed,
        cases=lambda s: _bytes_cases(num_random, s),
        trial=lambda fn: function_trial(fn, expected_bytes_per_token,
                                        lambda want, got: same_int(want, got, "bytes per token"),
                                        _diagnose_bytes),
        verified="bytes per token match the layer specs' pages (K, V and scales), real models included",
    )


def _compare_capacity(expected: tuple[int, float], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"return a tuple (num_blocks, max_concurrency); got {type(got).__name__}"
    return same_int(expected[0], got[0], "num_blocks") or close_float(
        expected[1], got[1], "max_concurrency", rel_tol=1e-9)


def _diagnose_capacity(case: Case, expected: tuple[int, float], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    blocks, concurrency = got
    if blocks == expected[0] - 1:
        return "the null block is part of num_blocks: vLLM divides all of the memory into blocks"
    if blocks == expected[0] and isinstance(concurrency, (int, float)):
        length, block = case.args["max_model_len"], case.args["block_size"]
        if abs(concurrency - expected[0] / (length / block)) < 1e-9 and length % block:
            return "a request of L tokens holds cdiv(L, B) blocks: round up"
        if abs(concurrency - (expected[0] - 1) / -(-length // block)) < 1e-9:
            return "max_concurrency is num_blocks / blocks per request, null block included"
        per_token = expected_bytes_per_token(case.args["model"], case.args["kv_cache_dtype"])
        by_bytes = case.args["available_bytes"] / (per_token * length)
        if abs(concurrency - by_bytes) < 1e-6 * max(concurrency, 1):
            return "the pool is counted in whole blocks: num_blocks / cdiv(L, B), not memory / bytes of L"
    return None


def check_kv_capacity(
    kv_capacity: Callable[[ModelKV, str, int, int, int], tuple[int, float]],
    *,
    seed: int | None = None,
    num_random: int = 100,
) -> CheckResult:
    """Check ``kv_capacity(model, kv_cache_dtype, available_bytes, max_model_len, block_size)
    -> (num_blocks, max_concurrency)`` for full-attention models against vLLM's startup sizing.

    ``num_blocks = available_bytes // bytes_per_block`` (one block id costs a page in every layer,
    null block included) and ``max_concurrency = num_blocks / cdiv(max_model_len, block_size)``.
    """
    return check_learner(
        kv_capacity, "kv_capacity", "check_kv_capacity", seed=seed,
        cases=lambda s: _capacity_cases(num_random, s),
        trial=lambda fn: function_trial(fn, expected_kv_capacity, _compare_capacity, _diagnose_capacity),
        verified="num_blocks and max_concurrency match kvlab.sizing.plan_kv_cache",
    )
