"""A small BERT pretrained from scratch with the masked-language-model recipe, checkpointed at
log-spaced steps: the offline stand-in for the MultiBERT checkpoints of Godey et al. §5.

What it is, so that no chapter passes it off as MultiBERT: a `transformers` `BertForMaskedLM`
(by default 4 layers, width 256, 4 heads of 64, FFN 1024) with BERT's uncased WordPiece vocabulary,
taken offline from all-MiniLM-L6-v2's package; trained on WikiText-103 *validation* text (the
mirror has no training split) with BERT's masking (15 % of tokens; of these 80 % [MASK], 10 % a
random token, 10 % unchanged), AdamW with linear warm-up and linear decay, no next-sentence task.
The analysis inputs come from the WikiText-103 *test* split, which training never sees.

Checkpoint/resume goes through `helpers.train.save_checkpoint` / `load_checkpoint` (atomic, with
every RNG state), so a run killed between two resume points ends with the same weights and
losses as one that was never interrupted.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..book.runtime import progress
from ..hf import models
from .checkpoint import load_checkpoint, save_checkpoint

TOKENIZER_SOURCE = "all-MiniLM-L6-v2"     # its folder holds BERT's uncased tokenizer (30,522 WordPieces)


@dataclass(frozen=True)
class PretrainConfig:
    """Architecture and MLM recipe of the small BERT (BERT's recipe, Devlin et al. 2019, scaled down)."""

    layers: int = 4
    hidden: int = 256
    heads: int = 4
    intermediate: int = 1024
    seq_len: int = 128               # tokens per training sequence, [CLS] and [SEP] included
    batch: int = 8
    steps: int = 1000                # optimiser steps
    lr: float = 1e-3
    warmup: float = 0.06             # fraction of `steps` with linear warm-up, then linear decay to 0
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    seed: int = 0
    checkpoint_steps: tuple[int, ...] = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000)
    resume_every: int = 100          # full-state checkpoint (for resume) every this many steps

    def __post_init__(self) -> None:
        if self.hidden % self.heads:
            raise ValueError(f"hidden = {self.hidden} must be divisible by heads = {self.heads}")
        if any(s < 0 or s > self.steps for s in self.checkpoint_steps):
            raise ValueError(f"checkpoint_steps {self.checkpoint_steps} must lie in [0, steps = {self.steps}]")


def tokenizer():
    """BERT's uncased WordPiece tokenizer, offline (from the all-MiniLM-L6-v2 package)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(models.resolve_source(TOKENIZER_SOURCE))


def _paragraphs(text: str) -> list[str]:
    """WikiText lines that are article text (headings ` = … = ` and blank lines dropped)."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("=")]


def training_chunks(tok, seq_len: int, split: str = "validation", text: str | None = None) -> Tensor:
    """The split's article text, tokenised, concatenated and cut into [CLS] + (seq_len−2) tokens + [SEP]
    sequences: (n_chunks, seq_len) token ids, no padding."""
    from ..data import load_wikitext103

    paras = _paragraphs(text if text is not None else load_wikitext103(split))
    ids = [i for p in tok(paras, add_special_tokens=False, verbose=False)["input_ids"] for i in p]
    body = seq_len - 2
    n = len(ids) // body
    if n < 1:
        raise ValueError(f"the text gave {len(ids)} tokens, fewer than one sequence of {body}")
    x = torch.tensor(ids[: n * body]).view(n, body)                                  # (n, seq_len-2)
    cls = torch.full((n, 1), tok.cls_token_id)
    sep = torch.full((n, 1), tok.sep_token_id)
    return torch.cat([cls, x, sep], dim=1)                                           # (n, seq_len)


def analysis_samples(tok, n: int, max_length: int, seed: int = 0, split: str = "test",
                     min_words: int = 20, text: str | None = None) -> dict[str, Tensor]:
    """Godey et al. §5: "128 samples from Wikitext-103". Here: `n` paragraphs of at least `min_words`
    words drawn (seeded) from the test split, truncated to `max_length` tokens and padded:
    {"input_ids", "attention_mask"} of shape (n, L). Every checkpoint and seed sees the same samples."""
    from ..data import load_wikitext103

    paras = [p for p in _paragraphs(text if text is not None else load_wikitext103(split))
             if len(p.split()) >= min_words]
    if len(paras) < n:
        raise ValueError(f"only {len(paras)} paragraphs of >= {min_words} words, {n} asked for")
    g = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(paras), generator=g)[:n].tolist()
    enc = tok([paras[i] for i in pick], truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def mask_tokens(ids: Tensor, tok, mask_prob: float = 0.15, generator: torch.Generator | None = None
                ) -> tuple[Tensor, Tensor]:
    """BERT's masking: each non-special token is selected with probability `mask_prob`; a selected
    token becomes [MASK] with probability 0.8, a uniformly random token with 0.1, stays with 0.1.
    Returns (inputs, labels) with labels = −100 where not selected."""
    special = torch.zeros_like(ids, dtype=torch.bool)
    for sid in tok.all_special_ids:
        special |= ids == sid
    u = torch.rand(ids.shape, generator=generator)
    selected = (u < mask_prob) & ~special                                             # (B, L)
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    v = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[selected & (v < 0.8)] = tok.mask_token_id
    rnd = selected & (v >= 0.8) & (v < 0.9)
    inputs[rnd] = torch.randint(len(tok), ids.shape, generator=generator)[rnd]
    return inputs, labels


def build_model(cfg: PretrainConfig, vocab_size: int, attn_implementation: str = "sdpa"):
    """A freshly initialised `BertForMaskedLM` (weights drawn from the current torch RNG state)."""
    from transformers import BertConfig, BertForMaskedLM

    bc = BertConfig(vocab_size=vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                    num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                    max_position_embeddings=max(512, cfg.seq_len))
    bc._attn_implementation = attn_implementation
    return BertForMaskedLM(bc)


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


def pretrain(cfg: PretrainConfig, chunks: Tensor, folder: str | Path, tok=None, eval_chunks: Tensor | None = None,
             stop_after: int | None = None, device: str | torch.device = "cpu") -> dict:
    """MLM pretraining from scratch. Saves the weights at every step of `cfg.checkpoint_steps`
    (`step_XXXXXXX.pt`, step 0 = the initialisation) and the full training state (`resume.pt`:
    model, optimiser, schedule, history, every RNG state) every `resume_every` steps; a call on a
    folder holding `resume.pt` continues from it, and one on a finished folder returns at once.
    `stop_after` stops after that many steps (simulates a kill). Returns the history: training
    loss per step, held-out loss at the checkpoint steps, wall time."""
    from ..book.runtime import seed_everything

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = tok if tok is not None else tokenizer()
    seed_everything(cfg.seed)
    dev = torch.device(device)
    model = build_model(cfg, len(tok)).to(dev)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "LayerNorm" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "LayerNorm" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.999), eps=1e-6,
                            foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg))
    history: dict = {"loss": [], "eval_loss": {}, "wall_time_s": 0.0, "config": asdict(cfg), "done": False}
    step = 0
    state = load_checkpoint(folder / "resume.pt", map_location=dev)                  # restores the RNG states
    if state is not None:
        if state["config"] != asdict(cfg):
            raise ValueError(f"{folder}/resume.pt was written with other settings: {state['config']} != {asdict(cfg)}")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        history, step = state["history"], state["step"]
    if history["done"]:
        return history

    def checkpoint_here() -> None:
        if step in cfg.checkpoint_steps:
            weights_path(folder, step).parent.mkdir(parents=True, exist_ok=True)
            tmp = weights_path(folder, step).with_suffix(".tmp")
            torch.save(model.state_dict(), tmp)
            tmp.replace(weights_path(folder, step))
            if eval_chunks is not None:
                history["eval_loss"][str(step)] = eval_loss(model, eval_chunks.to(dev), tok, cfg.mask_prob)

    def save_state() -> None:
        save_checkpoint(folder / "resume.pt", model=model.state_dict(), opt=opt.state_dict(),
                        sched=sched.state_dict(), history=history, step=step, config=asdict(cfg))

    if step == 0:
        checkpoint_here()
    model.train()
    t0 = time.perf_counter()
    wall0 = history["wall_time_s"]
    for _ in progress(range(step, cfg.steps), desc=f"MLM pretraining seed {cfg.seed}", total=cfg.steps - step):
        if stop_after is not None and step >= stop_after:
            break
        idx = torch.randint(len(chunks), (cfg.batch,))                               # (B,)
        inputs, labels = mask_tokens(chunks[idx], tok, cfg.mask_prob)                 # (B, L) each
        loss = mlm_loss(model, inputs.to(dev), labels.to(dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(f"MLM loss became {value} at step {step}")
        history["loss"].append(value)
        history["wall_time_s"] = wall0 + time.perf_counter() - t0
        checkpoint_here()
        if step % cfg.resume_every == 0 or step in cfg.checkpoint_steps or step == cfg.steps:
            history["done"] = step == cfg.steps
            save_state()
    if step == cfg.steps and not history["done"]:
        history["done"] = True
        save_state()
    return history


def load_step(cfg: PretrainConfig, folder: str | Path, step: int, vocab_size: int,
              device: str | torch.device = "cpu"):
    """The model saved at `step`, with eager attention (so it returns attention probabilities), eval mode."""
    path = weights_path(folder, step)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint for step {step} in {folder}")
    model = build_model(cfg, vocab_size, attn_implementation="eager")
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.to(device).eval()


__all__ = ["PretrainConfig", "TOKENIZER_SOURCE", "tokenizer", "training_chunks", "analysis_samples", "mask_tokens",
           "build_model", "mlm_loss", "eval_loss", "pretrain", "load_step", "weights_path"]
