"""The queries-and-keys chapter's runs (Godey et al. 2024, §5 and Appendices C–D): the dynamics of the mean query
and the mean key of every head along pretraining (Figures 11–15, 19–23).

`run(params)`, per seed: pretrain our small MLM BERT (`helpers.train.mlm`, checkpoints at `steps`)
or, with `source="multiberts"`, load the paper's MultiBERT checkpoints by hub id; record the queries,
keys and attention of every checkpoint on the same analysis samples (`helpers.hf.qk`); analyse the
trajectory (`helpers.core.qk`); each seed's analysis is read back from the committed results when
its settings match. `compare_runs` reads the trajectories of all seeds as the chapter's numbers; the end state
of released models (`measure_end_state`) and the recipe probes (`recipe_probes`) are read beside them.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ...core.qk import alignment_summary, analyse, end_state, pick_steps
from ...hf import models
from ...hf.qk import end_state_moments, multibert_id, step_statistics
from ...machinery import results, runtime
from ...machinery.params import ParameterError
from ...train import mlm
from .params import ANALYSIS_VERSION, END_STATE_FIELDS, Params
from .records import Trajectory
from .result import Result


def _trajectories(runs: dict) -> dict[str, Trajectory]:
    """Each seed's trajectory (a stored dict or a record) as its record."""
    return {k: Trajectory.of(r) for k, r in runs.items()}


def compare_runs(runs: dict, steps: Iterable[int], threshold: float = 0.5, rebound_nats: float = 0.1) -> dict:
    """The numbers behind the chapter's reading of Figures 12–15, 19–23, over all seeds of `runs`
    (seed -> result of `trajectory`). Per head the final cos(Q̄, K̄) classifies it as
    common (≥ threshold) or opposite (≤ −threshold) as in `alignment_summary`; per layer the counts
    over all seeds; onsets grouped by the final sign; |Q̄·K̄| growth (Fig. 14); per-layer entropy at
    the first and last step, its lowest point and the layers that rebound by more than
    `rebound_nats` (Fig. 15); the concatenated-head cosine per seed (Fig. 23); for the first
    seed, how far the *other* mean moves along the first direction of the K-only / Q-only SVD (App. C);
    and `per_seed`, the timing claims seed by seed (head counts, median onsets, the entropy dip averaged
    over layers and its step, the final held-out loss), so that the chapter states their spread."""
    steps, runs = list(steps), _trajectories(runs)
    cos = np.stack([r.array("cos") for r in runs.values()])                               # (seeds, S, L, H)
    first, final = cos[:, 0], cos[:, -1]
    onsets: dict[str, list[int]] = {"common": [], "opposite": []}
    for i in range(cos.shape[0]):
        summ = alignment_summary(cos[i], steps, threshold)
        for li, row in enumerate(summ["onset"]):
            for hi, o in enumerate(row):
                if o is not None:
                    onsets["common" if final[i, li, hi] > 0 else "opposite"].append(o)
    n_common_l = (final >= threshold).sum((0, 2))
    n_opp_l = (final <= -threshold).sum((0, 2))
    absdot = np.stack([np.abs(r.array("dot")) for r in runs.values()])
    ent = np.stack([r.array("entropy_layer") for r in runs.values()]).mean(0)                      # (S, L)
    cc = np.stack([r.array("cos_concat") for r in runs.values()])[:, -1]                           # (seeds, L)
    R = next(iter(runs.values()))
    other = {}
    for basis, which in (("K", "q"), ("Q", "k")):
        m = np.asarray(R.means[basis][which], dtype=float)[..., 0]
        other[basis] = {"moved": int((np.abs(m[-1]) > np.abs(m[0])).sum()), "heads": int(m[-1].size),
                        "first": float(np.abs(m[0]).mean()), "final": float(np.abs(m[-1]).mean())}
    lowest = ent.min(0)
    per_seed = []
    for i, (name, r) in enumerate(runs.items()):
        e = r.array("entropy_layer")                                                      # (S, L)
        em = e.mean(1)
        on = {"common": [], "opposite": []}
        for li, row in enumerate(alignment_summary(cos[i], steps, threshold)["onset"]):
            for hi, o in enumerate(row):
                if o is not None:
                    on["common" if final[i, li, hi] > 0 else "opposite"].append(o)
        ev = r.eval_loss or {}
        per_seed.append({
            "seed": int(name if r.seed is None else r.seed), "n_common": int((final[i] >= threshold).sum()),
            "n_opposite": int((final[i] <= -threshold).sum()),
            "median_onset": {k: (int(np.median(v)) if v else None) for k, v in on.items()},
            "abs_cos_final": float(np.abs(final[i]).mean()),
            "entropy_first": float(em[0]), "entropy_final": float(em[-1]), "entropy_lowest": float(em.min()),
            "entropy_lowest_step": steps[int(em.argmin())],
            "entropy_rebound_layers": [li for li in range(e.shape[1]) if e[-1, li] - e[:, li].min() > rebound_nats],
            "eval_final": float(ev[str(steps[-1])]) if str(steps[-1]) in ev else None})
    return {
        "threshold": threshold, "n_heads": int(final.size), "heads_per_layer": int(final.shape[0] * final.shape[2]),
        "abs_cos_first": float(np.abs(first).mean()), "abs_cos_final": float(np.abs(final).mean()),
        "n_common": int(n_common_l.sum()), "n_opposite": int(n_opp_l.sum()),
        "common_per_layer": n_common_l.tolist(), "opposite_per_layer": n_opp_l.tolist(),
        "mean_final_cos_per_layer": final.mean((0, 2)).tolist(),
        "common_layers": [li for li in range(len(n_common_l)) if n_common_l[li] > n_opp_l[li]],
        "opposite_layers": [li for li in range(len(n_common_l)) if n_opp_l[li] > n_common_l[li]],
        "onsets": onsets,
        "median_onset": {k: (int(np.median(v)) if v else None) for k, v in onsets.items()},
        "abs_dot_first": float(absdot[:, 0].mean()), "abs_dot_final": float(absdot[:, -1].mean()),
        "abs_dot_growth": float(absdot[:, -1].mean() / max(absdot[:, 0].mean(), 1e-12)),
        "entropy_first": ent[0].tolist(), "entropy_final": ent[-1].tolist(), "entropy_lowest": lowest.tolist(),
        "entropy_lowest_step": [steps[i] for i in ent.argmin(0)],
        "entropy_falls": int((ent[-1] < ent[0]).sum()),
        "entropy_rebound_layers": [li for li in range(ent.shape[1]) if ent[-1, li] - lowest[li] > rebound_nats],
        "concat_final": cc.tolist(), "concat_spread": float(cc.std(0).mean()) if cc.shape[0] > 1 else 0.0,
        "concat_same_sign_layers": int((np.abs(np.sign(cc).sum(0)) == cc.shape[0]).sum()),
        "other_mean": other, "per_seed": per_seed,
    }




def union_reading(run: dict | Trajectory) -> dict:
    """Figures 11-12 read on one seed: on the common SVD, the share of σ₁² in σ₁²+σ₂², how many heads'
    mean query and key both move away from the origin along the first direction between the first
    and the last step, and how many end with the same / opposite sign of that coordinate."""
    run = Trajectory.of(run)
    u = run.means["union"]
    share = np.asarray(run.sv1_share["union"], dtype=float)
    qd, kd = np.asarray(u["q"], dtype=float)[..., 0], np.asarray(u["k"], dtype=float)[..., 0]   # (S, layers, h)
    same = np.sign(qd[-1]) == np.sign(kd[-1])
    grow = (np.abs(qd[-1]) > np.abs(qd[0])) & (np.abs(kd[-1]) > np.abs(kd[0]))
    return {"union_share_mean": float(share.mean()), "union_share_min": float(share.min()),
            "union_share_max": float(share.max()), "union_grow": int(grow.sum()), "union_heads": int(grow.size),
            "union_same_sign": int(same.sum()), "union_opposite_sign": int((~same).sum())}


def ablation_summary(plain: dict, centred: dict, steps: Iterable[int]) -> dict:
    """Plain against centred pretraining (seed by seed, both over all seeds): held-out MLM loss at the
    last step, mean attention entropy over layers and heads (first, lowest, last step), the mean
    |cos(Q̄, K̄)| at the last step; ‖K̄‖ of layers 1.. (mean over them and their heads) at every step
    (`k_norm_later`); per layer at the last step (mean over seeds and heads) the entropy,
    |cos(Q̄, K̄)|, |Q̄·K̄|, ‖Q̄‖ and ‖K̄‖; and per-seed differences centred − plain (held-out loss, entropy drop
    from the first to the last step, final mean |cos|; `Result.ablation_interval` gives their t-intervals);
    `later`: the same entropy comparison over layers 1.. only, where centring acts (`later_layer_entropy`)."""
    steps, plain, centred = list(steps), _trajectories(plain), _trajectories(centred)
    out: dict = {"steps": steps, "seeds": sorted(plain, key=int)}
    for name, runs in (("plain", plain), ("centred", centred)):
        ev = np.array([[float(r.eval_loss[str(s)]) for s in steps] for r in runs.values()])          # (seeds, S)
        ent = np.stack([r.array("entropy_layer").mean(1) for r in runs.values()])                     # (seeds, S)
        cos = np.stack([np.abs(r.array("cos")).mean((1, 2)) for r in runs.values()])
        knorm = np.stack([r.array("k_norm")[:, 1:].mean((1, 2)) for r in runs.values()])
        out[name] = {"eval": ev.tolist(), "entropy": ent.tolist(), "abs_cos": cos.tolist(),
                     "k_norm_later": knorm.tolist(),
                     "eval_final": float(ev[:, -1].mean()), "eval_best": float(ev.min(1).mean()),
                     "entropy_first": float(ent[:, 0].mean()), "entropy_lowest": float(ent.min(1).mean()),
                     "entropy_final": float(ent[:, -1].mean()),
                     "entropy_drop": float((ent[:, 0] - ent[:, -1]).mean()),
                     "abs_cos_final": float(cos[:, -1].mean()),
                     "entropy_final_layer": np.stack([r.array("entropy_layer")[-1]
                                                      for r in runs.values()]).mean(0).tolist(),
                     **{f"{k}_final_layer": np.stack([np.abs(r.array(src))[-1].mean(-1)
                                                      for r in runs.values()]).mean(0).tolist()
                        for k, src in (("abs_cos", "cos"), ("abs_dot", "dot"), ("q_norm", "q_norm"),
                                       ("k_norm", "k_norm"))}}
    common = [k for k in plain if k in centred]
    last = str(steps[-1])
    out["diff_eval_final"] = [float(centred[k].eval_loss[last]) - float(plain[k].eval_loss[last])
                              for k in common]
    idx = {name: {k: i for i, k in enumerate(runs)} for name, runs in (("plain", plain), ("centred", centred))}

    def diff(key: str, f) -> list[float]:
        return [f(np.asarray(out["centred"][key][idx["centred"][k]]))
                - f(np.asarray(out["plain"][key][idx["plain"][k]])) for k in common]
    out["diff_entropy_drop"] = diff("entropy", lambda e: float(e[0] - e[-1]))
    out["diff_abs_cos_final"] = diff("abs_cos", lambda c: float(c[-1]))
    out["unigram_nats"] = next(iter(plain.values())).unigram_nats
    out["later"] = later_layer_entropy(plain, centred, steps)
    return out


def later_layer_entropy(plain: dict, centred: dict, steps: Iterable[int], first_layer: int = 1) -> dict:
    """The attention entropy of the layers centring acts on, seed-paired: layers `first_layer`.. only
    (layer 0 reads the embeddings, which centring does not touch), mean over those layers and their heads.

    Per variant: per seed the entropy at the first and last step and its drop, and their means over seeds.
    Paired by seed (same initialisation seed, same batches), centred − plain: the drop (`diff_drop`) and the
    final entropy (`diff_final`), and per later layer the final entropy's difference per seed
    (`layer_diff_final`, one list per layer). `Result.later_interval` gives their t-intervals."""
    steps, plain, centred = list(steps), _trajectories(plain), _trajectories(centred)
    keys = [k for k in plain if k in centred]
    if not keys:
        raise ValueError("later_layer_entropy needs at least one seed run both plain and centred")

    def ent(runs: dict) -> np.ndarray:                                             # (seeds, S, later layers)
        e = np.stack([runs[k].array("entropy_layer") for k in keys])
        if e.shape[1] != len(steps) or e.shape[2] <= first_layer:
            raise ValueError(f"entropy_layer {e.shape[1:]} does not fit {len(steps)} steps and layers "
                             f"from {first_layer}")
        return e[:, :, first_layer:]
    p, c = ent(plain), ent(centred)
    out: dict = {"layers": list(range(first_layer, first_layer + p.shape[2])), "seeds": [int(k) for k in keys]}
    for name, e in (("plain", p), ("centred", c)):
        m = e.mean(2)                                                              # (seeds, S)
        drop = m[:, 0] - m[:, -1]
        out[name] = {"first": m[:, 0].tolist(), "final": m[:, -1].tolist(), "drop": drop.tolist(),
                     "first_mean": float(m[:, 0].mean()), "final_mean": float(m[:, -1].mean()),
                     "final_layer": e[:, -1].mean(0).tolist()}
    out["diff_drop"] = [a - b for a, b in zip(out["centred"]["drop"], out["plain"]["drop"], strict=True)]
    out["diff_final"] = [a - b for a, b in zip(out["centred"]["final"], out["plain"]["final"], strict=True)]
    layer_diff = c[:, -1] - p[:, -1]                                               # (seeds, later layers)
    out["layer_diff_final"] = layer_diff.T.tolist()
    return out


def pretrain_config(p: Params, seed: int) -> mlm.PretrainConfig:
    """The MLM pretraining of run seed `seed` of `p`."""
    return mlm.PretrainConfig(layers=p.layers, d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff,
                              seq_len=p.seq_len, batch_size=p.batch_size, steps=max(p.steps), lr=p.lr, warmup=p.warmup,
                              weight_decay=p.weight_decay, mask_prob=p.mask_prob, dropout=p.dropout,
                              centre=p.centre, seed=seed,
                              checkpoint_steps=tuple(p.steps), resume_every=p.resume_every)


def pretrain_weights(p: Params, seed: int, device: Any = "cpu") -> tuple[dict, Tensor, dict]:
    """Run seed `seed`'s MLM pretraining into its checkpoint folder (`checkpoint_dir("qk", <settings>)`;
    resumes from `resume.pt`, returns at once on a finished folder): (history, training chunks, the
    corpus facts the trajectory records)."""
    tok = mlm.tokenizer()
    pc = pretrain_config(p, seed)
    folder = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    if p.corpus == "mixed":
        c = mlm.corpus(tok, p.seq_len, p.n_samples, analysis_seed=p.seed)
        chunks, held_out = c["train"], c["held_out"]
        extra = {"unigram_nats": c["unigram_nats"], "corpus_sources": c["sources"]}
    else:
        chunks = mlm.training_chunks(tok, p.seq_len, p.train_split)
        held_out = mlm.training_chunks(tok, p.seq_len, "test")[:64]
        extra = {}
    history = mlm.pretrain(pc, chunks, folder, tok=tok, eval_chunks=held_out, device=device, precision=p.precision)
    return history, chunks, extra


def _rounded(x, decimals: int = 5):
    if isinstance(x, dict):
        return {k: _rounded(v, decimals) for k, v in x.items()}
    if isinstance(x, Tensor):
        return np.round(x.detach().cpu().double().numpy(), decimals).tolist()
    return x


def trajectory(p: Params, seed: int, device: Any = "cpu") -> dict:
    """Pretrain (or, with `source="multiberts"`, load from the hub) the checkpoints of run seed `seed`
    and analyse them. Pretraining weights live in `checkpoint_dir("qk", <pretraining settings>)`: an
    interrupted run resumes there, a finished one is reused; at `ci` scale the folder is wiped first.
    Returns the JSON-ready analysis plus the summary, training history and timings."""
    t0 = time.perf_counter()
    history: dict = {}
    chunks = None
    if p.source == "multiberts":
        first = models.load(multibert_id(seed, p.steps[0]), device=device)       # ModelUnavailable offline
        tok = first.tokenizer

        def model_at(step: int):
            return first.model if step == p.steps[0] else models.load(multibert_id(seed, step), device=device).model
        what = f"MultiBERT seed {seed} (google/multiberts-seed_{seed}-step_*)"
    else:
        tok = mlm.tokenizer()
        pc = pretrain_config(p, seed)
        folder = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
        if p.scale == "ci":
            shutil.rmtree(folder)
        history, chunks, history_extra = pretrain_weights(p, seed, device=device)

        def model_at(step: int):
            return mlm.load_step(pc, folder, step, len(tok), device=device)
        what = (f"our {p.layers}-layer, {p.d_model}-wide MLM BERT (seed {seed}, {max(p.steps)} steps of batch "
                f"{p.batch_size}x{p.seq_len} on " + ("the mixed corpus" if p.corpus == "mixed" else
                                                      f"WikiText-103 {p.train_split}") +
                (", block outputs centred" if p.centre else "") + ")")
    samples = mlm.analysis_samples(tok, p.n_samples, p.max_length, seed=p.seed)
    t1 = time.perf_counter()
    stats = [step_statistics(model_at(s), samples["input_ids"], samples["attention_mask"], p.svd_fraction,
                             p.n_display, seed=p.seed, device=device, desc=f"seed {seed} step {s}")
             for s in runtime.progress(p.steps, desc=f"checkpoints, seed {seed}", total=len(p.steps))]
    res = analyse(stats, list(p.steps), display_steps=pick_steps(list(p.steps)))
    out = _rounded({k: v for k, v in res.items() if k != "display"})
    out["display"] = _rounded(res["display"], 3)
    out["summary"] = alignment_summary(res["cos"].numpy(), p.steps)
    out["model"] = what
    out["seed"] = seed
    out["train_loss"] = [round(x, 4) for x in history.get("loss", [])]
    out["eval_loss"] = history.get("eval_loss", {})
    out["pretrain_wall_time_s"] = history.get("wall_time_s")
    if p.source == "pretrain":
        out.update(history_extra)
    out["train_tokens_available"] = int(chunks.numel()) if chunks is not None else None
    out["analysis_wall_time_s"] = time.perf_counter() - t1
    out["wall_time_s"] = time.perf_counter() - t0
    return out


def run_name(p: Params, seed: int) -> str:
    """The committed file of run seed `seed`: `seed<seed>`, `centred-seed<seed>` for the centring ablation."""
    return f"{'centred-' if p.centre else ''}seed{seed}"


class _Trajectory:
    """Computes one seed's trajectory (`trajectory(p, seed)`), as a run of the grid (its checkpoints are the
    pretraining folder `trajectory` manages). An object rather than a closure, so a grid job can carry it."""

    def __init__(self, p: Params, seed: int, device: Any = None):
        self.p, self.seed, self.device = p, seed, device

    def __call__(self, checkpoint=None) -> dict:
        runtime.seed_everything(self.p.seed)     # before any GEMM on the device (CUBLAS_WORKSPACE_CONFIG)
        return trajectory(self.p, self.seed, device=self.device or runtime.choose_device(self.p.device))


def run_spec(p: Params, seed: int, device: Any = None) -> results.RunSpec:
    return results.RunSpec(p.CHAPTER, run_name(p, seed), p, _Trajectory(p, seed, device),
                           drop=("seeds", "ablation", *END_STATE_FIELDS),
                           extra=dict(run_seed=seed, analysis_version=ANALYSIS_VERSION))


def runs(p: Params) -> list[results.RunSpec]:
    """Every heavy run `run(p)` makes, in its order, as the grid runner takes them (`make grid`): each seed's
    trajectory, then (the centring ablation) each seed's centred trajectory."""
    seeds = runtime.run_seeds(p.seed, p.seeds)
    out = [run_spec(p, s) for s in seeds]
    if p.ablation and p.source == "pretrain" and not p.centre:
        out += [run_spec(p.with_(centre=True, ablation=False), s) for s in seeds]
    return out


# --- the end state of real pretraining ----------------------------------------------------------------

def _encode(tok, texts: list[str], max_length: int) -> dict[str, Tensor]:
    """(N, L) input ids and attention mask of `texts` with the model's special tokens, cut at `max_length`,
    padded on the right: a Hugging Face tokenizer, or the book's vocabulary / byte tokenizers."""
    import torch

    if hasattr(tok, "pad") and hasattr(tok, "model_max_length"):
        enc = tok(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    ids = [tok(t, add_special_tokens=True)["input_ids"][:max_length] for t in texts]
    if any(len(i) > 2 and i[-1] != tok.sep_token_id for i in ids):
        ids = [i[: max_length - 1] + [tok.sep_token_id] if len(i) == max_length else i for i in ids]
    L = max(len(i) for i in ids)
    x = torch.full((len(ids), L), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(ids), L), dtype=torch.long)
    for r, i in enumerate(ids):
        x[r, : len(i)] = torch.tensor(i)
        mask[r, : len(i)] = 1
    return {"input_ids": x, "attention_mask": mask}


def _wikitext_paragraphs(n: int, seed: int) -> list[str]:
    """The chapter's analysis paragraphs (WikiText-103 test, ≥ 20 words, drawn with `seed`), as text."""
    from ...data import load_wikitext103

    paras = mlm.split_paragraphs(load_wikitext103("test"))
    return [paras[i] for i in mlm.analysis_pick(paras, n, seed, 20)]


def end_state_data(name: str, n: int, seed: int) -> tuple[list[str], str]:
    """The in-domain sequences of model `name` and what they are: antibody chains for AntiBERTy, USPTO-50K
    reactions for rxnmapper's ALBERT, WikiText-103 test paragraphs for the text and byte models."""
    from ...data.sequences import load_antibody_chains, load_uspto50k_reactions

    if name == "AntiBERTy":
        chains = load_antibody_chains()
        pick = sorted({int(i) for i in np.linspace(0, len(chains) - 1, min(n, len(chains))).round()})
        return [chains[i][2] for i in pick], f"{len(pick)} antibody variable-domain chains (Jain et al. 2017)"
    if name == "rxnmapper-ALBERT":
        rx = load_uspto50k_reactions(n, seed)
        return rx, f"{len(rx)} USPTO-50K test reactions (atom maps stripped)"
    return _wikitext_paragraphs(n, seed), f"{n} WikiText-103 test paragraphs"


def _byte_mlm(untrained: bool):
    """The anisotropy chapter's byte-level MLM, only when its final checkpoint is on this machine: this
    chapter never trains it (ModelUnavailable otherwise)."""
    import torch

    from ...hf.bytelevel import VOCAB_SIZE, ByteTokenizer
    from ...hf.loading import ModelUnavailable
    from ..anisotropy import BYTE_MLM, BYTE_MLM_DESCRIPTION, byte_mlm_folder

    folder = byte_mlm_folder()
    path = mlm.weights_path(folder, BYTE_MLM.steps)
    if not path.is_file():
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()                          # the empty folder byte_mlm_folder() just made
        raise ModelUnavailable("byte-MLM: its checkpoint is not on this machine (the anisotropy chapter trains it, "
                               "about 20 CPU-minutes: make rerun CHAPTER=anisotropy SCALE=book); not trained here")
    if untrained:
        torch.manual_seed(0)
        model = mlm.new_mlm(BYTE_MLM, VOCAB_SIZE, attn_implementation="eager").eval()
    else:
        model = mlm.load_step(BYTE_MLM, folder, BYTE_MLM.steps, VOCAB_SIZE)
    kind = "randomly initialised (untrained) twin" if untrained else "trained here"
    return model, ByteTokenizer(), BYTE_MLM_DESCRIPTION + f" [{kind}]"


def _load_end_state(name: str, untrained: bool, device: Any):
    if name == "byte-MLM":
        return _byte_mlm(untrained)
    loaded = models.load(name, untrained=untrained, device=device)
    return loaded.model, loaded.tokenizer, loaded.description


def measure_end_state(name: str, n: int, max_length: int, seed: int = 0, device: Any = "cpu") -> dict:
    """Q̄ and K̄ of every layer (attention call) and head of model `name` as released and of its untrained
    twin (the same architecture from its config with seeded random weights), on `n` in-domain sequences:
    `core.qk.end_state` (cos, dot, norms, the mean's share of the score, the mean query's share of what the
    softmax sees), (layers, heads) each. A rotary model is measured after the rotation (`qk`: its scores
    are products of these vectors) and before it (`*_pre_rotary`)."""
    t0 = time.perf_counter()
    texts, what = end_state_data(name, n, seed)
    out: dict[str, Any] = {"name": name, "data": what, "n_sequences": len(texts), "max_length": max_length}
    for kind, untrained in (("trained", False), ("twin", True)):
        model, tok, description = _load_end_state(name, untrained, device)
        enc = _encode(tok, texts, max_length)
        moments = end_state_moments(model, enc["input_ids"], enc["attention_mask"], device=device,
                                    desc=f"{name} ({kind})")
        out[f"{kind}_description"] = description
        out[kind] = _rounded(end_state(moments["qk"]), 6)
        if "qk_pre_rotary" in moments:
            out[f"{kind}_pre_rotary"] = _rounded(end_state(moments["qk_pre_rotary"]), 6)
        out["tokens"] = moments["qk"].count
        out["d_k"] = int(moments["qk"].q_sum.shape[-1])
        out["rotary"] = "qk_pre_rotary" in moments
        del model
    out["wall_time_s"] = time.perf_counter() - t0
    return out


class _EndState:
    """One model's end-state measurement as a run of the grid (no checkpoint)."""

    def __init__(self, p: Params, name: str, device: Any = None):
        self.p, self.name, self.device = p, name, device

    def __call__(self, checkpoint=None) -> dict:
        runtime.seed_everything(self.p.seed)
        return measure_end_state(self.name, self.p.end_state_samples, self.p.end_state_length, self.p.seed,
                                 device=self.device or runtime.choose_device(self.p.device))


def end_state_name(model: str) -> str:
    """The committed file of one model's end state: `end-state-<model>`."""
    return "end-state-" + model.replace("/", "-")


def end_state_spec(p: Params, model: str, device: Any = None) -> results.RunSpec:
    keep = ("seed", *END_STATE_FIELDS)
    drop = tuple(f for f in p.cache_key() if f not in keep)
    return results.RunSpec(p.CHAPTER, end_state_name(model), p, _EndState(p, model, device),
                           drop=drop, extra=dict(end_state=model))


def end_state_runs(p: Params, device: Any = None) -> tuple[dict[str, dict], dict[str, str], list[bool]]:
    """Every model of `p.end_state` through the committed-results cache: (records, {model: why it is
    missing}, cache hits). A model whose weights or data are not on this machine is reported, not faked; so is
    one with no committed record when this run may not measure it (`train_missing=False`, the book build: the
    byte-level MLM, whose checkpoint is never committed), with the command that makes it."""
    from ...data import DataUnavailable
    from ...hf.loading import ModelUnavailable

    done, missing, hits = {}, {}, []
    for m in p.end_state:
        try:
            done[m], hit = results.execute(end_state_spec(p, m, device), train_missing=p.train_missing)
            hits.append(hit)
        except (ModelUnavailable, DataUnavailable, results.MissingRuns) as err:
            missing[m] = str(err).splitlines()[0]
    return done, missing, hits


def run_seed(p: Params, seed: int, device: Any = "cpu") -> tuple[dict, bool]:
    """One seed's trajectory through the committed-results cache: (trajectory, cache hit). Separate
    processes may run different seeds of the same Params (one single-threaded process per core); one
    process trains a run at a time (`results.execute` holds its lock)."""
    return results.execute(run_spec(p, seed, device), train_missing=p.train_missing)


def export_model(p: Params, seed: int | None = None, step: int | None = None,
                 name: str = "book-mlm-bert", train: bool = False, device: Any = "cpu") -> Path:
    """Export run seed `seed` (default `p.seed`) of `p`'s pretraining as a Hugging Face folder
    `models.book_model_dir(name)` that `models.load(name)` reads: the `BertForMaskedLM` weights at
    `step` (default: the checkpoint with the lowest held-out MLM loss), BERT's tokenizer, and
    `BOOK_MODEL.json` (settings, step, held-out and unigram losses, commit). The weights are not
    committed: the pretraining must have run on this machine, or `train=True` re-runs it
    (`pretrain_weights`, about an hour on one CPU thread at `book`) and checks that its held-out losses
    equal the committed trajectory's (to 0.02 nats; bf16 on another CPU may differ in the last bits), so
    the exported model is the one the book measured."""
    import json

    if p.source != "pretrain":
        raise ParameterError("only our own pretraining (source='pretrain') can be exported")
    seed = p.seed if seed is None else seed
    traj, _ = run_seed(p, seed)
    evals = {int(k): float(v) for k, v in traj["eval_loss"].items()}
    if step is None:
        step = min((s for s in evals if s in p.steps), key=evals.get)
    pc = pretrain_config(p, seed)
    ckpt = results.checkpoint_dir("qk", {**pc.stored(), "precision": p.precision})
    tok = mlm.tokenizer()
    if train and not mlm.weights_path(ckpt, step).exists():
        history, _, _ = pretrain_weights(p, seed, device=device)
        again = {int(k): float(v) for k, v in history.get("eval_loss", {}).items()}
        off = {s: (evals[s], again.get(s)) for s in evals if again.get(s) is None or abs(again[s] - evals[s]) > 0.02}
        if off:
            raise RuntimeError(f"the re-run pretraining of seed {seed} does not reproduce the committed held-out "
                               f"losses (step: committed, re-run): {off}")
    try:
        model = mlm.load_step(pc, ckpt, step, len(tok))
    except FileNotFoundError:
        raise FileNotFoundError(f"the weights of seed {seed} step {step} are not on this machine ({ckpt}); "
                                "make them with `python scripts/export_book_model.py --train`") from None
    out = models.book_model_dir(name)
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"name": name, "what": traj["model"], "seed": seed, "step": step, "held_out_mlm_nats": evals.get(step),
            "unigram_nats": traj.get("unigram_nats"), "settings": pc.stored(), "precision": p.precision,
            "git_commit": runtime.head_commit(), "versions": runtime.package_versions()}
    (out / "BOOK_MODEL.json").write_text(json.dumps(info, indent=1))
    return out


def recipe_probes() -> list[dict]:
    """The committed recipe probes of the book model (`results/qk/probes/*.json`, written by
    `scripts/qk_recipe_probe.py`): one seed each under another learning rate, batch or corpus weighting,
    with the held-out MLM loss at its checkpoints. Each: the settings, `tokens_seen`, `eval_loss`
    ({step: nats}), `unigram_nats`, the command and wall time. Empty when none are committed."""
    import json

    folder = runtime.REPO_ROOT / "results" / "qk" / "probes"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        rec = json.loads(path.read_text())
        out.append({**rec["results"], "command": rec["provenance"]["command"],
                    "wall_time_s": rec["provenance"]["wall_time_s"]})
    return out


def run(p: Params) -> Result:
    """Every seed's trajectory (read back from the committed results when the settings match) and
    the chapter's reading of them."""
    runtime.seed_everything(p.seed)           # before any GEMM on the device (CUBLAS_WORKSPACE_CONFIG)
    dev = runtime.choose_device(p.device)
    seeds = runtime.run_seeds(p.seed, p.seeds)
    runs, hits = {}, []
    for s in seeds:
        runs[str(s)], hit = run_seed(p, s, device=dev)
        hits.append(hit)
    steps = list(p.steps)
    centred: dict[str, dict] = {}
    if p.ablation and p.source == "pretrain" and not p.centre:
        q = p.with_(centre=True, ablation=False)
        for s in seeds:
            centred[str(s)], hit = run_seed(q, s, device=dev)
            hits.append(hit)
    comparison = {**compare_runs(runs, steps, p.threshold), **union_reading(runs[str(seeds[0])])}
    what = ("MultiBERT (BERT-base)" if p.source == "multiberts" else
            f"our {p.layers}-layer, {p.d_model}-wide MLM BERT")
    ends, missing, end_hits = end_state_runs(p, device=dev)
    return Result(source=p.source, what=what, steps=steps, seeds=seeds, shown=pick_steps(steps),
                  n_samples=p.n_samples, batch_size=p.batch_size, seq_len=p.seq_len, d_k=p.d_k,
                  threshold=p.threshold, max_length=p.max_length, n_display=p.n_display, runs=runs,
                  comparison=comparison, from_cache=all(hits + end_hits),
                  ablation=centred, end_state=ends, end_state_missing=missing,
                  ablation_summary=ablation_summary(runs, centred, steps) if centred else {},
                  probes=recipe_probes() if p.source == "pretrain" else [], scale=p.scale,
                  mask_prob=p.mask_prob, dropout=p.dropout, precision=p.precision, svd_fraction=p.svd_fraction,
                  warmup=p.warmup)
