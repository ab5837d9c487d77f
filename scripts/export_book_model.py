"""Export the book's own MLM BERT (the queries-and-keys chapter's pretraining) as a Hugging Face folder.

    python scripts/export_book_model.py [--seed 0] [--step N] [--scale book]

Writes `_build/models/book-mlm-bert/` (weights at the step with the lowest held-out MLM loss unless
--step is given, BERT's tokenizer, BOOK_MODEL.json with the settings and losses), which
`helpers.hf.models.load("book-mlm-bert")` reads, e.g. as an encoder of the STS chapter's mechanism test.
The pretraining must have run on this machine (`make rerun CHAPTER=qk SCALE=book`); weights are never committed.
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
    a = ap.parse_args()
    out = qk.export_model(qk.Params.resolve(a.scale), seed=a.seed, step=a.step)
    print(out, (out / "BOOK_MODEL.json").read_text())


if __name__ == "__main__":
    main()
