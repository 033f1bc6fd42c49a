"""Low-bit decode: a program's sequence read from a lookup table, or taken from its program id.

In a batch where every sequence has one new token, program ``i`` of the low-bit kernel serves
sequence ``i`` (``SEQ_BY_PROGRAM``), so its query offsets and length can be loaded at once instead
of after a load of its sequence number: one round trip to memory fewer before the first tile. Both
variants run the same kernel, timed alternately, two rounds in opposite orders, every output
compared bit for bit with ``lookup``'s. Writes ``lowbit_lookup_ab.csv`` into the folder given as the
first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/lowbit_lookup_ab.py "$OUT"
"""

from decode_ab_cases import constexpr_ab

CASES = ((1, 1024), (1, 8192), (1, 32768), (4, 8192), (16, 8192))
SCHEMES = ("int4_per_token_head", "kivi4", "kivi2")
VARIANTS = ("lookup", "by_program")


def main() -> None:
    constexpr_ab("lowbit_lookup_ab.csv", CASES, SCHEMES, VARIANTS, "SEQ_BY_PROGRAM",
                 lambda variant, launch: variant == "by_program")


if __name__ == "__main__":
    main()
