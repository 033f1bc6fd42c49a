"""``kvlab budget``: the admission gate's need for one prompt length under every policy."""

from __future__ import annotations

import argparse
import json

from kvlab.admission.policies import POLICY_NAMES
from kvlab.cli.arg_types import token_count
from kvlab.cli.engine_args import add_engine_arguments, engine_config, print_table
from kvlab.serving import compare_policies


def run(args: argparse.Namespace) -> int:
    config = engine_config(args)
    names = [args.policy] if args.policy else list(POLICY_NAMES)
    needs = compare_policies(config, args.prompt_tokens, names)
    if args.json:
        print(
            json.dumps(
                {
                    "model": config.model_kv.name,
                    "profile": config.profile,
                    "prompt_tokens": args.prompt_tokens,
                    "policies": {
                        name: {
                            "per_group": [g.blocks for g in need.per_group],
                            "groups": [
                                {
                                    "kind": g.kind,
                                    "block_size": g.block_size,
                                    "window": g.window,
                                    "num_layers": g.num_layers,
                                    "blocks": g.blocks,
                                    "bytes": g.bytes,
                                    "pool_blocks": g.pool_blocks,
                                }
                                for g in need.per_group
                            ],
                            "total": need.total,
                            "total_bytes": need.total_bytes,
                            "pool_blocks": need.pool_blocks,
                            "fits_empty_pool": need.fits_empty_pool,
                        }
                        for name, need in needs.items()
                    },
                },
                indent=2,
            )
        )
        return 0
    print(
        f"{config.model_kv.name}  TP={config.tensor_parallel_size}  profile={config.profile}  "
        f"prompt={args.prompt_tokens:,} tokens  max_num_batched_tokens={config.max_num_batched_tokens:,}"
    )
    rows = []
    for name, need in needs.items():
        per_group = " ".join(str(g.blocks) for g in need.per_group)
        rows.append(
            [
                name,
                per_group,
                f"{need.total:,}",
                f"{need.total_bytes / 2**30:.2f}",
                f"{need.pool_blocks:,}",
                "yes" if need.fits_empty_pool else "NO (never admitted)",
            ]
        )
    print_table(rows, ["policy", "blocks per group", "total", "GiB", "pool blocks", "fits empty pool"])
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("budget", help="admission-gate need of one request under each policy")
    add_engine_arguments(p)
    p.add_argument(
        "--prompt-tokens", type=token_count, required=True, help="prompt length in tokens (65536, 64K, 65.5k)"
    )
    p.set_defaults(func=run)
