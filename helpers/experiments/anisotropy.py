"""Godey et al. §3, §4 and Appendix B: anisotropy across layers and models, the drift of an
untrained Transformer block, and cosine similarity of isotropic Gaussians."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from scipy import optimize, stats
from torch import Tensor

from ..book.params import ChapterParams, positive, rules
from ..book.runtime import progress
from ..core import measures as M

#: the paper's models (Godey et al. Figures 1-5), by hub id and modality, for the `paper` preset
PAPER_ANISOTROPY_MODELS = (
    "text:bert-base-uncased", "text:roberta-base", "text:gpt2", "text:t5-base", "text:google/canine-c",
    "text:google/canine-s", "text:google/byt5-small", "audio:facebook/wav2vec2-base-960h",
    "audio:facebook/hubert-base-ls960", "audio:openai/whisper-base", "vision:google/vit-base-patch16-224",
    "vision:microsoft/beit-base-patch16-224", "vision:facebook/deit-base-patch16-224",
    "vision:microsoft/resnet-50", "vision:google/efficientnet-b0", "vision:microsoft/cvt-13",
    "vision:facebook/convnext-tiny-224", "vision:Visual-Attention-Network/van-base",
)


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §3 and Appendices A-B: anisotropy across layers and models."""

    models: tuple[str, ...] = ("text:all-MiniLM-L6-v2", "text:SmolLM2-135M-Instruct", "vision:DINOv2-S/14")
    untrained_twins: bool = True
    text_tokens: int = 40_000
    decoder_tokens: int = 12_000     # cap for models with more than 12 layers (SmolLM2: 30)
    images: int = 192
    chunk_len: int = 256
    batch_size: int = 8
    n_pairs: int = 20_000
    gaussian_dims: tuple[int, ...] = (16, 64, 256, 768, 4096)
    gaussian_samples: int = 100_000

    CHAPTER: ClassVar[str] = "anisotropy"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(models=("text:all-MiniLM-L6-v2",), text_tokens=3000, images=8, n_pairs=4000,
                   gaussian_samples=20_000),
        "book": dict(),
        "paper": dict(models=PAPER_ANISOTROPY_MODELS, text_tokens=217_000, decoder_tokens=217_000, images=5000,
                      n_pairs=100_000),
    }
    RULES: ClassVar = rules(
        models=(lambda v: len(v) > 0 and all(x.split(":", 1)[0] in ("text", "vision", "audio") and ":" in x
                                             for x in v), "each entry is 'text:<id>', 'vision:<id>' or 'audio:<id>'"),
        text_tokens=(lambda v: v >= 16, "needs >= 16 tokens"), decoder_tokens=(lambda v: v >= 16, "needs >= 16 tokens"),
        images=(lambda v: v >= 1, "needs >= 1 image"), chunk_len=(lambda v: 8 <= v <= 510, "must lie in [8, 510]"),
        batch_size=positive, n_pairs=(lambda v: v >= 100, "needs >= 100 pairs"),
        gaussian_dims=(lambda v: len(v) > 0 and all(x >= 3 for x in v), "every d must be >= 3"),
        gaussian_samples=(lambda v: v >= 1000, "needs >= 1000 samples"),
    )


# ------------------------------------------------------------------ streaming layer-wise anisotropy


@dataclass
class LayerAccumulator:
    """Streams token vectors of every layer and keeps, per layer: the sum of unit vectors (for the
    exact all-pairs average cosine), the sum of vectors (for the drift ‖x̄‖₂), the sum of norms, the
    count, and the vectors at pre-sampled global positions (for the sampled-pairs estimate)."""

    pairs: Tensor                               # (n_pairs, 2) global token indices
    unit_sum: list[Tensor] = field(default_factory=list)
    vec_sum: list[Tensor] = field(default_factory=list)
    norm_sum: list[float] = field(default_factory=list)
    kept: list[Tensor] = field(default_factory=list)
    count: int = 0

    def __post_init__(self) -> None:
        self.positions = self.pairs.flatten().unique().contiguous()          # sorted

    def add(self, layers: list[Tensor]) -> None:
        """`layers`: one (tokens, d) tensor of real (non-special) token vectors per layer."""
        n = layers[0].shape[0]
        if not self.unit_sum:
            for h in layers:
                d = h.shape[-1]
                self.unit_sum.append(torch.zeros(d, dtype=torch.float64))
                self.vec_sum.append(torch.zeros(d, dtype=torch.float64))
                self.norm_sum.append(0.0)
                self.kept.append(torch.zeros(len(self.positions), d, dtype=torch.float32))
        lo, hi = self.count, self.count + n
        sel = (self.positions >= lo) & (self.positions < hi)
        local = self.positions[sel] - lo
        for li, h in enumerate(layers):
            h64 = h.double()
            norms = h64.norm(dim=-1, keepdim=True)
            self.unit_sum[li] += (h64 / norms.clamp_min(1e-30)).sum(0)
            self.vec_sum[li] += h64.sum(0)
            self.norm_sum[li] += float(norms.sum())
            self.kept[li][sel] = h[local].float()
        self.count = hi

    def result(self) -> dict[str, np.ndarray]:
        """Per layer: exact all-pairs mean cosine, sampled-pairs mean cosine and its standard error,
        ‖x̄‖₂ (drift norm) and the average norm E‖x‖."""
        n = self.count
        if int(self.pairs.max()) >= n:
            raise ValueError("sampled positions beyond the streamed tokens")
        exact = np.array([(float(u.square().sum()) - n) / (n * (n - 1)) for u in self.unit_sum])
        mean_norm = np.array([float((v / n).norm()) for v in self.vec_sum])
        avg_norm = np.array(self.norm_sum) / n
        ia = torch.searchsorted(self.positions, self.pairs[:, 0].contiguous())
        ib = torch.searchsorted(self.positions, self.pairs[:, 1].contiguous())
        samp, se = [], []
        for kept in self.kept:
            c = torch.nn.functional.cosine_similarity(kept[ia], kept[ib], dim=-1)
            samp.append(float(c.mean()))
            se.append(float(c.std() / math.sqrt(c.numel())))
        return {"cos_exact": exact, "cos_sampled": np.array(samp), "cos_sampled_se": np.array(se),
                "mean_norm": mean_norm, "avg_norm": avg_norm, "tokens": n,
                "dims": np.array([u.numel() for u in self.unit_sum])}


def sample_pairs(n_total: int, n_pairs: int, seed: int) -> Tensor:
    """`n_pairs` pairs (i, j), i ≠ j, drawn uniformly from `n_total` positions: (n_pairs, 2)."""
    if n_total < 2:
        raise ValueError("need at least two tokens")
    g = torch.Generator().manual_seed(seed)
    i = torch.randint(0, n_total, (n_pairs,), generator=g)
    j = (i + torch.randint(1, n_total, (n_pairs,), generator=g)) % n_total   # uniform over j ≠ i
    return torch.stack([i, j], dim=1)


@torch.no_grad()
def text_anisotropy(model, tokenizer, text: str, max_tokens: int, chunk_len: int = 256, batch_size: int = 8,
                    n_pairs: int = 20_000, seed: int = 0, desc: str = "forward") -> dict[str, np.ndarray]:
    """Godey et al. §3: hidden representations of contiguous chunks of `text` (the first
    `max_tokens` tokens), special tokens excluded; per layer the average cosine similarity over
    uniformly drawn pairs of token positions from the whole corpus (and, exactly, over all pairs),
    and the drift norm ‖x̄‖₂."""
    ids = tokenizer(text[: max_tokens * 12], add_special_tokens=False, return_attention_mask=False,
                    verbose=False)["input_ids"][:max_tokens]
    if len(ids) < 2:
        raise ValueError("the text gave fewer than two tokens")
    chunks = [ids[i:i + chunk_len] for i in range(0, len(ids), chunk_len)]
    acc = LayerAccumulator(sample_pairs(len(ids), n_pairs, seed))
    model = _encoder_of(model)
    dev = next(model.parameters()).device
    batches = [chunks[i:i + batch_size] for i in range(0, len(chunks), batch_size)]
    for batch in progress(batches, desc=desc, total=len(batches)):
        pre, post = _specials(tokenizer)
        enc = [pre + c + post for c in batch]
        special = [[0] * len(pre) + [1] * len(c) + [0] * len(post) for c in batch]
        L = max(len(e) for e in enc)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([e + [pad] * (L - len(e)) for e in enc], device=dev)
        attn = torch.tensor([[1] * len(e) + [0] * (L - len(e)) for e in enc], device=dev)
        keep = torch.tensor([s + [0] * (L - len(s)) for s in special], dtype=torch.bool)   # real, non-special
        out = model(input_ids=input_ids, attention_mask=attn, output_hidden_states=True)
        acc.add([h.float().cpu()[keep] for h in out.hidden_states])
    return acc.result()


def _encoder_of(model):
    """Encoder-decoder models (T5, ByT5, Whisper) are measured on their encoder; the paper also
    reports decoders, which need target sequences (left to the `paper` preset's online run)."""
    return model.get_encoder() if getattr(model.config, "is_encoder_decoder", False) else model


@torch.no_grad()
def audio_anisotropy(model, feature_extractor, waveforms: list[np.ndarray], sampling_rate: int,
                     n_pairs: int = 20_000, seed: int = 0, desc: str = "forward") -> dict[str, np.ndarray]:
    """The same measurements on a speech model (wav2vec 2.0, HuBERT, Whisper's encoder): every frame
    of every utterance, one utterance at a time (Godey et al. §3.2, Common Voice)."""
    model = _encoder_of(model)
    dev = next(model.parameters()).device
    feats = []
    for w in progress(waveforms, desc=desc, total=len(waveforms)):
        inp = feature_extractor(w, sampling_rate=sampling_rate, return_tensors="pt").to(dev)
        out = model(**inp, output_hidden_states=True)
        feats.append([h[0].float().cpu() for h in out.hidden_states])
    acc = LayerAccumulator(sample_pairs(sum(f[0].shape[0] for f in feats), n_pairs, seed))
    for f in feats:
        acc.add(f)
    return acc.result()


def _specials(tokenizer) -> tuple[list[int], list[int]]:
    """Special tokens a model expects around a chunk: [CLS] … [SEP] for BERT-style encoders, BOS
    for decoders. They are fed to the model but excluded from the statistics."""
    cls, sep, bos = (getattr(tokenizer, a, None) for a in ("cls_token_id", "sep_token_id", "bos_token_id"))
    if cls is not None and sep is not None:
        return [cls], [sep]
    return ([bos] if bos is not None else []), []


@torch.no_grad()
def vision_anisotropy(model, processor, images: list, batch_size: int = 32, n_pairs: int = 20_000, seed: int = 0,
                      desc: str = "forward") -> dict[str, np.ndarray]:
    """The same measurements on a vision model: every patch token (and [CLS]) of every image for
    Transformers; for convolutional models (4-D hidden states) each feature map is flattened to one
    vector per image, as Godey et al. do for Figure 4."""
    dev = next(model.parameters()).device
    feats_all: list[list[Tensor]] = []
    for i in progress(range(0, len(images), batch_size), desc=desc, total=math.ceil(len(images) / batch_size)):
        px = processor(images=images[i:i + batch_size], return_tensors="pt")["pixel_values"].to(dev)
        out = model(pixel_values=px, output_hidden_states=True)
        hs = [h.flatten(1) if h.dim() == 4 else h.flatten(0, 1) for h in out.hidden_states]
        feats_all.append([h.float().cpu() for h in hs])
    total = sum(f[0].shape[0] for f in feats_all)
    acc = LayerAccumulator(sample_pairs(total, n_pairs, seed))
    for f in feats_all:
        acc.add(f)
    return acc.result()


def drift_correlation(cos: np.ndarray, mean_norm: np.ndarray) -> dict[str, float]:
    """Godey et al. §3.3 / App. A: Spearman and Pearson tests between ‖x̄‖₂ and the average cosine
    across layers (statistic and two-sided p-value)."""
    s = stats.spearmanr(mean_norm, cos)
    p = stats.pearsonr(mean_norm, cos)
    return {"spearman_r": float(s.statistic), "spearman_p": float(s.pvalue),
            "pearson_r": float(p.statistic), "pearson_p": float(p.pvalue)}


# ------------------------------------------------------------------ Appendix B: isotropic Gaussians


def isotropic_cosine_pdf(c: np.ndarray, d: int) -> np.ndarray:
    """Density of cos(x, y) for independent x, y ~ N(0, I_d): ∝ (1 − c²)^{(d−3)/2} on [−1, 1],
    i.e. (c + 1)/2 ~ Beta((d−1)/2, (d−1)/2)."""
    a = (d - 1) / 2
    return stats.beta.pdf((np.asarray(c) + 1) / 2, a, a) / 2


def isotropic_cosine_quantile(q: float, d: int) -> float:
    """The q-quantile of that cosine distribution (Godey et al. Fig. 18 uses q = 0.95); for large d
    it tends to z_q/√d (1.645/√d at q = 0.95)."""
    a = (d - 1) / 2
    return float(2 * stats.beta.ppf(q, a, a) - 1)


def sample_isotropic_cosines(d: int, n: int, seed: int) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randn(n, d, generator=g, dtype=torch.float64)
    return torch.nn.functional.cosine_similarity(x, y, dim=-1).numpy()


# ------------------------------------------------------------------ §4: drift in an untrained block


def bert_block(seed: int, hidden: int = 768, heads: int = 12, intermediate: int = 3072):
    """A BERT embedding table E (vocab × d) and one BERT layer T, both with BERT's default
    initialisation (normal, std 0.02; LayerNorm γ = 1, β = 0), eval mode, eager attention."""
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertEmbeddings, BertLayer

    torch.manual_seed(seed)
    cfg = BertConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=intermediate,
                     attn_implementation="eager")
    emb = BertEmbeddings(cfg)
    layer = BertLayer(cfg)
    for mod in (emb, layer):
        for m in mod.modules():   # BertPreTrainedModel._init_weights, applied by hand to bare modules
            if isinstance(m, torch.nn.Linear | torch.nn.Embedding):
                torch.nn.init.normal_(m.weight, 0.0, cfg.initializer_range)
                if getattr(m, "bias", None) is not None:
                    torch.nn.init.zeros_(m.bias)
            elif isinstance(m, torch.nn.LayerNorm):
                torch.nn.init.ones_(m.weight)
                torch.nn.init.zeros_(m.bias)
    return emb.word_embeddings.weight.detach(), layer.eval()


@torch.no_grad()
def block_with_qk(layer, x: Tensor) -> dict[str, Tensor]:
    """Run a BertLayer on x (B, L, d) and return the output, Q and K per head (B, h, L, d_k), the
    pre-softmax scores QKᵀ/√d_k (B, h, L, L) and the softmax P."""
    att = layer.attention.self
    h = att.num_attention_heads
    dk = att.attention_head_size
    B, L, _ = x.shape
    q = att.query(x).view(B, L, h, dk).transpose(1, 2)
    k = att.key(x).view(B, L, h, dk).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dk)
    out = layer(x)
    out = out[0] if isinstance(out, tuple) else out
    return {"out": out, "q": q, "k": k, "scores": scores, "P": torch.softmax(scores, dim=-1)}


def drift_bias(d: int, norm: float, seed: int) -> Tensor:
    """b = N · b_u/‖b_u‖ with b_u ~ N(0, I_d) (Godey et al. §4.1)."""
    g = torch.Generator().manual_seed(seed)
    bu = torch.randn(d, generator=g)
    return bu / bu.norm() * norm


@torch.no_grad()
def drift_sweep(E: Tensor, layer, norms: list[float], n_seq: int, seq_len: int, seed: int,
                hist_norms: tuple[float, ...] = (), hist_samples: int = 20_000,
                desc: str = "bias norms") -> dict[str, np.ndarray]:
    """Godey et al. §4: 16 sequences of length 512 drawn uniformly from E, a common bias of norm N
    added, one untrained BERT block applied; for every N the input/output average cosine (all
    pairs, exact) and average norm (Fig. 6), the cosine and norm of Q and K (Fig. 8), the max,
    median and min of each softmax row averaged over rows, heads and batch (Fig. 9), the maximum and
    minimum over whole sequences averaged over the batch (Fig. 10), and score samples for the
    histograms of Fig. 7 at `hist_norms`."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, E.shape[0], (n_seq, seq_len), generator=g)
    x = E[ids]                                                    # (B, L, d)
    keys = ("in_cos", "out_cos", "in_norm", "out_norm", "q_cos", "k_cos", "q_norm", "k_norm",
            "row_max", "row_median", "row_min", "seq_max", "seq_min", "score_mean", "score_std")
    out = {k: np.zeros(len(norms)) for k in keys}
    hists = {}
    for i, N in enumerate(progress(norms, desc=desc, total=len(norms))):
        xb = x + drift_bias(x.shape[-1], N, seed + 1)
        r = block_with_qk(layer, xb)
        flat_in, flat_out = xb.reshape(-1, xb.shape[-1]), r["out"].reshape(-1, xb.shape[-1])
        q = r["q"].transpose(1, 2).flatten(0, 1).flatten(1)          # (B·L, d): heads concatenated
        k = r["k"].transpose(1, 2).flatten(0, 1).flatten(1)
        P = r["P"]
        vals = dict(
            in_cos=M.pairwise_cosine_mean(flat_in), out_cos=M.pairwise_cosine_mean(flat_out),
            in_norm=flat_in.norm(dim=-1).mean(), out_norm=flat_out.norm(dim=-1).mean(),
            q_cos=M.pairwise_cosine_mean(q), k_cos=M.pairwise_cosine_mean(k),
            q_norm=q.norm(dim=-1).mean(), k_norm=k.norm(dim=-1).mean(),
            row_max=P.amax(-1).mean(), row_median=P.median(-1).values.mean(), row_min=P.amin(-1).mean(),
            seq_max=P.flatten(1).amax(-1).mean(), seq_min=P.flatten(1).amin(-1).mean(),
            score_mean=r["scores"].mean(), score_std=r["scores"].std(),
        )
        for kname, v in vals.items():
            out[kname][i] = float(v)
        if any(math.isclose(N, hn, rel_tol=1e-9, abs_tol=1e-12) for hn in hist_norms):
            s = r["scores"].flatten()
            idx = torch.randint(0, s.numel(), (hist_samples,), generator=g)
            hists[N] = s[idx].numpy()
    out["norms"] = np.asarray(norms, dtype=float)
    out["hists"] = hists
    return out


def find_fixed_point(norms: np.ndarray, gap: np.ndarray, refine=None) -> float | None:
    """N* where gap(N) = E‖T(x + b_N)‖ − E‖x + b_N‖ changes sign (Godey et al. §4.2): the first
    sign change on the grid, interpolated linearly in N, then refined by Brent's method on `refine`
    (a callable N -> gap) when given. None if the gap never changes sign."""
    norms, gap = np.asarray(norms, float), np.asarray(gap, float)
    sign = np.sign(gap)
    idx = np.nonzero(sign[:-1] * sign[1:] < 0)[0]
    if idx.size == 0:
        return None
    i = int(idx[0])
    a, b = norms[i], norms[i + 1]
    if refine is not None:
        return float(optimize.brentq(refine, a, b, xtol=1e-6 * b, rtol=1e-8))
    t = gap[i] / (gap[i] - gap[i + 1])
    return float(a + t * (b - a))
