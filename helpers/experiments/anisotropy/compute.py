"""The anisotropy chapter's runs: each model measured on its modality's data (`measure`), its untrained twin,
the token-type-zeroed twins, the spectrum runs, the bootstraps over inputs (the CNN's flattened maps, Whisper
base's recordings), the jackknife of the mean-removed cosine, the isotropic-Gaussian baseline, the byte-level MLM
trained here, and `run`, which reads each through the heavy-run cache."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ...core import anisotropy as A
from ...data import DataUnavailable, load_cifar10, load_common_voice, load_wikitext103
from ...data.sequences import load_antibody_chains, load_uspto50k_reactions
from ...data.speech import digit_sequences
from ...hf import anisotropy as H
from ...hf import bytelevel, models, whisper
from ...machinery import results
from ...machinery.runtime import choose_device, seed_everything, stream_seed
from ...train.mlm import PretrainConfig, pretrain, training_chunks
from .params import BYTE_MLM, BYTE_MLM_DESCRIPTION, BYTE_MLM_NAME, BYTE_MLM_TRAINING, NO_TWIN, TOKEN_TYPE, Params
from .result import Result


def _label(name: str, untrained: bool, zeroed: bool = False) -> str:
    trained = f"trained here, {BYTE_MLM.steps} steps" if name == BYTE_MLM_NAME else "pretrained"
    twin = "untrained twin, token type zeroed" if zeroed else "untrained twin"
    return f"{name} ({twin if untrained else trained})"


def zero_token_type(model) -> int:
    """Zero every token-type embedding table of `model` (BERT's and ALBERT's `token_type_embeddings`):
    the untrained twin without the one random vector its embedding block adds to every token. Returns how
    many tables were zeroed (ValueError when none)."""
    n = 0
    for mod in model.modules():
        emb = getattr(mod, "token_type_embeddings", None)
        if isinstance(emb, torch.nn.Embedding):
            with torch.no_grad():
                emb.weight.zero_()
            n += 1
    if not n:
        raise ValueError(f"{type(model).__name__} has no token-type embedding")
    return n


def _load(modality: str, name: str, untrained: bool, device, p: Params | None = None):
    """(model, tokenizer or processor, description) of one model. The trained byte-level MLM is trained here
    (about 20 CPU-minutes) when its checkpoint is not on this machine — unless `p.train_missing` is False (the
    book build): then `results.MissingRuns` names it and the command that makes it."""
    if name == BYTE_MLM_NAME:
        from ...train.mlm import load_step, new_mlm, weights_path

        folder = byte_mlm_folder()
        if untrained:
            torch.manual_seed(0)
            model = new_mlm(BYTE_MLM, bytelevel.VOCAB_SIZE, attn_implementation="eager").eval()
        else:
            if p is not None and not p.train_missing and not weights_path(folder, BYTE_MLM.steps).is_file():
                raise results.MissingRuns(Params.CHAPTER, p.scale, [BYTE_MLM_TRAINING],
                                          command=f"make rerun CHAPTER={Params.CHAPTER} SCALE={p.scale}")
            byte_mlm(device=device)                     # trains (about 20 min, one thread) unless done
            model = load_step(BYTE_MLM, folder, BYTE_MLM.steps, bytelevel.VOCAB_SIZE, device)
        kind = "randomly initialised (untrained) twin" if untrained else "trained here"
        return model.to(device), bytelevel.ByteTokenizer(), BYTE_MLM_DESCRIPTION + f" [{kind}]"
    if name in whisper.VARIANTS:
        model, proc = whisper.load_whisper(untrained=untrained, device=device, name=name)
        kind = "randomly initialised (untrained) twin" if untrained else "pretrained"
        return model, proc, models.DESCRIPTIONS.get(name, name) + f" [{kind}]"
    loaded = models.load(name, untrained=untrained, modality="vision" if modality == "vision" else
                         ("audio" if modality == "audio" else "text"), device=device)
    return loaded.model, loaded.tokenizer, loaded.description


def _spread(n_total: int, k: int) -> list[int]:
    return sorted({int(i) for i in np.linspace(0, n_total - 1, min(k, n_total)).round()})


def measure(entry: str, untrained: bool, p: Params, device, data: dict[str, Any], zeroed: bool = False
            ) -> dict[str, Any]:
    """One model (`modality:name`), pretrained or its untrained twin (with its token-type embedding
    zeroed when `zeroed`), measured on its modality's data (`data` caches what was loaded: WikiText-103
    text, antibody chains, reactions, FSDD speech, CIFAR-10 images)."""
    modality, name = entry.split(":", 1)
    label = _label(name, untrained, zeroed)
    model, tok, description = _load(modality, name, untrained, device, p)
    if zeroed:
        zero_token_type(model)
        description += " [token-type embedding zeroed]"
    seed = stream_seed(p.seed, "pairs")
    extra: dict[str, Any] = {}
    if modality in ("text", "bytes"):
        if "text" not in data:
            data["text"] = load_wikitext103(p.text_split)
        n_layers = getattr(model.config, "num_hidden_layers", 12)
        budget = p.text_tokens if n_layers <= 12 else min(p.text_tokens, p.decoder_tokens)
        r = H.text_anisotropy(model, tok, data["text"], budget, p.chunk_len, p.batch_size, p.n_pairs, seed, desc=label)
        unit = "bytes" if modality == "bytes" else "tokens"
        what = (f"WikiText-103 {p.text_split} text: {r['tokens']:,} {unit} in chunks of {p.chunk_len} spread over "
                "the split")
    elif modality in ("protein", "chem"):
        if modality == "protein":
            chains = data.setdefault("chains", load_antibody_chains())
            seqs = [chains[i][2] for i in _spread(len(chains), p.chains)]
        else:
            seqs = data.setdefault("reactions", load_uspto50k_reactions(p.reactions, p.seed))
        ids = [tok(s_)["input_ids"][:510] for s_ in seqs]
        r = H.sequence_anisotropy(model, ids, [tok.cls_token_id], [tok.sep_token_id], tok.pad_token_id,
                                  p.batch_size, p.n_pairs, seed, desc=label)
        unk = sum(i == tok.unk_token_id for s_ in ids for i in s_)
        extra["unknown_tokens"] = int(unk)
        what = (f"{len(seqs)} antibody variable-domain chains (Jain et al. 2017), one token per residue"
                if modality == "protein" else
                f"{len(seqs)} USPTO-50K test reactions, atom maps stripped, atom-level SMILES tokens")
        what += f": {r['tokens']:,} tokens ({unk} unknown)"
    elif modality == "audio":
        if name in whisper.VARIANTS:
            if "speech" not in data:
                data["speech"] = digit_sequences(p.speech_per_speaker, 5, seed=p.seed)
            waves = [s_.waveform for s_ in data["speech"]]
            r = H.frames_anisotropy([list(h) for h in whisper.encoder_hidden_states(model, tok, waves)],
                                    p.n_pairs, seed)
            what = (f"{len(waves)} FSDD recordings of five spoken digits each (6 speakers, 0.25 s pauses, 16 kHz): "
                    f"{r['tokens']:,} encoder positions covering the audio (the 30-s padding left out)")
        else:
            if "voice" not in data:
                data["voice"] = load_common_voice(max(8, p.images // 10), seed=p.seed)
            waves, rate = data["voice"]
            r = H.audio_anisotropy(model, tok, waves, rate, p.n_pairs, seed, desc=label)
            what = f"{len(waves)} LibriSpeech clean validation utterances"
    else:
        if "images" not in data:
            data["images"] = load_cifar10("test", p.images, p.seed)[0]
        images = data["images"][:p.images]
        skip = vision_special_tokens(model)
        r = H.vision_anisotropy(model, tok, images, 16, p.n_pairs, seed, desc=label, cnn_vectors=p.cnn_vectors,
                                skip_tokens=skip)
        what = f"{len(images)} CIFAR-10 test images upsampled to 224 px"
        if "vectors_per_layer" in r and len(set(np.asarray(r["vectors_per_layer"]).tolist())) > 1:
            flat = H.vision_anisotropy(model, tok, images, 16, p.n_pairs, seed, desc=label + " (maps)",
                                       cnn_vectors="map")
            extra.update(map_cos_exact=flat["cos_exact"].tolist(), map_drift_ratio=flat["drift_ratio"].tolist())
            what += (f": every spatial position of each block's output is a vector ({r['vectors_per_layer'][0]:,} "
                     f"to {r['vectors_per_layer'][-1]:,} per layer)")
        else:
            what += f": {r['tokens']:,} patch tokens ([CLS] left out)" if skip else f": {r['tokens']:,} patch tokens"
    r = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in r.items()}
    r.update(extra, label=label, modality=modality, name=name, trained=not untrained, zeroed=zeroed,
             description=description,
             data=what, correlation=A.drift_correlation(r["cos_exact"], r["mean_norm"]),
             normalised=A.normalised_drift_tests(r["cos_exact"], r["mean_norm"], r["avg_norm"]))
    return r


#: bootstrap draws over images of the CNN's flattened-map statistics (`cnn_map_bootstrap`)
CNN_DRAWS = 2000


def resampled_gram_stats(C: np.ndarray, G: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (rows of `counts`: how often each of the n vectors is drawn) and layer (`C`, `G`: (layers, n,
    n) cosine and raw Gram matrices), the average cosine over the pairs of distinct draws, the pairs of a vector
    with its own copy left out — (cᵀCc − Σc²) / ((Σc)² − Σc²) — and ‖x̄‖₂ of the resample, √(cᵀGc) / Σc. Counts
    of ones give the all-pairs average and the mean of the n vectors. Returns two (resamples, layers) arrays."""
    counts = np.asarray(counts, float)
    total, self_pairs = counts.sum(1), (counts**2).sum(1)
    cos = (np.einsum("bi,lij,bj->bl", counts, C, counts) - self_pairs[:, None]) / (total**2 - self_pairs)[:, None]
    norm = np.sqrt(np.einsum("bi,lij,bj->bl", counts, G, counts)) / total[:, None]
    return cos, norm


@torch.no_grad()
def cnn_map_bootstrap(entry: str, p: Params, device, data: dict[str, Any], draws: int = CNN_DRAWS
                      ) -> dict[str, Any]:
    """Godey et al. Fig. 4 and §3.3 for one CNN, with their sampling over images: every layer's output map
    flattened to one vector per image (as the paper describes), the Gram matrices of those vectors (raw and
    normalised) over the `p.images` images, and `draws` bootstrap resamples of the images (multinomial counts
    c; a resample's average cosine is (cᵀCc − Σc²)/(n² − Σc²), the pairs of an image with its own copy left out,
    and its ‖x̄‖² = cᵀGc/n²). Returns per layer the exact average cosine and ‖x̄‖₂ of the maps, and per draw the
    median average cosine over the block outputs (the stem and head left out) and the Spearman ρ across layers
    between ‖x̄‖₂ and the average cosine."""
    from scipy import stats as sps

    modality, name = entry.split(":", 1)
    model, proc, _ = _load(modality, name, False, device, p)
    if "images" not in data:
        data["images"] = load_cifar10("test", p.images, p.seed)[0]
    images = data["images"][:p.images]
    vecs: list[list[Tensor]] = []
    for i in range(0, len(images), p.batch_size):
        px = proc(images=images[i:i + p.batch_size], return_tensors="pt")["pixel_values"].to(device)
        hs = model(pixel_values=px, output_hidden_states=True).hidden_states
        for li, h in enumerate(hs):
            if not vecs:
                vecs = [[] for _ in hs]
            vecs[li].append(h.float().flatten(1).cpu())
    n = len(images)
    raw, cosg = [], []
    for per_layer in vecs:
        X = torch.cat(per_layer).double()
        G = X @ X.T
        d = G.diagonal().clamp_min(1e-24).sqrt()
        raw.append(G.numpy())
        cosg.append((G / d[:, None] / d[None, :]).numpy())
    del vecs
    C, G = np.stack(cosg), np.stack(raw)                              # (layers, n, n)
    cos_exact, mean_norm = (v[0] for v in resampled_gram_stats(C, G, np.ones((1, n))))
    rng = np.random.default_rng(stream_seed(p.seed, "cnn-bootstrap"))
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws).astype(float)        # (draws, n)
    cos_draws, norm_draws = resampled_gram_stats(C, G, counts)
    rho = [float(sps.spearmanr(nd, cd).statistic) for nd, cd in zip(norm_draws, cos_draws, strict=True)]
    return {"name": name, "images": n, "draws": draws, "map_cos": cos_exact.tolist(),
            "map_mean_norm": mean_norm.tolist(),
            "median_draws": np.median(cos_draws[:, 1:-1], axis=1).tolist(), "rho_draws": rho,
            "rho": float(sps.spearmanr(mean_norm, cos_exact).statistic),
            "layer_low": np.percentile(cos_draws, 2.5, axis=0).tolist(),
            "layer_high": np.percentile(cos_draws, 97.5, axis=0).tolist()}


#: the speech model whose drift test (the paper's §3.3 on Whisper-base) gets a bootstrap over recordings
SPEECH_DRIFT_MODEL = "audio:whisper-base"


def resampled_frame_stats(U: np.ndarray, X: np.ndarray, n: np.ndarray, counts: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Per resample and layer, the average cosine and ‖x̄‖₂ of the frames of resampled recordings.

    `U[c, l]`: recording c's sum of unit-normalised frame vectors at layer l, `X[c, l]` the sum of its raw frame
    vectors, `n[c]` its frame count; `counts` (draws, recordings) multinomial counts w. With N = Σ w_c n_c and
    S = Σ w_c U_c, the average cosine over pairs of distinct frames is (‖S‖² − Σ w_c² n_c) / (N² − Σ w_c² n_c)
    (the pairs of a frame with itself and its own copies left out; w = 1 gives every pair of distinct frames,
    the record's `cos_exact`), and ‖x̄‖₂ = ‖Σ w_c X_c‖ / N."""
    N = counts @ n
    same = (counts ** 2) @ n
    S = np.einsum("kc,cld->kld", counts, U)
    cos = ((S ** 2).sum(-1) - same[:, None]) / (N ** 2 - same)[:, None]
    norm = np.linalg.norm(np.einsum("kc,cld->kld", counts, X), axis=-1) / N[:, None]
    return cos, norm


@torch.no_grad()
def speech_drift_bootstrap(entry: str, p: Params, device, data: dict[str, Any], draws: int = CNN_DRAWS
                           ) -> dict[str, Any]:
    """Godey et al. §3.3 (Fig. 5) for one Whisper model, with its sampling over recordings: the encoder's
    states on the chapter's FSDD recordings (the positions that cover audio), per recording and layer the sums
    of `resampled_frame_stats`, and `draws` bootstrap resamples of the recordings. Returns per layer the
    average cosine and ‖x̄‖₂ of all frames, the Spearman ρ across layers between them (and its p), and ρ per
    draw."""
    from scipy import stats as sps

    modality, name = entry.split(":", 1)
    model, proc, _ = _load(modality, name, False, device, p)
    if "speech" not in data:
        data["speech"] = digit_sequences(p.speech_per_speaker, 5, seed=p.seed)
    waves = [s_.waveform for s_ in data["speech"]]
    U, X, n = [], [], []
    for h in whisper.encoder_hidden_states(model, proc, waves):      # (layers + 1, frames, d)
        h = h.double()
        U.append((h / h.norm(dim=-1, keepdim=True).clamp_min(1e-12)).sum(1).numpy())
        X.append(h.sum(1).numpy())
        n.append(h.shape[1])
    U, X, n = np.stack(U), np.stack(X), np.asarray(n, float)
    cos, norm = (v[0] for v in resampled_frame_stats(U, X, n, np.ones((1, len(n)))))
    rng = np.random.default_rng(stream_seed(p.seed, "speech-bootstrap"))
    counts = rng.multinomial(len(n), np.full(len(n), 1.0 / len(n)), size=draws).astype(float)
    cos_draws, norm_draws = resampled_frame_stats(U, X, n, counts)
    rho = [float(sps.spearmanr(nd, cd).statistic) for nd, cd in zip(norm_draws, cos_draws, strict=True)]
    test = sps.spearmanr(norm, cos)
    return {"name": name, "clips": len(n), "frames": int(n.sum()), "draws": draws, "cos": cos.tolist(),
            "mean_norm": norm.tolist(), "rho": float(test.statistic), "p": float(test.pvalue), "rho_draws": rho}


#: the models whose mean-removed average cosine is read with a jackknife over their inputs (`centred_jackknife`):
#: the three whose sampled pairs put a layer closest to the isotropic line
CENTRED_MODELS = ("text:all-MiniLM-L6-v2", "text:SmolLM2-135M-Instruct", "vision:DINOv2-S/14")


@torch.no_grad()
def layer_vectors(entry: str, p: Params, device, data: dict[str, Any]) -> tuple[list[Tensor], np.ndarray, str]:
    """Every layer's vectors of one pretrained text or vision Transformer on the chapter's data, as `measure`
    takes them (text: `p.text_tokens` tokens in chunks spread over WikiText-103, special tokens fed but left
    out; vision: the patch tokens of `p.images` CIFAR-10 images, [CLS] left out), with the input each vector
    comes from. Returns (one (n, d) float32 tensor per layer, the input index of each vector, the unit's name)."""
    modality, name = entry.split(":", 1)
    model, tok, _ = _load(modality, name, False, device, p)
    layers: list[list[Tensor]] = []
    owner: list[np.ndarray] = []

    def add(states, keep: Tensor, first: int) -> None:
        per_row = keep.sum(1).tolist()
        owner.append(np.repeat(np.arange(first, first + len(per_row)), per_row))
        for li, h in enumerate(states):
            if len(layers) <= li:
                layers.append([])
            layers[li].append(h.float().cpu()[keep])

    if modality == "text":
        if "text" not in data:
            data["text"] = load_wikitext103(p.text_split)
        n_layers = getattr(model.config, "num_hidden_layers", 12)
        budget = p.text_tokens if n_layers <= 12 else min(p.text_tokens, p.decoder_tokens)
        ids = tok(data["text"], add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
        pre, post = H.specials(tok)
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        seqs = H.spread_chunks(ids, budget, p.chunk_len)
        dev = next(model.parameters()).device
        for i in range(0, len(seqs), p.batch_size):
            batch = [pre + c + post for c in seqs[i:i + p.batch_size]]
            L = max(len(e) for e in batch)
            input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in batch], device=dev)
            attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in batch], device=dev)
            keep = torch.tensor([[0] * len(pre) + [1] * (len(e) - len(pre) - len(post)) + [0] * (L - len(e) + len(post))
                                 for e in batch], dtype=torch.bool)
            add(model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True).hidden_states, keep, i)
        unit = "text chunks"
    elif modality == "vision":
        if "images" not in data:
            data["images"] = load_cifar10("test", p.images, p.seed)[0]
        images, skip, bs = data["images"][:p.images], vision_special_tokens(model), 16
        dev = next(model.parameters()).device
        for i in range(0, len(images), bs):
            px = tok(images=images[i:i + bs], return_tensors="pt")["pixel_values"].to(dev)
            states = model(pixel_values=px, output_hidden_states=True).hidden_states
            keep = torch.zeros(states[0].shape[:2], dtype=torch.bool)
            keep[:, skip:] = True
            add(states, keep, i)
        unit = "images"
    else:
        raise ValueError(f"{entry}: the centred bootstrap reads text and vision Transformers")
    return [torch.cat(h) for h in layers], np.concatenate(owner), unit


def centred_jackknife(entry: str, p: Params, device, data: dict[str, Any]) -> dict[str, Any]:
    """Biś et al.'s test with its sampling over inputs, for one model: per layer the average cosine over all
    pairs once the mean is removed, and the same with each input (text chunk or image) left out in turn, the
    rest centred on its own mean (`core.anisotropy.centred_cosine_resamples`) — a jackknife over the inputs.
    The raw all-pairs average cosine is kept as a check that these are the record's vectors."""
    vecs, owner, unit = layer_vectors(entry, p, device, data)
    k = int(owner.max()) + 1
    leave_one_out = 1.0 - np.eye(k)
    centred, raw, loo = [], [], []
    for X in vecs:
        c, r, dr = A.centred_cosine_resamples(X, owner, leave_one_out)
        centred.append(c)
        raw.append(r)
        loo.append(dr.tolist())
    return {"name": entry.split(":", 1)[1], "unit": unit, "inputs": k, "vectors": int(len(owner)),
            "dims": [int(X.shape[1]) for X in vecs], "centred": centred, "leave_one_out": loo, "raw": raw}


def gaussian_baseline(d: int, p: Params, bins: int = 120) -> dict[str, Any]:
    """Appendix B for one dimension d: Monte Carlo cosines of isotropic Gaussians against the exact law."""
    samples = A.sample_isotropic_cosines(d, p.gaussian_samples, stream_seed(p.seed, "gaussian", d))
    density, edges = np.histogram(samples, bins=bins, density=True)
    return {"d": d, "mc_mean": float(samples.mean()), "mc_q95": float(np.quantile(samples, 0.95)),
            "exact_q95": A.isotropic_cosine_quantile(0.95, d), "asymptotic_q95": 1.645 / float(np.sqrt(d)),
            "hist_edges": edges.tolist(), "hist_density": density.tolist()}


def vision_special_tokens(model) -> int:
    """How many summary tokens lead a vision Transformer's sequence ([CLS] and any registers): left out of
    the statistics, as the special tokens of text models are (0 for a CNN)."""
    cfg = getattr(model, "config", None)
    if cfg is None or getattr(cfg, "model_type", "") not in ("dinov2", "vit", "deit", "beit", "dinov2_with_registers"):
        return 0
    return 1 + int(getattr(cfg, "num_register_tokens", 0) or 0) + (1 if cfg.model_type == "deit" else 0)


#: fields that only matter for the Gaussian baseline, the list of models or the spectrum runs: left out of each
#: model's cache key
#: what a model run's level intervals are taken over (part of its cache key): each input's unit-vector sum is
#: kept, so a layer's all-pairs average cosine is jackknifed over the inputs
LEVELS_OVER = "inputs"
_MODEL_KEY_DROP = ("models", "untrained_twins", "gaussian_dims", "gaussian_samples", "zeroed_twins",
                   "shape_models", "shape_share", "shape_trained_byte_mlm")


def _slug(entry: str, kind: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", f"{entry}-{kind}")


def _special_key(entry: str) -> dict[str, str]:
    """Part of a vision Transformer's cache key: its [CLS] token is left out (text models' specials always were)."""
    vision = entry.startswith("vision:") and entry.split(":", 1)[1] not in NO_TWIN
    return {"special_tokens": "excluded"} if vision else {}


def _reason(err: Exception) -> str:
    """Why a model is left out, in one line (a missing heavy run: what it is and the command)."""
    if isinstance(err, results.MissingRuns):
        return f"needs {', '.join(err.names)}, not made here: {err.command}"
    return str(err).splitlines()[0]


def measure_models(p: Params, skipped: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Every model of `p.models` (and its untrained twin when `p.untrained_twins`, for Transformers),
    each through the heavy-run cache (`results/anisotropy/book/model-*.json` at book scale). A model
    whose data neither the mirror nor the hub provides (`DataUnavailable`) is left out and listed in
    `skipped` with the reason (on Colab: the antibody chains have no hub copy)."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    data: dict[str, Any] = {}
    measured = []
    for entry in p.models:
        name = entry.split(":", 1)[1]
        twins = (False, True) if p.untrained_twins and name not in NO_TWIN else (False,)
        for untrained in twins:
            slug = _slug(entry, "untrained" if untrained else "pretrained")
            try:
                rec, _ = results.cached(p, f"model-{slug}",
                                        lambda e=entry, u=untrained: measure(e, u, p, device, data),
                                        drop=_MODEL_KEY_DROP, model=entry, untrained=untrained,
                                        levels=LEVELS_OVER, **_special_key(entry))
            except (DataUnavailable, results.MissingRuns) as err:
                if skipped is None:
                    raise
                skipped.append({"model": entry, "reason": _reason(err)})
                break
            rec["label"] = _label(name, untrained)            # labels are not part of the measurement
            measured.append(rec)
    return measured


def measure_zeroed(p: Params, skip: set[str]) -> list[dict[str, Any]]:
    """The untrained twin with its token-type embedding zeroed, for every model of `p.models` in
    `TOKEN_TYPE` (full data budget; cached as `model-<entry>-untrained-zeroed.json`)."""
    if not p.zeroed_twins:
        return []
    device, data, out = choose_device(p.device), {}, []
    for entry in p.models:
        name = entry.split(":", 1)[1]
        if name not in TOKEN_TYPE or entry in skip:
            continue
        rec, _ = results.cached(p, f"model-{_slug(entry, 'untrained-zeroed')}",
                                lambda e=entry: measure(e, True, p, device, data, zeroed=True),
                                drop=_MODEL_KEY_DROP, model=entry, untrained=True, token_type="zeroed",
                                levels=LEVELS_OVER)
        rec["label"] = _label(name, True, zeroed=True)
        out.append(rec)
    return out


#: what a spectrum run keeps of `measure`'s record
SHAPE_KEYS = ("cos_exact", "dims", "tokens", "drift_ratio", "pr", "pr_iso", "top1", "top3", "top10", "rms_cos_k0",
              "rms_cos_k1", "rms_cos_k3", "rms_cos_k10", "mean_split_cos", "drift_over_top", "data")


def shape_params(p: Params) -> Params:
    """The data budgets of the spectrum runs: `p.shape_share` of each of `p`'s (at least two of anything)."""
    f = p.shape_share
    return p.with_(text_tokens=max(16, round(p.text_tokens * f)), decoder_tokens=max(16, round(p.decoder_tokens * f)),
                   chains=max(2, round(p.chains * f)), reactions=max(2, round(p.reactions * f)),
                   speech_per_speaker=max(1, round(p.speech_per_speaker * f)), images=max(1, round(p.images * f)))


DECODER = "text:SmolLM2-135M-Instruct"


def _final_norm(q: Params) -> dict[str, Any]:
    """SmolLM2's last point on `q`'s text budget, before and after its final RMSNorm."""
    loaded = models.load(DECODER.split(":", 1)[1], device=choose_device(q.device))
    budget = min(q.text_tokens, q.decoder_tokens)
    return H.final_norm_cosines(loaded.model, loaded.tokenizer, load_wikitext103(q.text_split), budget, q.chunk_len,
                                q.batch_size)


def measure_shapes(p: Params, skip: set[str]) -> list[dict[str, Any]]:
    """The centred cloud's spectrum per layer (`core.anisotropy.centred_shape`) for every model of
    `p.shape_models` that this run measures, pretrained and untrained twin, on `shape_params(p)`'s
    subsample of the data (cached as `shape-<entry>-<kind>.json`). The trained byte-level MLM only when
    `p.shape_trained_byte_mlm` (its checkpoint is not kept: it retrains)."""
    q = shape_params(p)
    device, data, out = choose_device(p.device), {}, []
    for entry in p.shape_models:
        name = entry.split(":", 1)[1]
        if entry not in p.models or entry in skip:
            continue
        for untrained in (False, True) if p.untrained_twins else (False,):
            if name == BYTE_MLM_NAME and not untrained and not p.shape_trained_byte_mlm:
                continue
            def compute(e=entry, u=untrained):
                r = measure(e, u, q, device, data)
                return {k: r[k] for k in SHAPE_KEYS}
            try:
                rec, _ = results.cached(q, f"shape-{_slug(entry, 'untrained' if untrained else 'pretrained')}",
                                        compute, drop=_MODEL_KEY_DROP, model=entry, untrained=untrained,
                                        **_special_key(entry))
            except results.MissingRuns:
                continue                                # the trained byte MLM, not on this machine: left out
            rec.update(name=name, trained=not untrained, label=_label(name, untrained))
            out.append(rec)
    return out


def run(p: Params) -> Result:
    """`measure_models(p)`, the byte-level MLM's training record when it is among the models, then the
    isotropic-Gaussian baseline for every d of `p.gaussian_dims`."""
    skipped: list[dict[str, str]] = []
    measured = measure_models(p, skipped)
    gone = {s_["model"] for s_ in skipped}
    zeroed = measure_zeroed(p, gone)
    shapes = measure_shapes(p, gone)
    final_norm = None
    if DECODER in p.models and DECODER not in gone:
        q = shape_params(p)
        final_norm, _ = results.cached(q, "smollm-final-norm", lambda: _final_norm(q), drop=_MODEL_KEY_DROP,
                                       model=DECODER)
    byte_rec = None
    if any(e.split(":", 1)[1] == BYTE_MLM_NAME for e in p.models):
        def train() -> dict[str, Any]:
            if not p.train_missing:
                raise results.MissingRuns(Params.CHAPTER, p.scale, [BYTE_MLM_TRAINING],
                                          command=f"make rerun CHAPTER={Params.CHAPTER} SCALE={p.scale}")
            return byte_mlm(device=choose_device(p.device))
        try:
            byte_rec, _ = results.cached(p, "byte-mlm-training", train, drop=_MODEL_KEY_DROP,
                                         config=BYTE_MLM.stored())
        except results.MissingRuns:
            byte_rec = None
    cnn_boot = None
    cnn_entry = next((e for e in p.models if e.split(":", 1)[1] in NO_TWIN and e not in gone), None)
    if cnn_entry is not None:
        cnn_boot, _ = results.cached(p, "cnn-map-bootstrap",
                                     lambda: cnn_map_bootstrap(cnn_entry, p, choose_device(p.device), {}),
                                     drop=_MODEL_KEY_DROP, model=cnn_entry, draws=CNN_DRAWS)
    speech_boot = None
    if SPEECH_DRIFT_MODEL in p.models and SPEECH_DRIFT_MODEL not in gone:
        speech_boot, _ = results.cached(p, "speech-drift-bootstrap",
                                        lambda: speech_drift_bootstrap(SPEECH_DRIFT_MODEL, p, choose_device(p.device),
                                                                       {}),
                                        drop=_MODEL_KEY_DROP, model=SPEECH_DRIFT_MODEL, draws=CNN_DRAWS)
    centred_jack = []
    for entry in (e for e in CENTRED_MODELS if e in p.models and e not in gone):
        try:
            rec, _ = results.cached(p, f"centred-jackknife-{_slug(entry, 'pretrained')}",
                                    lambda e=entry: centred_jackknife(e, p, choose_device(p.device), {}),
                                    drop=_MODEL_KEY_DROP, model=entry, **_special_key(entry))
        except results.MissingRuns:
            continue                                    # the book build without the committed run: pairs only
        centred_jack.append(rec)
    planted = {"clusters + drift": A.cloud_shape(A.planted_clusters_and_drift(seed=p.seed), p.n_pairs, p.seed),
               "isotropic + drift": A.cloud_shape(A.planted_clusters_and_drift(clusters=2000, seed=p.seed),
                                                  p.n_pairs, p.seed)}
    # cheap and deterministic: read back where committed, else computed (even by a run that may not train)
    keep = ("seed", "gaussian_dims", "gaussian_samples")
    gaussian, _ = results.cached_run(p.CHAPTER, "gaussian-baseline", p,
                                     p.cache_key(drop=tuple(f for f in p.cache_key() if f not in keep)),
                                     lambda: [gaussian_baseline(d, p) for d in p.gaussian_dims], p.scale)
    return Result(models=measured, gaussian=gaussian, byte_mlm=byte_rec,
                  skipped=skipped, n_pairs=p.n_pairs, planted=planted, zeroed=zeroed, shapes=shapes,
                  shape_share=p.shape_share, final_norm=final_norm, cnn_boot=cnn_boot,
                  speech_boot=speech_boot, centred_jack=centred_jack, chunk_len=p.chunk_len, chains=p.chains)


def byte_mlm_folder(cfg: PretrainConfig = BYTE_MLM) -> Path:
    """Checkpoints of the byte-level MLM: `_build/checkpoints/anisotropy/<hash>/` (never committed)."""
    return results.checkpoint_dir(Params.CHAPTER, {"byte_mlm": cfg.stored(), "train": "wikitext-103 validation",
                                                   "eval": "wikitext-103 test", "precision": "bf16"})


def unigram_cross_entropy(train: Tensor, held_out: Tensor) -> float:
    """Cross-entropy (nats) of the held-out bytes under the training bytes' unigram distribution
    (add-one smoothed over the 256 byte values; specials excluded): the baseline an MLM must beat."""
    counts = torch.bincount(train[train < 256].flatten(), minlength=256).double() + 1
    logp = (counts / counts.sum()).log()
    return float(-logp[held_out[held_out < 256].flatten()].mean())


def byte_mlm(cfg: PretrainConfig = BYTE_MLM, eval_sequences: int = 64, device: Any = "cpu") -> dict[str, Any]:
    """Train (or resume, or find finished) the byte-level MLM on `device`; returns its training record: held-out
    MLM loss per checkpoint step (masked bytes of WikiText-103 test text, nats), the unigram-byte
    baseline on the same text, steps and wall time."""
    tok = bytelevel.ByteTokenizer()
    train = training_chunks(tok, cfg.seq_len, "validation")
    held = training_chunks(tok, cfg.seq_len, "test")[:eval_sequences]
    hist = pretrain(cfg, train, byte_mlm_folder(cfg), tok=tok, eval_chunks=held, precision="bf16", device=device)
    return {"eval_loss": {int(k): float(v) for k, v in hist["eval_loss"].items()},
            "unigram_loss": unigram_cross_entropy(train, held), "steps": cfg.steps,
            "train_sequences": int(len(train)), "wall_time_s": float(hist.get("wall_time_s", 0.0)),
            "final_train_loss": float(np.mean(hist["loss"][-50:]))}
