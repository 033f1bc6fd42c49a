"""The block map shows the allocator's blocks as the simulator recorded them, step by step."""

from __future__ import annotations

import pytest

from kvlab.kvdata import workload
from kvlab.serving import simulate
from kvlab.widgets.block_map import MAX_MODEL_LEN, block_map_config, build_block_map
from tests.widgets.figure_checks import assert_well_formed

COLUMNS = 32


@pytest.fixture
def explorer():
    return build_block_map(model="gpt-oss-20b", workload_name="shared system prompt", pool_blocks=512,
                           chunk=512, step=0, debounce_s=0)


def _result(explorer, prefix_caching=True):
    c = explorer.controls
    cfg = block_map_config(c["model"].value, c["pool_blocks"].value, c["chunk"].value, prefix_caching)
    return simulate(cfg, workload(c["workload"].value, MAX_MODEL_LEN), record_blocks=True)


def _cells(fig) -> dict[int, str]:
    """block id → name of the trace that draws it (the shared-outline overlay excluded)."""
    out = {}
    for t in fig.data:
        if t.x is None or t.name.startswith("shared") or t.x == (None,):
            continue
        for x, y in zip(t.x, t.y, strict=True):
            block = y * COLUMNS + x
            assert block not in out, f"block {block} drawn twice"
            out[block] = t.name.split(" (")[0]
    return out


@pytest.mark.parametrize("step", [5, 30, 80])
def test_each_block_is_drawn_as_the_simulator_recorded_it(explorer, step):
    result = _result(explorer)
    explorer.controls["step"].value = step
    states = result.timeline[step].block_states
    cells = _cells(explorer.figures["blocks"])
    assert len(cells) == len(states) == 512
    for b in states:
        expected = ("null block" if b.is_null else b.owners[0] if b.owners
                    else "free, prefix cached" if b.is_cached else "free")
        assert cells[b.block_id] == expected, b
    shared = next(t for t in explorer.figures["blocks"].data if t.name.startswith("shared"))
    assert len(shared.x) == sum(1 for b in states if len(b.owners) > 1)


def test_the_shared_system_prompt_is_held_once_by_every_request_using_it(explorer):
    result = _result(explorer)
    prefix_tokens = next(n for cid, n in workload("shared system prompt", MAX_MODEL_LEN)[0].prompt)
    full_group = result.group_kinds.index("full")
    block_size = 16
    for rec in result.timeline:
        if len([r for r in rec.running if rec.scheduled.get(r, 0) <= 1]) >= 2:  # two requests past prefill
            break
    explorer.controls["step"].value = rec.step
    shared_full = [b for b in rec.block_states if len(b.owners) > 1 and b.group == full_group]
    assert len(shared_full) == prefix_tokens // block_size
    assert all(b.ref_cnt == len(b.owners) for b in shared_full)


def test_without_prefix_caching_nothing_is_shared(explorer):
    explorer.controls["prefix_caching"].value = False
    for step in (10, 40):
        explorer.controls["step"].value = step
        shared = next(t for t in explorer.figures["blocks"].data if t.name.startswith("shared"))
        assert len(shared.x) == 0
    assert "0 shared" in explorer.status.message


def test_step_slider_spans_the_run(explorer):
    result = _result(explorer)
    assert explorer.controls["step"].max == len(result.timeline) - 1 == explorer.controls["play"].max
    explorer.controls["step"].value = explorer.controls["step"].max
    assert f"step {len(result.timeline) - 1} of" in explorer.status.message


def test_every_figure_is_labelled(explorer):
    assert_well_formed(explorer.figures["blocks"], "blocks")


@pytest.mark.parametrize("prefix_caching", [True, False])
def test_a_replayed_step_has_the_blocks_of_the_whole_recorded_run(explorer, prefix_caching, seed):
    from random import Random

    from kvlab.widgets.block_map import blocks_at

    full = _result(explorer, prefix_caching)
    c = explorer.controls
    cfg = block_map_config(c["model"].value, c["pool_blocks"].value, c["chunk"].value, prefix_caching)
    steps = Random(seed).sample(range(len(full.timeline)), 4)
    for step in steps:
        assert blocks_at(cfg, c["workload"].value, step) == full.timeline[step]
    only = simulate(cfg, workload(c["workload"].value, MAX_MODEL_LEN), record_blocks=steps)
    assert [r.step for r in only.timeline if r.block_states is not None] == sorted(steps)
    for step in steps:
        assert only.timeline[step].block_states == full.timeline[step].block_states
