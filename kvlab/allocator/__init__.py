"""vLLM's paged KV-cache allocator, small enough to read in one sitting.

* :class:`BlockPool` (block 0 = null block, ref counts, prefix-cache map with lazy eviction) over a
  :class:`FreeBlockQueue` (intrusive doubly-linked list);
* one manager per group (:class:`FullAttentionManager`, :class:`SlidingWindowManager`,
  :class:`ChunkedLocalManager`) and the :class:`KVCacheCoordinator` that drives them;
* :class:`KVCacheManager`: ``get_computed_blocks``, ``allocate_slots`` (admission gate, lookahead),
  ``free`` and a per-block ownership snapshot (:meth:`KVCacheManager.block_states`);
* :class:`TokenRequest`: a request built from explicit token ids, with chained block hashes.

Example::

    from kvlab.allocator import KVCacheManager, TokenRequest
    from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool

    spec = FullAttentionSpec(block_size=16, num_kv_heads=2, head_size=64)
    config = KVCacheConfig(groups=(KVCacheGroup(("layer.0",), spec),),
                           pools=(KVCachePool(11, (0,), spec.page_size_bytes),))
    manager = KVCacheManager(config, max_model_len=1024)
    request = TokenRequest("a", range(55))
    manager.allocate_slots(request, 55)   # -> [[block 1, 2, 3, 4]]
"""

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.coordinator import KVCacheCoordinator
from kvlab.allocator.free_queue import FreeBlockQueue, KVCacheBlock
from kvlab.allocator.hashing import NONE_HASH, hash_block_tokens, hash_token_blocks
from kvlab.allocator.kv_cache_manager import BlockState, GateCheck, KVCacheManager
from kvlab.allocator.managers import (
    MANAGER_BY_KIND,
    ChunkedLocalManager,
    FullAttentionManager,
    SingleTypeManager,
    SlidingWindowManager,
)
from kvlab.allocator.request import KVRequest, TokenRequest

__all__ = [
    "MANAGER_BY_KIND",
    "NONE_HASH",
    "BlockPool",
    "BlockState",
    "ChunkedLocalManager",
    "FreeBlockQueue",
    "FullAttentionManager",
    "GateCheck",
    "KVCacheBlock",
    "KVCacheCoordinator",
    "KVCacheManager",
    "KVRequest",
    "SingleTypeManager",
    "SlidingWindowManager",
    "TokenRequest",
    "hash_block_tokens",
    "hash_token_blocks",
]
