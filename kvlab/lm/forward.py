"""A llama forward pass in plain PyTorch whose every attention layer runs through kvlab's paged cache.

Per layer, for the packed new tokens ``x [T, hidden]`` of one step (prefill chunks and decodes)::

    h = RMSNorm(x)
    q, k, v = h Wqᵀ, h Wkᵀ, h Wvᵀ              → [T, heads, head_size]
    q, k = RoPE(q), RoPE(k)                     (adjacent channel pairs, :mod:`kvlab.lm.rope`)
    cache.write(k, v, slots)                    kvlab's cache write: quantized by the cache's scheme
    a = kvlab.attention(q, cache, batch)        reads *all* of the sequence's K/V back from the cache
    x = x + a Woᵀ
    x = x + (silu(RMSNorm(x) Wgᵀ) ⊙ RMSNorm(x) Wuᵀ) Wdᵀ

As in vLLM, new tokens are written before attention, so a prompt also attends to its own quantized
K/V. There is no other attention code here: ``backend`` picks kvlab's float64 reference, its Triton
kernel, or its float32 PyTorch path.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

import kvlab
from kvlab.cache.batch import AttentionBatch
from kvlab.lm.config import LlamaConfig
from kvlab.lm.gguf_file import LlamaWeights, open_gguf, read_config, read_weights
from kvlab.lm.kv_state import ModelKVCache
from kvlab.lm.rope import apply_rope, rope_angles
from kvlab.lm.tokenizer import TokenizerInfo, build_tokenizer


def default_backend(device: torch.device | str = "cpu") -> str:
    """The fastest correct ``kvlab.attention`` backend: Triton on a GPU, float32 PyTorch on a CPU."""
    return "triton" if torch.device(device).type == "cuda" else "torch"


class LlamaModel:
    """Weights, shape and tokenizer of a llama model, and its forward pass over a :class:`ModelKVCache`."""

    def __init__(self, config: LlamaConfig, weights: LlamaWeights, tokenizer=None,
                 tokenizer_info: TokenizerInfo | None = None) -> None:
        self.config = config
        self.weights = weights
        self.tokenizer = tokenizer
        self.tokenizer_info = tokenizer_info

    @property
    def dtype(self) -> torch.dtype:
        """Dtype of the weights and activations."""
        return self.weights.token_embedding.dtype

    @property
    def device(self) -> torch.device:
        """Device of the weights."""
        return self.weights.token_embedding.device

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no BOS: the GGUF says ``add_bos_token = false``)."""
        ids = self.tokenizer.encode(text).ids
        if self.tokenizer_info and self.tokenizer_info.add_bos:
            ids = [self.tokenizer_info.bos_id, *ids]
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of token ids."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def token_strings(self, ids: list[int]) -> list[str]:
        """Each token's own text (for showing generations token by token)."""
        return [self.tokenizer.decode([i], skip_special_tokens=False) for i in ids]

    def _rms_norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """``x / sqrt(mean(x²) + ε) · weight``, computed in float32."""
        out = F.rms_norm(x.float(), (x.shape[-1],), weight.float(), self.config.rms_norm_eps)
        return out.to(x.dtype)

    def forward(
        self,
        token_ids: torch.Tensor,
        kv: ModelKVCache,
        batch: AttentionBatch,
        *,
        backend: str | None = None,
        sliding_window: int | None = None,
    ) -> torch.Tensor:
        """Run the new tokens of one step through every layer, writing their K/V into ``kv``.

        Args:
            token_ids: ``[num_tokens]`` new tokens of all sequences, packed in batch order.
            kv: the model's paged cache; ``batch`` must come from its :meth:`ModelKVCache.plan_step`.
            batch: query offsets, sequence lengths and block tables of this step.
            backend: ``kvlab.attention`` backend (default: :func:`default_backend`).
            sliding_window: attend only to the last ``W`` tokens (a what-if for this model).

        Returns:
            ``[num_tokens, hidden_size]`` final hidden states (after the output norm).
        """
        return self.forward_lockstep(token_ids, [kv], [batch], backend=backend,
                                     sliding_window=sliding_window)[0]

    def forward_lockstep(
        self,
        token_ids: torch.Tensor,
        caches: Sequence[ModelKVCache],
        batches: Sequence[AttentionBatch],
        *,
        backend: str | None = None,
        sliding_window: int | None = None,
    ) -> torch.Tensor:
        """The same new tokens through several caches at once (one per KV-cache scheme, say).

        Every cache sees exactly what :meth:`forward` alone would give it: its own cache write and
        attention, per layer. Only the weight multiplications, norms and RoPE are done once for all
        caches, on ``[len(caches) · num_tokens, hidden]`` rows, which saves per-operation overhead
        (it dominates on a CPU shared with other work) and reads each weight once per step.

        Args:
            token_ids: ``[num_tokens]`` new tokens, the same for every cache.
            caches, batches: one :class:`ModelKVCache` per run and the batch its ``plan_step`` gave;
                every batch must place the tokens at the same positions.
            backend, sliding_window: as :meth:`forward`.

        Returns:
            ``[len(caches), num_tokens, hidden_size]`` final hidden states, in the order of ``caches``.
        """
        if len(caches) != len(batches) or not caches:
            raise ValueError(f"give one batch per cache, got {len(caches)} caches and {len(batches)} batches")
        cfg, w = self.config, self.weights
        backend = backend or default_backend(self.device)
        positions = batches[0].positions("cpu")  # RoPE angles are computed on the host, copied once
        for b in batches[1:]:
            if b.query_lens != batches[0].query_lens or b.seq_lens_list != batches[0].seq_lens_list:
                raise ValueError("every cache of a lockstep step must hold the same sequence lengths")
        slots = [b.slot_mapping(kv.block_size) for kv, b in zip(caches, batches, strict=True)]
        runs, t = len(caches), positions.shape[0]
        rotation = rope_angles(positions, cfg.rope_dim, cfg.rope_base)
        if runs > 1:
            rotation = rotation.repeat(runs, 1)
        rotation = rotation.to(self.device, non_blocking=True)
        x = w.token_embedding[token_ids.to(self.device)]
        x = x.repeat(runs, 1) if runs > 1 else x
        for i, layer in enumerate(w.layers):
            h = self._rms_norm(x, layer.attn_norm)
            q = apply_rope((h @ layer.wq.T).view(runs * t, cfg.num_q_heads, cfg.head_size), rotation)
            k = apply_rope((h @ layer.wk.T).view(runs * t, cfg.num_kv_heads, cfg.head_size), rotation)
            v = (h @ layer.wv.T).view(runs * t, cfg.num_kv_heads, cfg.head_size)
            parts = []
            for r, (kv, batch) in enumerate(zip(caches, batches, strict=True)):
                rows = slice(r * t, (r + 1) * t)
                kv.write(i, k[rows], v[rows], batch, slots[r])
                parts.append(kvlab.attention(q[rows], kv.layers[i], batch, backend=backend,
                                             sliding_window=sliding_window))
            a = parts[0] if runs == 1 else torch.cat(parts)
            x = x + a.to(x.dtype).reshape(runs * t, -1) @ layer.wo.T
            h = self._rms_norm(x, layer.ffn_norm)
            x = x + (F.silu(h @ layer.w_gate.T) * (h @ layer.w_up.T)) @ layer.w_down.T
        return self._rms_norm(x, w.output_norm).view(runs, t, -1)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits ``[num_tokens, vocab_size]`` (float32) of final hidden states."""
        return (hidden @ self.weights.output.T).float()


@lru_cache(maxsize=2)
def _load(path: str | None, dtype: torch.dtype, device: str) -> LlamaModel:
    reader = open_gguf(path)
    config = read_config(reader)
    weights = read_weights(reader, config)
    if dtype != torch.float32 or device != "cpu":
        embedding = weights.token_embedding.to(device, dtype)
        tied = weights.output is weights.token_embedding
        weights = LlamaWeights(
            embedding,
            tuple(type(layer)(**{k: v.to(device, dtype) for k, v in vars(layer).items()})
                  for layer in weights.layers),
            weights.output_norm.to(device, dtype),
            embedding if tied else weights.output.to(device, dtype),
        )
    tokenizer, info = build_tokenizer(reader)
    return LlamaModel(config, weights, tokenizer, info)


def load_model(path: str | Path | None = None, *, dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> LlamaModel:
    """Load a llama GGUF (default: the packaged SmolLM2-135M-Instruct), cached per process.

    Takes a few seconds and about 0.6 GB for SmolLM2 in float32 (its weights are dequantized).

    Raises:
        ModelFileMissing: the file is not installed (the message says how to install it).
    """
    return _load(None if path is None else str(path), dtype, device)
