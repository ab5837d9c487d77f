"""Make a chapter's heavy runs as parallel jobs (submitit), on this machine or on a SLURM cluster.

    python scripts/grid.py vit --scale book                       # 2 single-threaded local jobs at a time
    python scripts/grid.py vit --scale book --parallel 4          # 4 at a time
    python scripts/grid.py glue --scale paper --gpus 0 1 2 3      # one job per GPU on one box
    python scripts/grid.py vit --scale paper --gpus 0 --jobs-per-gpu 6      # six runs share one card
    python scripts/grid.py deeplm --scale paper --gpus 0 --gib-per-job 8    # as many as fit in its memory
    python scripts/grid.py vit --scale paper --cluster slurm --partition gpu --gpus-per-job 1 --time-min 720
    python scripts/grid.py vit --scale book --list                # the runs, and which the cache holds
    python scripts/grid.py qk --scale book --recipe long --gpus 0 # qk's long pretraining (27x the book's tokens)

The runs are the chapter's `experiments.<chapter>.runs(p)` — the list its `run(p)` iterates — each keyed,
cached and resumable; every run the cache lacks becomes a job, which trains it under a lock beside its
checkpoint (one writer per run) and writes its results file atomically. Re-running skips finished runs and
resumes killed ones. At `book` scale results land in `results/<chapter>/book/` (to commit); at `ci` and `paper`
scale in `$TOKUNI_CACHE_DIR` (default `_build/grid-cache`, set here), where the chapter then reads them:
`TOKUNI_CACHE_DIR=_build/grid-cache make rerun CHAPTER=vit SCALE=paper`. Job logs: `_build/grid-logs/`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from rerun import parse_value  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter")
    ap.add_argument("--scale", default="book", choices=("ci", "book", "paper"))
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--recipe", default=None, help="a named set of overrides of the chapter (experiments.<chapter>."
                    "RECIPES), e.g. qk's `long`: the long pretraining for the 1.5-nat bar; -p values apply on top")
    ap.add_argument("--cluster", default="local", choices=("local", "slurm", "debug"))
    ap.add_argument("--parallel", type=int, default=2, help="local jobs at a time (default 2: one per core)")
    ap.add_argument("--gpus", type=int, nargs="*", default=None, help="local GPU ids: one job per GPU")
    ap.add_argument("--jobs-per-gpu", type=int, default=None, help="local: jobs sharing each GPU (default 1); a "
                    "paper run uses 1.5-7.4 GiB of an 80 GiB card, and one run alone keeps it a few per cent busy")
    ap.add_argument("--gib-per-job", type=float, default=None, help="local: pack by memory instead, as many jobs "
                    "per GPU as fit this peak (GiB, from scripts/bench_gpu.py) with 4 GiB to spare")
    ap.add_argument("--gpus-per-job", type=int, default=0, help="SLURM: GPUs per job")
    ap.add_argument("--cpus-per-job", type=int, default=1)
    ap.add_argument("--partition", default=None, help="SLURM partition")
    ap.add_argument("--time-min", type=int, default=24 * 60, help="time limit per job, minutes")
    ap.add_argument("--array-parallelism", type=int, default=64, help="SLURM: jobs of the array at a time")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per job")
    ap.add_argument("--folder", default=str(ROOT / "_build" / "grid-logs"), help="submitit's job folder")
    ap.add_argument("--list", action="store_true", help="list the runs and whether the cache holds them")
    args = ap.parse_args(argv)
    if args.jobs_per_gpu is not None and args.gib_per_job is not None:
        print("grid: give --jobs-per-gpu or --gib-per-job, not both", file=sys.stderr)
        return 2
    if (args.jobs_per_gpu is not None or args.gib_per_job is not None) and not args.gpus:
        print("grid: --jobs-per-gpu and --gib-per-job pack jobs onto the cards named by --gpus", file=sys.stderr)
        return 2

    if args.scale != "book":
        os.environ.setdefault("TOKUNI_CACHE_DIR", str(ROOT / "_build" / "grid-cache"))
    os.environ["TOKUNI_JOB_THREADS"] = str(args.threads)
    from importlib import import_module

    from helpers.machinery import grid
    from helpers.machinery.params import ParameterError

    try:
        module = import_module(f"helpers.experiments.{args.chapter}")
        recipes = getattr(module, "RECIPES", {})
        if args.recipe is not None and args.recipe not in recipes:
            raise ParameterError(f"chapter {args.chapter!r} has no recipe {args.recipe!r}; recipes: {sorted(recipes)}")
        overrides = {**recipes.get(args.recipe, {}), **{name: parse_value(value) for name, value in args.parameter}}
        p = module.Params.resolve(args.scale, **overrides)
    except (ModuleNotFoundError, ParameterError) as err:
        print(f"grid: {err}", file=sys.stderr)
        return 2
    if not hasattr(module, "runs"):
        print(f"grid: chapter {args.chapter!r} has no grid of heavy runs (no experiments.{args.chapter}.runs); "
              f"run it with `make rerun CHAPTER={args.chapter} SCALE={args.scale}`", file=sys.stderr)
        return 2
    if args.list:
        for s in module.runs(p):
            print(f"{'cached ' if s.done() else 'missing'}  {s.name}")
        return 0
    per_gpu = (grid.jobs_per_gpu_by_memory(args.gib_per_job, args.gpus) if args.gib_per_job is not None
               else args.jobs_per_gpu or 1)
    ex = grid.executor(args.cluster, args.folder, timeout_min=args.time_min, gpus_per_job=args.gpus_per_job,
                       cpus_per_job=args.cpus_per_job, partition=args.partition,
                       array_parallelism=args.array_parallelism)
    # a grid in stages (GLUE: the comparison runs are named by the selection runs' scores) is listed again
    # after each round, until every run it names is in the cache
    while True:
        specs = module.runs(p)
        if all(s.done() for s in specs):
            print(f"{args.chapter} at {args.scale}: all {len(specs)} runs are in the cache")
            return 0
        rep = grid.run_grid(specs, ex, parallel=args.parallel, gpus=args.gpus, jobs_per_gpu=per_gpu)
        if rep.failures:
            print(f"{len(rep.failures)} run(s) failed; logs in {args.folder}", file=sys.stderr)
            return 1
        if rep.count("done") == 0:
            print("no run could be made this round (another process holds them); run again later", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
