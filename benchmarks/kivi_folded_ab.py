"""KIVI decodes with the scales folded into the query and probability rows, against the low-bit
kernel that dequantizes every code (``kvlab.kernels.kivi_folded_decode``).

Variants, each on the rule's launch shape (key tile, split count) unless the name says otherwise:
``plain`` (the low-bit kernel) and ``folded``, with suffixes ``_w<warps>`` (warps a program),
``_r<registers>`` (register cap) and ``_x<tiles>`` (key tiles per loop step). Timed alternately,
two rounds in opposite orders; each row says whether its output equals ``plain``'s bit for bit (it
cannot: the two round differently) and gives its error against float64 attention on the
unquantized K/V. Writes ``kivi_folded_ab.csv`` into the folder given as the first argument.

    PYTHONPATH=.:benchmarks python3 benchmarks/kivi_folded_ab.py "$OUT" [--more]
"""

import re
import sys

from decode_ab_cases import alternate, print_best, run_grid

from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention

CASES = ((1, 8192), (1, 32768), (4, 8192), (16, 8192), (64, 8192), (64, 32768))
SCHEMES = ("kivi4", "kivi2")
VARIANTS = ("plain", "folded", "folded_w2", "folded_w4")
#: ``--more``: the full grids again, with more warps or loads in flight per multiprocessor
MORE_CASES = ((1, 32768), (64, 8192), (64, 32768))
MORE_VARIANTS = ("plain", "folded", "plain_w4_r128", "folded_w4_r128", "plain_x2", "folded_x2")


def launch_options(variant: str) -> dict:
    """``folded_w4_r128`` → ``folded=True, num_warps=4, max_registers=128``."""
    kernel, *suffixes = variant.split("_")
    opts = dict(folded=kernel == "folded")
    names = {"w": "num_warps", "r": "max_registers", "x": "tiles_per_step"}
    for suffix in suffixes:
        key, value = re.fullmatch(r"([wrx])(\d+)", suffix).groups()
        opts[names[key]] = int(value)
    return opts


def measure_variants(variants):
    def measure(ctx, config, case, scheme, cache, batches):
        def launches_for(variant):
            calls = [prepare_lowbit_attention(case.queries[s], cache, batches[s], **launch_options(variant))
                     for s in range(case.sets)]
            return calls, [c.run for c in calls]

        return alternate(ctx, config, case, scheme, variants, launches_for)
    return measure


def main() -> None:
    if "--more" in sys.argv[2:]:
        rows = run_grid("kivi_folded_more_ab.csv", MORE_CASES, SCHEMES, measure_variants(MORE_VARIANTS))
        print_best(rows, MORE_VARIANTS)
    else:
        print_best(run_grid("kivi_folded_ab.csv", CASES, SCHEMES, measure_variants(VARIANTS)), VARIANTS)


if __name__ == "__main__":
    main()
