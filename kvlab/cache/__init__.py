"""The paged KV cache: storage layout, batch metadata, slot mapping and ready-made examples."""

from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.example import PagedExample, build_paged_example, standard_normal_kv
from kvlab.cache.lowbit_cache import LowBitPagedCache
from kvlab.cache.paged_cache import PagedKVCache, WriteReport

__all__ = [
    "AttentionBatch",
    "LowBitPagedCache",
    "PagedExample",
    "PagedKVCache",
    "WriteReport",
    "build_paged_example",
    "cdiv",
    "standard_normal_kv",
]
