"""The per-request state of Mamba / linear-attention layers, as one more kind of KV-cache group.

vLLM (``MambaSpec`` in ``vllm/v1/kv_cache_interface.py``) stores a state layer's conv and SSM state
in *pages* of the same shared block pool as the attention layers, one page per request (plus one
per speculative token), whatever the request length. To share the pool, every page must have the
same size: the attention block size is raised until an attention page holds a state page and the
state page is padded to the attention page (:mod:`kvlab.sizing.state_unification`).

Pages a request holds in one state layer (``mamba_cache_mode``):

* ``"none"`` (no prefix caching of states): ``1 + num_speculative_blocks``;
* ``"align"`` (prefix caching, states kept at block boundaries): ``2 + num_speculative_blocks``;
* ``"all"`` (a state per block): ``cdiv(max_model_len, block_size)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kvlab.sizing.specs import cdiv
from kvlab.validation import require_choice, require_positive_int

MAMBA_CACHE_MODES = ("none", "align", "all")


@dataclass(frozen=True)
class MambaSpec:
    """One state layer's pages on one GPU.

    Attributes:
        block_size: tokens per block (``max_model_len`` in ``"none"`` mode: one block covers a request).
        state_bytes: bytes of one request's state (conv + SSM), unpadded.
        page_size_padded: the page after padding to the attention page (bytes), or ``None``.
        mamba_cache_mode: ``"none"``, ``"align"`` or ``"all"``.
        num_speculative_blocks: extra pages per request for speculative tokens.
    """

    kind: ClassVar[str] = "mamba"

    block_size: int
    state_bytes: int
    page_size_padded: int | None = None
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0

    def __post_init__(self) -> None:
        require_positive_int(self.block_size, "block_size")
        require_positive_int(self.state_bytes, "state_bytes")
        require_choice(self.mamba_cache_mode, MAMBA_CACHE_MODES, "mamba_cache_mode")
        require_positive_int(self.num_speculative_blocks, "num_speculative_blocks", minimum=0)
        if self.page_size_padded is not None and self.page_size_padded < self.state_bytes:
            raise ValueError(
                f"page_size_padded ({self.page_size_padded} B) must be >= the state ({self.state_bytes} B)"
            )

    @property
    def page_size_bytes(self) -> int:
        """Bytes one page occupies (the padded size when padding is set)."""
        return self.page_size_padded if self.page_size_padded is not None else self.state_bytes

    def admission_cap_blocks(self, in_flight_tokens: int, max_model_len: int) -> int | None:
        """A state layer never holds more than its fixed pages."""
        return self.max_blocks_per_request(max_model_len, in_flight_tokens)

    def max_blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        """Pages one request holds at its peak (see the module docstring)."""
        if self.mamba_cache_mode == "all":
            return cdiv(max_model_len, self.block_size)
        extra = 2 if self.mamba_cache_mode == "align" else 1
        return extra + self.num_speculative_blocks

    def max_memory_usage_bytes(self, max_model_len: int, in_flight_tokens: int) -> int:
        return self.max_blocks_per_request(max_model_len, in_flight_tokens) * self.page_size_bytes

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return 0
