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


def test_sweep_times_the_previous_prefill_rule_beside_the_new_one():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig())
    chunk = sweep.attention[("prefill", 1, 8192, 2048)]
    # the rule before this one: 128 rows (32 positions × 4 heads) on 8 warps, 64-key tiles, 3 stages,
    # query blocks in order; its row is labelled as launched in query order
    before = [c for c in chunk if c.tiling is not None and c.tiling.block_m == 128 and c.fp8_fast_decode
              and not c.tiling.longest_first]
    assert len(before) == 1
    t = before[0].tiling
    assert (t.block_q, t.num_warps, t.tile_n, t.num_stages) == (32, 8, 64, 3)
    assert before[0].backend("prefill") == "kvlab-triton-sweep-shortfirst"
    # Triton's own fp8 conversion is labelled, so the two fp8 paths are told apart in the CSV
    assert {c.backend("prefill") for c in chunk if not c.fp8_fast_decode} == {
        "kvlab-triton-sweep-castdecode", "kvlab-triton-sweep-castdecode-shortfirst"}
