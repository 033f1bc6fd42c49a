"""Pipeline parallelism: which layers each stage holds, and what one block costs on each stage.

vLLM splits the decoder layers into ``pp`` consecutive runs (``get_pp_indices`` in
``vllm/distributed/utils.py``): every stage gets ``num_layers // pp`` layers and the
``num_layers % pp`` left over go one each to the stages just *before* the last one (the last stage
also holds the final norm and the LM head). ``VLLM_PP_LAYER_PARTITION="16,32"`` overrides the split.

The KV cache is then planned once for the whole model (``get_kv_cache_configs`` in
``vllm/v1/core/kv_cache_utils.py``, v0.16 and later):

1. the layers of *all* stages are grouped together, so every stage has the same groups and one
   block id means the same thing everywhere (the scheduler is shared);
2. each stage keeps only its own layers of every group (a group may be empty on a stage);
3. on a stage, one block id costs ``page × (most layers any group has on that stage)``; each stage
   checks that a ``max_model_len`` request fits its own memory;
4. every stage gets as many blocks as the *tightest* stage can hold.

Hand-worked example (Llama 3.1 8B: 32 layers, 8 KV heads × 128, bf16, block 16, TP 1, PP 3):
``32 // 3 = 10`` with 2 left over → stages of ``[11, 11, 10]`` layers. A page is
``16 × 8 × 128 × 2 (K and V) × 2 B = 65,536 B``; a block id costs ``11 × 65,536 = 720,896 B`` on the
two 11-layer stages, so 16 GiB per GPU holds ``17,179,869,184 // 720,896 = 23,831`` blocks, against
``17,179,869,184 // (32 × 65,536) = 8,192`` without pipeline parallelism.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kvlab.sizing.grouping import Grouping, KVCacheGroup
from kvlab.sizing.memory_units import parse_memory
from kvlab.sizing.specs import UniformTypeSpecs
from kvlab.validation import require_positive_int

_LAYER_INDEX = re.compile(r"layers\.(\d+)(?:\.|$)")


def pipeline_partition(
    num_layers: int, pipeline_parallel_size: int, layer_partition: Sequence[int] | None = None
) -> tuple[int, ...]:
    """Layers on each stage, as ``get_pp_indices`` splits them.

    Args:
        num_layers: the model's decoder layers (``num_hidden_layers``).
        pipeline_parallel_size: stages.
        layer_partition: layers per stage given by hand (``VLLM_PP_LAYER_PARTITION``), or ``None``.

    Example: ``pipeline_partition(32, 3) == (11, 11, 10)``; ``pipeline_partition(61, 4) ==
    (15, 15, 16, 15)``.

    Raises:
        ValueError: a partition of the wrong length or sum (vLLM's two checks).
    """
    require_positive_int(num_layers, "num_hidden_layers")
    require_positive_int(pipeline_parallel_size, "pipeline_parallel_size")
    if layer_partition is not None:
        parts = tuple(layer_partition)
        if len(parts) != pipeline_parallel_size:
            raise ValueError(
                f"the layer partition {','.join(map(str, parts))} names {len(parts)} stages but "
                f"pipeline_parallel_size is {pipeline_parallel_size}; give one layer count per stage"
            )
        for p in parts:
            require_positive_int(p, "layers of a pipeline stage in the layer partition", minimum=0)
        if sum(parts) != num_layers:
            raise ValueError(
                f"the layer partition {','.join(map(str, parts))} adds up to {sum(parts)} layers but the "
                f"model has num_hidden_layers={num_layers}; the counts must add up to it"
            )
        return parts
    base, extra = divmod(num_layers, pipeline_parallel_size)
    parts_list = [base] * pipeline_parallel_size
    for i in range(2, extra + 2):
        parts_list[-i] += 1
    return tuple(parts_list)


def parse_layer_partition(value: tuple[int, ...] | list[int] | str) -> tuple[int, ...]:
    """``"16,32"`` or ``(16, 32)`` → ``(16, 32)``: layers per pipeline stage.

    Raises:
        ValueError: anything but comma-separated whole numbers.
    """
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        out = tuple(int(p) if isinstance(p, str) else p for p in parts)
    except ValueError:
        out = ()
    if not out or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in out):
        raise ValueError(
            f"pipeline_layer_partition must be layer counts per stage separated by commas, e.g. "
            f"\"16,32\"; got {value!r}"
        )
    return out


def parse_stage_memory(
    value: Sequence[int | float | str] | str, pipeline_parallel_size: int
) -> tuple[int, ...]:
    """``"3.18GiB,24GiB"`` or ``(…)`` → bytes per stage, one entry per pipeline stage.

    Raises:
        ValueError: a memory kvlab cannot read, or not one per stage.
    """
    parts = value.split(",") if isinstance(value, str) else list(value)
    out = tuple(parse_memory(p.strip() if isinstance(p, str) else p, "pipeline stage memory") for p in parts)
    if len(out) != pipeline_parallel_size:
        raise ValueError(
            f"{len(out)} pipeline stage memories given but pipeline_parallel_size is "
            f"{pipeline_parallel_size}; give one KV-cache memory per stage, e.g. 3.18GiB,24GiB"
        )
    return out


def layer_index(name: str) -> int | None:
    """The decoder-layer index in a kvlab layer name (``"layers.12"``, ``"layers.3.state"``,
    ``"layers.0.indexer"`` → 12, 3, 0), or ``None`` for layers outside the decoder stack (a
    speculative draft's ``"draft.…"`` layers)."""
    m = _LAYER_INDEX.match(name)
    return int(m.group(1)) if m else None


def stage_layer_names(
    names: Sequence[str], partition: Sequence[int]
) -> tuple[tuple[str, ...], ...]:
    """``names`` split over the stages of ``partition`` by their decoder-layer index.

    Layers without an index (a draft model's or MTP module's) go to the last stage, where vLLM
    runs the drafter.

    Raises:
        ValueError: a layer index beyond the partition's layers.
    """
    bounds, start = [], 0
    for count in partition:
        bounds.append((start, start + count))
        start += count
    stages: list[list[str]] = [[] for _ in partition]
    for name in names:
        index = layer_index(name)
        if index is None:
            stages[-1].append(name)
            continue
        if index >= start:
            raise ValueError(
                f"layer {name!r} lies beyond the {start} layers the pipeline stages hold "
                "(num_hidden_layers is too small for this model)"
            )
        stage = next(s for s, (lo, hi) in enumerate(bounds) if lo <= index < hi)
        stages[stage].append(name)
    return tuple(tuple(s) for s in stages)


def project_grouping(grouping: Grouping, layer_names: Collection[str]) -> Grouping:
    """The whole-model ``grouping`` as one stage sees it: every group kept (empty where the stage
    has none of its layers), holding only the stage's layers (``_project_kv_cache_groups_to_worker``)."""
    keep = set(layer_names)
    groups = []
    for g in grouping.groups:
        names = tuple(n for n in g.layer_names if n in keep)
        spec = g.spec
        if isinstance(spec, UniformTypeSpecs):
            spec = UniformTypeSpecs(tuple((n, s) for n, s in spec.specs if n in keep))
        groups.append(KVCacheGroup(names, spec))
    group_size = max((len(g.layer_names) for g in groups), default=0)
    return Grouping(tuple(groups), group_size, grouping.layout, 0, ())


def check_stages_hold_layers(stages: Sequence[Collection[str]]) -> None:
    """Refuse a split that leaves a stage without any layer that has a KV cache or state.

    Raises:
        ValueError: naming the empty stage.
    """
    for i, names in enumerate(stages):
        if not names:
            raise ValueError(
                f"pipeline stage {i} holds no layer with a KV cache or state (its layers are all "
                "MLP-only or there are more stages than such layers); kvlab sizes only splits where every "
                "stage has one: use fewer stages or a layer partition"
            )


def pipeline_stage_layers(
    layer_names: Sequence[str],
    num_layers: int,
    pipeline_parallel_size: int,
    layer_partition: Sequence[int] | None = None,
) -> tuple[tuple[str, ...], ...] | None:
    """``layer_names`` split over the stages (``None`` for one stage and no partition given).

    Raises:
        ValueError: a partition vLLM refuses, or a stage left without layers that have a cache.
    """
    if pipeline_parallel_size == 1 and layer_partition is None:
        return None
    stages = stage_layer_names(layer_names, pipeline_partition(num_layers, pipeline_parallel_size,
                                                               layer_partition))
    check_stages_hold_layers(stages)
    return stages


@dataclass(frozen=True)
class PipelineStage:
    """One pipeline stage's share of the KV cache (one GPU of the stage).

    Attributes:
        index: stage number (0 first).
        layer_names: the stage's layers that have a cache or state.
        bytes_per_block: bytes one block id costs on this stage.
        available_bytes: KV-cache memory of one GPU of this stage.
        blocks_fit: blocks this stage's memory alone would hold (the pool takes the smallest).
    """

    index: int
    layer_names: tuple[str, ...]
    bytes_per_block: int
    available_bytes: int
    blocks_fit: int


def plan_stages(
    grouping: Grouping, stages: Sequence[Collection[str]], available_bytes: Sequence[int]
) -> tuple[tuple[PipelineStage, ...], int, Grouping]:
    """Each stage's block cost and fit, the tightest stage (fewest blocks fit: it sets the pool, the
    fit check and the length estimate, since a request needs the same blocks on every stage) and its
    projected grouping.

    Args:
        grouping: the whole model's groups.
        stages: layer names of each stage.
        available_bytes: KV-cache memory of one GPU of each stage (bytes).

    Raises:
        ValueError: a stage without layers, layers that appear on no stage, or one memory per stage
            missing.
    """
    check_stages_hold_layers(stages)
    if len(available_bytes) != len(stages):
        raise ValueError(
            f"{len(available_bytes)} KV-cache memories given for {len(stages)} pipeline stages; give one "
            "per stage"
        )
    placed = [n for names in stages for n in names]
    grouped = [n for g in grouping.groups for n in g.layer_names]
    if sorted(placed) != sorted(grouped):
        missing = sorted(set(grouped) - set(placed)) or sorted(set(placed) - set(grouped))
        raise ValueError(f"pipeline stages and KV-cache groups disagree on layers {missing[:4]}")
    out, projections = [], []
    for i, (names, memory) in enumerate(zip(stages, available_bytes, strict=True)):
        projected = project_grouping(grouping, names)
        per_block = max((g.bytes_per_block for g in projected.groups), default=0)
        out.append(PipelineStage(i, tuple(names), per_block, memory, memory // per_block))
        projections.append(projected)
    tightest = min(range(len(out)), key=lambda i: out[i].blocks_fit)
    return tuple(out), tightest, projections[tightest]
