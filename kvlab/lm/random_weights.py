"""A llama model of any shape with random weights: for timing the forward without a model file.

Timing does not depend on what the weights are, only on their shapes, so the GPU decode benchmark
builds SmolLM2-135M's exact shapes this way (:data:`SMOLLM2_135M`), and tests build tiny models.
"""

from __future__ import annotations

import torch

from kvlab.lm.config import LlamaConfig
from kvlab.lm.forward import LlamaModel
from kvlab.lm.gguf_file import LayerWeights, LlamaWeights

#: SmolLM2-135M-Instruct's shape, as :func:`kvlab.lm.gguf_file.read_config` reads it from its GGUF.
SMOLLM2_135M = LlamaConfig(num_layers=30, hidden_size=576, intermediate_size=1536, num_q_heads=9,
                           num_kv_heads=3, head_size=64, rope_base=100000.0, rope_dim=64,
                           rms_norm_eps=1e-5, vocab_size=49152, context_length=8192)


def random_model(config: LlamaConfig, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                 seed: int = 0, std: float = 0.02) -> LlamaModel:
    """A model of ``config``'s shapes with N(0, std²) matrices, unit norms and tied embeddings.

    It has no tokenizer: feed it token ids.
    """
    g = torch.Generator(device=device).manual_seed(seed)

    def w(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g, device=device) * std).to(dtype)

    h, f = config.hidden_size, config.intermediate_size
    q, kv = config.num_q_heads * config.head_size, config.num_kv_heads * config.head_size
    ones = torch.ones(h, device=device, dtype=dtype)
    layers = tuple(LayerWeights(ones, w(q, h), w(kv, h), w(kv, h), w(h, q), ones, w(f, h), w(f, h), w(h, f))
                   for _ in range(config.num_layers))
    embedding = w(config.vocab_size, h)
    return LlamaModel(config, LlamaWeights(embedding, layers, ones, embedding))
