"""The classic tensor layout and per-window groups, by hand (65,536 B pages of 16 tokens x 8 heads)."""

from __future__ import annotations

from kvlab.sizing.cache_config import KVCacheTensor, classic_tensors
from kvlab.sizing.grouping import group_layers
from kvlab.sizing.specs import FullAttentionSpec, SlidingWindowSpec, UniformTypeSpecs
from kvlab.sizing.window_pools import window_groups

SHAPE = dict(block_size=16, num_kv_heads=8, head_size=128)
FULL, HALF = FullAttentionSpec(**SHAPE), FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=128)
S8, S4 = SlidingWindowSpec(**SHAPE, sliding_window=8), SlidingWindowSpec(**SHAPE, sliding_window=4)


def test_hybrid_slots_share_one_tensor():
    """3 full + 2 sliding layers: group size 2, groups (f0, f2), (f1), (s0, s1). Slot 0 is shared by the
    first layer of every group (f0, f1, s0), slot 1 by the second (f2, s1); 10 blocks of the largest
    page each: 655,360 B."""
    g = group_layers({"f0": FULL, "f1": FULL, "f2": FULL, "s0": S8, "s1": S8})
    assert classic_tensors(g, 10) == (KVCacheTensor(655_360, ("f0", "f1", "s0")),
                                      KVCacheTensor(655_360, ("f2", "s1")))


def test_one_spec_or_one_type_gives_a_tensor_per_layer():
    """One spec: each layer its own 3-block tensor of 196,608 B. One type with two shapes: each layer
    its own page size, 3 x 65,536 and 3 x 32,768."""
    assert classic_tensors(group_layers({"a": FULL, "b": FULL}), 3) == (
        KVCacheTensor(196_608, ("a",)), KVCacheTensor(196_608, ("b",)))
    assert classic_tensors(group_layers({"a": FULL, "b": HALF}), 3) == (
        KVCacheTensor(196_608, ("a",)), KVCacheTensor(98_304, ("b",)))


def test_window_groups_full_first_then_by_window():
    groups = window_groups({"s8a": S8, "f0": FULL, "s4": S4, "s8b": S8, "f1": HALF})
    assert [g.layer_names for g in groups] == [("f0", "f1"), ("s4",), ("s8a", "s8b")]
    assert isinstance(groups[0].spec, UniformTypeSpecs)  # two full-attention shapes share the group
    assert (groups[1].spec, groups[2].spec) == (S4, S8)
