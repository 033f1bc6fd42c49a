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
# # 6 · A serving what-if dashboard
#
# The previous lessons took the pieces apart; this one puts them together for one deployment —
# Gemma-4-31B on two GPUs with 16 GiB of KV cache each — and asks what changes when one setting does:
#
# 1. How much does the KV dtype change capacity, and why not always by the same factor?
# 2. How little memory can this workload live with?
# 3. What does a bigger chunk size cost?
#
# Then the dashboard lets you ask your own questions.

# %%
from kvlab.kvdata import workload
from kvlab.serving import EngineConfig, capacity, simulate
from kvlab.widgets import build_serving_dashboard

base = EngineConfig("gemma-4-31b", kv_cache_memory="16GiB", tensor_parallel_size=2, max_model_len=32768,
                    max_num_batched_tokens=2048, profile="vllm-0.33", policy="vllm")
requests = workload("chat burst", 32768)
print(f"{len(requests)} requests, prompts {min(r.prompt_tokens for r in requests):,}–"
      f"{max(r.prompt_tokens for r in requests):,} tokens")

# %% [markdown]
# ## 1. How much does the KV dtype change capacity?

# %%
for dtype in ("auto", "fp8", "int8_per_token_head"):
    plan = capacity(base.replace(kv_cache_dtype=dtype))
    full = plan.config.groups[-1]
    print(f"{dtype:20s} bytes/block {plan.bytes_per_block:>9,}  max concurrency {plan.max_concurrency:5.2f}  "
          f"full group: block {full.block_size}, page {full.page_size_bytes:,} B, "
          f"{plan.blocks_per_request[-1]:,} blocks/request")

# %% [markdown]
# fp8 doubles capacity, as expected. int8 per-token-head, with only 1.6 % more bytes per token, gains
# far less. The reason is in the last columns: Gemma 4's full layers have 2 KV heads × 512 channels per
# GPU, its sliding layers 8 × 256. In bfloat16 and fp8 the full layer's page is exactly half the
# sliding one, so vLLM doubles the full group's block size to 32 and the pages line up. With
# per-token-head scales the pages become 33,024 and 66,560 bytes: no longer a divisor, so the newer
# vLLM pads the full layer's page to 66,560 bytes at block size 16 — every full-attention token costs
# twice what it should.

# %% [markdown]
# Below 8 bits there are no vLLM formats, but kvlab has three of its own (**kvlab schemes, not vLLM
# `--kv-cache-dtype` values**, lesson 2 section 7). The same sizing rules apply to their bytes:

# %%
for dtype in ("int4_per_token_head", "kivi4", "kivi2"):
    plan = capacity(base.replace(kv_cache_dtype=dtype))
    full = plan.config.groups[-1]
    print(f"{dtype:20s} bytes/block {plan.bytes_per_block:>9,}  max concurrency {plan.max_concurrency:5.2f}  "
          f"full group: block {full.block_size}, page {full.page_size_bytes:,} B")

# %% [markdown]
# 2-bit KIVI fits about 4.6 times as many 32k-token requests as bfloat16. Its key scales belong to a
# whole block, so a longer block makes them cheaper: the full layers, at block 32, pay half the key
# scale bytes per token of the sliding ones at block 16. Whether the model still answers well at
# 2 bits is lesson 2's frontier; this is only what the bytes buy.

# %% [markdown]
# ## 2. How little memory can this workload live with?

# %%
for memory in ("4GiB", "6GiB", "8GiB", "16GiB"):
    cfg = base.replace(kv_cache_memory=memory)
    s = simulate(cfg, requests).summary
    print(f"{memory:>5}: max concurrency {capacity(cfg).max_concurrency:5.2f}  steps {s.steps:4d}  "
          f"peak running {s.peak_running:2d}  preemptions {s.preemptions}")

# %% [markdown]
# Every run finishes, but with less memory fewer requests run at once and the workload takes more steps.
# A maximum concurrency of 1.25 counts requests of 32,768 tokens; the 16 chats of this burst are much
# shorter, and the scheduler absorbs the rest by queueing.

# %% [markdown]
# ## 3. What does a bigger chunk size cost?
#
# A sliding group reserves `window + tokens in flight`; with `vllm-0.33` the in-flight allowance is
# twice the chunk (asynchronous scheduling keeps one step in flight).

# %%
for chunk in (512, 2048, 8192):
    cfg = base.replace(kv_cache_memory="8GiB", max_num_batched_tokens=chunk)
    s = simulate(cfg, requests).summary
    print(f"chunk {chunk:5,}: max concurrency {capacity(cfg).max_concurrency:5.2f}  steps {s.steps}")

# %% [markdown]
# A larger chunk prefills in fewer steps but shrinks the capacity the sizer promises for long requests
# (3.93 → 1.01 requests of 32,768 tokens): the sliding groups must keep room for the tokens in flight.

# %% [markdown]
# ## 4. What it costs in seconds
#
# Blocks and steps do not say how long users wait. With `gpu=` every step takes the time kvlab's
# step-time model predicts on that GPU (a roofline of weight GEMMs, attention and cache writes with
# efficiencies measured on an H100, plus the all-reduces between the GPUs of a tensor-parallel group;
# `kvlab gpus` lists them), and the run reports what
# `vllm bench serve` would: time to first token (TTFT), time per output token (TPOT), throughput and
# wall time. Here the burst runs on two H100s at 6 GiB of KV cache each, under each KV dtype.

# %%
from kvlab.analysis import latency_samples_ms, tokens_per_second
from kvlab.plots.timing import latency_figure, timeline_figure
from kvlab.simulator import steps_to_seconds

in_seconds = steps_to_seconds(requests, 0.05)  # the burst's arrivals, 50 ms per step
timed = {}
for dtype in ("auto", "fp8", "int8_per_token_head"):
    config = base.replace(kv_cache_memory="6GiB", kv_cache_dtype=dtype)
    timed[dtype] = simulate(config, in_seconds, gpu="h100")
    m = timed[dtype].metrics
    print(f"{dtype:20s} wall {m.wall_time_s:6.2f} s  output {m.output_tokens_per_s:7,.0f} tok/s  "
          f"mean TTFT {m.ttft.mean * 1e3:7.1f} ms  mean TPOT {m.tpot.mean * 1e3:6.2f} ms  "
          f"p99 TPOT {m.tpot.p99 * 1e3:6.2f} ms")

# %%
latency_figure({k: latency_samples_ms(r)["tpot"] for k, r in timed.items()}, what="TPOT")

# %%
timeline_figure({k: tokens_per_second(r, 0.25) for k, r in timed.items()}, what="throughput", unit="tokens/s")

# %% [markdown]
# How far can these seconds be trusted? The time model was checked against 12 real steps of kvlab's
# kernels on an H100 (decode, prefill and mixed steps of four Llama-8B-shaped layers): each point is
# one step, measured against predicted; the dashed lines are ±15 %.

# %%
from kvlab.kvdata import load_timing_validation
from kvlab.plots.timing import validation_figure

rows = load_timing_validation()
validation_figure(rows) if rows else print("(no benchmarks/results/timing_validation_*.csv here)")

# %% [markdown]
# A smaller cache format buys time two ways: each decode reads fewer bytes, and more requests fit,
# so fewer wait in the queue (TTFT). How much depends on what dominates a step: at short contexts
# the weights do, and the format matters little. `benchmarks/seed_per_token_head.py` asks the same
# question at 200 concurrent requests on a 24 GB card, where capacity decides: there an INT8 cache
# wins end to end even with a kernel assumed slower than the bf16 one.

# %% [markdown]
# ## Your turn
#
# The dashboard compares every KV dtype at the current settings, runs the workload under the chosen
# profile and policy, and reports the outcome — including a stall: try gemma-3-27b, TP 1, 8 GiB,
# chunk 2,048, profile `vllm-0.20`, policy `uncapped` and the *long prompts* workload (lesson 5's
# stall). Settings vLLM would refuse at startup are reported in the status line.

# %%
dashboard = build_serving_dashboard()
dashboard.ui

# %% [markdown]
# ## Summary
#
# * Capacity scales with bytes per token only when page sizes still line up: per-token-head scales can
#   break the alignment of hybrid models and cost far more than their 3 %.
# * A workload with short requests fits in less memory than `max concurrency` suggests; queueing absorbs
#   the rest, at the price of more steps.
# * The chunk size trades prefill speed against the capacity reserved for sliding windows.
# * In seconds, a smaller KV format pays off when K/V reads or queueing dominate, and little when the
#   weights do.
