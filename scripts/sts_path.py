"""Read the book MLM BERT's pretraining checkpoints on STS: its own path along Table 1's axis.

    python scripts/sts_path.py [--seeds 0 1] [--steps 200 500 ...] [--device cpu]

Each checkpoint (the queries-and-keys chapter's `book` pretraining; `python scripts/export_book_model.py --train
--seed N` makes them, about an hour per seed on one CPU thread) is exported, read on every pair of the seven sets
under the paper-comparison pooling (raw, SoftDecay, whitening, …) and written to
`results/sts/book/sts-path-book-mlm-bert-seed<s>-step<t>.json` with its provenance; a reading already committed is
read back, not redone. A checkpoint that is not on this machine is skipped and named. The STS chapter's `book`
preset reads the same files (`path_seeds`, `path_steps`). About two CPU-minutes per checkpoint.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.experiments import sts  # noqa: E402
from helpers.experiments.sts.compute import path_cached  # noqa: E402

COMMAND = "python scripts/sts_path.py"


def main() -> None:
    book = sts.Params.resolve("book")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(book.path_seeds))
    ap.add_argument("--steps", type=int, nargs="+", default=list(book.path_steps))
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    from dataclasses import replace

    from helpers.machinery import runtime

    p = replace(book, command=COMMAND)
    device = runtime.choose_device(a.device)
    skipped = []
    for seed in a.seeds:
        for step in a.steps:
            t0 = time.process_time()
            try:
                res, cached = path_cached(p, seed, step, device)
            except FileNotFoundError as err:
                skipped.append(f"seed {seed} step {step}")
                print(f"seed {seed} step {step}: skipped ({err})", flush=True)
                continue
            r = res["draws"][0]["scores"][p.paper_pooling]
            raw = sum(v["vanilla"] for v in r.values()) / len(r)
            sd = sum(v["SoftDecay (sentence)"] for v in r.values()) / len(r)
            print(f"seed {seed} step {step}: raw {raw:.2f}, SoftDecay − raw {sd - raw:+.2f} "
                  f"({'committed' if cached else f'{time.process_time() - t0:.0f} CPU-s'})", flush=True)
    if skipped:
        print(f"{len(skipped)} checkpoints not on this machine: {', '.join(skipped)}")


if __name__ == "__main__":
    main()
