"""Pipeline stages by hand: 4 decoder layers, 0-1 full attention and 2-3 sliding window, 65,536 B pages.

Grouped as two groups of two (full: layers 0-1, sliding: layers 2-3), so a block id costs 2 x 65,536 =
131,072 B on the whole model. Split 2 + 2: stage 0 holds only the full layers (its sliding group is
empty), stage 1 only the sliding ones; each stage pays 131,072 B per block. With 10 pages on stage 0
and 3 on stage 1, they fit 655,360 // 131,072 = 5 and 196,608 // 131,072 = 1 blocks: stage 1 is the
tightest and sets the pool.
"""

from __future__ import annotations

import pytest

from kvlab.sizing.grouping import group_layers
from kvlab.sizing.pipeline import (
    PipelineStage,
    check_stages_hold_layers,
    parse_layer_partition,
    pipeline_stage_layers,
    plan_stages,
    project_grouping,
    stage_layer_names,
)
from kvlab.sizing.specs import FullAttentionSpec, SlidingWindowSpec

SHAPE = dict(block_size=16, num_kv_heads=8, head_size=128)
FULL, SLIDING = FullAttentionSpec(**SHAPE), SlidingWindowSpec(**SHAPE, sliding_window=8)
SPECS = {"layers.0": FULL, "layers.1": FULL, "layers.2": SLIDING, "layers.3": SLIDING}
EMPTY_STAGE = ("pipeline stage 1 holds no layer with a KV cache or state (its layers are all MLP-only or "
               "there are more stages than such layers); kvlab sizes only splits where every stage has one: "
               "use fewer stages or a layer partition")


def test_layers_go_to_stages_by_index():
    assert stage_layer_names(list(SPECS), (2, 2)) == (("layers.0", "layers.1"), ("layers.2", "layers.3"))
    assert stage_layer_names(list(SPECS), (1, 3)) == (("layers.0",), ("layers.1", "layers.2", "layers.3"))
    # a draft model's layers have no decoder index: they go to the last stage
    assert pipeline_stage_layers([*SPECS, "draft.x"], 4, 2) == (
        ("layers.0", "layers.1"), ("layers.2", "layers.3", "draft.x"))
    assert pipeline_stage_layers(list(SPECS), 4, 1) is None  # one stage, no partition: no split


def test_a_stage_sees_every_group_but_only_its_layers():
    grouping = group_layers(SPECS)
    stage0 = project_grouping(grouping, ["layers.0", "layers.1"])
    assert [(g.layer_names, g.spec) for g in stage0.groups] == [(("layers.0", "layers.1"), FULL),
                                                               ((), SLIDING)]
    assert (stage0.group_size, stage0.layout, stage0.padding_layers, stage0.warnings) == (2, "hybrid", 0, ())


def test_the_tightest_stage_sets_the_pool():
    grouping = group_layers(SPECS)
    assert [g.bytes_per_block for g in grouping.groups] == [131_072, 131_072]
    stages = stage_layer_names(list(SPECS), (2, 2))
    out, tight, projected = plan_stages(grouping, stages, [10 * 65_536, 3 * 65_536])
    assert out == (PipelineStage(0, ("layers.0", "layers.1"), 131_072, 655_360, 5),
                   PipelineStage(1, ("layers.2", "layers.3"), 131_072, 196_608, 1))
    assert tight == 1 and [g.layer_names for g in projected.groups] == [(), ("layers.2", "layers.3")]


def test_a_stage_with_one_layer_of_each_group_pays_one_page_per_block():
    """Stages (0, 2) and (1, 3): each stage's groups hold one layer each, so a block costs max(65,536,
    65,536) = 65,536 B there; equal memories fit 10 blocks each and the first stage counts as tightest."""
    out, tight, _ = plan_stages(group_layers(SPECS), (("layers.0", "layers.2"), ("layers.1", "layers.3")),
                                [10 * 65_536, 10 * 65_536])
    assert [(s.bytes_per_block, s.blocks_fit) for s in out] == [(65_536, 10), (65_536, 10)] and tight == 0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: stage_layer_names(["layers.4"], (2, 2)),
         "layer 'layers.4' lies beyond the 4 layers the pipeline stages hold (num_hidden_layers is too small "
         "for this model)"),
        (lambda: check_stages_hold_layers([["a"], []]), EMPTY_STAGE),
        (lambda: pipeline_stage_layers(list(SPECS), 4, 2, (4, 0)), EMPTY_STAGE),
        (lambda: plan_stages(group_layers(SPECS), (("layers.0", "layers.1"), ("layers.2", "layers.3")), [1]),
         "1 KV-cache memories given for 2 pipeline stages; give one per stage"),
        (lambda: plan_stages(group_layers(SPECS), (("layers.0", "layers.1"), ("layers.2",)), [1, 1]),
         "pipeline stages and KV-cache groups disagree on layers ['layers.3']"),
        (lambda: plan_stages(group_layers(SPECS),
                             (("layers.0", "layers.1", "layers.9"), ("layers.2", "layers.3")), [1, 1]),
         "pipeline stages and KV-cache groups disagree on layers ['layers.9']"),
        (lambda: parse_layer_partition([True, 2]),
         "pipeline_layer_partition must be layer counts per stage separated by commas, e.g. \"16,32\"; "
         "got [True, 2]"),
        (lambda: parse_layer_partition([-1, 2]),
         "pipeline_layer_partition must be layer counts per stage separated by commas, e.g. \"16,32\"; "
         "got [-1, 2]"),
        (lambda: parse_layer_partition(""),
         "pipeline_layer_partition must be layer counts per stage separated by commas, e.g. \"16,32\"; "
         "got ''"),
    ],
)
def test_stage_refusals(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message
