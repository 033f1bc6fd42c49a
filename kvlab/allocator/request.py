"""The request as the KV-cache manager sees it.

The manager reads four things: ``request_id``, ``num_tokens`` (prompt + generated so far),
``num_computed_tokens`` (tokens whose KV is already in the cache) and ``block_hashes`` (chained
hashes of every full block of known tokens, at the hash block size). Any object with those
attributes works; :class:`TokenRequest` is the plain one, built from explicit token ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kvlab.allocator.hashing import hash_block_tokens
from kvlab.validation import require_positive_int


class KVRequest(Protocol):
    """What :class:`~kvlab.allocator.KVCacheManager` needs from a request."""

    request_id: str
    num_computed_tokens: int

    @property
    def num_tokens(self) -> int: ...

    @property
    def block_hashes(self) -> Sequence[bytes]: ...


class TokenRequest:
    """A request made of explicit token ids; block hashes follow the tokens as they are appended.

    Args:
        request_id: unique name.
        token_ids: the prompt.
        hash_block_size: tokens per hashed block (the smallest group block size).
    """

    def __init__(self, request_id: str, token_ids: Sequence[int], hash_block_size: int = 16) -> None:
        if not isinstance(request_id, str) or not request_id:
            raise ValueError(f"request_id must be a non-empty string, got {request_id!r}")
        self.request_id = request_id
        self.hash_block_size = require_positive_int(hash_block_size, "hash_block_size")
        self.token_ids: list[int] = [int(t) for t in token_ids]
        self.num_computed_tokens = 0
        self._hashes: list[bytes] = []

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return len(self.token_ids)

    @property
    def block_hashes(self) -> list[bytes]:
        """Chained hashes of every full block of the known tokens."""
        b = self.hash_block_size
        while (len(self._hashes) + 1) * b <= len(self.token_ids):
            i = len(self._hashes)
            parent = self._hashes[-1] if self._hashes else None
            self._hashes.append(hash_block_tokens(parent, tuple(self.token_ids[i * b : (i + 1) * b])))
        return self._hashes

    def append_tokens(self, token_ids: Sequence[int]) -> None:
        """Add generated tokens."""
        self.token_ids.extend(int(t) for t in token_ids)
