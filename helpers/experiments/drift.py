"""The drift chapter (Godey et al. §4): an untrained BERT block fed inputs sharing a common bias of
growing norm N, over several seeds — rows of the embedding table as the paper describes, and (a
variant) the output of BERT's whole embedding layer; the norm fixed point N*; what of the score
spread the softmax sees; and, beside it, the hidden-state norms and average cosines of a real
pretrained model. At `book` scale the sweeps go through the committed-results cache
(`results/drift/book/`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from ..book import results
from ..book.params import ChapterParams, ParameterError, check_heads, positive, rules
from ..book.runtime import choose_device, progress, run_seeds, seed_everything, stream_seed
from ..core.anisotropy import BLOCK_STATS, block_statistics, drift_bias, find_fixed_point
from ..core.drift import DRIFT_STATS, drift_statistics
from ..core.findings import Finding, Partial, Spec
from ..core.measures import pairwise_cosine_mean
from ..core.scale import Distance, model_distance
from ..core.stats import Interval, t_interval
from ..data import load_glue
from ..hf import models
from ..hf.drift import bert_embeddings_and_block, block_with_qk, embed

#: what a sweep records per bias norm
STATS = BLOCK_STATS + DRIFT_STATS
#: the inputs: rows of the embedding table E (the paper's description), or the output of BERT's whole
#: embedding layer, LN(word + position + token type) — which the paper's "initialized as in BERT" may mean
VARIANTS = ("table", "embedding-layer")
#: the trained model whose hidden-state norms the paper compares N* with (§4.2)
PAPER_REFERENCE = "bert-base-uncased"


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §4: an untrained BERT block fed drifted inputs (Figures 6-10)."""

    n_seq: int = 16
    seq_len: int = 512
    norm_min: float = 0.1
    norm_max: float = 3000.0
    n_norms: int = 19
    hist_norms: tuple[float, ...] = (0.0, 10.0, 100.0, 1000.0)
    hist_samples: int = 20_000
    seeds: int = 3
    d_model: int = 768
    n_heads: int = 12
    d_ff: int = 3072
    reference_model: str = "all-MiniLM-L6-v2"
    reference_sentences: int = 256
    variants: tuple[str, ...] = VARIANTS
    variant_seeds: int = 1        # seeds of the variants other than "table" (the first ones of `seeds`)
    #: attention counts as uniform while the mean row maximum is below this many times 1/L
    uniform_tol: float = 1.05

    CHAPTER: ClassVar[str] = "drift"
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(n_seq=4, seq_len=128, n_norms=8, seeds=2, reference_sentences=32),
        "book": dict(),
        "paper": dict(seeds=5, n_norms=31, reference_model=PAPER_REFERENCE, reference_sentences=1024),
    }
    RULES: ClassVar = rules(
        n_seq=positive, seq_len=(lambda v: 2 <= v <= 512, "must lie in [2, 512] (BERT positions)"),
        norm_min=positive, norm_max=positive, n_norms=(lambda v: v >= 3, "needs >= 3 bias norms"),
        hist_norms=(lambda v: all(x >= 0 for x in v), "bias norms must be >= 0"),
        hist_samples=(lambda v: v >= 100, "needs >= 100 score samples"),
        seeds=positive, d_model=positive, n_heads=positive, d_ff=positive,
        reference_sentences=(lambda v: v >= 2, "needs >= 2 sentences"),
        variants=(lambda v: len(v) > 0 and v[0] == "table" and all(x in VARIANTS for x in v),
                  f"variants must start with 'table' and come from {VARIANTS}"),
        uniform_tol=(lambda v: v > 1, "must exceed 1"), variant_seeds=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.norm_max <= self.norm_min:
            raise ParameterError(f"parameter 'norm_max' = {self.norm_max} must exceed norm_min = {self.norm_min}")
        check_heads(self)

    def grid(self) -> list[float]:
        """The bias norms swept: `n_norms` log-spaced from norm_min to norm_max, plus `hist_norms`."""
        logs = np.geomspace(self.norm_min, self.norm_max, self.n_norms).round(6).tolist()
        return sorted(set(logs) | set(self.hist_norms))


@dataclass
class Result(results.Result):
    """Everything the drift chapter shows. `stats[name]` is (seeds, norms) for every name of `STATS`
    (inputs: rows of E); `variant_stats[variant][name]` the same for the other input variants (their
    first `variant_seeds` seeds);
    `hists[s][j]` the histogram (bin edges, densities) of the pre-softmax scores of seed s at
    `hist_norms[j]`."""

    norms: list[float]
    seeds: list[int]
    stats: dict[str, list[list[float]]]
    hist_norms: list[float]
    hists: list[list[dict[str, list[float]]]]
    fixed_point_per_seed: list[float | None]
    fixed_point_refined: float | None
    n_seq: int
    seq_len: int
    hidden: int
    norm_min: float
    reference: dict[str, Any] = field(default_factory=dict)
    variant_stats: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    uniform_tol: float = 1.05

    def stat(self, name: str, variant: str = "table") -> np.ndarray:
        """One statistic as a (seeds, norms) array, for the inputs of `variant`."""
        src = self.stats if variant == "table" else self.variant_stats[variant]
        return np.asarray(src[name], dtype=float)

    def last_uniform(self, variant: str = "table") -> int:
        """Index of the largest bias norm up to which the mean row maximum (over seeds) stays below
        `uniform_tol`/L at every norm: the attention is uniform there."""
        ok = self.stat("row_max", variant).mean(0) < self.uniform_tol / self.seq_len
        return int(np.argmin(ok)) - 1 if not ok.all() else len(ok) - 1

    # ------------------------------------------------------------------ what the chapter reads off the sweeps

    def seeds_of(self, variant: str = "table") -> int:
        """How many seeds the inputs of `variant` were run on."""
        return len(self.stat("row_max", variant))

    def variants(self) -> list[str]:
        return ["table", *self.variant_stats]

    def onset(self, variant: str = "table") -> int | None:
        """Index of the first bias norm where the mean row maximum (over seeds) is twice its value
        without bias; None when it never doubles."""
        rm = self.stat("row_max", variant).mean(0)
        idx = np.nonzero(rm > 2 * rm[0])[0]
        return int(idx[0]) if idx.size else None

    def index_of(self, norm: float) -> int:
        """Index of the swept bias norm closest to `norm`."""
        return int(np.argmin(np.abs(np.asarray(self.norms) - norm)))

    def softmax_rows(self) -> list[dict[str, float]]:
        """Per input variant, where the attention leaves uniform: the largest bias norm up to which it
        is uniform (mean row maximum below `uniform_tol`/L) with the input cosine there, the bias norm
        where the row maximum first doubles with the input cosine and 1 − cosine there, and the row
        maximum × L and normalised entropy without bias and at the largest bias (means over seeds)."""
        nan = float("nan")
        rows = []
        for v in self.variants():
            cos, u, o = self.stat("in_cos", v).mean(0), self.last_uniform(v), self.onset(v)
            rm, ent = self.stat("row_max", v).mean(0) * self.seq_len, self.stat("entropy_norm", v).mean(0)
            rows.append({"variant": v, "seeds": self.seeds_of(v),
                         "in_norm_0": float(self.stat("in_norm", v)[:, 0].mean()),
                         "uniform_n": self.norms[u] if u >= 0 else nan, "uniform_cos": float(cos[u]) if u >= 0 else nan,
                         "onset_n": self.norms[o] if o is not None else nan,
                         "onset_cos": float(cos[o]) if o is not None else nan,
                         "onset_1mcos": float(1 - cos[o]) if o is not None else nan,
                         "row_max_l_0": float(rm[0]), "entropy_0": float(ent[0]),
                         "row_max_l_last": float(rm[-1]), "entropy_last": float(ent[-1])})
        return rows

    def fixed_point_range(self) -> tuple[float, float]:
        """The smallest and largest N* over seeds (interpolated on the grid); NaN when none crossed."""
        per_seed = [v for v in self.fixed_point_per_seed if v is not None]
        return (min(per_seed), max(per_seed)) if per_seed else (float("nan"), float("nan"))

    #: below this distance of the input's average cosine from 1, float32 cannot resolve the output's
    #: cosine from the input's (the differences there are rounding, ±6e-8)
    RESOLVABLE: ClassVar[float] = 1e-4

    def cosine_gain(self) -> Interval:
        """Output − input average cosine at the bias norm where it is smallest, among the norms where
        1 − input cosine exceeds `RESOLVABLE`: per seed, then a t-interval over seeds."""
        gap = self.stat("out_cos") - self.stat("in_cos")
        ok = (1 - self.stat("in_cos").mean(0)) > self.RESOLVABLE
        return t_interval(gap[:, ok].min(1))

    def fixed_point_ratio(self) -> Interval:
        """log10 of N* over the reference model's mean hidden-state norm: the estimate from the refined
        N* and the mean over layers; the range from the smallest per-seed N* over the largest layer norm
        to the largest N* over the smallest norm."""
        norms = np.asarray(self.reference["layer_norms"], float)
        lo, hi = self.fixed_point_range()
        est = self.fixed_point_refined if self.fixed_point_refined is not None else float("nan")
        return Interval(np.log10(est / norms.mean()), np.log10(lo / norms.max()), np.log10(hi / norms.min()),
                        len(norms), "range")

    def score_growth(self) -> Interval:
        """log10 of the pooled score sd at the largest histogram bias norm over its value without bias:
        per seed, t-interval over seeds."""
        sd = self.stat("score_std")
        return t_interval(np.log10(sd[:, self.index_of(max(self.hist_norms))] / sd[:, 0]))

    def entropy_drop(self) -> Interval:
        """Normalised attention entropy at the largest bias norm minus without bias: per seed, t over seeds."""
        e = self.stat("entropy_norm")
        return t_interval(e[:, -1] - e[:, 0])

    def qk_norm_growth(self) -> Interval:
        """log10 of the mean query norm at the largest bias norm over its value without bias (Fig. 8b): per seed,
        t-interval over seeds."""
        qn = self.stat("q_norm")
        return t_interval(np.log10(qn[:, -1] / qn[:, 0]))

    def qk_cos_at_zero(self) -> Interval:
        """Average cosine of the queries at N = 0 (inputs: rows of E), t over seeds."""
        return t_interval(self.stat("q_cos")[:, 0])

    def reference_level(self) -> int:
        """Index of the largest bias norm whose input average cosine (mean over seeds) does not exceed
        the reference model's most anisotropic layer: the drift at real anisotropy levels."""
        cos = self.stat("in_cos").mean(0)
        return int(np.nonzero(cos <= max(self.reference["layer_cos"]))[0].max())

    def sharpening_at_reference(self) -> Interval:
        """Row maximum × L − 1 (0 = uniform attention) at `reference_level`: per seed, t over seeds."""
        return t_interval(self.stat("row_max")[:, self.reference_level()] * self.seq_len - 1)

    def findings(self) -> list[Finding]:
        """The paper's §4 claims (Figs. 6-10) against the sweeps, with the inputs the paper describes (rows
        of E): `FINDINGS`."""
        return [f for spec in FINDINGS for f in spec.findings(self, paper="godey2024", chapter="drift", scale=_scale)]


# --- the findings, as a table (`core.findings.Spec`): what each row reads of the Result -------------------
def _dims(res: Result) -> str:
    return f"{res.n_seq} sequences of {res.seq_len} tokens"


def _what(res: Result) -> str:
    return f"an untrained BERT block ({res.hidden} wide), {_dims(res)} drawn from E, {len(res.seeds)} seeds"


def _scale(res: Result) -> str:
    return f"the paper's set-up ({_dims(res)}, one BERT block), {len(res.seeds)} seeds (the paper: one)"


def _against(res: Result) -> str:
    """The block, its inputs and the bias sweep are the paper's; a trained model's norms and cosines (N*'s order,
    the low-anisotropy level) come from the reference model, which the paper takes as BERT-base."""
    model = res.reference["model"]
    return "" if model == PAPER_REFERENCE else f"against {model} in place of BERT-base"


def _against_distance(res: Result) -> tuple[Distance, ...]:
    """How far the reference model is from BERT-base (`_against`): parameters, layers, width (`hf.models.SIZE`)."""
    model = res.reference["model"]
    return () if model == PAPER_REFERENCE else model_distance(models.SIZE.get(model), models.SIZE[PAPER_REFERENCE])


def _on_norms(res: Result) -> str:
    return f"{_what(res)}; {len(res.norms)} bias norms from 0 to {max(res.norms):g}"


FINDINGS = (
    Spec(key="drift-output-cosine", where="§4.2, Fig. 6", claim_id="godey-fig6-output-cosine",
         section="drift-input-output",
         claim="The block's output has an average cosine slightly higher than its input's, whatever the bias norm.",
         measured=_on_norms,
         quantity=lambda res: ("output − input average cosine at the bias norm where it is smallest "
                               f"(norms with 1 − input cosine > {res.RESOLVABLE:g})"),
         read=lambda res: Partial(res.cosine_gain()), direction="above",
         more=dict(size_word="slightly", label="rows of E", digits=6)),
    Spec(key="drift-fixed-point", where="§4.2, Fig. 6", claim_id="godey-fig6-fixed-point",
         section="drift-input-output",
         claim="There is a bias norm N* where the block's output norm equals its input norm, of the order of the "
               "hidden-state norms of the trained model.",
         measured=lambda res: (f"{_what(res)}; N* against {res.reference['model']}'s layer norms on "
                               f"{res.reference['sentences']} MRPC sentences"),
         quantity="log10(N* / mean hidden-state norm of the reference model), range over seeds and layers",
         read=lambda res: Partial(res.fixed_point_ratio()), direction="equal", margin=1.0,
         reference_label="0 (equal norms; the margin is one order of magnitude)",
         more=dict(reduced=_against, distance=_against_distance, digits=2, unit="seeds and layers",
                   caveat=lambda res: ("N* is √d by the LayerNorm's construction, the same on every seed; what could "
                                       "fail is only its comparison with the trained model's hidden-state norms, and "
                                       "the spread shown is a range over seeds and layers"))),
    Spec(key="drift-score-spread", where="§4.3, Fig. 7", claim_id="godey-fig7-scores", section="drift-scores",
         claim="The pre-softmax attention scores move away from zero as the input bias norm grows.",
         measured=lambda res: f"{_what(res)}; pooled scores QKᵀ/√d_k",
         quantity=lambda res: f"log10 of the score sd at N = {max(res.hist_norms):g} over N = 0",
         read=lambda res: Partial(res.score_growth()), direction="above", more=dict(digits=2)),
    Spec(key="drift-qk-norm", where="§4.3, Fig. 8b", claim_id="godey-fig8-qk-norm", section="drift-queries-keys",
         claim="Query and key representations increase in norm with the input bias norm.",
         measured=_on_norms,
         quantity=lambda res: f"log10 of the mean query norm at N = {max(res.norms):g} over N = 0",
         read=lambda res: Partial(res.qk_norm_growth()), direction="above", more=dict(digits=2)),
    Spec(key="drift-qk-without-bias", where="§4.3, Fig. 8", claim_id="godey-fig8-qk-anisotropic",
         section="drift-queries-keys",
         claim="The queries and keys are anisotropic even when no bias is added.",
         measured=lambda res: f"{_what(res)}; N = 0",
         quantity="average cosine of the queries at N = 0",
         read=lambda res: Partial(res.qk_cos_at_zero()), direction="above", more=dict(digits=5)),
    Spec(key="drift-sharper-softmax", where="§4.4, Figs. 9-10", claim_id="godey-fig9-sharper",
         section="drift-softmax",
         claim="As the input bias norm grows, the self-attention softmax becomes less entropic.",
         measured=lambda res: f"{_what(res)}; normalised row entropy",
         quantity=lambda res: f"entropy / log L at N = {max(res.norms):g} minus at N = 0",
         read=lambda res: Partial(res.entropy_drop()), direction="below", more=dict(digits=3)),
    Spec(key="drift-low-anisotropy", where="§4.4", claim_id="godey-s44-low-anisotropy", section="drift-sharpness",
         claim="At low anisotropy levels the sharpening is not very important.",
         measured=lambda res: (f"{_what(res)}; at N = {res.norms[res.reference_level()]:.3g}, the largest bias "
                               f"whose input cosine stays at or below {res.reference['model']}'s most anisotropic "
                               "layer"),
         quantity="mean row maximum × L − 1 (0 = uniform attention)",
         read=lambda res: Partial(res.sharpening_at_reference()), direction="equal",
         margin=lambda res: res.uniform_tol - 1, reference_label="0 (uniform attention)",
         more=dict(reduced=_against, distance=_against_distance, digits=5)),
)


@torch.no_grad()
def drift_sweep(E: torch.Tensor, layer, norms: list[float], n_seq: int, seq_len: int, seed: int,
                hist_norms: tuple[float, ...] = (), hist_samples: int = 20_000, hist_bins: int = 80,
                desc: str = "bias norms", emb=None) -> dict[str, Any]:
    """Godey et al. §4: `n_seq` sequences of length `seq_len` drawn uniformly from E, a common bias
    of norm N added (direction b_u from `seed`), one block applied; for every N the statistics of
    `core.anisotropy.block_statistics` and `core.drift.drift_statistics`, and at `hist_norms` a
    histogram of `hist_samples` pre-softmax scores (Figure 7). With `emb` (BERT's embedding layer)
    the same token ids go through it — LN(word + position + token type) — instead of being looked
    up in E. Returns {stat: array over norms, "hists": [(edges, density) per hist norm]}."""
    g = torch.Generator().manual_seed(stream_seed(seed, "tokens"))
    ids = torch.randint(0, E.shape[0], (n_seq, seq_len), generator=g)
    x = E[ids.to(E.device)] if emb is None else embed(emb, ids.to(E.device))   # (B, L, d)
    bias_dir = drift_bias(x.shape[-1], 1.0, stream_seed(seed, "bias")).to(x.device)
    gh = torch.Generator().manual_seed(stream_seed(seed, "scores"))
    out: dict[str, Any] = {k: np.zeros(len(norms)) for k in STATS}
    hists = {}
    for i, N in enumerate(progress(norms, desc=desc, total=len(norms))):
        xb = x + N * bias_dir
        r = block_with_qk(layer, xb)
        vals = block_statistics(xb, r["out"], r["q"], r["k"], r["scores"]) | drift_statistics(r["scores"], r["P"])
        for name, v in vals.items():
            out[name][i] = v
        for hn in hist_norms:
            if math.isclose(N, hn, rel_tol=1e-9, abs_tol=1e-12):
                s = r["scores"].flatten().cpu()
                sample = s[torch.randint(0, s.numel(), (hist_samples,), generator=gh)].numpy()
                density, edges = np.histogram(sample, bins=hist_bins, density=True)
                hists[hn] = {"edges": edges.tolist(), "density": density.tolist()}
    out["hists"] = [hists[hn] for hn in hist_norms]
    return out


def reference_norms(p: Params, device: torch.device) -> dict[str, Any]:
    """Mean hidden-state norm and average cosine of real tokens per layer of the reference model on
    MRPC sentences."""
    ref = models.load(p.reference_model, device=device)
    texts = load_glue("MRPC", "validation").texts()[: p.reference_sentences]
    layers, mask = models.hidden_states(ref, texts, 128, 32, desc=p.reference_model)
    return {"model": p.reference_model, "description": ref.description, "sentences": len(texts),
            "layer_norms": [float(h[mask].norm(dim=-1).mean()) for h in layers],
            "layer_cos": [float(pairwise_cosine_mean(h[mask].double())) for h in layers],
            "d": int(layers[0].shape[-1])}


def _sweeps(p: Params, variant: str, device: torch.device) -> list[dict[str, Any]]:
    """The sweep over bias norms of every seed, for one input variant (JSON-able)."""
    out = []
    for s in run_seeds(p.seed, p.seeds if variant == "table" else min(p.seeds, p.variant_seeds)):
        emb, layer = bert_embeddings_and_block(s, p.d_model, p.n_heads, p.d_ff)
        emb, layer = emb.to(device), layer.to(device)
        sw = drift_sweep(emb.word_embeddings.weight.detach(), layer, p.grid(), p.n_seq, p.seq_len, s, p.hist_norms,
                         p.hist_samples, desc=f"{variant}, seed {s}", emb=emb if variant == "embedding-layer" else None)
        out.append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in sw.items()})
    return out


def run(p: Params) -> Result:
    """The sweep over bias norms for every seed and input variant (each seed draws a new layer,
    table, token sample and bias direction), the fixed point per seed (interpolated) and for the
    first seed (refined by Brent's method on exact evaluations), and the reference model's layer
    norms and cosines. At `book` scale each piece is read back from `results/drift/book/` when its
    parameters match."""
    seed_everything(p.seed)
    device = choose_device(p.device)
    grid = p.grid()
    seeds = run_seeds(p.seed, p.seeds)
    by_variant = {v: results.cached(p, f"sweeps-{v}", lambda v=v: _sweeps(p, v, device))[0] for v in p.variants}
    sweeps = by_variant["table"]
    gaps = [np.asarray(sw["out_norm"]) - np.asarray(sw["in_norm"]) for sw in sweeps]

    def refined() -> float | None:
        E, layer = bert_embeddings_and_block(seeds[0], p.d_model, p.n_heads, p.d_ff)
        E, layer = E.word_embeddings.weight.detach().to(device), layer.to(device)

        def gap(n: float) -> float:   # E‖T(x + b)‖ − E‖x + b‖ of the first seed, evaluated exactly at n
            sw = drift_sweep(E, layer, [float(n)], p.n_seq, p.seq_len, seeds[0], desc="refine")
            return float(sw["out_norm"][0] - sw["in_norm"][0])
        return find_fixed_point(grid, gaps[0], refine=gap)

    n_star, _ = results.cached(p, "fixed-point", lambda: {"refined": refined()})
    reference, _ = results.cached(p, "reference", lambda: reference_norms(p, device))
    stat_table = lambda sws: {k: [list(map(float, sw[k])) for sw in sws] for k in STATS}  # noqa: E731
    return Result(
        norms=grid, seeds=seeds, stats=stat_table(sweeps), hist_norms=list(p.hist_norms),
        hists=[sw["hists"] for sw in sweeps],
        fixed_point_per_seed=[find_fixed_point(grid, g) for g in gaps],
        fixed_point_refined=n_star["refined"],
        n_seq=p.n_seq, seq_len=p.seq_len, hidden=p.d_model, norm_min=p.norm_min, reference=reference,
        variant_stats={v: stat_table(sws) for v, sws in by_variant.items() if v != "table"},
        uniform_tol=p.uniform_tol,
    )
