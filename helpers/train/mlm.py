"""A small BERT pretrained from scratch with the masked-language-model recipe, checkpointed at
log-spaced steps: the offline stand-in for the MultiBERT checkpoints of Godey et al. §5.

What it is, so that no chapter passes it off as MultiBERT: a `transformers` `BertForMaskedLM`
(by default 4 layers, width 256, 4 heads of 64, FFN 1024) with BERT's uncased WordPiece vocabulary,
taken offline from all-MiniLM-L6-v2's package; trained on WikiText-103 *validation* text (the
mirror has no training split) with BERT's masking (15 % of tokens; of these 80 % [MASK], 10 % a
random token, 10 % unchanged), AdamW with linear warm-up and linear decay, no next-sentence task.
The analysis inputs come from the WikiText-103 *test* split, which training never sees.

Training goes through the book's one loop (`helpers.train.loop.fit`): its checkpoint (atomic, with
every RNG state) lets a run killed between two resume points end with the same weights and losses
as one that was never interrupted.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor

from ..core.config import StoredNames
from ..hf import models
from ..machinery.runtime import seed_everything, stream_seed
from .loop import Task, adamw, decay_groups, fit

TOKENIZER_SOURCE = "all-MiniLM-L6-v2"     # its folder holds BERT's uncased tokenizer (30,522 WordPieces)


@dataclass(frozen=True)
class PretrainConfig(StoredNames):
    """Architecture and MLM recipe of the small BERT (BERT's recipe, Devlin et al. 2019, scaled down)."""

    #: the names these settings were first keyed with, kept because they are in committed keys: the anisotropy
    #: chapter's byte-MLM training run is keyed by `BYTE_MLM.stored()`, the STS chapter's path runs by the hash of
    #: the book MLM's `stored()` (`sts.compute.path_key`), and the queries-and-keys pretraining folders by it too;
    #: renaming them would orphan those runs (`tests/test_config_names.py` pins the hashes)
    STORED_AS: ClassVar[dict[str, str]] = {"d_model": "hidden", "n_heads": "heads", "d_ff": "intermediate",
                                           "batch_size": "batch"}

    layers: int = 4
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    seq_len: int = 128               # tokens per training sequence, [CLS] and [SEP] included
    batch_size: int = 8
    steps: int = 1000                # optimiser steps
    lr: float = 1e-3
    warmup: float = 0.06             # fraction of `steps` with linear warm-up, then linear decay to 0
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    dropout: float = 0.1             # BERT's hidden and attention dropout (0 trains faster on a small budget)
    centre: bool = False             # ablation: subtract each block's output mean over the tokens (Yu & Zhang eq. 21)
    seed: int = 0
    checkpoint_steps: tuple[int, ...] = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000)
    resume_every: int = 100          # full-state checkpoint (for resume) every this many steps

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model = {self.d_model} must be divisible by n_heads = {self.n_heads}")
        if any(s < 0 or s > self.steps for s in self.checkpoint_steps):
            raise ValueError(f"checkpoint_steps {self.checkpoint_steps} must lie in [0, steps = {self.steps}]")


def tokenizer():
    """BERT's uncased WordPiece tokenizer, offline (from the all-MiniLM-L6-v2 package), or from the folder
    $TOKUNI_TOKENIZER names (a saved copy of it: what `scripts/bundle.py` carries to a machine that has no
    such package)."""
    import os
    from pathlib import Path

    from transformers import AutoTokenizer

    source = os.environ.get("TOKUNI_TOKENIZER") or models.resolve_source(TOKENIZER_SOURCE)
    if Path(source).exists():
        return AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    # the package is missing: the hub id, at the commit hub.lock pins (recorded and checked)
    from ..data import hublock

    asked, rev, resolved = hublock.hub_revision(source)
    try:
        tok = AutoTokenizer.from_pretrained(source, trust_remote_code=False, **({"revision": rev} if rev else {}))
    except OSError as err:
        mv = hublock.explain_missing("model", source, asked, err)
        if mv is None:
            raise
        raise mv from None
    hublock.settle("model", source, resolved)
    return tok


def split_paragraphs(text: str) -> list[str]:
    """WikiText lines that are article text (headings ` = … = ` and blank lines dropped)."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("=")]


def training_chunks(tok, seq_len: int, split: str = "validation", text: str | None = None) -> Tensor:
    """The split's article text, tokenised, concatenated and cut into [CLS] + (seq_len−2) tokens + [SEP]
    sequences: (n_chunks, seq_len) token ids, no padding."""
    from ..data import load_wikitext103

    paras = split_paragraphs(text if text is not None else load_wikitext103(split))
    ids = tokenised(tok, paras)
    body = seq_len - 2
    n = len(ids) // body
    if n < 1:
        raise ValueError(f"the text gave {len(ids)} tokens, fewer than one sequence of {body}")
    x = torch.tensor(ids[: n * body]).view(n, body)                                  # (n, seq_len-2)
    cls = torch.full((n, 1), tok.cls_token_id)
    sep = torch.full((n, 1), tok.sep_token_id)
    return torch.cat([cls, x, sep], dim=1)                                           # (n, seq_len)


def analysis_pick(paras: list[str], n: int, seed: int, min_words: int) -> list[int]:
    """Indices (into `paras`) of the `n` analysis paragraphs: drawn with `seed` among those of at least
    `min_words` words. One function, so that the corpus can leave exactly these out of training."""
    long = [i for i, p in enumerate(paras) if len(p.split()) >= min_words]
    if len(long) < n:
        raise ValueError(f"only {len(long)} paragraphs of >= {min_words} words, {n} asked for")
    g = torch.Generator().manual_seed(seed)
    return [long[j] for j in torch.randperm(len(long), generator=g)[:n].tolist()]


def analysis_samples(tok, n: int, max_length: int, seed: int = 0, split: str = "test",
                     min_words: int = 20, text: str | None = None) -> dict[str, Tensor]:
    """Godey et al. §5: "128 samples from Wikitext-103". Here: `n` paragraphs of at least `min_words`
    words drawn (seeded) from the test split, truncated to `max_length` tokens and padded:
    {"input_ids", "attention_mask"} of shape (n, L). Every checkpoint and seed sees the same samples."""
    from ..data import load_wikitext103

    paras = split_paragraphs(text if text is not None else load_wikitext103(split))
    pick = analysis_pick(paras, n, seed, min_words)
    enc = tok([paras[i] for i in pick], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


#: the mirror's sentence sets that join WikiText in the "mixed" pretraining corpus
CORPUS_GLUE = ("CoLA", "SST-2", "MRPC", "QNLI", "RTE")
CORPUS_STS = ("STS-B", "STS12", "STS13", "STS14", "STS15", "STS16", "SICK-R")


#: this process's tokenised texts, by tokenizer and text digest (`tokenised`): a chapter tokenises the same
#: corpus for every seed and variant, and the mixed corpus takes ~25 CPU seconds to tokenise
_TOKENISED: dict[tuple, list[int]] = {}


def tokenised(tok, paras: list[str]) -> list[int]:
    """The token ids of `paras`, each tokenised without special tokens, concatenated: computed once per
    process for a tokenizer and a text (keyed by the text's SHA-1, so a different text is tokenised anew).
    The list is shared: read it, do not change it."""
    digest = hashlib.sha1()
    for p in paras:
        digest.update(p.encode("utf-8"))
        digest.update(b"\0")
    key = (getattr(tok, "name_or_path", None), len(tok), type(tok).__name__, digest.hexdigest())
    if key not in _TOKENISED:
        if len(_TOKENISED) >= 4:
            _TOKENISED.clear()
        _TOKENISED[key] = [i for p in tok(paras, add_special_tokens=False, verbose=False)["input_ids"] for i in p]
    return _TOKENISED[key]


def chunk_ids(ids: list[int], tok, seq_len: int) -> Tensor:
    body = seq_len - 2
    n = len(ids) // body
    if n < 1:
        raise ValueError(f"the text gave {len(ids)} tokens, fewer than one sequence of {body}")
    x = torch.tensor(ids[: n * body]).view(n, body)
    return torch.cat([torch.full((n, 1), tok.cls_token_id), x, torch.full((n, 1), tok.sep_token_id)], dim=1)


def corpus(tok, seq_len: int, n_analysis: int, analysis_seed: int = 0, held_out_chunks: int = 64,
           min_words: int = 20) -> dict:
    """The "mixed" pretraining corpus of the Q/K chapter: WikiText-103 validation and test
    article text, minus the `n_analysis` analysis paragraphs (`analysis_samples` with the same seed,
    which training never sees) and minus a held-out block at the end of the test split, plus every
    sentence of the mirror's GLUE (train and validation of CoLA, SST-2, MRPC, QNLI, RTE, where present)
    and STS sets. Returns {"train": (n, seq_len) chunks, "held_out": (held_out_chunks, seq_len) chunks
    from the held-out test text, "unigram_nats": the cross-entropy on the held-out tokens of the
    training text's unigram distribution (add-one smoothed), "uniform_nats": log |V|, "train_tokens",
    "sources": which sets were found}. The unigram cross-entropy is the baseline a masked LM that
    ignores context would reach."""
    import math
    from collections import Counter

    from ..data import DataUnavailable, load_glue, load_sts, load_wikitext103

    val = split_paragraphs(load_wikitext103("validation"))
    test = split_paragraphs(load_wikitext103("test"))
    skip = set(analysis_pick(test, n_analysis, analysis_seed, min_words))
    rest = [p for i, p in enumerate(test) if i not in skip]
    enc = lambda paras: [i for p in tok(paras, add_special_tokens=False, verbose=False)["input_ids"] for i in p]  # noqa: E731
    held_ids: list[int] = []
    k = len(rest)
    while len(held_ids) < held_out_chunks * (seq_len - 2) and k > 0:     # the held-out block: the test text's end
        k -= 1
        held_ids = enc([rest[k]]) + held_ids
    sources, sents = ["WikiText-103 validation", "WikiText-103 test (analysis and held-out paragraphs removed)"], []
    for task in CORPUS_GLUE:
        for split in ("train", "validation"):
            try:
                s = load_glue(task, split, source="mirror")
            except DataUnavailable:
                continue
            sents += list(s.sentence1) + list(s.sentence2 or [])
            sources.append(f"GLUE {task} {split}")
    for name in CORPUS_STS:
        try:
            s = load_sts(name)
        except DataUnavailable:
            continue
        sents += list(s.sentence1) + list(s.sentence2)
        sources.append(name)
    train = chunk_ids(tokenised(tok, val + rest[:k] + sents), tok, seq_len)
    held = chunk_ids(held_ids, tok, seq_len)[:held_out_chunks]
    counts = Counter(train.flatten().tolist())
    total, vocab = sum(counts.values()), len(tok)
    ids = held[:, 1:-1].flatten().tolist()
    unigram = -sum(math.log((counts.get(i, 0) + 1) / (total + vocab)) for i in ids) / len(ids)
    return {"train": train, "held_out": held, "unigram_nats": unigram, "uniform_nats": math.log(vocab),
            "train_tokens": int(train.numel()), "sources": sources}


def mask_tokens(ids: Tensor, tok, mask_prob: float = 0.15, generator: torch.Generator | None = None
                ) -> tuple[Tensor, Tensor]:
    """BERT's masking: each non-special token is selected with probability `mask_prob`; a selected
    token becomes [MASK] with probability 0.8, a uniformly random token with 0.1, stays with 0.1.
    Returns (inputs, labels) with labels = −100 where not selected, on the device of `ids`.

    The draws come from `generator` on *its* device (a CPU generator by default, as every caller
    passes) and are moved to `ids.device`: the same seed gives the same masks on CPU and on a GPU,
    and a CPU generator never meets CUDA tensors (which would crash at step 0)."""
    dev = ids.device
    gdev = generator.device if generator is not None else torch.device("cpu")
    draw = lambda f, *a: f(*a, ids.shape, generator=generator, device=gdev).to(dev)   # noqa: E731
    special = torch.zeros_like(ids, dtype=torch.bool)
    for sid in tok.all_special_ids:
        special |= ids == sid
    u = draw(torch.rand)
    selected = (u < mask_prob) & ~special                                             # (B, L)
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    v = draw(torch.rand)
    inputs = ids.clone()
    inputs[selected & (v < 0.8)] = tok.mask_token_id
    rnd = selected & (v >= 0.8) & (v < 0.9)
    inputs[rnd] = draw(torch.randint, len(tok)).to(ids.dtype)[rnd]
    return inputs, labels


def new_mlm(cfg: PretrainConfig, vocab_size: int, attn_implementation: str = "sdpa"):
    """A freshly initialised `BertForMaskedLM` (weights drawn from the current torch RNG state)."""
    from transformers import BertConfig, BertForMaskedLM

    bc = BertConfig(vocab_size=vocab_size, hidden_size=cfg.d_model, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.n_heads, intermediate_size=cfg.d_ff,
                    max_position_embeddings=max(512, cfg.seq_len),
                    hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.dropout)
    bc._attn_implementation = attn_implementation
    model = BertForMaskedLM(bc)
    if cfg.centre:
        centre_blocks(model)
    return model


def centre_blocks(model) -> None:
    """The centring ablation: after every encoder block, subtract the block output's mean over the
    sequence's tokens (padding excluded when the model is called with an `attention_mask`),
    x_i ← x_i − (1/n) Σ_j x_j — Yu & Zhang (2024) eq. (21) applied after the block's LayerNorm. The
    hidden states then have zero mean over each sequence, so the mean query and mean key of every head
    reduce to the projection biases: Q̄ = b_Q, K̄ = b_K (Godey et al.'s drift along a common direction
    of the hidden states is removed; what remains is what the biases learn). Hooks, so the weights and
    the state dict are those of a plain `BertForMaskedLM`."""
    from ..hf.walk import transformer_layers

    state: dict = {"mask": None}

    def grab_mask(_module, args, kwargs):
        m = kwargs.get("attention_mask")
        state["mask"] = None if m is None else m.to(torch.bool)                     # (B, L)

    def centre(_module, _inputs, out):
        h = out[0] if isinstance(out, tuple) else out                                # (B, L, d)
        if state["mask"] is None:
            h = h - h.mean(dim=1, keepdim=True)
        else:
            w = state["mask"].to(h.dtype).unsqueeze(-1)                               # (B, L, 1)
            h = h - (h * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1.0)
        return (h, *out[1:]) if isinstance(out, tuple) else h

    model.bert.register_forward_pre_hook(grab_mask, with_kwargs=True)
    for layer in transformer_layers(model):
        layer.register_forward_hook(centre)


def mlm_loss(model, inputs: Tensor, labels: Tensor) -> Tensor:
    """Cross-entropy of the MLM head on the selected positions only (the 30k-way decoder is applied
    to the ~15 % selected tokens instead of all of them: same loss, a fraction of the cost)."""
    h = model.bert(input_ids=inputs).last_hidden_state                              # (B, L, d)
    sel = labels != -100                                                             # (B, L)
    logits = model.cls(h[sel])                                                       # (n_sel, V)
    return torch.nn.functional.cross_entropy(logits, labels[sel])


def _schedule(cfg: PretrainConfig):
    warm = max(1, int(round(cfg.warmup * cfg.steps)))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (cfg.steps - step) / max(1, cfg.steps - warm))
    return f


def weights_path(folder: str | Path, step: int) -> Path:
    return Path(folder) / f"step_{step:07d}.pt"


@torch.no_grad()
def eval_loss(model, chunks: Tensor, tok, mask_prob: float, seed: int = 1234, batch: int = 16) -> float:
    """MLM loss on fixed held-out sequences with a fixed masking (its own generator: the training
    RNG stream is untouched)."""
    was = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    tot, n = 0.0, 0
    for i in range(0, len(chunks), batch):
        inputs, labels = mask_tokens(chunks[i:i + batch], tok, mask_prob, generator=g)
        k = int((labels != -100).sum())
        tot += float(mlm_loss(model, inputs, labels)) * k
        n += k
    model.train(was)
    return tot / max(n, 1)


class MLMTask(Task):
    """MLM pretraining as a `fit` task: batch `t` (random sequences, BERT masking) is drawn from a
    generator seeded with (seed, t), so a resumed run sees the same batches; weights are written at
    every step of `cfg.checkpoint_steps` (step 0 = the initialisation) with the held-out loss."""

    clip_norm = 1.0

    def __init__(self, cfg: PretrainConfig, chunks: Tensor, folder: Path, tok, eval_chunks: Tensor | None) -> None:
        self.cfg, self.chunks, self.folder, self.tok, self.eval_chunks = cfg, chunks, folder, tok, eval_chunks
        self.name = f"MLM pretraining seed {cfg.seed}"
        self.steps_per_epoch, self.epochs, self.save_every = cfg.steps, 1, cfg.resume_every

    def settings(self) -> dict:
        return self.cfg.stored()

    def build(self, device: torch.device):
        model = new_mlm(self.cfg, len(self.tok)).to(device)
        opt = adamw(decay_groups(model, self.cfg.weight_decay), lr=self.cfg.lr, betas=(0.9, 0.999), eps=1e-6)
        return model, opt, torch.optim.lr_scheduler.LambdaLR(opt, _schedule(self.cfg))

    def batch(self, epoch: int, index: int, device: torch.device) -> tuple[Tensor, Tensor]:
        g = torch.Generator().manual_seed(stream_seed(self.cfg.seed, "mlm-batch", index))    # CPU draws
        idx = torch.randint(len(self.chunks), (self.cfg.batch_size,), generator=g)                 # (B,)
        inputs, labels = mask_tokens(self.chunks[idx], self.tok, self.cfg.mask_prob, generator=g)
        return inputs.to(device), labels.to(device)                                            # (B, L) each

    def loss(self, model, batch: tuple[Tensor, Tensor]):
        loss = mlm_loss(model, *batch)
        return loss, {"loss": loss.detach()}, self.cfg.batch_size   # a tensor: `fit` reads it back in batches

    def new_history(self) -> dict:
        return {"loss": [], "eval_loss": {}, "config": self.cfg.stored()}

    def _snapshot(self, model, step: int, history: dict) -> None:
        if step not in self.cfg.checkpoint_steps:
            return
        path = weights_path(self.folder, step)
        tmp = path.with_suffix(".tmp")
        torch.save(model.state_dict(), tmp)
        tmp.replace(path)
        if self.eval_chunks is not None:
            dev = next(model.parameters()).device
            history["eval_loss"][str(step)] = eval_loss(model, self.eval_chunks.to(dev), self.tok, self.cfg.mask_prob)

    def before_training(self, model, history: dict) -> None:
        self._snapshot(model, 0, history)

    def hook_needs_model(self, step: int) -> bool:
        return step in self.cfg.checkpoint_steps

    def after_step(self, model, step: int, stats: dict[str, float], history: dict) -> None:
        history["loss"].append(stats["loss"])
        self._snapshot(model, step, history)


def pretrain(cfg: PretrainConfig, chunks: Tensor, folder: str | Path, tok=None, eval_chunks: Tensor | None = None,
             stop_after: int | None = None, device: str | torch.device = "cpu", precision: str = "fp32") -> dict:
    """MLM pretraining from scratch through `fit`. Saves the weights at every step of
    `cfg.checkpoint_steps` (`step_XXXXXXX.pt`, step 0 = the initialisation) and the training state
    (`resume.pt`, the core's checkpoint) every `resume_every` steps; a call on a folder holding
    `resume.pt` continues from it, and one on a finished folder returns at once. `stop_after` stops
    after that many steps (simulates a kill). Returns the history: training loss per step, held-out
    loss at the checkpoint steps, wall time."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = tok if tok is not None else tokenizer()
    seed_everything(cfg.seed)                                       # the initial weights
    task = MLMTask(cfg, chunks, folder, tok, eval_chunks)
    _, history = fit(task, checkpoint=folder / "resume.pt", device=device, precision=precision,
                     stop_after_steps=stop_after)
    return history


def load_step(cfg: PretrainConfig, folder: str | Path, step: int, vocab_size: int,
              device: str | torch.device = "cpu"):
    """The model saved at `step`, with eager attention (so it returns attention probabilities), eval mode."""
    path = weights_path(folder, step)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint for step {step} in {folder}")
    model = new_mlm(cfg, vocab_size, attn_implementation="eager")
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.to(device).eval()


__all__ = ["PretrainConfig", "TOKENIZER_SOURCE", "tokenizer", "training_chunks", "analysis_samples", "corpus",
           "centre_blocks", "mask_tokens",
           "new_mlm", "mlm_loss", "eval_loss", "pretrain", "load_step", "weights_path"]
