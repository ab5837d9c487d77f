"""The anisotropy chapter's `Result`: every number its figures, tables and prose need, with the statistics
read from them, and the paper's drift test across layers (`drift_layer_test`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...book import results
from ...core import anisotropy as A
from ...core.findings import Finding
from ...core.stats import Interval, jackknife_interval, rank_correlation_interval, spearman_exact_p
from .findings import findings
from .params import ALPHA, CHARACTER_LEVEL, IDENTITY_TOL, NO_TWIN


@dataclass
class Result(results.Result):
    """Everything the anisotropy chapter shows. `models`: one entry per measured model (pretrained
    and untrained twin), with its label, modality, name, `trained`, description, `data` (what it was
    measured on), and per layer (embeddings first) `cos_exact`, `cos_sampled`, `cos_sampled_se`,
    `cos_centred` (mean removed, Biś et al. 2021) and its `cos_centred_se`, `mean_norm` (‖x̄‖₂),
    `avg_norm` (E‖x‖), `drift_ratio` (‖x̄‖₂ / E‖x‖), `dims`; `tokens` (vectors measured),
    `correlation` (Spearman and Pearson tests between ‖x̄‖₂ and the average cosine, Godey et al.
    Fig. 5 and 16) and `normalised` (the same tests with the normalised drift, and how closely
    avg cos ≈ (‖x̄‖₂ / E‖x‖)² holds). A CNN entry also holds `map_cos_exact`, the cosine of whole
    flattened maps. `gaussian`: per dimension d, the Monte Carlo mean and 95th percentile of the
    cosine of isotropic Gaussians, the exact percentile, 1.645/√d, and a histogram. `byte_mlm`: the
    byte-level MLM's training record (held-out loss per step, unigram baseline), when measured.
    `skipped`: models left out because their data is neither in the mirror nor on the hub (model, reason)."""

    models: list[dict[str, Any]]
    gaussian: list[dict[str, Any]]
    byte_mlm: dict[str, Any] | None = None
    skipped: list[dict[str, str]] = field(default_factory=list)
    n_pairs: int = 20_000
    #: two planted clouds (`core.anisotropy.cloud_shape`): clusters + drift, and isotropic + drift
    planted: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the untrained twins with the token-type embedding zeroed (`measure_zeroed`), records like `models`'
    zeroed: list[dict[str, Any]] = field(default_factory=list)
    #: the centred cloud's spectrum per layer on a subsample (`measure_shapes`): `SHAPE_KEYS` per model and twin
    shapes: list[dict[str, Any]] = field(default_factory=list)
    #: share of each data budget the spectrum runs use
    shape_share: float = 1.0
    #: SmolLM2's last point before and after its final RMSNorm (`hf.anisotropy.final_norm_cosines`), when measured
    final_norm: dict[str, Any] | None = None
    #: the CNN's flattened maps with a bootstrap over images (`cnn_map_bootstrap`), when a CNN is measured
    cnn_boot: dict[str, Any] | None = None
    #: the paper's speech model (Whisper base) with a bootstrap over recordings (`speech_drift_bootstrap`)
    speech_boot: dict[str, Any] | None = None
    #: the mean-removed average cosine of `CENTRED_MODELS` with a jackknife over their inputs (`centred_jackknife`)
    centred_jack: list[dict[str, Any]] = field(default_factory=list)

    # ------------------------------------------------------------------ lookups

    def model(self, name: str, trained: bool = True) -> dict[str, Any]:
        """The entry of model `name` (pretrained, or its untrained twin)."""
        return next(m for m in self.models if m["name"] == name and m["trained"] == trained)

    def get(self, name: str, trained: bool = True) -> dict[str, Any] | None:
        """The entry of model `name`, or None when this run did not measure it."""
        return next((m for m in self.models if m["name"] == name and m["trained"] == trained), None)

    def pretrained(self) -> list[dict[str, Any]]:
        return [m for m in self.models if m["trained"]]

    def transformers(self) -> list[dict[str, Any]]:
        """The pretrained Transformers (every pretrained model but the CNNs)."""
        return [m for m in self.pretrained() if m["name"] not in NO_TWIN]

    def twin(self, m: dict[str, Any]) -> dict[str, Any] | None:
        return self.get(m["name"], trained=False)

    # ------------------------------------------------------------------ the null of an average (Appendix B)

    def null_q95(self, d: int) -> float:
        """The 95th percentile of the average cosine of `n_pairs` independent isotropic pairs at width d."""
        return A.isotropic_mean_cosine_quantile(0.95, int(d), self.n_pairs)

    def above_isotropic(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers whose average cosine exceeds `null_q95` of their width, layers)."""
        return {m["label"]: (sum(c > self.null_q95(d) for c, d in zip(m["cos_exact"], m["dims"], strict=True)),
                             len(m["cos_exact"])) for m in self.models}

    def above_single_pair(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers above the 95th percentile of a *single* pair's isotropic cosine — the paper's
        Fig. 18 line —, layers)."""
        return {m["label"]: (sum(c > A.isotropic_cosine_quantile(0.95, int(d))
                                 for c, d in zip(m["cos_exact"], m["dims"], strict=True)), len(m["cos_exact"]))
                for m in self.models}

    def sampling_z(self) -> np.ndarray:
        """|sampled − exact| / standard error over every layer of every model."""
        return np.concatenate([np.abs(np.subtract(m["cos_sampled"], m["cos_exact"]))
                               / np.clip(m["cos_sampled_se"], 1e-12, None) for m in self.models])

    # ------------------------------------------------------------------ the shape of the centred cloud

    def effective_dims(self, m: dict[str, Any]) -> np.ndarray:
        """Per layer, the effective dimension 1/E[cos²] of the centred cloud (`core.measures.
        cosine_effective_dim`), from the mean and standard error of the mean-removed cosines of the
        layer's `n_pairs` sampled pairs: E[cos²] = mean² + sd², sd = se·√n_pairs."""
        mean, se = np.asarray(m["cos_centred"], float), np.asarray(m["cos_centred_se"], float)
        return 1.0 / (mean**2 + se**2 * self.n_pairs)

    def isotropic_effective_dim(self, d: int) -> Interval:
        """What the same estimate gives for an isotropic Gaussian cloud of width d (E[cos²] = 1/d, and
        cos² has variance ≈ 2/d² per pair): d with its 95 % sampling band over `n_pairs` pairs."""
        half = 1.96 * np.sqrt(2.0 / self.n_pairs)
        return Interval(d, d / (1 + half), d / (1 - half), self.n_pairs, "normal")

    def centred_rows(self) -> list[dict[str, Any]]:
        """Per pretrained model (and its twin): width d, the effective dimension of the centred cloud
        over layers (smallest, largest) and as a share of d, the isotropic Gaussian's band at that d,
        and the largest |mean-removed average cosine|."""
        rows = []
        for m in self.pretrained():
            eff, t = self.effective_dims(m), self.twin(m)
            d = np.asarray(m["dims"], float)
            iso = self.isotropic_effective_dim(int(d[-1]))
            row = {"model": m["name"], "d": int(d[-1]), "eff_min": float(eff.min()), "eff_max": float(eff.max()),
                   "share_max": float((eff / d).max()), "iso_low": iso.low, "iso_high": iso.high,
                   "centred_max": float(np.abs(m["cos_centred"]).max())}
            if t is not None:
                te = self.effective_dims(t)
                row |= {"twin_min": float(te.min()), "twin_max": float(te.max())}
            rows.append(row)
        return rows

    def centred_share(self) -> Interval:
        """Effective dimension of the centred cloud over d, over every layer of every pretrained
        Transformer: median, with the range (smallest, largest) as its interval."""
        v = np.concatenate([self.effective_dims(m) / np.asarray(m["dims"], float) for m in self.transformers()])
        return Interval(float(np.median(v)), float(v.min()), float(v.max()), int(v.size), "range")

    # ------------------------------------------------------------------ the centred cloud's spectrum

    def shape(self, name: str, trained: bool = True) -> dict[str, Any] | None:
        """The spectrum record of model `name` (or its twin), None when not measured."""
        return next((s_ for s_ in self.shapes if s_["name"] == name and s_["trained"] == trained), None)

    @staticmethod
    def makeup(s_: dict[str, Any]) -> list[str]:
        """Per layer, what the anisotropy is made of (`core.anisotropy.anisotropy_makeup`)."""
        return [A.anisotropy_makeup(a, b, c) for a, b, c in zip(s_["pr"], s_["pr_iso"], s_["mean_split_cos"],
                                                                 strict=True)]

    @staticmethod
    def pr_share(s_: dict[str, Any]) -> np.ndarray:
        """Per layer, the centred cloud's participation ratio over an isotropic Gaussian's of the same n and d."""
        return np.asarray(s_["pr"], float) / np.asarray(s_["pr_iso"], float)

    def shape_rows(self) -> list[dict[str, Any]]:
        """Per model with a spectrum run: width d, tokens, the participation ratio of the centred cloud
        over layers (smallest, largest) against the isotropic Gaussian's and the twin's, the largest top-3
        variance share, the smallest split-half cosine of the mean (model and twin), the smallest ‖x̄‖² over
        the top centred eigenvalue, the RMS cosine after removing the mean and the top 10 directions over
        1/√d (largest), and how many layers fall in each `MAKEUP` class."""
        rows = []
        for name in dict.fromkeys(s_["name"] for s_ in self.shapes):
            m, t = self.shape(name), self.shape(name, False)
            ref = m or t
            d = int(ref["dims"][-1])
            row: dict[str, Any] = {"model": name, "d": d, "tokens": int(ref["tokens"]),
                                   "pr_iso": float(np.median(ref["pr_iso"]))}
            nan = float("nan")
            for tag, r in (("", m), ("twin_", t)):
                pr = np.asarray(r["pr"], float) if r else np.array([nan])
                row |= {f"{tag}pr_min": float(pr.min()), f"{tag}pr_max": float(pr.max())}
            if m:
                kinds = self.makeup(m)
                row |= {"top3_max": float(np.max(m["top3"])), "split_min": float(np.min(m["mean_split_cos"])),
                        "drift_over_top_min": float(np.min(m["drift_over_top"])),
                        "rms10_ratio": float(np.max(np.asarray(m["rms_cos_k10"]) * np.sqrt(np.asarray(m["dims"])))),
                        "layers": len(kinds)} | {k: kinds.count(k) for k in A.MAKEUP}
            if t:
                row["twin_split_min"] = float(np.min(t["mean_split_cos"]))
            rows.append(row)
        return rows

    def makeup_counts(self) -> dict[str, int]:
        """Layers of the pretrained Transformers' spectrum runs in each `MAKEUP` class."""
        kinds = [k for s_ in self.shapes if s_["trained"] for k in self.makeup(s_)]
        return {k: kinds.count(k) for k in A.MAKEUP} | {"layers": len(kinds)}

    def pr_share_interval(self) -> Interval | None:
        """The centred cloud's participation ratio over an isotropic Gaussian's, over every layer of every
        pretrained Transformer's spectrum run: median, with the range as its interval (None without runs)."""
        v = [x for s_ in self.shapes if s_["trained"] for x in self.pr_share(s_)]
        if not v:
            return None
        return Interval(float(np.median(v)), float(np.min(v)), float(np.max(v)), len(v), "range")

    # ------------------------------------------------------------------ the token-type-zeroed twins

    def zeroed_twin(self, name: str) -> dict[str, Any] | None:
        return next((z for z in self.zeroed if z["name"] == name), None)

    def zeroed_rows(self) -> list[dict[str, Any]]:
        """Per model with a token-type-zeroed twin: the average cosine at the embeddings of the twin and of
        the zeroed twin, and the layers where the pretrained model lies below each (of all layers)."""
        rows = []
        for z in self.zeroed:
            m, t = self.get(z["name"]), self.get(z["name"], False)
            zc = np.asarray(z["cos_exact"])
            row = {"model": z["name"], "twin_emb": float(t["cos_exact"][0]) if t else float("nan"),
                   "zeroed_emb": float(zc[0]), "zeroed_max": float(zc.max()), "layers": len(zc)}
            if m:
                mc = np.asarray(m["cos_exact"])
                row |= {"below_twin": int(np.sum(mc < np.asarray(t["cos_exact"]))) if t else 0,
                        "below_zeroed": int(np.sum(mc < zc))}
            rows.append(row)
        return rows

    # ------------------------------------------------------------------ the paper's claims

    def weakest_peak(self, group: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any], int]:
        """The model of `group` (default: the pretrained Transformers) whose most anisotropic layer is least so,
        and that layer."""
        m = min(group or self.transformers(), key=lambda m: max(m["cos_exact"]))
        return m, int(np.argmax(m["cos_exact"]))

    def layer_interval(self, m: dict[str, Any], layer: int) -> Interval:
        """A layer's average cosine over its `n_pairs` sampled pairs, ±1.96 standard errors."""
        c, se = m["cos_sampled"][layer], m["cos_sampled_se"][layer]
        return Interval(c, c - 1.96 * se, c + 1.96 * se, self.n_pairs, "normal")

    def null_of(self, group: list[dict[str, Any]]) -> float:
        """The largest isotropic null (95th percentile of an `n_pairs` average) over the widths of `group`."""
        return max(self.null_q95(m["dims"][-1]) for m in group)

    def group(self, kind: str) -> list[dict[str, Any]]:
        """The pretrained Transformers of one kind: "subword" (token-level text), "character" (byte- or
        character-level text), "speech", "vision"."""
        def kind_of(m: dict[str, Any]) -> str:
            if m["modality"] == "bytes" or m["name"] in CHARACTER_LEVEL:
                return "character"
            return {"text": "subword", "audio": "speech"}.get(m["modality"], m["modality"])
        return [m for m in self.transformers() if kind_of(m) == kind]

    def lowest_layer(self, group: list[dict[str, Any]]) -> Interval:
        """The least anisotropic layer over every model of `group` (sampled pairs, ±1.96 SE)."""
        m = min(group, key=lambda m: min(m["cos_exact"]))
        return self.layer_interval(m, int(np.argmin(m["cos_exact"])))

    @staticmethod
    def mean_over_layers(m: dict[str, Any]) -> tuple[float, float]:
        """A model's average cosine averaged over its layers (sampled pairs) and its standard error."""
        c, se = np.asarray(m["cos_sampled"], float), np.asarray(m["cos_sampled_se"], float)
        return float(c.mean()), float(np.sqrt((se**2).sum()) / len(se))

    def level_gap(self, a: dict[str, Any], b: dict[str, Any]) -> Interval:
        """Average cosine over layers of `a` minus that of `b`, ±1.96 SE of the pair sampling (normal)."""
        (ca, sa), (cb, sb) = self.mean_over_layers(a), self.mean_over_layers(b)
        half = 1.96 * float(np.hypot(sa, sb))
        return Interval(ca - cb, ca - cb - half, ca - cb + half, self.n_pairs, "normal")

    def cnn(self) -> dict[str, Any] | None:
        return next((m for m in self.pretrained() if m["name"] in NO_TWIN), None)

    def cnn_map_cosine(self) -> Interval | None:
        """The CNN's average cosine of whole flattened maps (the paper's reading of Fig. 4), median over
        the block outputs (the non-negative stem and head maps left out), with its bootstrap interval over
        images (`cnn_map_bootstrap`); None without a CNN."""
        b = self.cnn_boot
        if not b:
            return None
        return Interval.from_draws(b["median_draws"], estimate=float(np.median(b["map_cos"][1:-1])))

    # ------------------------------------------------------------------ the drift test across layers (Fig. 5, App. A)

    @staticmethod
    def layer_test(mean_norm, cos) -> dict[str, Any]:
        """The paper's §3.3 test at its own unit, the layers (`drift_layer_test`)."""
        return drift_layer_test(tuple(float(v) for v in mean_norm), tuple(float(v) for v in cos))

    def model_test(self, m: dict[str, Any]) -> dict[str, Any]:
        """`layer_test` of one model's record: ‖x̄‖₂ against the all-pairs average cosine across its layers."""
        return self.layer_test(m["mean_norm"], m["cos_exact"])

    def speech_test(self) -> dict[str, Any] | None:
        """`layer_test` of Whisper base's encoder (the bootstrap record's layers), with the Spearman ρ of its
        bootstrap over recordings as `input_bootstrap`; None when not measured."""
        b = self.speech_boot
        if not b:
            return None
        return self.layer_test(b["mean_norm"], b["cos"]) | {
            "input_bootstrap": Interval.from_draws(b["rho_draws"], estimate=b["rho"])}

    def cnn_test(self) -> dict[str, Any] | None:
        """`layer_test` of the CNN's flattened maps (the paper's reading), with the Spearman ρ of its bootstrap
        over images as `input_bootstrap`; None without a CNN."""
        b = self.cnn_boot
        if not b:
            return None
        return self.layer_test(b["map_mean_norm"], b["map_cos"]) | {
            "input_bootstrap": Interval.from_draws(b["rho_draws"], estimate=b["rho"])}

    def identity_layers(self, models: list[dict[str, Any]]) -> tuple[int, int]:
        """Of the layers of `models`, how many satisfy avg cos ≈ (‖x̄‖₂ / E‖x‖)² within `IDENTITY_TOL`, and how
        many there are (a CNN read as whole flattened maps: its maps' cosines and drift ratios)."""
        within = total = 0
        for m in models:
            if "map_cos_exact" in m:
                gap = np.abs(np.asarray(m["map_cos_exact"]) - np.square(m["map_drift_ratio"]))
                within, total = within + int((gap < IDENTITY_TOL).sum()), total + gap.size
            else:
                within += m["normalised"]["identity_layers_within"]
                total += m["normalised"]["layers"]
        return within, total

    def definition_caveat(self, models: list[dict[str, Any]]) -> str:
        """The caveat every verdict read from the paper's drift test carries: it is nearly a definition."""
        within, total = self.identity_layers(models)
        return (f"nearly a definition: the average cosine equals (‖x̄‖₂ / E‖x‖)² within {IDENTITY_TOL} on {within} "
                f"of these {total} layers, so the test measures that identity, blurred by how the scale E‖x‖ "
                "moves across layers")

    def significant_share(self) -> Interval:
        """Share of the pretrained Transformers whose anisotropy follows the drift by the paper's test: a
        positive Spearman ρ across layers between ‖x̄‖₂ and the average cosine with the exact permutation
        p < 0.05 (a negative one is not "following"), with its exact binomial (Clopper–Pearson) interval over the
        models — which keeps a width when every model, or none, follows."""
        from scipy import stats as sps

        hits = [self.follows(self.model_test(m)) for m in self.transformers()]
        k, n = int(sum(hits)), len(hits)
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        return Interval(k / n, float(ci.low), float(ci.high), n, "binomial")

    @staticmethod
    def follows(t: dict[str, Any], reading: str = "spearman") -> bool:
        """A layer test that says the anisotropy follows the drift: positive and p < 0.05 (Spearman with its
        exact permutation p; `reading="pearson"`: Pearson's r and its p, the paper's Fig. 16)."""
        if reading == "pearson":
            return t["pearson_p"] < ALPHA and t["pearson_r"] > 0
        return t["p_exact"] < ALPHA and t["rho"] > 0

    def share_counts(self) -> dict[str, int]:
        """Over the pretrained Transformers: how many follow the drift (Spearman, Pearson), how many have a
        significant Spearman test of either sign (the count the paper's bars give), and how many are negative
        among those."""
        tests = [self.model_test(m) for m in self.transformers()]
        sig = [t for t in tests if t["p_exact"] < ALPHA]
        return {"models": len(tests), "spearman": sum(self.follows(t) for t in tests),
                "pearson": sum(self.follows(t, "pearson") for t in tests), "either_sign": len(sig),
                "negative": sum(t["rho"] < 0 for t in sig)}

    # ------------------------------------------------------------------ Biś et al.: the cosine once the mean is removed

    @staticmethod
    def isotropic_line(d: int) -> float:
        """The 95th percentile of one isotropic pair's cosine at width d (the paper's Appendix B line)."""
        return A.isotropic_cosine_quantile(0.95, int(d))

    @staticmethod
    def jackknife(theta: float, loo) -> Interval:
        """`theta` with its leave-one-out jackknife interval from the leave-one-out values `loo`: pseudo-values
        K·θ − (K − 1)·θ₍₋ᵢ₎, θ ± t·SE with K − 1 degrees of freedom (`core.stats.jackknife_interval`'s rule)."""
        from scipy import stats as sps

        loo = np.asarray(loo, float)
        k = loo.size
        pseudo = k * theta - (k - 1) * loo
        half = float(sps.t.ppf(0.975, k - 1)) * float(pseudo.std(ddof=1) / np.sqrt(k))
        return Interval(theta, theta - half, theta + half, k, "jackknife")

    def centred_pairs(self, m: dict[str, Any], layer: int) -> Interval:
        """A layer's mean-removed average cosine over its `n_pairs` sampled pairs, ±1.96 standard errors."""
        c, se = m["cos_centred"][layer], m["cos_centred_se"][layer]
        return Interval(c, c - 1.96 * se, c + 1.96 * se, self.n_pairs, "normal")

    def centred_rows_by_layer(self) -> list[dict[str, Any]]:
        """Per pretrained Transformer, its layer whose mean-removed average cosine reaches furthest toward the
        isotropic line (the reach: the larger |bound| of its interval over the line): the sampled pairs' reading
        for every model, and the jackknife over inputs where measured (`centred_jack`)."""
        rows = []
        for m in self.transformers():
            line = np.array([self.isotropic_line(d) for d in m["dims"]])
            pairs = [self.centred_pairs(m, i) for i in range(len(line))]
            reach = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(pairs, line, strict=True)]
            row = {"model": m["name"], "d": int(m["dims"][-1]), "layer": int(np.argmax(reach)),
                   "pairs": pairs[int(np.argmax(reach))], "pairs_reach": float(max(reach))}
            j = next((r for r in self.centred_jack if r["name"] == m["name"]), None)
            if j is not None:
                jk = [self.jackknife(c, loo) for c, loo in zip(j["centred"], j["leave_one_out"], strict=True)]
                jr = [max(abs(iv.low), abs(iv.high)) / q for iv, q in zip(jk, line, strict=True)]
                k = int(np.argmax(jr))
                row |= {"jk_layer": k, "jackknife": jk[k], "jk_reach": float(jr[k]), "jk_pairs": pairs[k],
                        "unit": j["unit"], "inputs": j["inputs"]}
            row["line"] = float(line[row.get("jk_layer", row["layer"])])
            rows.append(row)
        return rows

    def centred_decider(self) -> dict[str, Any] | None:
        """The layer that decides Biś et al.'s test: over the models read with the jackknife over inputs, the
        layer whose interval reaches furthest toward the isotropic line; without such a reading, the layer whose
        sampled pairs reach furthest. None without Transformers."""
        rows = self.centred_rows_by_layer()
        jk = [r for r in rows if "jackknife" in r]
        if jk:
            return max(jk, key=lambda r: r["jk_reach"])
        return max(rows, key=lambda r: r["pairs_reach"]) if rows else None

    def single_pair_margin(self) -> tuple[dict[str, Any], Interval]:
        """The paper's Fig. 18 reading: per pretrained Transformer, its average cosine over layers (sampled pairs)
        minus the 95th percentile of a *single* isotropic pair's cosine at its width; the model where it is
        smallest, with ±1.96 SE of the pair sampling."""
        def margin(m: dict[str, Any]) -> tuple[float, float]:
            c, se = self.mean_over_layers(m)
            return c - A.isotropic_cosine_quantile(0.95, int(m["dims"][-1])), se
        m = min(self.transformers(), key=lambda m: margin(m)[0])
        v, se = margin(m)
        return m, Interval(v, v - 1.96 * se, v + 1.96 * se, self.n_pairs, "normal")

    def findings(self) -> list[Finding]:
        """The paper's §3 claims (and the drift explanation it cites), from the table `findings.SPECS`."""
        return findings(self)


@functools.lru_cache(maxsize=512)
def drift_layer_test(mean_norm: tuple[float, ...], cos: tuple[float, ...]) -> dict[str, Any]:
    """Godey et al.'s §3.3 test (Fig. 5) and its Pearson reading (App. A, Fig. 16) with the layers as the unit,
    as the paper's test has them: Spearman's ρ across layers between ‖x̄‖₂ and the average cosine, its exact
    permutation p (over all n! orderings up to 9 layers, Monte Carlo beyond: `core.stats.spearman_exact_p`),
    its Fisher-z interval over the layers (`core.stats.rank_correlation_interval`) and its jackknife over
    the layers (degenerate for a perfect rank order); Pearson's r with its p and Fisher-z interval."""
    from scipy import stats as sps

    x, y = np.asarray(mean_norm, float), np.asarray(cos, float)
    n = x.size
    rho = lambda v: float(sps.spearmanr(v[:, 0], v[:, 1]).statistic)  # noqa: E731
    pr = sps.pearsonr(x, y)
    r = float(np.clip(pr.statistic, -(1 - 1 / n**2), 1 - 1 / n**2))
    half = 1.96 / np.sqrt(n - 3)
    est = float(pr.statistic)
    low, high = float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half))
    return {"layers": int(n), "rho": float(sps.spearmanr(x, y).statistic), "p_exact": spearman_exact_p(x, y),
            "fisher": rank_correlation_interval(x, y), "jackknife": jackknife_interval(np.column_stack([x, y]), rho),
            "pearson_r": est, "pearson_p": float(pr.pvalue),
            "pearson": Interval(est, min(low, est), max(high, est), int(n), "fisher-z")}

