"""The model families kvlab sizes, one preset each, and where one request's bytes go in each.

:data:`FAMILIES` pairs a family with a preset and one sentence on its memory trick;
:func:`family_request_bytes` sizes one ``max_model_len`` request of every family on one GPU and splits
its bytes into attention KV (K/V or MLA latents), state pages (Mamba / linear attention) and the
speculative draft's KV (:func:`kvlab.serving.breakdown.request_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.serving.breakdown import request_bytes
from kvlab.serving.config import EngineConfig


@dataclass(frozen=True)
class Family:
    """One model family as lesson 01 shows it.

    Attributes:
        name: the family.
        preset: the preset that stands for it.
        trick: one sentence on how it stores (or avoids storing) K and V.
        speculative_config: a ``--speculative-config`` the example uses, or ``None``.
        tensor_parallel_size: GPUs the example is split over.
    """

    name: str
    preset: str
    trick: str
    speculative_config: dict | None = None
    tensor_parallel_size: int = 1


FAMILIES: tuple[Family, ...] = (
    Family("dense (GQA)", "llama-3.1-8b",
           "Every layer keeps K and V of every token; grouped-query attention lets 4 query heads share one "
           "KV head, so a token costs 32 layers x 8 heads x 256 values x 2 B = 128 KiB."),
    Family("sliding window", "gemma-3-27b",
           "5 of every 6 layers look back only 1,024 tokens, so their blocks are freed as the request "
           "grows; the full layers still hold every token."),
    Family("sliding window + MoE", "gpt-oss-120b",
           "Half the layers look back 128 tokens, the other half hold everything; mixture-of-experts "
           "weights change nothing in the cache."),
    Family("MLA", "deepseek-v3",
           "One compressed latent of 512 + 64 values per token and layer replaces K and V of 128 heads "
           "(1,152 B in bf16, 656 B in fp8_ds_mla); every GPU keeps the whole latent, so TP does not "
           "divide it.", tensor_parallel_size=8),
    Family("gated DeltaNet hybrid", "qwen3-next-80b-a3b",
           "3 of 4 layers keep a fixed recurrent state per request instead of a growing cache; the "
           "attention block grows (to 272 tokens at TP 4) so that one page holds one state.",
           tensor_parallel_size=4),
    Family("Mamba-2 hybrid", "nemotron-nano-9b-v2",
           "Only 4 of 56 layers store K and V; 27 Mamba layers keep a conv + SSM state per request, "
           "padded to the attention page (672-token blocks)."),
    Family("cross-layer KV sharing", "gemma-4-e4b",
           "The last 18 of 42 layers read the K/V of an earlier layer and store nothing: sizing them "
           "as ordinary layers would undercount capacity by a third."),
    Family("speculative decoding (MTP)", "qwen3-next-80b-a3b",
           "The MTP module is one more attention layer with its own KV, each step reserves slots for the "
           "proposed tokens, and every state layer keeps one more page per proposed token.",
           speculative_config={"method": "mtp", "num_speculative_tokens": 2}, tensor_parallel_size=4),
)

FAMILY_NAMES: tuple[str, ...] = tuple(f.name for f in FAMILIES)


def get_family(name: str) -> Family:
    """The family called ``name`` (see :data:`FAMILY_NAMES`)."""
    for family in FAMILIES:
        if family.name == name:
            return family
    raise ValueError(f"family must be one of {', '.join(map(repr, FAMILY_NAMES))}; got {name!r}")


@dataclass(frozen=True)
class FamilyBytes:
    """One request of ``max_model_len`` tokens of a family's example, on one GPU.

    Attributes:
        family: the family name.
        preset: its preset.
        attention, state, draft: bytes by what stores them.
        max_model_len: the request length (tokens).
        bytes_per_token: ``(attention + state + draft) / max_model_len`` (bytes).
    """

    family: str
    preset: str
    attention: int
    state: int
    draft: int
    max_model_len: int

    @property
    def total(self) -> int:
        return self.attention + self.state + self.draft

    @property
    def bytes_per_token(self) -> float:
        return self.total / self.max_model_len


def family_config(family: Family, max_model_len: int, kv_cache_dtype: str = "auto") -> EngineConfig:
    """The example configuration of ``family`` (memory large enough for one request)."""
    return EngineConfig(
        family.preset,
        kv_cache_memory=2**40,
        kv_cache_dtype=kv_cache_dtype,
        block_size=64 if family.preset.startswith("deepseek") else 16,
        max_model_len=max_model_len,
        tensor_parallel_size=family.tensor_parallel_size,
        speculative_config=family.speculative_config,
    )


def family_request_bytes(max_model_len: int = 32768) -> list[FamilyBytes]:
    """Where one ``max_model_len``-token request's bytes go, for every family's example."""
    rows = []
    for family in FAMILIES:
        split = request_bytes(family_config(family, max_model_len))
        rows.append(FamilyBytes(family.name, family.preset, split.attention, split.state, split.draft,
                                max_model_len))
    return rows
