"""What limits the Q/K chapter's MLM pretraining at CPU budgets (the 1.5-nat bar): one seed of the
book model (4 x 256 MLM BERT, bf16, no dropout unless asked) under another recipe, held-out MLM loss at five
evenly spaced checkpoints on the book's held-out block, written to results/qk/probes/<name>.json with provenance.

    python scripts/qk_recipe_probe.py base 1e-3 8 5000            # the book recipe at 5,000 steps
    python scripts/qk_recipe_probe.py lr3e-4 3e-4 8 5000          # a 3x lower learning rate
    python scripts/qk_recipe_probe.py b32 1e-3 32 1250            # a 4x larger batch, same tokens
    python scripts/qk_recipe_probe.py wd1 1e-3 8 15000 --wiki-weighted --dropout 0.1

`--wiki-weighted`: the mixed corpus with its WikiText part repeated 3x, SST-2's training phrases (fragments
of the same sentences) and exact duplicate sentences removed. One single-threaded process per core."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.data import DataUnavailable, load_glue, load_sts, load_wikitext103  # noqa: E402
from helpers.machinery.results import save_results  # noqa: E402
from helpers.train import mlm  # noqa: E402

L, N_ANALYSIS = 128, 128


def wiki_weighted(tok, repeat: int = 3):
    """The mixed corpus re-weighted: WikiText (validation + test minus the analysis and held-out paragraphs,
    as `mlm.corpus`) repeated `repeat` times, plus the GLUE/STS sentences without SST-2 train, deduplicated."""
    val, test = mlm.split_paragraphs(load_wikitext103("validation")), mlm.split_paragraphs(load_wikitext103("test"))
    skip = set(mlm.analysis_pick(test, N_ANALYSIS, 0, 20))
    rest = [p for i, p in enumerate(test) if i not in skip]
    enc = lambda paras: [i for p in tok(paras, add_special_tokens=False, verbose=False)["input_ids"] for i in p]  # noqa: E731
    held, k = [], len(rest)
    while len(held) < 64 * (L - 2) and k > 0:          # the same held-out block as mlm.corpus
        k -= 1
        held = enc([rest[k]]) + held
    sents = []
    for task in mlm.CORPUS_GLUE:
        for split in ("train", "validation"):
            if (task, split) == ("SST-2", "train"):
                continue
            try:
                s = load_glue(task, split, source="mirror")
            except DataUnavailable:
                continue
            sents += list(s.sentence1) + list(s.sentence2 or [])
    for name in mlm.CORPUS_STS:
        try:
            s = load_sts(name)
        except DataUnavailable:
            continue
        sents += list(s.sentence1) + list(s.sentence2)
    wiki = mlm.chunk_ids(enc(val + rest[:k]), tok, L)
    other = mlm.chunk_ids(enc(list(dict.fromkeys(sents))), tok, L)
    return torch.cat([wiki] * repeat + [other])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("lr", type=float)
    ap.add_argument("batch", type=int)
    ap.add_argument("steps", type=int)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--wiki-weighted", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    tok = mlm.tokenizer()
    c = mlm.corpus(tok, L, N_ANALYSIS, analysis_seed=0)
    chunks = wiki_weighted(tok) if a.wiki_weighted else c["train"]
    marks = tuple(sorted({0, *(a.steps * i // 5 for i in range(1, 6))}))
    cfg = mlm.PretrainConfig(steps=a.steps, lr=a.lr, batch_size=a.batch, dropout=a.dropout, seed=0,
                             checkpoint_steps=marks, resume_every=max(100, a.steps // 10))
    t = time.time()
    out = Path(__file__).resolve().parents[1] / "_build" / "checkpoints" / "qk-probes" / a.name
    h = mlm.pretrain(cfg, chunks, out, tok=tok, eval_chunks=c["held_out"], precision="bf16")
    res = {"name": a.name, "lr": a.lr, "batch": a.batch, "steps": a.steps, "dropout": a.dropout,
           "wiki_weighted": a.wiki_weighted, "tokens_seen": a.steps * a.batch * L, "unigram_nats": c["unigram_nats"],
           "eval_loss": h["eval_loss"], "train_loss_last50": sum(h["loss"][-50:]) / 50}
    folder = Path(__file__).resolve().parents[1] / "results" / "qk" / "probes"
    folder.mkdir(parents=True, exist_ok=True)
    save_results(a.name, res, vars(a), folder, wall_time_s=time.time() - t,
                 command="python scripts/qk_recipe_probe.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
