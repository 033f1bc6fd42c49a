"""The Triton cache-write path of the model's cache (used on a GPU) stores what the reference writer stores.

Runs in Triton's interpreter on a CPU (a tiny random-weight llama, so no model file is needed) and
compiled on a GPU. Attention runs with the same backend in both runs, so any difference in the
caches comes from the write path: the caches must be equal bit for bit, NaN poison included.
"""

import pytest
import torch

pytest.importorskip("kvlab.kernels", reason="Triton is not installed (Linux x86_64 only)")

from kvlab.kernels import INTERPRET  # noqa: E402
from kvlab.lm import CacheVariant, LlamaConfig, ModelKVCache  # noqa: E402
from kvlab.lm.random_weights import random_model  # noqa: E402

TINY = LlamaConfig(num_layers=2, hidden_size=64, intermediate_size=96, num_q_heads=4, num_kv_heads=2,
                   head_size=32, rope_base=10000.0, rope_dim=32, rms_norm_eps=1e-5, vocab_size=97,
                   context_length=256)
DEVICE = "cpu" if INTERPRET else "cuda"


def _run(model, variant, use_kernel, token_seed, k_scale):
    kv = ModelKVCache(model.config, variant.scheme, max_tokens=2 * 40, max_sequences=2, block_size=8,
                      rounding=variant.rounding, device=DEVICE, use_kernel=use_kernel, k_scale=k_scale,
                      v_scale=k_scale, seed=1)
    seqs = [kv.add_sequence(), kv.add_sequence()]
    g = torch.Generator().manual_seed(token_seed)
    with torch.no_grad():
        for lens in ([19, 26], [1, 1], [1, 1], [5, 1]):  # prefill, decodes, a chunk next to a decode
            batch = kv.plan_step(seqs, lens)
            ids = torch.randint(0, model.config.vocab_size, (sum(lens),), generator=g)
            model.forward(ids, kv, batch, backend="torch")
    return kv


@pytest.mark.parametrize(("scheme", "rounding", "k_scale"), [
    ("fp8_e5m2", "nearest", 2e-5),  # a tiny per-tensor scale makes some values saturate
    ("int8_per_token_head", "truncate", 1.0),
    ("int4_per_token_head", "nearest", 1.0),
    ("kivi2", "nearest", 1.0),
])
def test_kernel_write_path_stores_what_the_reference_writer_stores(scheme, rounding, k_scale, seed):
    model = random_model(TINY, DEVICE, torch.float32, seed=seed % 1000, std=0.2)
    variant = CacheVariant(scheme, rounding)
    ref = _run(model, variant, False, seed, k_scale)
    ker = _run(model, variant, True, seed, k_scale)
    compared = 0
    for layer_ref, layer_ker in zip(ref.layers, ker.layers, strict=True):
        for name, t in vars(layer_ref).items():
            if isinstance(t, torch.Tensor):
                u = getattr(layer_ker, name)
                assert torch.equal(t.view(torch.uint8), u.view(torch.uint8)), f"{scheme}: {name} differs"
                compared += 1
    assert compared >= 2 * 2  # at least K and V codes of both layers
    assert ker.saturated == ref.saturated
    if scheme == "fp8_e5m2":
        assert ref.saturated > 0
