"""Where the bytes of one request go: attention KV, state pages, the speculative draft's KV."""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.serving.config import EngineConfig
from kvlab.sizing.specs import UniformTypeSpecs
from kvlab.sizing.state_spec import MambaSpec

CATEGORIES = ("attention", "state", "draft")


@dataclass(frozen=True)
class RequestBytes:
    """Bytes one ``max_model_len`` request occupies on one GPU at its peak, by category.

    Attributes:
        attention: the model's attention layers (K/V or MLA latents), bytes.
        state: Mamba / linear-attention state pages (padding included), bytes.
        draft: the speculative draft's attention layers, bytes.
        max_model_len: the request length (tokens).
    """

    attention: int
    state: int
    draft: int
    max_model_len: int

    @property
    def total(self) -> int:
        return self.attention + self.state + self.draft

    def as_dict(self) -> dict[str, int]:
        return {"attention": self.attention, "state": self.state, "draft": self.draft}


def request_bytes(config: EngineConfig) -> RequestBytes:
    """Split a ``max_model_len`` request's footprint by what stores it.

    Each group holds ``blocks_per_request`` blocks; a block costs each member layer one page, so a
    group's bytes are split between its model and draft layers by layer count. Example: Llama 3.1
    8B with one EAGLE layer, L = 8,192, block 16: 512 blocks × 33 layers × 65,536 B; 32/33 of it is
    attention, 1/33 draft. With pipeline parallelism only the layers of the tightest stage (the GPU
    that sets the block count) are counted.
    """
    plan = config.plan()
    totals = dict.fromkeys(CATEGORIES, 0)
    tightest = max(plan.stages, key=lambda s: s.bytes_per_block) if plan.stages else None
    for group, blocks in zip(plan.config.groups, plan.blocks_per_request, strict=True):
        if isinstance(group.spec, UniformTypeSpecs):
            pages = {name: spec.page_size_bytes for name, spec in group.spec.specs}
        else:
            pages = dict.fromkeys(group.layer_names, group.spec.page_size_bytes)
        for name, page in pages.items():
            if tightest is not None and name not in tightest.layer_names:
                continue
            if isinstance(group.spec, MambaSpec):
                key = "state"
            elif name.startswith("draft."):
                key = "draft"
            else:
                key = "attention"
            totals[key] += blocks * page
    return RequestBytes(totals["attention"], totals["state"], totals["draft"], plan.max_model_len)
