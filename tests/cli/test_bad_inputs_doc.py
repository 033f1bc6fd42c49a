"""The bad inputs listed in docs/bad_inputs.md get exactly the message the page shows.

Each case below is run and its one-line message compared with the expected text, and that text must
appear verbatim in the page, so the page cannot drift from what kvlab says.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import kvlab
from kvlab.cache import AttentionBatch, PagedKVCache
from kvlab.cli.main import main
from kvlab.kernels.devices import INTERPRET
from kvlab.models import model_from_hf_config
from kvlab.quantization.per_tensor import as_fp32_scale
from kvlab.reference import reference_attention

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "bad_inputs.md").read_text(encoding="utf-8")
SOFTCAP = "softcap must be None (no cap) or a finite number > 0, got {}"
SCALE = "scale must be a finite number > 0 (multiplies q.k; None for 1/sqrt(head_size)), got {}"
BLOCK = "block_size must be a power of two (the Triton kernels tile whole blocks), got {}; the nearest are {}"


def _reference(**options):
    batch = AttentionBatch.from_lengths([2], [5], [[0, 1]])
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 8, generator=gen)
    k = [torch.randn(5, 2, 8, generator=gen)]
    v = [torch.randn(5, options.pop("v_heads", 2), 8, generator=gen)]
    reference_attention(q, k, v, batch, **options)


def _attention(block_size=16, **options):
    """One call on the device the Triton kernels read (the CPU under the interpreter, else the GPU)."""
    device = "cpu" if INTERPRET else "cuda"
    cache = PagedKVCache.allocate("bfloat16", 4, block_size, 2, 8, device=device)
    batch = AttentionBatch.from_lengths([1], [5], [[1]], device=device)
    kvlab.attention(torch.randn(1, 4, 8, dtype=torch.bfloat16, device=device), cache, batch, **options)


API = [
    (lambda: _reference(softcap=math.inf), SOFTCAP.format("inf")),
    (lambda: _reference(softcap=math.nan), SOFTCAP.format("nan")),
    (lambda: _attention(softcap=math.inf), SOFTCAP.format("inf")),
    (lambda: _reference(scale=math.nan), SCALE.format("nan")),
    (lambda: _reference(scale=-1.0), SCALE.format("-1.0")),
    (lambda: as_fp32_scale(math.nan, "k_scale"), "k_scale must be a positive finite number, got nan"),
    (lambda: as_fp32_scale(-1.0, "k_scale"), "k_scale must be a positive finite number, got -1.0"),
    (lambda: _reference(v_heads=1),
     "values[0] must be [seq_len, 2, head_size_v] (as many heads as keys), got (5, 1, 8)"),
    (lambda: PagedKVCache("bfloat16", torch.zeros(2, 4, 2, 8, dtype=torch.bfloat16),
                          torch.zeros(2, 4, 1, 8, dtype=torch.bfloat16)),
     "key and value must agree on [num_blocks, block_size, num_kv_heads], got (2, 4, 2, 8) and (2, 4, 1, 8)"),
    (lambda: _attention(7, backend="triton"), BLOCK.format(7, "4 and 8")),
    (lambda: _attention(24, backend="triton"), BLOCK.format(24, "16 and 32")),
    (lambda: model_from_hf_config({"num_hidden_layers": 2, "num_attention_heads": 32,
                                   "num_key_value_heads": 7, "hidden_size": 4096,
                                   "max_position_embeddings": 4096}),
     "config.json layer 0: 32 query heads are not a multiple of 7 KV heads; grouped-query attention needs "
     "every KV head to serve the same number of query heads"),
]

CLI = [
    (["capacity", "--model", "llama-3.1-8b", "-tp", "3", "--max-model-len", "8192"],
     "kvlab capacity: error: model 'llama-3.1-8b': total number of attention heads (32) must be divisible by "
     "the tensor parallel size (3); vLLM refuses this split. Choose a tensor_parallel_size that divides 32."),
    (["simulate", "--model", "llama-3.1-8b", "--kv-cache-memory", "1e15", "--max-model-len", "8192",
      "--num-requests", "2"],
     "kvlab simulate: error: a pool of 476,837,158 blocks is too large to simulate: kvlab keeps one object "
     "per block and allows at most 2,000,000 blocks per pool (about 0.4 GB); use less KV-cache memory "
     "(--kv-cache-memory), a larger block size (--block-size) or a fixed pool (num_gpu_blocks_override, "
     "--num-gpu-blocks-override)"),
]


@pytest.mark.parametrize("make, message", API, ids=[m[:40] for _, m in API])
def test_api_message_is_the_one_on_the_page(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message
    assert message in PAGE


@pytest.mark.parametrize("argv, message", CLI, ids=[a[0] for a, _ in CLI])
def test_cli_message_is_the_one_on_the_page(capsys, argv, message):
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == message
    assert message in PAGE
