"""Checks for exercise 10: the bytes a decode step must move, and the speed-up they predict.

Decode attention does about one multiply-add per byte it reads, far below what a GPU can compute
per byte of memory bandwidth, so its time is (at best) ``bytes / bandwidth``. Two caches on the same
GPU then differ in speed by the ratio of their bytes.

* ``decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size, block_size)``:
  bytes one decode call must move at the least — K, V and per-token-head scales of every cached
  token, the query read and the output written (bf16), the block table (int32 ids) and the
  per-sequence metadata. The answer key is :func:`kvlab.bench.traffic.attention_bytes` with one query
  token per sequence.
* ``predicted_decode_speedup(...)`` (same arguments): ``decode_bytes("bfloat16", …) /
  decode_bytes(kv_cache_dtype, …)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.bench.traffic import attention_bytes
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
from kvlab.quantization import VLLM_SCHEME_NAMES, token_footprint

#: Bytes of one query or output element (bf16).
QUERY_BYTES = 2
_HEADS = ((32, 8), (32, 32), (64, 8), (16, 2), (8, 1), (28, 4))


def expected_decode_bytes(
    kv_cache_dtype: str, batch: int, context: int, num_q_heads: int, num_kv_heads: int, head_size: int,
    block_size: int,
) -> int:
    """kvlab's answer: bytes of one decode call (one new token per sequence), bf16 queries."""
    return attention_bytes(
        kv_cache_dtype, batch=batch, context=context, query_len=1, num_q_heads=num_q_heads,
        num_kv_heads=num_kv_heads, head_size=head_size, block_size=block_size, query_bytes=QUERY_BYTES,
    )


def expected_decode_speedup(kv_cache_dtype: str, **shape: int) -> float:
    """kvlab's answer: the memory-bound speed-up of ``kv_cache_dtype`` over a bf16 cache."""
    return expected_decode_bytes("bfloat16", **shape) / expected_decode_bytes(kv_cache_dtype, **shape)


def _random_shape(gen: torch.Generator) -> dict[str, Any]:
    num_q_heads, num_kv_heads = choice(gen, _HEADS)
    return {
        "kv_cache_dtype": choice(gen, VLLM_SCHEME_NAMES),
        "batch": choice(gen, (1, 4, 16, 64, randint(gen, 1, 256))),
        "context": choice(gen, (1, 17, 1024, 32768, randint(gen, 1, 131072))),
        "num_q_heads": num_q_heads,
        "num_kv_heads": num_kv_heads,
        "head_size": choice(gen, (64, 128, 256)),
        "block_size": choice(gen, (16, 32)),
    }


def _edge_cases() -> list[Case]:
    def case(label: str, dtype: str, batch: int, context: int, hq: int = 32, hkv: int = 8, d: int = 128,
             b: int = 16) -> Case:
        args = {"kv_cache_dtype": dtype, "batch": batch, "context": context, "num_q_heads": hq,
                "num_kv_heads": hkv, "head_size": d, "block_size": b}
        return Case(label, args, edge=True)

    return [
        case("int8 per-token-head, 64 sequences of 32k tokens", "int8_per_token_head", 64, 32768),
        case("bf16, one sequence of 32k tokens", "bfloat16", 1, 32768),
        case("fp8 per-tensor: no per-token scales", "fp8", 16, 4096),
        case("a context of one token", "int8_per_token_head", 8, 1),
        case("context not a multiple of the block size", "fp8_per_token_head", 3, 1000),
        case("multi-head attention, head size 64", "int8_per_token_head", 4, 2048, hq=32, hkv=32, d=64),
    ]


def _parts(args: dict[str, Any]) -> dict[str, int]:
    """The terms of the byte count, for hints (each from a library call or the statement)."""
    batch, context = args["batch"], args["context"]
    footprint = token_footprint(args["kv_cache_dtype"], args["num_kv_heads"], args["head_size"])
    return {
        "kv": batch * context * footprint.total_bytes,
        "codes": batch * context * footprint.data_bytes,
        "query_and_output": 2 * batch * args["num_q_heads"] * args["head_size"] * QUERY_BYTES,
        "query_only": batch * args["num_q_heads"] * args["head_size"] * QUERY_BYTES,
        "table": batch * -(-context // args["block_size"]) * 4,
        "table_floor": batch * (context // args["block_size"]) * 4,
        "meta": batch * 2 * 4 + 4,
    }


def _diagnose_bytes(case: Case, expected: int, got: Any) -> str | None:
    if not isinstance(got, int) or isinstance(got, bool):
        return None
    p = _parts(dict(case.args))
    if got - expected == p["table_floor"] - p["table"] != 0:
        return "a sequence of `context` tokens has cdiv(context, block_size) block ids to read"
    terms = {
        "the per-token-head scales (two fp32 per token and KV head)": p["kv"] - p["codes"],
        "the query read plus the output written (bf16)": p["query_and_output"],
        "the query read (or the output written)": p["query_only"],
        "the block table (4 bytes per block id)": p["table"],
        "the metadata (8 bytes per sequence + 4)": p["meta"],
        "the block table and the metadata": p["table"] + p["meta"],
    }
    missing = expected - got
    matches = [name for name, value in terms.items() if value == missing and value]
    if matches:
        return f"your count is {missing:,} bytes short: exactly " + ", or ".join(matches)
    return None


def check_decode_bytes(decode_bytes: Callable[..., int], *, seed: int | None = None,
                       num_random: int = 200) -> CheckResult:
    """Check ``decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads, head_size,
    block_size) -> int`` exactly against :func:`kvlab.bench.traffic.attention_bytes`."""
    return check_learner(
        decode_bytes, "decode_bytes", "check_decode_bytes", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_shape),
        trial=lambda fn: function_trial(fn, expected_decode_bytes,
                                        lambda want, got: same_int(want, got, "bytes"), _diagnose_bytes),
        verified="bytes equal kvlab.bench.traffic.attention_bytes",
    )


def _diagnose_speedup(case: Case, expected: float, got: Any) -> str | None:
    number = isinstance(got, (int, float)) and not isinstance(got, bool)
    if number and got > 0 and abs(got * expected - 1) < 1e-6:
        return "the speed-up is bf16 bytes / quantized bytes (time ∝ bytes), not the other way round"
    return None


def check_decode_speedup(predicted_decode_speedup: Callable[..., float], *, seed: int | None = None,
                         num_random: int = 200) -> CheckResult:
    """Check ``predicted_decode_speedup(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads,
    head_size, block_size) -> float``: bf16 bytes over ``kv_cache_dtype`` bytes, to a relative 1e-9."""
    return check_learner(
        predicted_decode_speedup, "predicted_decode_speedup", "check_decode_speedup", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_shape),
        trial=lambda fn: function_trial(fn, expected_decode_speedup,
                                        lambda want, got: close_float(want, got, "speed-up", rel_tol=1e-9),
                                        _diagnose_speedup),
        verified="speed-ups equal the ratio of kvlab's byte counts",
    )
