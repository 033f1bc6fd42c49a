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


def test_sweep_times_both_split_merges_beside_the_rule():
    from kvlab.bench.sweeps import default_sweep

    sweep = default_sweep(BenchConfig(), num_sms=132)
    assert sorted(sweep.attention) == [("decode", b, L, 1) for b, L in ((1, 1024), (1, 8192), (1, 32768),
                                                                        (16, 8192), (16, 32768))]
    for cands in sweep.attention.values():
        labels = [c.backend("decode") for c in cands]
        assert labels == ["kvlab-triton-sweep-mergekernel", "kvlab-triton-sweep-fusedmerge"]
        assert all(c.tiling is None and c.fp8_fast_decode and c.int8_fast_decode for c in cands)
    assert sweep.schemes_for("decode", ()) == ("bfloat16", "float16", "int8_per_token_head",
                                               "fp8_per_token_head", "fp8_e4m3")
