"""A pool too large to simulate block by block is refused with the limit named, before any block
object is made (a 1e15-byte pool would otherwise need hundreds of millions of them)."""

from __future__ import annotations

import tracemalloc

import pytest

from kvlab.allocator.block_pool import MAX_SIMULATED_BLOCKS, BlockPool
from kvlab.cli.main import main
from kvlab.serving import EngineConfig, capacity, simulate
from kvlab.simulator import make_request


def test_one_block_more_than_the_limit_is_refused():
    with pytest.raises(ValueError, match=r"allows at most 2,000,000 blocks per pool"):
        BlockPool(MAX_SIMULATED_BLOCKS + 1)
    assert MAX_SIMULATED_BLOCKS == 2_000_000
    assert BlockPool(1000).num_usable_blocks == 999


def test_a_petabyte_pool_is_sized_but_not_simulated():
    """Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 x 2 B = 131,072 B per token, 2 MiB per 16-token block;
    1e15 B / 2,097,152 B = 476,837,158 blocks. Sizing answers; simulating refuses within little memory."""
    config = EngineConfig("llama-3.1-8b", kv_cache_memory="1e15", max_model_len=8192)
    assert capacity(config).num_blocks == 476_837_158
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"a pool of 476,837,158 blocks is too large to simulate"):
            simulate(config, [make_request("r0", 100, 4)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20


def test_the_cli_names_the_limit_in_one_line(capsys):
    argv = ["simulate", "--model", "llama-3.1-8b", "--kv-cache-memory", "1e15",
            "--max-model-len", "8192", "--num-requests", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("kvlab simulate: error: a pool of 476,837,158 blocks")
    assert "at most 2,000,000 blocks per pool" in err and "--kv-cache-memory" in err
