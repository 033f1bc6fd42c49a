"""Short low-bit decodes: the key tile at the rule's split count, 32 to 256 keys.

Round 13 found that a one-wave split decode over a 1-byte cache ends on its last tile's math, with
nothing left to load, and that halving a segment's tiles when it holds only a few pays
(``kernel_notes.md``, v33). This script asks the same of the low-bit kernel (int4 per-token-head,
kivi4, kivi2) on its short grids: the rule's launch, and the same split count with each other key
tile, alternately, two rounds in opposite orders. It is how the rule for 2-bit KIVI was found:
when the first two committed CSVs were measured the rule ran 64-key tiles everywhere, and since then
split short-grid kivi2 decodes run 128 (there ``rule`` is the 128-key row and ``t64…`` the launch
before); in the ``--full`` CSV ``rule`` is already the 64-key launch.
Writes ``lowbit_tile_ab.csv`` into the folder given as the first argument (default ``.``). With
``--kivi`` after it: the KIVI schemes only, with 64- to 256-key tiles, on the short grids and on
B=16 and B=64 (``lowbit_tile_kivi_ab.csv``). With ``--full``: the full grids that split only to fill
whole waves (B=32 and B=48), 64- and 128-key tiles (``lowbit_tile_full_ab.csv``; round 14 of
``lowbit_notes.md``, which took these grids out of the 2-bit 128-key rule).

    PYTHONPATH=.:benchmarks python3 benchmarks/lowbit_tile_ab.py "$OUT" [--kivi | --full]
"""

import sys

import torch
from decode_ab_cases import shapes_ab

from kvlab.kernels.lowbit_launch import choose_lowbit_launch

CASES = ((1, 8192), (1, 16384), (1, 32768), (4, 8192))
SCHEMES = ("int4_per_token_head", "kivi4", "kivi2")
TILES = (32, 64, 128)
KIVI_CASES = CASES + ((16, 8192), (64, 8192), (64, 32768))
KIVI_SCHEMES = ("kivi4", "kivi2")
KIVI_TILES = (64, 128, 256)
FULL_CASES = ((32, 8192), (32, 32768), (48, 8192), (48, 32768))


def tile_shapes(tiles):
    """``shapes_for`` of :func:`~decode_ab_cases.shapes_ab`: each of ``tiles`` but the rule's own, at
    the rule's split count."""
    def shapes_for(config, case, scheme):
        rule = choose_lowbit_launch(kivi=scheme.startswith("kivi"), prefill=False,
                                    num_programs=case.kv.batch * config.num_kv_heads,
                                    max_seq_len=case.kv.context, block_size=config.block_size,
                                    num_sms=torch.cuda.get_device_properties(0).multi_processor_count,
                                    bits=2 if scheme == "kivi2" else 4)
        return tuple((tile, rule.num_splits) for tile in tiles if tile != rule.tile_n)
    return shapes_for


def main() -> None:
    if "--full" in sys.argv[2:]:
        shapes_ab("lowbit_tile_full_ab.csv", FULL_CASES, KIVI_SCHEMES, tile_shapes((64, 128)))
    elif "--kivi" in sys.argv[2:]:
        shapes_ab("lowbit_tile_kivi_ab.csv", KIVI_CASES, KIVI_SCHEMES, tile_shapes(KIVI_TILES))
    else:
        shapes_ab("lowbit_tile_ab.csv", CASES, SCHEMES, tile_shapes(TILES))


if __name__ == "__main__":
    main()
