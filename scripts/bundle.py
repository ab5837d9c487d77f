"""Carry what a bare machine lacks: the data mirror's text parts and BERT's tokenizer, in one folder.

    python scripts/bundle.py .device                    # here: WikiText, GLUE, STS and the tokenizer (~27 MiB)

A rented GPU or a cluster node with its own PyTorch but neither `../shared/data` nor the pip package BERT's
tokenizer ships in reads them from the bundle:

    export TOKUNI_DATA=.device/data TOKUNI_TOKENIZER=.device/tokenizer
    make grid CHAPTER=qk SCALE=book GRID_ARGS='--recipe long --gpus 0'

With the hub reachable, neither is needed (the loaders fall back to the real dataset and model ids). The folder
is for carrying, never for committing (add it to `.git/info/exclude`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the mirror's folders the text chapters read (the mixed pretraining corpus, the STS and GLUE samples)
PARTS = ("wikitext", "glue", "sts")


def bundle(folder: Path, parts: tuple[str, ...] = PARTS) -> int:
    """Copy `parts` of the mirror to `folder/data/` and save BERT's tokenizer to `folder/tokenizer/`; returns
    the bundle's size in bytes."""
    from helpers.data import data_root
    from helpers.train import mlm

    root = data_root()
    if root is None:
        raise SystemExit("bundle: no data mirror here (../shared/data or $TOKUNI_DATA) to carry")
    for sub in parts:
        if not (root / sub).is_dir():
            raise SystemExit(f"bundle: the mirror at {root} has no {sub}/")
        shutil.copytree(root / sub, folder / "data" / sub, dirs_exist_ok=True)
    mlm.tokenizer().save_pretrained(folder / "tokenizer")
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--parts", nargs="+", default=list(PARTS), help=f"mirror folders to carry (default {PARTS})")
    args = ap.parse_args(argv)
    size = bundle(args.folder, tuple(args.parts))
    print(f"bundle in {args.folder}: {size / 2**20:.1f} MiB; on the other machine: "
          f"export TOKUNI_DATA={args.folder}/data TOKUNI_TOKENIZER={args.folder}/tokenizer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
