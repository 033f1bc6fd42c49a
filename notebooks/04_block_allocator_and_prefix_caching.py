# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4 · The block allocator and prefix caching
#
# The pool of lesson 1 is handed out block by block. This lesson drives kvlab's allocator (a
# re-implementation of vLLM's `KVCacheManager`) by hand on a pool of 11 blocks, small enough to print:
#
# 1. What is in a fresh pool?
# 2. How does a request get its blocks?
# 3. How does a second request find the blocks it shares with the first?
# 4. When requests finish, which blocks are reused first — and why does it matter?
# 5. What does this look like with real traffic?

# %%
from kvlab.allocator import TokenRequest
from kvlab.models import model_from_hf_config
from kvlab.plots.block_map import block_map_figure
from kvlab.serving import EngineConfig
from kvlab.widgets import build_block_map

# %% [markdown]
# ## 1. What is in a fresh pool?
#
# One full-attention layer, blocks of 16 tokens, 11 blocks. Block 0 is taken out at once as the *null
# block* (the placeholder sliding-window tables point to); the other ten wait in the free queue, in
# order.

# %%
tiny = model_from_hf_config({"num_hidden_layers": 1, "hidden_size": 128, "num_attention_heads": 2,
                             "num_key_value_heads": 2, "max_position_embeddings": 4096,
                             "torch_dtype": "float32"}, name="tiny")


def fresh_manager(profile):
    config = EngineConfig(tiny, num_gpu_blocks_override=11, max_model_len=1024, profile=profile)
    return config.build_kv_cache_manager()


manager = fresh_manager("vllm-0.21")
print("free queue:", manager.block_pool.free_queue.block_ids())

# %% [markdown]
# ## 2. How does a request get its blocks?
#
# A 55-token prompt needs `⌈55 / 16⌉ = 4` blocks, taken from the head of the free queue. Every *full*
# block also gets a hash that chains the hash of the previous block with its 16 token ids: that hash is
# the block's address in the prefix cache. The last block holds 7 tokens and stays unhashed.

# %%
a = TokenRequest("a", range(55))
manager.allocate_slots(a, 55)
a.num_computed_tokens = 55
print("a holds", manager.get_block_ids("a"), "| free queue:", manager.block_pool.free_queue.block_ids())

# %% [markdown]
# ## 3. How does a second request find the shared blocks?
#
# Request `b` starts with the same 48 tokens, then differs. Looking up its block hashes left to right
# finds the first three blocks of `a`; only the rest is allocated.

# %%
b = TokenRequest("b", list(range(48)) + [1000, 1001, 1002, 1003, 1004])
hits, hit_tokens = manager.get_computed_blocks(b)
print(f"prefix hit: {hit_tokens} tokens, blocks {[blk.block_id for blk in hits[0]]}")
manager.allocate_slots(b, b.num_tokens - hit_tokens, hit_tokens, hits)
b.num_computed_tokens = b.num_tokens
print("b holds", manager.get_block_ids("b"), "| ref counts:", [k.ref_cnt for k in manager.get_blocks("b")[0]])

# %% [markdown]
# Blocks 1–3 now have a reference count of 2: they are stored once and read by both requests. The block
# map draws the pool: colour = owner, outline = shared, × = the null block.

# %%
block_map_figure(manager.block_states(), request_order=["a", "b"], group_kinds=["full"], columns=11,
                 title="11-block pool after a and b")

# %% [markdown]
# ## 4. Which blocks are reused first?
#
# Both requests finish. Their blocks go back to the free queue — hashed blocks keep their hash, so a later
# request can still hit them until they are handed out again (*lazy eviction*). The order matters: the
# head of the queue is reused (and its cached content lost) first. Requests free their blocks tail first,
# so the *end* of a prompt is evicted before its shared beginning.

# %%
manager.free("a")
manager.free("b")
print("vllm-0.21 free queue:", manager.block_pool.free_queue.block_ids())

# %% [markdown]
# Newer vLLM versions (kvlab's `vllm-0.33` profile) put blocks *without* a hash at the head instead
# (they can never be hit, so reuse them first) and keep hashed blocks at the tail, least recently used
# first:

# %%
manager33 = fresh_manager("vllm-0.33")
for r in (TokenRequest("a", range(55)), TokenRequest("b", list(range(48)) + [1000, 1001, 1002, 1003, 1004])):
    hits, n = manager33.get_computed_blocks(r)
    manager33.allocate_slots(r, r.num_tokens - n, n, hits)
    r.num_computed_tokens = r.num_tokens
manager33.free("a")
manager33.free("b")
print("vllm-0.33 free queue:", manager33.block_pool.free_queue.block_ids())

# %% [markdown]
# In both orders the shared prefix blocks 3, 2, 1 come last, deepest block first. A third request with
# the same 48-token prefix still hits them:

# %%
c = TokenRequest("c", list(range(48)) + [2000, 2001, 2002, 2003, 2004, 2005])
hits, n = manager.get_computed_blocks(c)
manager.allocate_slots(c, c.num_tokens - n, n, hits)
print(f"c: prefix hit {n} tokens, holds {manager.get_block_ids('c')}")

# %% [markdown]
# ## 5. With real traffic
#
# Ten requests whose first third is one system prompt, on gpt-oss-20b (12 sliding layers with a
# 128-token window, 12 full layers) and a 512-block pool. Step through the run: the system prompt's full
# blocks stay shared (outlined) while requests come and go; sliding groups (squares) hold only a few
# blocks per request; freed prompt blocks stay cached (white) until the pool needs them. Untick
# *prefix caching* to see every request store its own copy.

# %%
block_map = build_block_map()
block_map.ui

# %% [markdown]
# ## Summary
#
# * Block 0 is the null block; the free queue hands out blocks from its head.
# * Full blocks are hashed in a chain, so a prefix hit is a left-to-right walk that stops at the first
#   miss; hit blocks are shared through reference counts.
# * Freed blocks keep their hash until reused (lazy eviction); requests free tail first so shared
#   prefixes survive longest. Newer versions reuse unhashed blocks first.
