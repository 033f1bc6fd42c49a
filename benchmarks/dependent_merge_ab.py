"""Split-K decode: the merge kernel after the attention kernel, or as its programmatic dependent.

Three variants of the same prepared calls, timed alternately (CUDA-graph replays, inputs rotated past
the L2 as in ``kvlab bench``), two rounds in opposite orders:

* ``after``: the merge kernel launched after the attention kernel has finished (the rule before);
* ``dependent``: the merge launched as a programmatic dependent, every attention program letting it
  launch as soon as it starts (:mod:`kvlab.kernels.dependent_launch`);
* ``dependent_late``: launched as a dependent, but the attention kernel never lets it launch early,
  so it starts when the attention grid ends (what was measured in round 10).

Each row keeps its median µs, its percent of copy bandwidth, whether its output is bit-identical to
``after``'s, and its relative error against the float64 truth. Writes ``dependent_merge_ab.csv``
into the folder given as the first argument (default ``.``) and prints the best of the rounds.

    PYTHONPATH=.:benchmarks python3 benchmarks/dependent_merge_ab.py "$OUT"
"""

from decode_ab_cases import alternate, prepare_calls, print_best, run_grid

from kvlab.kernels.split_reduce import launch_split_reduce

CASES = ((1, 1024), (1, 8192), (1, 32768), (4, 8192), (16, 8192), (16, 32768))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_per_token_head", "fp8_e4m3", "int4_per_token_head",
           "kivi2")
VARIANTS = ("after", "dependent", "dependent_late")
ROUNDS = 2


def launcher(call, variant):
    """A callable launching ``variant`` of a prepared call."""
    launch = call._launch
    launch.dependent_merge = variant != "after"
    if variant != "dependent_late" or launch.grid[1] == 1:
        return call.run

    def late():
        launch.kernel[launch.grid](*launch.args, **dict(launch.kernel_consts(), LAUNCH_DEPENDENTS=False),
                                   **launch.options)
        launch_split_reduce(launch.out, launch.part_acc, launch.part_stat, launch.out_scale,
                            launch.consts["OUT_DTYPE"], dependent=True)
        return launch.out
    return late


def main() -> None:
    def measure(ctx, config, case, scheme, cache, batches):
        def launches_for(variant):
            calls = prepare_calls(case, scheme, cache, batches)
            return calls, [launcher(c, variant) for c in calls]

        return alternate(ctx, config, case, scheme, VARIANTS, launches_for, ROUNDS)

    rows = run_grid("dependent_merge_ab.csv", CASES, SCHEMES, measure)
    print_best(rows, VARIANTS)


if __name__ == "__main__":
    main()
