"""The GPU benchmark's configuration and command line refuse what they cannot run, on any machine."""

from __future__ import annotations

import argparse

import pytest

from kvlab.bench.config import BenchConfig
from kvlab.cli.bench import add_arguments


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(p)
    return p.parse_args(list(argv))


def test_low_bit_schemes_are_sent_to_their_own_benchmark():
    with pytest.raises(argparse.ArgumentError, match="lowbit_bench.py"):
        _parse("--schemes", "bfloat16,kivi4")
    with pytest.raises(ValueError, match="schemes"):
        BenchConfig(schemes=("kivi2",))
    assert _parse("--schemes", "bfloat16,int8_per_token_head").schemes == ("bfloat16", "int8_per_token_head")


def test_prefill_cases_are_checked():
    assert BenchConfig().prefill == ((2048, 8192), (8192, 8192))  # a chunk over context, a whole prompt
    with pytest.raises(ValueError, match="cannot exceed its length"):
        BenchConfig(prefill=((4096, 2048),))
    with pytest.raises(ValueError, match="prefill new tokens"):
        BenchConfig(prefill=((0, 2048),))


def test_parts_pick_the_cases():
    assert _parse().parts == ("decode", "prefill", "write")
    assert _parse("--parts", "prefill").parts == ("prefill",)
    with pytest.raises(argparse.ArgumentError, match="unknown part"):
        _parse("--parts", "prefil")


def test_sweep_times_narrow_programs_and_fp16_dots_beside_the_rule():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    # B=16, L=32768: narrow programs (64 keys, 2 warps) split 8 ways fill 8 × 132 = 1056 slots with
    # 1024 programs; 1-warp programs (32 keys) 16 ways; then fp16 dots with the rule's tiling
    b16 = sweep.attention[("decode", 16, 32768, 1)]
    assert [(c.tiling.tile_n, c.tiling.num_warps, c.tiling.num_splits, c.tiling.max_registers)
            for c in b16[:2]] == [(64, 2, 8, 128), (32, 1, 16, 128)]
    assert b16[2].tiling is None and b16[2].backend("decode") == "kvlab-triton-sweep-f16dots"
    # B=64 (512 programs): narrow programs in two segments; one sequence of 8,192 tokens: 128 segments
    (b64,) = sweep.attention[("decode", 64, 8192, 1)]
    (b1,) = sweep.attention[("decode", 1, 8192, 1)]
    assert (b64.tiling.num_splits, b1.tiling.num_splits) == (2, 128)
    # prefill: fp16 dots with the rule's tiling, and with 256 rows on 16 warps
    chunk = sweep.attention[("prefill", 1, 8192, 2048)]
    assert [c.backend("prefill") for c in chunk] == ["kvlab-triton-sweep-f16dots"] * 2
    assert chunk[0].tiling is None and (chunk[1].tiling.block_m, chunk[1].tiling.num_warps) == (256, 16)
