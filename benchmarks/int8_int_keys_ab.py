"""Decode over an int8 per-token-head cache: key codes converted to bf16, or fed to integer dots.

The library's int8 decode converts every key code to bf16 (five instructions per four codes,
``kernels/int8_decode.py``) for a bf16 tensor-core dot. The variant ``int_keys`` never converts a
key code: the query is split once per program into two int8 parts (``split_query_int8``) and the
scores come from two int8 tensor-core dots (``int8_scores``), exact in int32. Offline for sm_90 the
decode step shrinks by 11-14% (int8, B=1, L=32768: 1,572 → 1,393 instructions; B=64: 1,407 →
1,216). The query's split costs a relative error of about 2e-5 in the scores (2e-4 with a query
element 40 times the others), far below the cache's own (about 1e-2).

Both variants run alternately, two rounds in opposite orders; the outputs are not bit-identical
(the query's split rounds), so each row carries its error against float64 attention on the
unquantized K/V. Writes ``int8_int_keys_ab.csv`` into the folder given as the first argument
(default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/int8_int_keys_ab.py "$OUT"
"""

from decode_ab_cases import alternate, print_best, run_grid

from kvlab.kernels.attention import prepare_paged_attention

CASES = ((1, 1024), (1, 8192), (1, 32768), (4, 8192), (16, 8192), (16, 32768), (64, 1024), (64, 8192),
         (64, 32768))
SCHEMES = ("int8_per_token_head",)
VARIANTS = ("bf16_keys", "int_keys")


def measure(ctx, config, case, scheme, cache, batches):
    def launches_for(variant):
        calls = [prepare_paged_attention(case.queries[s], cache, batches[s],
                                         int8_int_keys=variant == "int_keys") for s in range(case.sets)]
        return calls, [c.run for c in calls]

    return alternate(ctx, config, case, scheme, VARIANTS, launches_for)


def main() -> None:
    print_best(run_grid("int8_int_keys_ab.csv", CASES, SCHEMES, measure), VARIANTS)


if __name__ == "__main__":
    main()
