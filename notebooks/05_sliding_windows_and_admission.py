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
# # 5 · Sliding windows: grouping, block freeing and the admission budget
#
# A sliding-window layer only looks back `W` tokens, so its old blocks can be given back while the
# request is still running. Getting the accounting right is subtle: the engine must size its pool,
# free blocks and decide admissions with *one* consistent idea of what a request needs. This lesson
# follows one model through all three:
#
# 1. How are sliding and full layers grouped into block tables?
# 2. When does a sliding layer give its blocks back?
# 3. What does the admission gate charge a new request, under each policy?
# 4. How can a server stall with an empty queue of work it could serve? (vLLM 0.20)
# 5. What fixes it, and what do the other policies do?

# %%
from kvlab.allocator import TokenRequest
from kvlab.analysis import blocks_in_use, request_state_spans
from kvlab.kvdata import workload
from kvlab.models import model_from_hf_config
from kvlab.plots.admission import blocks_figure, timeline_figure
from kvlab.serving import EngineConfig, capacity, compare_policies, simulate
from kvlab.widgets import build_admission_explorer

# %% [markdown]
# ## 1. How are sliding and full layers grouped?
#
# Gemma-3-27B has 62 layers: 52 sliding (window 1,024) and 10 full. vLLM puts layers of one kind into
# groups of equal size; all layers of a group share one block table per request, and all groups draw
# block ids from one pool.

# %%
cfg = EngineConfig("gemma-3-27b", kv_cache_memory="8GiB", max_model_len=32768, max_num_batched_tokens=2048,
                   profile="vllm-0.20")
plan = capacity(cfg)
for i, g in enumerate(plan.config.groups):
    print(f"group {i}: {g.kind:15s} {len(g.layer_names):2d} layers, block {g.block_size} tokens")
print(f"padding layers: {plan.grouping.padding_layers};  pool: {plan.num_blocks:,} blocks "
      f"({plan.num_blocks - 1:,} usable + the null block)")

# %% [markdown]
# Six sliding groups of 8–9 layers and one full group of 10: every group is sized for 10 layers, so
# 8 layer slots are padding (the "Add 8 padding layers" warning vLLM prints).

# %% [markdown]
# ## 2. When does a sliding layer give its blocks back?
#
# A tiny model with one sliding layer (`W = 32`) and one full layer, blocks of 16 tokens: we prefill 48
# tokens, then decode one token at a time and print both block tables. Block id 0 is the *null block*:
# it replaces table entries whose tokens left the window.

# %%
tiny = model_from_hf_config({"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
                             "num_key_value_heads": 2, "sliding_window": 32,
                             "layer_types": ["sliding_attention", "full_attention"],
                             "max_position_embeddings": 4096}, name="tiny hybrid")
manager = EngineConfig(tiny, num_gpu_blocks_override=40, max_model_len=1024, max_num_batched_tokens=64,
                       profile="vllm-0.21").build_kv_cache_manager()
request = TokenRequest("a", range(48))
manager.allocate_slots(request, 48)
request.num_computed_tokens = 48
for step in range(33):
    if step % 8 == 0:
        sliding, full = manager.get_block_ids("a")
        print(f"{request.num_computed_tokens:3d} tokens: sliding {sliding}  full {full}")
    request.append_tokens([1000 + step])  # decode one token
    manager.allocate_slots(request, 1)
    request.num_computed_tokens += 1

# %% [markdown]
# The full table grows by one block per 16 tokens and never shrinks. The sliding table grows too, but
# each block whose 16 tokens are all more than `W − 1 = 31` positions behind the newest one is replaced
# by the null block and returned to the pool: the sliding layer holds at most about `W + 16` tokens.

# %% [markdown]
# ## 3. What does the admission gate charge a new request?
#
# Before admitting a waiting request, vLLM checks that the *whole* request will fit
# (`scheduler_reserve_full_isl`). The policies differ in what they charge a sliding group for a
# 22,234-token prompt:

# %%
for name, need in compare_policies(cfg, 22234).items():
    print(f"{name:18s} asks {need.total:6,} blocks  per group {[g.blocks for g in need.per_group]}  "
          f"of a pool of {need.pool_blocks:,}  → {'fits' if need.fits_empty_pool else 'NEVER fits'}")

# %% [markdown]
# * `uncapped` (vLLM ≤ 0.20) charges every sliding group the whole request: `cdiv(22,234, 16) = 1,390`
#   blocks, seven times over — 9,730 blocks, more than the whole pool.
# * `vllm` (0.21 on) caps a sliding group at `cdiv(W − 1 + chunk, B) + 1 = 193` blocks, the footprint the
#   pool was sized with; `window_plus_chunk` and `exact` give 192.
# * `trtllm` has one pool per window size, so its need is split over two pools (a different sizing).

# %% [markdown]
# ## 4. How does a server stall? (vLLM 0.20, `uncapped`)
#
# Six requests of 6k–24k tokens arrive at once. The sizer promised a maximum concurrency of 2.04 for
# 32,768-token requests; the gate disagrees.

# %%
requests = workload("long prompts", 32768)
old = simulate(cfg, requests)
print(old.summary.stalled)
print(f"finished {old.summary.finished} of {len(requests)}")

# %% [markdown]
# The queue is strictly first-come-first-served: when the head of the queue cannot be admitted, nothing
# behind it is tried. Request `r4` asks 9,730 blocks of a 6,552-block pool, so it never will be, and
# every request behind it waits forever — even when the pool is empty.

# %% [markdown]
# ## 5. The fix, and the other policies
#
# vLLM 0.21 caps the sliding groups at admission with the same number the sizer used. Same pool, same
# requests:

# %%
new = simulate(cfg.replace(profile="vllm-0.21"), requests)
runs = {"uncapped (vllm-0.20)": old, "vllm (vllm-0.21)": new}
timeline_figure({k: request_state_spans(r) for k, r in runs.items()},
                stalls={k: r.summary.stalled.step if r.summary.stalled else None for k, r in runs.items()},
                title="The same six requests under the old and the new admission gate")

# %%
blocks_figure({k: blocks_in_use(r) for k, r in runs.items()}, title="Blocks in use per group")

# %% [markdown]
# In seconds the stall is a gap: timed on one H100, the old gate serves the requests before `r4`,
# then the GPU sits idle while the rest wait forever; the new gate keeps it busy until all six are done.

# %%
from kvlab.analysis import running_over_time
from kvlab.plots.timing import timeline_figure as time_figure
from kvlab.simulator import steps_to_seconds

in_seconds = steps_to_seconds(requests, 0.05)  # the arrivals of the workload, 50 ms per step
timed = {k: simulate(c, in_seconds, gpu="h100") for k, c in
         (("uncapped (vllm-0.20)", cfg), ("vllm (vllm-0.21)", cfg.replace(profile="vllm-0.21")))}
for name, r in timed.items():
    m = r.metrics
    print(f"{name:22s} finished {m.finished}/{len(requests)}, last one at {m.wall_time_s:.2f} s"
          + ("; then stalled" if r.summary.stalled else ""))
end = max(r.metrics.wall_time_s for r in timed.values())
time_figure({k: running_over_time(r, until_s=end) for k, r in timed.items()}, what="running", unit="requests")

# %% [markdown]
# Under the capped gate all six requests finish and the pool never fills (dotted line). The sliding
# groups (light) stay small while the full group (dark) grows with each prompt. For the other policies:

# %%
for policy in ("window_plus_chunk", "exact", "trtllm"):
    s = simulate(cfg.replace(policy=policy), requests).summary
    print(f"{policy:18s} finished {s.finished}/{len(requests)} in {s.steps} steps"
          + (f"; stalled: {s.stalled.reason}" if s.stalled else ""))

# %% [markdown]
# `window_plus_chunk` and `exact` behave like `vllm` here. `trtllm` stalls for a different reason: it
# splits memory into one pool per window size up front, and with 8 GiB the window-1,024 pool is smaller
# than one window plus one 2,048-token chunk.

# %% [markdown]
# ## Explore
#
# Two policies side by side on the same configuration. Move the **window** slider: under `uncapped` the
# gate's need does not change (it ignores the window), under `vllm` it grows with the window. Try a
# larger chunk, a smaller memory, or the `vllm-0.33` profile (whose in-flight allowance doubles the chunk).
#
# Below the block figures the same requests run in seconds on the chosen **GPU**: a table of wall time,
# tokens per second, TTFT and TPOT for each policy, the throughput over time (the stalled policy's line
# stops) and the TTFT of each finished request. Switch the GPU to see the seconds change while the
# blocks stay the same. (In a workload whose requests arrive over time, such as `chat burst`, they
# arrive in seconds, so a faster GPU serves more steps between two arrivals and the blocks move too.)

# %%
explorer = build_admission_explorer()
explorer.ui

# %% [markdown]
# ## Summary
#
# * Layers are grouped by kind into groups of equal size; each group has one block table per request and
#   all groups share one pool (padding fills the smaller groups).
# * A sliding table replaces blocks that left the window by the null block and frees them: it holds about
#   `W + block` tokens, plus the tokens of one step in flight.
# * The sizer and the admission gate must agree. vLLM ≤ 0.20 sized sliding groups at `W + chunk` but
#   admitted at the full request length, so long prompts could never be admitted and blocked the queue.
# * Capping the gate at the sizer's footprint (vLLM 0.21) removes the stall without changing the pool.
