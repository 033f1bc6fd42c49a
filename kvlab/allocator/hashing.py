"""Prefix-cache keys: chained block hashes (spec §3.1).

``hash_i = sha256(pickle((hash_{i-1} or NONE_HASH, tokens of block i, extra_keys)))``, computed only
for full blocks. Because each hash covers its parent, equal hashes mean equal prefixes, so a lookup
can stop at the first miss. The cache map key adds the group id, so every group caches on its own.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Sequence

#: The seed of the chain (vLLM's default for cryptographic hashes when PYTHONHASHSEED is unset).
NONE_HASH: bytes = hashlib.sha256(b"vllm-none-hash").digest()


def hash_block_tokens(
    parent_hash: bytes | None, token_ids: tuple[int, ...], extra_keys: object = None
) -> bytes:
    """The chained hash of one full block."""
    parent = NONE_HASH if parent_hash is None else parent_hash
    return hashlib.sha256(pickle.dumps((parent, token_ids, extra_keys), protocol=5)).digest()


def hash_token_blocks(
    token_ids: Sequence[int], block_size: int, parent_hash: bytes | None = None
) -> list[bytes]:
    """Chained hashes of every full block of ``token_ids`` (a partial last block gets none)."""
    hashes = []
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent_hash = hash_block_tokens(parent_hash, tuple(token_ids[start : start + block_size]))
        hashes.append(parent_hash)
    return hashes


class GroupBlockHashes:
    """Read-only view of hashes at a group block size ``ratio`` times the hash block size.

    Block ``j`` of the group is keyed by the ``ratio`` hashes it spans (concatenated, as vLLM does);
    entries are built on access, so viewing a long request costs nothing until a block is read.
    """

    __slots__ = ("hashes", "ratio")

    def __init__(self, hashes: Sequence[bytes], ratio: int) -> None:
        self.hashes = hashes
        self.ratio = ratio

    def __len__(self) -> int:
        return len(self.hashes) // self.ratio

    def __getitem__(self, j: int) -> tuple[bytes, ...]:
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError(j)
        r = self.ratio
        return tuple(self.hashes[j * r : (j + 1) * r])


def group_block_hashes(hashes: Sequence[bytes], ratio: int) -> Sequence:
    """Hashes at a group block size ``ratio`` times the hash block size (unchanged when ``ratio == 1``)."""
    return hashes if ratio == 1 else GroupBlockHashes(hashes, ratio)
