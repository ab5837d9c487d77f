"""The GLUE chapter (Yan et al. §5.2, App. B, D): the grid of fine-tuning runs (models × tasks × variants ×
seeds) through the results cache, per-layer spectra of the fine-tuned models, and the tables set beside
the paper's Table 2 and Table 6. One run is `helpers.train.glue.finetune`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn

from .. import data as D
from ..book.params import ChapterParams, nonneg, positive, rules
from ..core import subspace
from ..data.glue import TASK_METRICS, Encoded, _int_label, collate, encode_task, glue_metrics
from ..hf.softdecay_layer import find_softdecay, insert_softdecay
from ..train.glue import FinetuneConfig, finetune


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yan et al. §5.2, App. B, App. D: SoftDecay fine-tuning on GLUE (Table 2, Table 6, Figs. 5, 8-13)."""

    models: tuple[str, ...] = ("all-MiniLM-L6-v2",)
    tasks: tuple[str, ...] = ("RTE", "MRPC", "CoLA")
    variants: tuple[str, ...] = ("baseline", "softdecay", "expdecay")
    alphas: tuple[float, ...] = (-0.5,)          # initial α of SoftDecay (the paper searches -0.2, -0.5, -0.8)
    lr: float = 2e-5
    alpha_lr: float = 2e-3
    epochs: int = 3
    batch: int = 32
    max_length: int = 128
    seeds: int = 2
    train_examples: int = 0                      # 0 = the whole training split
    eval_examples: int = 0                       # 0 = the whole validation split
    spectra_examples: int = 256
    expdecay_squared: bool = False               # False: App. D.1 as printed; True: Wang et al.'s squared form

    CHAPTER: ClassVar[str] = "glue"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(tasks=("RTE", "MRPC"), train_examples=48, eval_examples=48, batch=8, max_length=48, epochs=2,
                   seeds=2, spectra_examples=24),
        "book": dict(),
        "paper": dict(models=("bert-base-uncased", "albert-base-v1", "distilbert-base-uncased", "roberta-base"),
                      tasks=("CoLA", "SST-2", "MRPC", "QNLI", "RTE"), alphas=(-0.2, -0.5, -0.8), seeds=3,
                      spectra_examples=1000),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0, "needs at least one model"),
        tasks=(lambda v: len(v) > 0 and all(t in ("CoLA", "SST-2", "MRPC", "QNLI", "RTE") for t in v),
               "each must be one of CoLA, SST-2, MRPC, QNLI, RTE"),
        variants=(lambda v: len(v) > 0 and all(x in ("baseline", "softdecay", "expdecay") for x in v),
                  "each must be baseline, softdecay or expdecay"),
        alphas=(lambda v: len(v) > 0 and all(-1.0 <= a < 0 for a in v), "every initial alpha must lie in [-1, 0)"),
        lr=positive, alpha_lr=positive, epochs=positive, batch=positive,
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), seeds=positive,
        train_examples=nonneg, eval_examples=nonneg, spectra_examples=(lambda v: v >= 2, "needs >= 2 examples"),
    )


def _cdf_rows(per_layer: list[Tensor], mask: Tensor, labels: list[str], quantiles: int) -> list[dict]:
    rows = subspace.layer_spectrum_stats(per_layer, mask)
    qs = torch.linspace(0, 1, quantiles, dtype=torch.float64)
    for r, label in zip(rows, labels, strict=True):
        v = r.pop("values").to(torch.float64)
        r["label"] = label
        r["quantiles"] = torch.quantile(v, qs).tolist()
    return rows


@torch.no_grad()
def layer_spectra(model: nn.Module, tok, ev: Encoded, n: int = 256, batch: int = 32, quantiles: int = 201,
                  device: str | torch.device = "cpu") -> dict[str, list[dict]]:
    """Per-layer singular-value statistics of a (fine-tuned) model on the first `n` validation
    examples, as `subspace.layer_spectrum_stats` (each sentence's token matrix, values normalised by
    the largest; median, skewness, token uniformity), with each CDF kept as `quantiles` quantiles
    (small enough to commit). For a model with SoftDecay, `softdecay` also holds the last layer's
    matrix just before and just after the SoftDecay transform (before the LayerNorm)."""
    model.eval()
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    feats = ev.features[:n]
    sd = find_softdecay(model)
    if sd is not None:
        sd.capture = True
    chunks: list[list[Tensor]] = []
    masks: list[Tensor] = []
    try:
        for idx in [list(range(i, min(i + batch, len(feats)))) for i in range(0, len(feats), batch)]:
            b = {k: v.to(device) for k, v in collate([feats[i] for i in idx], None, pad_id).items()}
            out = model(**b, output_hidden_states=True)
            extra = [t.float().cpu() for t in sd.captured] if sd is not None else []
            chunks.append([h.float().cpu() for h in out.hidden_states] + extra)
            masks.append(b["attention_mask"].bool().cpu())
    finally:
        if sd is not None:
            sd.capture, sd.captured = False, None
    L = max(m.shape[1] for m in masks)
    pad = lambda t: torch.nn.functional.pad(t, (0, 0, 0, L - t.shape[1]))  # noqa: E731
    per_layer = [torch.cat([pad(c[i]) for c in chunks]) for i in range(len(chunks[0]))]   # (N, L, d) each
    mask = torch.cat([torch.nn.functional.pad(m, (0, L - m.shape[1])) for m in masks])   # (N, L)
    n_layers = len(per_layer) - (2 if sd is not None else 0)
    labels = ["embeddings"] + [f"layer {i}" for i in range(1, n_layers)]
    out = {"layers": _cdf_rows(per_layer[:n_layers], mask, labels, quantiles)}
    if sd is not None:
        out["softdecay"] = _cdf_rows(per_layer[n_layers:], mask, ["before SoftDecay", "after SoftDecay"], quantiles)
    return out


def run_key(p, model: str, task: str, variant: str, alpha: float | None, seed: int) -> dict[str, Any]:
    """Every setting one run's result depends on (the committed-results cache key)."""
    return {"model": model, "task": task, "variant": variant, "alpha": alpha, "seed": seed,
            **{k: getattr(p, k) for k in ("lr", "alpha_lr", "epochs", "batch", "max_length", "train_examples",
                                          "eval_examples", "spectra_examples", "expdecay_squared")}}


def run_grid(p, device: str = "auto", command: str | None = None) -> dict[tuple, dict]:
    """Every (model, task, variant, initial α, seed) of a `GlueParams`, each through
    `runtime.cached_run` (book scale: committed results re-read when their settings match).
    Outside `ci`, each run checkpoints after every epoch under `_build/checkpoints/glue/` and a
    rerun after a kill resumes it. Returns {(model, task, variant, alpha, seed): history with `spectra`}."""
    from ..book.results import cached_run, settings_hash
    from ..book.runtime import REPO_ROOT

    out: dict[tuple, dict] = {}
    for model in p.models:
        for task in p.tasks:
            for variant in p.variants:
                for alpha in (p.alphas if variant == "softdecay" else (None,)):
                    for s in range(p.seeds):
                        seed = p.seed + s
                        key = run_key(p, model, task, variant, alpha, seed)
                        name = f"{model.replace('/', '_')}-{task}-{variant}" + \
                            (f"{alpha:+.1f}" if alpha is not None else "") + f"-seed{seed}"

                        def compute(model=model, task=task, variant=variant, alpha=alpha, seed=seed, key=key):
                            fc = FinetuneConfig(task=task, model=model, variant=variant,
                                                alpha=alpha if alpha is not None else -0.5, lr=p.lr,
                                                alpha_lr=p.alpha_lr, epochs=p.epochs, batch=p.batch,
                                                max_length=p.max_length, train_examples=p.train_examples,
                                                eval_examples=p.eval_examples, seed=seed)
                            fc.expdecay["squared"] = p.expdecay_squared
                            # resume after a kill (ci always starts afresh); removed once the run is done
                            ckpt = None if p.scale == "ci" else \
                                REPO_ROOT / "_build" / "checkpoints" / "glue" / f"{settings_hash(key)}.pt"
                            h = finetune(fc, device=device, keep_model=True, checkpoint=ckpt)
                            if ckpt is not None:
                                ckpt.unlink(missing_ok=True)
                            m, tok = h.pop("_model"), h.pop("_tokenizer")
                            ev = encode_task(tok, task, "validation", 0, 0, p.max_length)
                            h["spectra"] = layer_spectra(m, tok, ev, n=p.spectra_examples,
                                                         device=next(m.parameters()).device)
                            return h

                        out[(model, task, variant, alpha, seed)], _ = cached_run(
                            "glue", name, p, key, compute, p.scale, command=command)
    return out


def paper_tables() -> pd.DataFrame:
    """Yan et al. Table 2 and Table 6 (data/yan_2022_table{2,6}.csv) in long form:
    task, metric, model, variant, value, significance."""
    from ..book.runtime import REPO_ROOT

    t2 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table2.csv", keep_default_na=False)
    t6 = pd.read_csv(REPO_ROOT / "data" / "yan_2022_table6.csv", keep_default_na=False).assign(significance="")
    return pd.concat([t2, t6], ignore_index=True)


def majority_baseline(task: str, source: str = "auto") -> dict[str, float]:
    """The task's metrics for always predicting the validation split's majority class (MCC is 0;
    MRPC's F1 is high because its majority class is the positive one): the floor a fine-tuned
    model must clear."""
    ev = D.load_glue(task, "validation", source)
    labels = np.asarray([_int_label(v) for v in ev.labels])
    major = np.bincount(labels).argmax()
    return glue_metrics(task, np.full_like(labels, major), labels)


def summary_table(results: dict[tuple, dict], paper_model: str = "bert-base-uncased") -> pd.DataFrame:
    """Table 2 / Table 6 counterpart: for each (model, task, metric) our final validation score per
    variant as mean ± std over seeds, the relative change Δ% against our baseline (as the paper's
    Δ%), and the paper's numbers for `paper_model` beside them."""
    paper = paper_tables()
    rows = []
    combos = sorted({(m, t) for (m, t, *_rest) in results}, key=lambda x: (x[0], list(TASK_METRICS).index(x[1])))
    for model, task in combos:
        for metric in TASK_METRICS[task]:
            row: dict[str, Any] = {"model": model, "task": task, "metric": metric}
            base = None
            for (m, t, variant, alpha, _seed), h in results.items():
                if (m, t) != (model, task):
                    continue
                col = variant if alpha is None else f"{variant} ({alpha:+.1f})"
                row.setdefault(col, []).append(h["final"][metric])
            for col in [c for c in row if isinstance(row[c], list)]:
                v = np.asarray(row[col])
                row[col] = float(v.mean())
                row[f"{col} sd"] = float(v.std(ddof=1)) if v.size > 1 else float("nan")
                row[f"{col} n"] = int(v.size)
            base = row.get("baseline")
            for col in [c for c in list(row) if c not in ("model", "task", "metric", "baseline")
                        and not c.endswith((" sd", " n"))]:
                if base:
                    row[f"{col} Δ%"] = 100.0 * (row[col] - base) / abs(base)
            row["majority class"] = majority_baseline(task)[metric]
            for variant in ("baseline", "softdecay", "expdecay"):
                hit = paper[(paper.task == task) & (paper.metric == metric) & (paper.model == paper_model)
                            & (paper.variant == variant)]
                row[f"paper {variant}"] = float(hit.value.iloc[0]) if len(hit) else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def seed_verdicts(table: pd.DataFrame) -> pd.DataFrame:
    """For each (task, metric) and each modified variant of `summary_table`: the difference to our
    baseline in points, the larger of the two seed standard deviations (0 when a single seed), and
    whether the difference lies beyond it. With two or three seeds this is a pointer, not a test."""
    rows = []
    variants = [c for c in table.columns
                if c.startswith(("softdecay", "expdecay")) and not c.endswith((" sd", " n", " Δ%"))]
    for _, r in table.iterrows():
        for col in variants:
            diff = float(r[col] - r["baseline"])
            spread = float(np.nanmax([r.get(f"{col} sd", np.nan), r.get("baseline sd", np.nan), 0.0]))
            rows.append({"task": r["task"], "metric": r["metric"], "variant": col, "diff": diff, "spread": spread,
                         "beyond": abs(diff) > spread})
    return pd.DataFrame(rows, columns=["task", "metric", "variant", "diff", "spread", "beyond"])


def paper_gains(model: str = "bert-base-uncased") -> pd.DataFrame:
    """The paper's relative change Δ% of SoftDecay over its baseline (Table 2), per task and metric."""
    paper = paper_tables().query("model == @model")
    wide = paper.pivot_table(index=["task", "metric"], columns="variant", values="value").reset_index()
    wide["gain %"] = 100.0 * (wide["softdecay"] - wide["baseline"]) / wide["baseline"].abs()
    return wide[["task", "metric", "baseline", "softdecay", "gain %"]]


def spectrum_summary(results: dict[tuple, dict], seed: int) -> pd.DataFrame:
    """Per (task, variant) of one seed: median, skewness and TokenUni of the last layer's normalised
    singular values, and for SoftDecay runs the same before and after the transform (Figure 5)."""
    rows = []
    for (_m, task, variant, _a0, s), h in results.items():
        if s != seed:
            continue
        last = h["spectra"]["layers"][-1]
        row = {"task": task, "variant": variant, "last layer median": last["median"],
               "last layer skewness": last["skewness"], "last layer TokenUni": last["token_uni"]}
        if "softdecay" in h["spectra"]:
            before, after = h["spectra"]["softdecay"]
            row.update({"median before SD": before["median"], "median after SD": after["median"],
                        "skew before SD": before["skewness"], "skew after SD": after["skewness"]})
        rows.append(row)
    return pd.DataFrame(rows)


def format_pm(table: pd.DataFrame) -> pd.DataFrame:
    """`mean ± sd` strings for display, one column per variant, paper columns beside."""
    out = table[["model", "task", "metric"]].copy()
    variants = [c for c in table.columns if f"{c} sd" in table.columns]
    for v in variants:
        out[v] = [f"{m:.2f} ± {s:.2f}" if np.isfinite(s) else f"{m:.2f}" for m, s in zip(table[v], table[f"{v} sd"],
                                                                                       strict=True)]
        if f"{v} Δ%" in table.columns:
            out[f"{v} Δ%"] = table[f"{v} Δ%"].map(lambda x: f"{x:+.2f}")
    for c in [c for c in table.columns if c.startswith("paper ") or c == "majority class"]:
        out[c] = table[c].map(lambda x: "" if pd.isna(x) else f"{x:.2f}")
    return out


def alpha_table(results: dict[tuple, dict]) -> pd.DataFrame:
    """The learned α per task: initial value, value after each epoch (mean over seeds) and its spread."""
    rows = []
    for (model, task, variant, alpha, seed), h in results.items():
        if variant != "softdecay":
            continue
        rows.append({"model": model, "task": task, "initial α": alpha, "seed": seed,
                     **{f"α after epoch {e}": a for e, a in zip(h["epoch"], h["alpha"], strict=True)}})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    return df.drop(columns="seed").groupby(["model", "task", "initial α"], as_index=False).agg(["mean", "std"])


def tiny_classifier(kind: str, hidden: int = 64, layers: int = 4, heads: int = 4, vocab: int = 200,
                    max_positions: int = 64, dropout: float = 0.1, seed: int = 0) -> nn.Module:
    """A small *randomly initialised* 2-class classifier of one of the architectures of §5.2
    (`bert`, `roberta`, `albert`, `distilbert`), for plumbing checks and tests."""
    from transformers import (
        AlbertConfig,
        AlbertForSequenceClassification,
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    common = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=2 * hidden,
                  max_position_embeddings=max_positions, vocab_size=vocab, num_labels=2, hidden_dropout_prob=dropout,
                  attention_probs_dropout_prob=dropout)
    torch.manual_seed(seed)
    if kind == "bert":
        return BertForSequenceClassification(BertConfig(**common))
    if kind == "roberta":
        return RobertaForSequenceClassification(RobertaConfig(**common, pad_token_id=1))
    if kind == "albert":
        return AlbertForSequenceClassification(AlbertConfig(**common, embedding_size=hidden // 2,
                                                            classifier_dropout_prob=dropout))
    if kind == "distilbert":
        return DistilBertForSequenceClassification(DistilBertConfig(
            vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=2 * hidden,
            max_position_embeddings=max_positions, dropout=dropout, attention_dropout=dropout,
            seq_classif_dropout=dropout, num_labels=2))
    raise ValueError(f"kind {kind!r}: one of bert, roberta, albert, distilbert")


def architecture_check(seed: int = 0) -> pd.DataFrame:
    """SoftDecay inserted into small *randomly initialised* BERT, RoBERTa, ALBERT and DistilBERT
    classifiers (the four architectures of §5.2; the plumbing, not their pretrained weights): loss,
    α gradient, largest parameter gradient, and whether every earlier layer is left untouched."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 200, (8, 40), generator=g)
    mask = (torch.arange(40).unsqueeze(0) < torch.randint(8, 41, (8, 1), generator=g)).long()   # ragged padding
    ids = ids * mask + (1 - mask)
    labels = torch.randint(0, 2, (8,), generator=g)
    rows = []
    for kind in ("bert", "roberta", "albert", "distilbert"):
        base = tiny_classifier(kind, seed=seed).eval()
        model = tiny_classifier(kind, seed=seed).eval()
        sd = insert_softdecay(model, alpha=-0.5)
        with torch.no_grad():
            h0 = base(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
        out.loss.backward()
        grads = [p.grad.abs().max() for p in model.parameters() if p.grad is not None]
        untouched = all(torch.equal(a, b) for a, b in zip(h0[:-1], out.hidden_states[:-1], strict=True))
        rows.append({"architecture": kind, "loss": float(out.loss.detach()), "dL/dα": float(sd.softdecay.alpha.grad),
                     "max |grad|": float(torch.stack(grads).max()), "all gradients finite":
                     bool(all(torch.isfinite(x) for x in grads)), "earlier layers untouched": untouched})
    return pd.DataFrame(rows)
