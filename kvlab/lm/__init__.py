"""A real language model whose every attention layer runs through kvlab's paged, quantized cache.

SmolLM2-135M-Instruct (llama architecture, read from its GGUF file) is run in plain PyTorch; each
layer writes K/V with kvlab's cache write into a :class:`~kvlab.cache.PagedKVCache` of any scheme
and attends with :func:`kvlab.attention`. On top of it: teacher-forced scoring of a text under every
scheme (perplexity, top-1 agreement and KL against the unquantized cache, per position) and greedy
generations compared token by token.

* :func:`load_model` — weights, shape and tokenizer from the GGUF file (:mod:`kvlab.lm.gguf_file`);
* :class:`ModelKVCache` — one paged cache per layer and the block tables (:mod:`kvlab.lm.kv_state`);
* :func:`score_tokens`, :func:`generate_greedy` — the measurements (:mod:`kvlab.lm.scoring`,
  :mod:`kvlab.lm.generation`).
"""

from kvlab.lm.config import LlamaConfig
from kvlab.lm.forward import LlamaModel, default_backend, load_model
from kvlab.lm.generation import Generation, first_divergence, generate_greedy
from kvlab.lm.kv_state import ModelKVCache
from kvlab.lm.model_file import INSTALL_HINT, ModelFileMissing, find_model_file, require_model_file
from kvlab.lm.scoring import PositionScores, score_tokens
from kvlab.lm.variants import BASELINE_SCHEME, CacheVariant, all_variants, parse_variants

__all__ = [
    "BASELINE_SCHEME",
    "INSTALL_HINT",
    "CacheVariant",
    "Generation",
    "LlamaConfig",
    "LlamaModel",
    "ModelFileMissing",
    "ModelKVCache",
    "PositionScores",
    "all_variants",
    "default_backend",
    "find_model_file",
    "first_divergence",
    "generate_greedy",
    "load_model",
    "parse_variants",
    "require_model_file",
    "score_tokens",
]
