"""Layer grouping on small models worked out by hand (the rule of vLLM's ``get_kv_cache_groups``).

Hybrid rule: bucket the layers by spec; with bucket sizes from ``smallest`` to ``largest``, the group
size is ``largest`` if ``largest < 1.5 × smallest``, else ``smallest``; a bucket of n layers becomes
``ceil(n / group size)`` groups taking every k-th layer; empty slots are padding, reported as
``padding × 100 // (layers + padding)`` percent.
"""

from __future__ import annotations

import pytest

from kvlab.sizing.grouping import group_layers
from kvlab.sizing.specs import ChunkedLocalAttentionSpec, FullAttentionSpec, SlidingWindowSpec

SHAPE = dict(block_size=16, num_kv_heads=8, head_size=128)
FULL = FullAttentionSpec(**SHAPE)
SLIDING = SlidingWindowSpec(**SHAPE, sliding_window=8)


def _model(full, sliding):
    return {**{f"f{i}": FULL for i in range(full)}, **{f"s{i}": SLIDING for i in range(sliding)}}


def _groups(g):
    return [(grp.layer_names, grp.spec) for grp in g.groups]


def test_no_layers_and_one_spec():
    empty = group_layers({})
    assert (empty.groups, empty.group_size, empty.layout, empty.padding_layers, empty.warnings) == (
        (), 0, "uniform", 0, ())
    g = group_layers(_model(3, 0))
    assert (g.group_size, g.layout, g.padding_layers, g.warnings) == (3, "uniform", 0, ())
    assert _groups(g) == [(("f0", "f1", "f2"), FULL)]


def test_one_type_of_layer_with_two_shapes_is_uniform_type():
    g = group_layers({"a": FULL, "b": FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=128)})
    assert (g.group_size, g.layout, len(g.groups)) == (2, "uniform_type", 1)
    assert g.groups[0].layer_names == ("a", "b")


def test_five_full_and_three_sliding():
    """Buckets 5 and 3: 5 < 4.5 fails, group size 3. Full: ceil(5/3) = 2 groups, (f0, f2, f4) and
    (f1, f3); sliding: one group of 3. 3 groups x 3 slots - 8 layers = 1 padding layer, 100 // 9 = 11%."""
    g = group_layers(_model(5, 3))
    assert (g.layout, g.group_size, g.padding_layers) == ("hybrid", 3, 1)
    assert _groups(g) == [(("f0", "f2", "f4"), FULL), (("f1", "f3"), FULL), (("s0", "s1", "s2"), SLIDING)]
    assert g.warnings == ("Add 1 padding layers, may waste at most 11% KV cache memory",)


def test_six_full_and_four_sliding_sit_on_the_one_and_a_half_edge():
    """Buckets 6 and 4: 6 < 1.5 x 4 = 6 is false, so the group size is 4, not 6. Full: 2 groups of
    3; sliding: one of 4. 3 x 4 - 10 = 2 padding layers, 200 // 12 = 16%."""
    g = group_layers(_model(6, 4))
    assert (g.group_size, g.padding_layers) == (4, 2)
    assert _groups(g) == [(("f0", "f2", "f4"), FULL), (("f1", "f3", "f5"), FULL),
                          (("s0", "s1", "s2", "s3"), SLIDING)]
    assert g.warnings == ("Add 2 padding layers, may waste at most 16% KV cache memory",)


def test_three_and_three_need_no_padding():
    g = group_layers(_model(3, 3))
    assert (g.group_size, g.padding_layers, g.warnings) == (3, 0, ())
    assert _groups(g) == [(("f0", "f1", "f2"), FULL), (("s0", "s1", "s2"), SLIDING)]


def test_disable_hybrid_promotes_sliding_layers_that_remember_their_window():
    g = group_layers({"f0": FULL, "s0": SLIDING, "s1": SLIDING}, disable_hybrid=True)
    assert (g.layout, g.group_size) == ("uniform", 3)
    (names, spec), = _groups(g)
    assert names == ("f0", "s0", "s1")
    assert (isinstance(spec, FullAttentionSpec) and spec.sliding_window == 8
            and spec.attention_chunk_size is None)
    assert (spec.block_size, spec.num_kv_heads, spec.head_size) == (16, 8, 128)


@pytest.mark.parametrize(
    "specs, message",
    [
        ({"f0": FULL, "s0": SLIDING, "s1": SlidingWindowSpec(**SHAPE, sliding_window=16)},
         "all sliding-window layers in one group must have the same window size; got [8, 16]"),
        ({"f0": FULL, "s0": SLIDING, "c0": ChunkedLocalAttentionSpec(**SHAPE, attention_chunk_size=8)},
         "sliding-window and chunked-local layers cannot be promoted into one group"),
        ({"f0": FULL, "c0": ChunkedLocalAttentionSpec(**SHAPE, attention_chunk_size=8),
          "c1": ChunkedLocalAttentionSpec(**SHAPE, attention_chunk_size=16)},
         "all chunked-local layers in one group must have the same chunk size; got [8, 16]"),
    ],
)
def test_promotion_refusals(specs, message):
    with pytest.raises(ValueError) as err:
        group_layers(specs, disable_hybrid=True)
    assert str(err.value) == message


def test_promoted_chunked_layers_remember_their_chunk():
    chunked = ChunkedLocalAttentionSpec(**SHAPE, attention_chunk_size=32)
    (_, spec), = _groups(group_layers({"f0": FULL, "c0": chunked, "c1": chunked}, disable_hybrid=True))
    assert (spec.attention_chunk_size, spec.sliding_window) == (32, None)
