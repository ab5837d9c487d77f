"""Export the book's own MLM BERT (the queries-and-keys chapter's pretraining) as a Hugging Face folder.

    python scripts/export_book_model.py [--seed 0] [--step N] [--scale book] [--train] [--device cuda]

Writes `_build/models/book-mlm-bert/` (weights at the step with the lowest held-out MLM loss unless
--step is given, BERT's tokenizer, BOOK_MODEL.json with the settings and losses), which
`helpers.hf.models.load("book-mlm-bert")` reads, e.g. as an encoder of the STS chapter's mechanism test.
Weights are never committed: the pretraining must have run on this machine, or `--train` re-runs it (about an
hour on one CPU thread at `book`; it resumes if killed) and checks its held-out losses against the committed
trajectory, so the exported model is the one the book measured.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.experiments import qk  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=None, help="run seed (default: the preset's first)")
    ap.add_argument("--step", type=int, default=None, help="checkpoint step (default: lowest held-out loss)")
    ap.add_argument("--scale", default="book")
    ap.add_argument("--train", action="store_true", help="re-run the pretraining if its weights are not here")
    ap.add_argument("--device", default="cpu", help="where --train runs (cpu, cuda, auto)")
    a = ap.parse_args()
    from helpers.machinery import runtime

    out = qk.export_model(qk.Params.resolve(a.scale), seed=a.seed, step=a.step, train=a.train,
                          device=runtime.choose_device(a.device))
    print(out, (out / "BOOK_MODEL.json").read_text())


if __name__ == "__main__":
    main()
