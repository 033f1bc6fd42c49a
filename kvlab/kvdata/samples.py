"""One layer's Q/K/V to study, from either source, with a plain-language note when real data is missing.

:func:`kv_sample` is what the quantization lessons and widgets call: ``source="minilm"`` returns the
real activations of one MiniLM layer (:mod:`kvlab.kvdata.minilm`) and falls back to synthetic data
(:mod:`kvlab.kvdata.synthetic`) with an explanatory ``note`` when the model package is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.kvdata.minilm import minilm_activations, minilm_unavailable_reason
from kvlab.kvdata.sample_text import SAMPLE_TEXT
from kvlab.kvdata.synthetic import SyntheticKVConfig, synthetic_kv
from kvlab.validation import require_choice, require_positive_int

#: Where K/V can come from.
KV_SOURCES: tuple[str, ...] = ("synthetic", "minilm")

#: Layers and token limit of the packaged MiniLM (fixed by the model).
MINILM_LAYERS = 6
MINILM_MAX_TOKENS = 512


@dataclass(frozen=True)
class KVSample:
    """Q, K and V of one attention layer for one sequence, float32.

    Attributes:
        queries: ``[num_tokens, num_q_heads, head_size]``.
        keys, values: ``[num_tokens, num_kv_heads, head_size]``.
        source: ``"synthetic"`` or ``"minilm"`` (what was actually used).
        label: a short description for titles, e.g. ``"MiniLM-L6 layer 2"``.
        note: why the requested source was replaced, or ``""``.
    """

    queries: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    source: str
    label: str
    note: str = ""

    @property
    def num_tokens(self) -> int:
        """Tokens in the sample."""
        return self.keys.shape[0]

    @property
    def num_kv_heads(self) -> int:
        """KV heads."""
        return self.keys.shape[1]

    @property
    def head_size(self) -> int:
        """Channels per head."""
        return self.keys.shape[2]


def kv_sample(
    source: str = "synthetic",
    *,
    num_tokens: int = 512,
    num_kv_heads: int = 4,
    head_size: int = 128,
    num_q_heads: int | None = None,
    outlier_strength: float = 20.0,
    rope: bool = True,
    layer: int = 0,
    seed: int = 0,
) -> KVSample:
    """Q/K/V of one layer.

    Args:
        source: ``"synthetic"`` or ``"minilm"`` (real activations; 12 heads of 32 channels, at most 512
            tokens, so ``num_kv_heads``, ``head_size`` and the outlier knobs do not apply to it).
        num_tokens: sequence length in tokens (MiniLM: capped at 512).
        num_kv_heads, head_size, num_q_heads: synthetic shape.
        outlier_strength: synthetic outlier offset (see :class:`~kvlab.kvdata.synthetic.SyntheticKVConfig`).
        rope: rotate synthetic keys and queries by RoPE.
        layer: MiniLM layer, 0..5.
        seed: synthetic seed.
    """
    require_choice(source, KV_SOURCES, "source")
    require_positive_int(num_tokens, "num_tokens")
    note = ""
    if source == "minilm":
        reason = minilm_unavailable_reason()
        if reason is None:
            if not 0 <= layer < MINILM_LAYERS:
                raise ValueError(f"layer must be within 0..{MINILM_LAYERS - 1}, got {layer}")
            acts = minilm_activations(SAMPLE_TEXT, MINILM_MAX_TOKENS)
            n = min(num_tokens, acts.keys[layer].shape[0])
            if n < num_tokens:
                note = f"MiniLM reads at most {MINILM_MAX_TOKENS} tokens; using {n}."
            return KVSample(
                acts.queries[layer][:n].clone(), acts.keys[layer][:n].clone(), acts.values[layer][:n].clone(),
                "minilm", f"MiniLM-L6 layer {layer}", note,
            )
        note = f"Real K/V unavailable ({reason}); showing synthetic K/V instead."
    data = synthetic_kv(
        num_tokens, num_kv_heads, head_size, num_q_heads=num_q_heads,
        config=SyntheticKVConfig(outlier_strength=outlier_strength, rope=rope), seed=seed,
    )
    label = f"synthetic (outliers ×{outlier_strength:g}{', RoPE' if rope else ''})"
    return KVSample(data.queries, data.keys, data.values, "synthetic", label, note)
