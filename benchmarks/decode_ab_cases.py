"""The decode grid the A/B scripts share: each (case, scheme) with its paged cache, its prepared
calls and the bytes a decode must move; the alternating timing of variants; and launch shapes
(key tile, split count, stages, warps, register cap) timed beside the library's rule.

    from decode_ab_cases import decode_cases, prepare_calls, decode_bytes   (same folder)
"""

import dataclasses
import re

import torch

from kvlab.bench.attention_cases import attention_case, paged
from kvlab.bench.traffic import attention_bytes
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention, prepare_lowbit_call

LOWBIT = ("int4_per_token_head", "kivi4", "kivi2")


def paged_sets(config, case, scheme):
    """``(cache, batches)``: the case's K/V in ``case.sets`` copies of a paged cache of ``scheme``."""
    if scheme in LOWBIT:
        from lowbit_bench import lowbit_copies  # the low-bit benchmark's builder (same folder)

        gen = torch.Generator(device="cuda").manual_seed(config.seed + 7)
        return lowbit_copies(scheme, case.kv, 1, case.sets, gen)
    sets = paged(config, case, scheme)
    return sets.cache, sets.batches


def decode_cases(config, cases, schemes):
    """Yield ``(batch, context, case, scheme, cache, batches)`` for every decode case (B, L) and
    scheme, building each paged cache once and freeing it before the next."""
    for batch, context in cases:
        case = attention_case(config, batch, context, 1)
        for scheme in schemes:
            cache, batches = paged_sets(config, case, scheme)
            yield batch, context, case, scheme, cache, batches
            del cache, batches
        del case
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def prepare_calls(case, scheme, cache, batches) -> list:
    """One prepared call per rotation set, by the library's own launch rules."""
    prep = prepare_lowbit_call if scheme in LOWBIT else prepare_paged_attention
    return [prep(case.queries[s], cache, batches[s]) for s in range(case.sets)]


def decode_bytes(config, scheme: str, batch: int, context: int) -> int:
    """Bytes one decode step of ``batch`` sequences of ``context`` tokens must move at the least."""
    return attention_bytes(scheme, batch=batch, context=context, query_len=1,
                           num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                           head_size=config.head_size, block_size=config.block_size)


def ab_row(ctx, case, scheme: str, variant: str, rnd: int, us: float, nbytes: int, calls, out,
           same_as: str, same) -> dict:
    """One CSV row of an A/B run: the variant's median µs, its percent of copy bandwidth, whether its
    output equals the reference variant's (column ``same_as``) and its error against float64."""
    from kvlab.reference.metrics import relative_error

    return dict(device=ctx.device, batch=case.kv.batch, context=case.kv.context, scheme=scheme,
                variant=variant, round=rnd, us=round(us, 2),
                pct_copy_bw=round(100 * nbytes / us / 1e3 / ctx.copy_bw_gbps, 1),
                num_splits=calls[0]._launch.grid[1], **{same_as: same},
                rel_err_truth=f"{relative_error(out, case.truth):.4e}")


def run_grid(csv_name: str, cases, schemes, measure) -> list[dict]:
    """Run ``measure(ctx, config, case, scheme, cache, batches)`` (a list of CSV rows) on every case
    and scheme, print each row, and write them all to ``csv_name`` in the folder given as the
    script's first argument (default ``.``). Returns the rows."""
    import os
    import sys

    from kvlab.bench.config import BenchConfig
    from kvlab.bench.context import gpu_context
    from kvlab.bench.results import write_dict_rows

    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    config = BenchConfig()
    ctx = gpu_context()
    rows = []
    for _batch, _context, case, scheme, cache, batches in decode_cases(config, cases, schemes):
        for row in measure(ctx, config, case, scheme, cache, batches):
            rows.append(row)
            print(row, flush=True)
    write_dict_rows(rows, os.path.join(out_dir, csv_name))
    return rows


def alternate(ctx, config, case, scheme: str, variants: tuple[str, ...], launches_for, rounds: int = 2,
              same_as: str | None = None) -> list[dict]:
    """Time ``variants`` of one case alternately, ``rounds`` times, every other round in reverse order.

    ``launches_for(variant)`` returns ``(calls, launches)``: the prepared calls and the callables a
    graph replay runs. Each row says (column ``same_as``, default ``same_as_<first variant>``) whether
    the variant's output, from a NaN-filled output buffer, equals the first variant's bit for bit."""
    import torch

    from kvlab.bench.measure import time_graph_us

    nbytes = decode_bytes(config, scheme, case.kv.batch, case.kv.context)
    reference, rows = None, []
    for rnd in range(rounds):
        for variant in variants if rnd % 2 == 0 else variants[::-1]:
            calls, launches = launches_for(variant)
            us = time_graph_us(launches, config.repeats)
            calls[0]._launch.out.fill_(float("nan"))
            launches[0]()
            out = calls[0]._launch.out.clone()
            if variant == variants[0] and reference is None:
                reference = out
            same = bool(torch.equal(out, reference)) if reference is not None else ""
            rows.append(ab_row(ctx, case, scheme, variant, rnd, us, nbytes, calls, out,
                               same_as or f"same_as_{variants[0]}", same))
    return rows


def print_best(rows: list[dict], variants: tuple[str, ...]) -> None:
    """The best of the rounds per case and variant, and each variant's time over the first's."""
    best: dict = {}
    for r in rows:
        key = (r["batch"], r["context"], r["scheme"], r["variant"])
        best[key] = min(best.get(key, float("inf")), r["us"])
    print(f"{'B':>3} {'L':>6} {'scheme':22} " + " ".join(f"{v:>14}" for v in variants)
          + "".join(f"  {v + '/' + variants[0]:>18}" for v in variants[1:]))
    for b, L, scheme in dict.fromkeys((r["batch"], r["context"], r["scheme"]) for r in rows):
        t = [best.get((b, L, scheme, v), float("nan")) for v in variants]
        print(f"{b:>3} {L:>6} {scheme:22} " + " ".join(f"{x:14.2f}" for x in t)
              + "".join(f"  {x / t[0]:18.3f}" for x in t[1:]))


def constexpr_ab(csv_name: str, cases, schemes, variants: tuple[str, ...], name: str, value_of) -> None:
    """A/B of one kernel constexpr: each variant runs the library's prepared calls with ``name`` set
    to ``value_of(variant, launch)``; times, equality and errors as :func:`alternate` gives them."""
    def measure(ctx, config, case, scheme, cache, batches):
        def launches_for(variant):
            calls = prepare_calls(case, scheme, cache, batches)
            for call in calls:
                launch = call._launch
                launch.consts = dict(launch.consts, **{name: value_of(variant, launch)})
            return calls, [c.run for c in calls]

        return alternate(ctx, config, case, scheme, variants, launches_for)

    print_best(run_grid(csv_name, cases, schemes, measure), variants)


def element_bytes(scheme: str) -> int:
    return 2 if scheme in ("bfloat16", "float16") else 1


def shape_name(shape: tuple) -> str:
    """``(tile, splits[, stages[, warps[, register cap[, tiles a step]]]])`` → ``t128s66``, ``t64s66n3``,
    ``t128s33n2w8``, ``t64s82n2w4r96``; :func:`parse_shape` reads it back."""
    tile, splits, *rest = shape
    return f"t{tile}s{splits}" + "".join(f"{k}{v}" for k, v in zip("nwrp", rest, strict=False))


_SHAPE = re.compile(r"t(\d+)s(\d+)(?:n(\d+))?(?:w(\d+))?(?:r(\d+))?(?:p(\d+))?")


def parse_shape(name: str) -> dict:
    """A :func:`shape_name` (any of ``n``, ``w``, ``r``, ``p`` may be left out) as the launch options of
    the prepare functions: ``tile_n``, ``num_splits``, ``num_stages``, ``num_warps``, ``max_registers``,
    ``tiles_per_step`` (``None`` where left out). ``t64s82n2w4r96`` → 64, 82, 2, 4, 96, None."""
    m = _SHAPE.fullmatch(name)
    if m is None:
        raise ValueError(f"not a launch shape name (t<tile>s<splits>[n<stages>][w<warps>][r<cap>][p<step>]): "
                         f"{name!r}")
    keys = ("tile_n", "num_splits", "num_stages", "num_warps", "max_registers", "tiles_per_step")
    return {k: int(v) if v else None for k, v in zip(keys, m.groups(), strict=True)}


def measure_shapes(ctx, config, case, scheme, cache, batches, shapes) -> list[dict]:
    """Time the rule's launch beside each of ``shapes`` (see :func:`shape_name`), alternately."""
    variants = ("rule",) + tuple(shape_name(shape) for shape in shapes)

    def launches_for(variant):
        if variant == "rule":
            calls = prepare_calls(case, scheme, cache, batches)
        else:
            shape = parse_shape(variant)
            tile, splits, stages, warps, cap = (shape[k] for k in ("tile_n", "num_splits", "num_stages",
                                                                   "num_warps", "max_registers"))
            calls = []
            for s in range(case.sets):
                if scheme in LOWBIT:
                    calls.append(prepare_lowbit_attention(case.queries[s], cache, batches[s], tile_n=tile,
                                                          num_splits=splits, num_stages=stages,
                                                          num_warps=warps, max_registers=cap))
                else:
                    rule = prepare_paged_attention(case.queries[s], cache, batches[s]).tiling
                    capped = cap or (128 if element_bytes(scheme) == 1 else None)
                    tiling = dataclasses.replace(rule, tile_n=tile, num_splits=splits, max_registers=capped,
                                                 num_stages=stages or rule.num_stages,
                                                 num_warps=warps or rule.num_warps)
                    calls.append(prepare_paged_attention(case.queries[s], cache, batches[s], tiling=tiling))
        return calls, [c.run for c in calls]

    rows = alternate(ctx, config, case, scheme, variants, launches_for)
    best: dict = {}
    for r in rows:
        best[r["variant"]] = min(best.get(r["variant"], float("inf")), r["us"])
    line = " ".join(f"{v}={best[v]:.2f}({best[v] / best['rule']:.3f})" for v in variants)
    print(f"BEST B={case.kv.batch} L={case.kv.context} {scheme}: {line}", flush=True)
    return rows


def shapes_ab(csv_name: str, cases, schemes, shapes_for) -> list[dict]:
    """:func:`run_grid` of :func:`measure_shapes`: ``shapes_for(config, case, scheme)`` gives the
    launch shapes timed beside the rule in each (case, scheme)."""
    def measure(ctx, config, case, scheme, cache, batches):
        return measure_shapes(ctx, config, case, scheme, cache, batches, shapes_for(config, case, scheme))

    return run_grid(csv_name, cases, schemes, measure)
