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


def test_sweep_times_the_previous_decode_rule_beside_narrow_programs():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    # B=16, L=32768, 8-bit: the rule now runs narrow programs (64 keys, 2 warps, 8 segments); the
    # sweep times the previous rule beside it: 128-key tiles on 4 warps, 4 segments (512 programs,
    # four per multiprocessor), under the register cap
    b16 = sweep.attention[("decode", 16, 32768, 1)]
    previous = [c.tiling for c in b16 if c.tiling is not None and c.tiling.num_warps == 4]
    assert [(t.tile_n, t.num_splits, t.max_registers) for t in previous] == [(128, 4, 128)]
    # one sequence of 8,192 tokens: 64-key tiles (8 programs × 64 tiles < 528), 66 segments
    b1 = [c.tiling for c in sweep.attention[("decode", 1, 8192, 1)] if c.tiling is not None]
    assert [(t.tile_n, t.num_warps, t.num_splits) for t in b1] == [(64, 4, 66)]
    # B=64 keeps 4 warps unsplit by the rule; the candidate is narrow programs split in two
    b64 = [c.tiling for c in sweep.attention[("decode", 64, 8192, 1)] if c.tiling is not None]
    assert [(t.tile_n, t.num_warps, t.num_splits) for t in b64] == [(64, 2, 2)]
    # the prefill rule now reads per-tensor fp8 through fp16 dots; the previous bf16 dots are labelled,
    # so the two fp8 paths are told apart in the CSV
    chunk = sweep.attention[("prefill", 1, 8192, 2048)]
    assert [c.backend("prefill") for c in chunk] == ["kvlab-triton-sweep-bf16dots",
                                                     "kvlab-triton-sweep-f16dots"]
    assert chunk[0].tiling is None and (chunk[1].tiling.block_m, chunk[1].tiling.num_warps) == (256, 16)
