"""``kvlab quality``: does a quantized KV cache change what a real model predicts?

Scores a text (default: the shipped prose) teacher-forced with SmolLM2-135M-Instruct under every
KV-cache scheme, each layer's K/V stored in kvlab's paged cache of that scheme, and prints one row
per scheme: perplexity, top-1 agreement and mean KL against the unquantized (fp32) cache, and the
first position where greedy generations from eight prompts part from the unquantized cache's.
``--json`` prints one object per scheme instead.
"""

from __future__ import annotations

import argparse
import json
import sys

#: Tokens of the shipped prose scored by default.
DEFAULT_TOKENS = 1024


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def register(subparsers) -> None:
    p = subparsers.add_parser("quality", help="perplexity, agreement and KL of every KV-cache scheme on a "
                              "real model (SmolLM2-135M)", description=__doc__.split("\n\n")[0])
    p.add_argument("--kv-cache-dtype", nargs="+", metavar="NAME", default=None,
                   help="schemes to score (default: every scheme kvlab knows)")
    p.add_argument("--rounding", choices=("truncate", "nearest"), default=None,
                   help="int8 per-token-head rounding (default: both; truncate is vLLM's store)")
    p.add_argument("--text-file", metavar="PATH", help="UTF-8 text to score (default: the shipped prose)")
    p.add_argument("--max-tokens", type=_positive, default=None, metavar="N",
                   help=f"score the first N tokens (default: all of --text-file; {DEFAULT_TOKENS} of the "
                   "shipped prose)")
    p.add_argument("--window", type=_positive, default=None, metavar="W",
                   help="what-if: attend to the last W tokens only (the model was trained without one)")
    p.add_argument("--new-tokens", type=_positive, default=16, metavar="N",
                   help="greedy tokens generated per prompt to find first divergences (0: skip)")
    p.add_argument("--json", action="store_true", help="one JSON object per scheme")
    p.set_defaults(func=run)


def _table(rows) -> str:
    head = f"{'kv_cache_dtype':<22} {'rounding':<9} {'tokens':>6} {'perplexity':>10} {'top1 agree':>10} " \
           f"{'mean KL':>9}  first divergence (per prompt; - = identical)"
    lines = [head, "-" * len(head)]
    for r in rows:
        div = " ".join("-" if d is None else str(d) for d in r.first_divergence) or "(not generated)"
        lines.append(f"{r.kv_cache_dtype:<22} {r.rounding or '':<9} {r.tokens:>6} {r.perplexity:>10.4f} "
                     f"{r.top1_agreement:>10.4f} {r.mean_kl:>9.5f}  {div}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from kvlab.lm import load_model, parse_variants, score_tokens
    from kvlab.lm.corpus import corpus_text
    from kvlab.lm.inputs import read_text_file, require_fits_context, require_max_tokens, require_window
    from kvlab.lm.prompts import GENERATION_PROMPTS
    from kvlab.lm.quality import compare_generations, quality_rows

    if args.max_tokens is not None:
        require_max_tokens(args.max_tokens)
    window = require_window(args.window)
    text = read_text_file(args.text_file) if args.text_file else corpus_text()
    parse_variants(args.kv_cache_dtype, args.rounding)  # unknown names fail before the model loads
    model = load_model()
    variants = parse_variants(args.kv_cache_dtype, args.rounding, model.config.head_size)
    ids = model.encode(text)
    if len(ids) < 2:
        raise ValueError(f"the text is {len(ids)} token(s) long; scoring needs at least 2")
    context = model.config.context_length
    if args.max_tokens is not None:
        require_fits_context(args.max_tokens, context, f"--max-tokens {args.max_tokens}")
        ids = ids[: args.max_tokens]
    elif args.text_file:
        require_fits_context(len(ids), context, f"text file {args.text_file!r}")
    else:
        ids = ids[:DEFAULT_TOKENS]
    quiet = args.json or not sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if not quiet:
            print(f"\r  scored {done}/{total} tokens", end="", file=sys.stderr, flush=True)

    scores = score_tokens(model, ids, variants, sliding_window=window, progress=progress)
    divergences = None
    if args.new_tokens:
        scored = [s.variant for s in scores.values()]
        _, _, divergences = compare_generations(model, GENERATION_PROMPTS, scored,
                                                max_new_tokens=args.new_tokens, sliding_window=window)
    rows = quality_rows(scores, divergences)
    if args.json:
        print(json.dumps([r.as_json() for r in rows], indent=2))
    else:
        if not quiet:
            print(file=sys.stderr)
        print(_table(rows))
        print("\nbaseline: 'auto' = the model's own fp32 K/V; top1 agree and mean KL are measured against it")
    return 0
