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
# # 1 · KV-cache memory and capacity of real models
#
# Before a serving engine admits a single request it decides how many KV-cache *blocks* fit in the
# memory left after the weights. This lesson reproduces that decision the way vLLM makes it, for
# published model configurations:
#
# 1. How many bytes does one token cost?
# 2. How does memory become a pool of blocks?
# 3. How many requests fit at once, and how does that depend on `max_model_len`?
# 4. Does a sliding window save memory?
# 5. Why did vLLM's "GPU KV cache size" jump between versions?
# 6. What does a 1-byte KV dtype buy?
# 7. How do MLA, linear-attention and Mamba hybrids, KV sharing and speculative decoding change the bill?
# 8. What does one pipeline stage hold?
#
# Every number here comes from `kvlab.serving.capacity`, the function behind `kvlab capacity`.

# %%
from kvlab.analysis import (
    as_full_attention,
    concurrency_curve,
    layer_type_bytes,
    request_blocks_by_group,
)
from kvlab.models import get_model
from kvlab.plots.memory import bytes_per_token_figure, concurrency_figure, request_memory_figure
from kvlab.serving import EngineConfig, capacity
from kvlab.widgets import build_family_picker, build_memory_explorer

# %% [markdown]
# ## 1. How many bytes does one token cost?
#
# Each attention layer stores one key and one value vector per KV head for every token. Llama-3.1-8B
# has 32 layers with 8 KV heads of 128 channels, stored in bfloat16 (2 bytes):

# %%
llama = get_model("llama-3.1-8b")
rows = layer_type_bytes(llama, "auto", block_size=16)
per_token = sum(r.total_bytes * r.num_layers for r in rows)
print(f"{rows[0].total_bytes:,} B per token per layer × {rows[0].num_layers} layers = {per_token:,} B")
bytes_per_token_figure(rows, title="Llama-3.1-8B: bytes per token per layer")

# %% [markdown]
# 8 heads × (128 + 128) channels × 2 bytes = 4,096 B per layer; 128 KiB per token for the model. A
# 32,768-token request therefore holds 4 GiB of KV cache.

# %% [markdown]
# ## 2. How does memory become a pool of blocks?
#
# The cache is cut into blocks of 16 tokens. One block id covers that block in every layer, so one
# block costs 16 tokens × 128 KiB = 2 MiB here. With 20 GiB left for the cache:

# %%
cfg = EngineConfig("llama-3.1-8b", kv_cache_memory="20GiB", max_model_len=32768)
plan = capacity(cfg)
print(f"bytes per block   {plan.bytes_per_block:,}")
print(f"num_blocks        {plan.num_blocks:,}  (block 0 is the null block)")
print(f"blocks / request  {plan.blocks_per_max_request:,}  (32,768 tokens / 16)")
for line in plan.log_lines:
    print("log:", line)

# %% [markdown]
# `num_blocks = memory // bytes_per_block` = 10,240, and one maximum-length request needs 2,048 of them:
# **5.00** such requests fit at once — the number vLLM logs as its maximum concurrency.

# %% [markdown]
# ## 3. How many requests fit, as a function of `max_model_len`?
#
# Concurrency is the pool divided by the blocks of one maximum-length request. For a full-attention
# model that is simply inversely proportional to the length; at some length a single request no
# longer fits and vLLM refuses to start (× marks).

# %%
lengths = [2**k for k in range(11, 19)]
concurrency_figure({"Llama-3.1-8B, 20 GiB": concurrency_curve(cfg, lengths)}, current_len=32768,
                   title="Requests of max_model_len that fit at once")

# %% [markdown]
# ## 4. Does a sliding window save memory?
#
# Gemma-3-27B has 62 layers; 52 of them attend only to the last 1,024 tokens. vLLM frees the blocks
# that leave such a window, so a sliding layer holds about `window + tokens in flight` tokens, not the
# whole request. The comparison below keeps every layer's shape and only makes them all full attention.

# %%
gemma = get_model("gemma-3-27b")
g_cfg = EngineConfig(gemma, kv_cache_memory="20GiB", max_model_len=32768, profile="vllm-0.21")
g_full = g_cfg.replace(model=as_full_attention(gemma))
plans = {"as configured": capacity(g_cfg), "every layer full": capacity(g_full)}
for name, p in plans.items():
    print(f"{name:17s} groups {len(p.config.groups)}  blocks/request {p.blocks_per_max_request:,}  "
          f"max concurrency {p.max_concurrency:.2f}")
request_memory_figure({k: request_blocks_by_group(p) for k, p in plans.items()},
                      {k: (p.num_blocks - 1) * p.bytes_per_block for k, p in plans.items()},
                      title="Gemma-3-27B: pool memory one 32,768-token request holds")

# %% [markdown]
# At 32,768 tokens the window lets 2.3× more requests in. It is not free everywhere: vLLM gives every
# group the same number of layer slots (7 groups of 10 here, 8 of the slots padding), and a sliding
# group still reserves `window − 1 + max_num_batched_tokens` tokens (plus one block). For short requests
# the window saves nothing and the padding costs capacity:

# %%
curves = {"as configured": concurrency_curve(g_cfg, lengths),
          "every layer full": concurrency_curve(g_full, lengths)}
concurrency_figure(curves, current_len=32768, title="Gemma-3-27B, 20 GiB: sliding window vs full attention")

# %% [markdown]
# Up to 8,192 tokens a sliding group reserves the whole request anyway (window + one step's 8,192
# tokens is longer), and the padding slots cost about 12 % of the capacity. From 16,384 tokens on the
# window wins, and beyond 32,768 tokens only the windowed model starts at all.

# %% [markdown]
# ## 5. Why did "GPU KV cache size" jump between versions?
#
# The log line changed its formula in v0.21, not the pool: before, it was
# `(num_blocks // num_groups) × block_size`; since, it is `max concurrency × max_model_len`.

# %%
for profile in ("vllm-0.20", "vllm-0.21"):
    p = capacity(g_cfg.replace(profile=profile))
    print(f"{profile}: {p.num_blocks:,} blocks, max concurrency {p.max_concurrency:.2f} | {p.log_lines[0]}")

# %% [markdown]
# Same 16,384 blocks, same 2.97× concurrency; the logged size goes from 37,440 to 97,435 tokens. The old
# formula divides the pool by the 7 groups as if each request used all of them equally, which badly
# under-reports hybrid models.

# %% [markdown]
# ## 6. What does a 1-byte KV dtype buy?

# %%
for dtype in ("auto", "fp8", "int8_per_token_head", "fp8_per_token_head"):
    p = capacity(cfg.replace(kv_cache_dtype=dtype))
    print(f"{dtype:20s} bytes/block {p.bytes_per_block:>9,}  blocks {p.num_blocks:>6,}  "
          f"max concurrency {p.max_concurrency:.2f}")

# %% [markdown]
# fp8 halves the page and doubles the concurrency; the per-token-head formats add two fp32 scales per
# token and head (3 % more bytes), so they fit 1.94× as many requests as bfloat16.

# %% [markdown]
# Below one byte vLLM has no format. kvlab has three of its own, **kvlab schemes, not vLLM
# `--kv-cache-dtype` values** (lesson 2 measures what they do to attention): 4-bit codes with one
# scale per token and head, and KIVI's 4- and 2-bit codes with fp16 scales and zero points per key
# channel (per block) and per group of value channels (per token). Capacity counts their bytes with
# the same rules, scales and zero points included:

# %%
for dtype in ("int4_per_token_head", "kivi4", "kivi2"):
    p = capacity(cfg.replace(kv_cache_dtype=dtype))
    print(f"{dtype:20s} bytes/block {p.bytes_per_block:>9,}  blocks {p.num_blocks:>6,}  "
          f"max concurrency {p.max_concurrency:.2f}")

# %% [markdown]
# 2-bit KIVI fits 4.6× as many 32k-token requests as bfloat16, not 8×: its scales and zero points cost
# 1.5 bits per element next to the 2-bit codes. 4-bit KIVI pays more for them than the symmetric
# int4 scheme (an fp16 scale and zero point per 32 values of V and per 16 of K, against one fp32
# scale per 128 values).
# Lesson 6 does the same for Gemma 4 31B (`kvlab capacity --model gemma-4-31b -tp 2
# --kv-cache-memory 16GiB --max-model-len 131072 --kv-cache-dtype kivi2`: 6.28 requests, bfloat16 1.37).

# %% [markdown]
# ## 7. Every family: where do one request's bytes go?
#
# Models people deploy today store far less than "layers × heads × 2" per token, each with its own
# trick. One preset stands for each family; the figure shows what one 32,768-token request holds on
# one GPU, split into attention K/V, state pages (Mamba / linear attention) and the speculative
# draft's K/V.

# %%
from kvlab.analysis.family_views import FAMILIES, family_request_bytes
from kvlab.plots.family import family_bytes_figure

rows = family_request_bytes(32768)
for fam, row in zip(FAMILIES, rows, strict=True):
    print(f"{fam.name:28s} {fam.preset:20s} {row.bytes_per_token:>9,.0f} B/token  {fam.trick}")
family_bytes_figure(rows, title="One 32,768-token request, by family (one GPU of each example)")

# %% [markdown]
# A hybrid's state is a fixed cost per request, so its bytes per token fall as requests grow; the
# MTP module adds one more attention layer and one more state page per proposed token.
# `kvlab capacity --model qwen3-next-80b-a3b -tp 4` prints the same split, and the block size vLLM
# raises the attention layers to.

# %% [markdown]
# ## 8. Pipeline parallelism: what does one stage hold?
#
# With `--pipeline-parallel-size`, vLLM splits the decoder layers into consecutive runs, one per
# stage. A GPU then stores only its stage's layers, so one block id costs it fewer bytes, and the pool
# is as large as the stage that holds the fewest blocks. Llama-3.1-70B (80 layers) with TP 2 and
# 16 GiB of KV cache per GPU:

# %%
for pp in (1, 2, 4):
    p = capacity(EngineConfig("llama-3.1-70b", "16GiB", tensor_parallel_size=2, pipeline_parallel_size=pp,
                              max_model_len=32768))
    layers = [len(st.layer_names) for st in p.stages] or [80]
    print(f"PP {pp}: layers per stage {layers}, {p.bytes_per_block:>9,} B per block, "
          f"{p.num_blocks:>6,} blocks, max concurrency {p.max_concurrency:.2f}")

# %% [markdown]
# Each doubling of the stages halves what a block costs one GPU and doubles the requests that fit
# (with twice the GPUs). When the layers do not divide evenly, the leftover layers go to the stages
# before the last one, and that stage sets the pool: `kvlab capacity -pp 3 --model llama-3.1-8b`
# shows stages of 11, 11 and 10 layers.

# %% [markdown]
# ## Explore
#
# Pick a model (or upload any `config.json`), the KV dtype, block size, memory per GPU, tensor
# parallelism, `max_model_len`, chunk size and vLLM profile. Invalid combinations (too little memory
# for one request) show vLLM's startup error in the status line.

# %%
explorer = build_memory_explorer()
explorer.ui

# %% [markdown]
# The family picker: one sentence per family and its capacity in the memory you choose.

# %%
family_picker = build_family_picker()
family_picker.ui

# %% [markdown]
# ## Summary
#
# * Bytes per token = layers × KV heads × (K + V channels) × bytes per element (+ scales); 128 KiB for
#   Llama-3.1-8B in bfloat16.
# * vLLM turns memory into `memory // bytes_per_block` blocks; max concurrency is that pool over the
#   blocks of one `max_model_len` request.
# * Sliding windows pay off for long requests only: each sliding group still reserves the window plus the
#   tokens of one step, and hybrid grouping adds padding.
# * The "GPU KV cache size" log line changed formula in v0.21; compare concurrency instead.
# * A 1-byte cache nearly doubles capacity; per-token-head scales cost 3 % of it. kvlab's own 4- and
#   2-bit schemes (not vLLM's) go further, their scales and zero points counted like the codes.
# * MLA caches one latent per token (not split by TP); hybrids keep a fixed state per request and raise
#   the attention block to match it; shared layers store nothing; a speculative draft adds its own K/V
#   and lookahead slots.
# * With pipeline parallelism each GPU holds only its stage's layers; the stage that holds the fewest
#   blocks sets the pool.
