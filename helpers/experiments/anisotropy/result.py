"""The anisotropy chapter's `Result`: every measured model's records (`records`: `Model`, `Shape`, the bootstraps),
and the statistics that read across records (the isotropic null, the shape of the centred cloud, the drift test's
share of models, Biś et al.'s centred cosine); the findings are `findings.py`'s table."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ...core import anisotropy as A
from ...core.findings import Finding
from ...core.stats import Interval, LayerTest
from ...machinery import results
from ...machinery.results import jsonable, stored_layout
from . import records as R
from .findings import findings
from .params import ALPHA, IDENTITY_TOL, NO_TWIN
from .records import CentredJackknife, Model, Shape


@dataclass
class Result(results.Result):
    """Everything the anisotropy chapter shows. `models`: one `Model` per measured model (pretrained and untrained
    twin); `zeroed`: the untrained twins with the token-type embedding zeroed (`Model`s); `shapes`: the centred
    cloud's spectrum per layer on a `shape_share` subsample (`Shape`s); `gaussian`: the isotropic-Gaussian baseline
    per width (`Gaussian`); `planted`: two planted clouds (`Cloud`: clusters + drift, isotropic + drift);
    `byte_mlm`: the byte-level MLM's training (`ByteTraining`), `final_norm`: SmolLM2's final RMSNorm
    (`FinalNorm`), `cnn_boot` and `speech_boot`: the drift test with a bootstrap over inputs, `centred_jack`: the
    mean-removed cosine with a jackknife over inputs, when measured. `skipped`: models left out because their data
    is neither in the mirror nor on the hub (model, reason). Stored dicts become records here (a saved Result and
    the committed runs read back as they were written)."""

    models: list[Model]
    gaussian: list[R.Gaussian]
    byte_mlm: R.ByteTraining | None = None
    skipped: list[dict[str, str]] = field(default_factory=list)
    n_pairs: int = 20_000
    planted: dict[str, R.Cloud] = field(default_factory=dict)
    zeroed: list[Model] = field(default_factory=list)
    shapes: list[Shape] = field(default_factory=list)
    shape_share: float = 1.0
    final_norm: R.FinalNorm | None = None
    cnn_boot: R.CnnBootstrap | None = None
    speech_boot: R.SpeechBootstrap | None = None
    centred_jack: list[CentredJackknife] = field(default_factory=list)
    #: the run's settings the prose quotes: tokens per text chunk, antibody chains
    chunk_len: int = 0
    chains: int = 0

    def __post_init__(self) -> None:
        """The converter: each stored dict becomes its record."""
        self.models = [Model.of(m, n_pairs=self.n_pairs) for m in self.models]
        self.zeroed = [Model.of(m, n_pairs=self.n_pairs) for m in self.zeroed]
        self.shapes = [Shape.of(s_) for s_ in self.shapes]
        self.gaussian = [R.Gaussian.of(g) for g in self.gaussian]
        self.planted = {k: R.Cloud.of(c) for k, c in self.planted.items()}
        self.centred_jack = [CentredJackknife.of(j) for j in self.centred_jack]
        self.byte_mlm = R.ByteTraining.of(self.byte_mlm) if self.byte_mlm else None
        self.final_norm = R.FinalNorm.of(self.final_norm) if self.final_norm else None
        self.cnn_boot = R.CnnBootstrap.of(self.cnn_boot) if self.cnn_boot else None
        self.speech_boot = R.SpeechBootstrap.of(self.speech_boot) if self.speech_boot else None

    def to_json(self) -> dict[str, Any]:
        return jsonable({f.name: stored_layout(getattr(self, f.name)) for f in fields(self)})

    # ------------------------------------------------------------------ lookups

    def model(self, name: str, trained: bool = True) -> Model:
        """The record of model `name` (pretrained, or its untrained twin)."""
        return next(m for m in self.models if m.name == name and m.trained == trained)

    def get(self, name: str, trained: bool = True) -> Model | None:
        """The record of model `name`, or None when this run did not measure it."""
        return next((m for m in self.models if m.name == name and m.trained == trained), None)

    def pretrained(self) -> list[Model]:
        return [m for m in self.models if m.trained]

    def transformers(self) -> list[Model]:
        """The pretrained Transformers (every pretrained model but the CNNs)."""
        return [m for m in self.pretrained() if m.name not in NO_TWIN]

    def twin(self, m: Model) -> Model | None:
        return self.get(m.name, trained=False)

    def cnn(self) -> Model | None:
        return next((m for m in self.pretrained() if m.name in NO_TWIN), None)

    def group(self, kind: str) -> list[Model]:
        """The pretrained Transformers of one `Model.kind`: "subword", "character", "speech", "vision"."""
        return [m for m in self.transformers() if m.kind == kind]

    def shape(self, name: str, trained: bool = True) -> Shape | None:
        """The spectrum record of model `name` (or its twin), None when not measured."""
        return next((s_ for s_ in self.shapes if s_.name == name and s_.trained == trained), None)

    # ------------------------------------------------------------------ the null of an average (Appendix B)

    def null_q95(self, d: int) -> float:
        """The 95th percentile of the average cosine of `n_pairs` independent isotropic pairs at width d."""
        return A.isotropic_mean_cosine_quantile(0.95, int(d), self.n_pairs)

    def above_isotropic(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers whose average cosine exceeds `null_q95` of their width, layers)."""
        return {m.label: (m.above(self.null_q95), m.layers) for m in self.models}

    def above_single_pair(self) -> dict[str, tuple[int, int]]:
        """Per model: (layers above the 95th percentile of a *single* pair's isotropic cosine — the paper's
        Fig. 18 line —, layers)."""
        return {m.label: (m.above(R.isotropic_line), m.layers) for m in self.models}

    def sampling_z(self) -> np.ndarray:
        """|sampled − exact| / standard error over every layer of every model."""
        return np.concatenate([m.sampling_z() for m in self.models])

    def null_of(self, group: list[Model]) -> float:
        """The largest isotropic null (95th percentile of an `n_pairs` average) over the widths of `group`."""
        return max(self.null_q95(m.d) for m in group)

    # ------------------------------------------------------------------ the shape of the centred cloud

    def isotropic_effective_dim(self, d: int) -> Interval:
        return R.isotropic_effective_dim(d, self.n_pairs)

    def centred_rows(self) -> list[dict[str, Any]]:
        """Per pretrained model (and its twin): `Model.centred_row`."""
        return [m.centred_row(self.twin(m)) for m in self.pretrained()]

    def shape_rows(self) -> list[dict[str, Any]]:
        """Per model with a spectrum run, pretrained and twin side by side (`records.shape_row`)."""
        return [R.shape_row(self.shape(n), self.shape(n, False)) for n in dict.fromkeys(s_.name for s_ in self.shapes)]

    def makeup_counts(self) -> dict[str, int]:
        """Layers of the pretrained Transformers' spectrum runs in each `MAKEUP` class."""
        kinds = [k for s_ in self.shapes if s_.trained for k in s_.makeup()]
        return {k: kinds.count(k) for k in A.MAKEUP} | {"layers": len(kinds)}

    def pr_share_interval(self) -> Interval | None:
        """The centred cloud's participation ratio over an isotropic Gaussian's, over every layer of every
        pretrained Transformer's spectrum run: median, with the range as its interval (None without runs)."""
        v = [x for s_ in self.shapes if s_.trained for x in s_.pr_share()]
        if not v:
            return None
        return Interval(float(np.median(v)), float(np.min(v)), float(np.max(v)), len(v), "range")

    def zeroed_rows(self) -> list[dict[str, Any]]:
        """Per model with a token-type-zeroed twin: `Model.zeroed_row`."""
        return [z.zeroed_row(self.get(z.name), self.get(z.name, False)) for z in self.zeroed]

    # ------------------------------------------------------------------ the paper's claims

    def weakest_peak(self, group: list[Model] | None = None) -> tuple[Model, int]:
        """The model of `group` (default: the pretrained Transformers) whose most anisotropic layer is least so,
        and that layer."""
        m = min(group or self.transformers(), key=lambda m: max(m.cos_exact))
        return m, int(np.argmax(m.cos_exact))

    def lowest(self, group: list[Model]) -> tuple[Model, int]:
        """The model of `group` with the least anisotropic layer over every model of `group`, and that layer."""
        m = min(group, key=lambda m: min(m.cos_exact))
        return m, int(np.argmin(m.cos_exact))

    def lowest_layer(self, group: list[Model]) -> Interval:
        """The least anisotropic layer over every model of `group` (`lowest`), with `Model.layer_interval`."""
        m, layer = self.lowest(group)
        return m.layer_interval(layer)

    def level_gap(self, a: Model, b: Model) -> Interval:
        """Average cosine over layers of `a` minus that of `b`, two independent samples of inputs: the two
        jackknife half-widths over the inputs combined in quadrature (Student-t on the smaller model's inputs);
        for runs without the inputs' sums, ±1.96 SE of the pair sampling (normal)."""
        ia, ib = a.mean_interval(), b.mean_interval()
        half = float(np.hypot(ia.high - ia.estimate, ib.high - ib.estimate))
        est = ia.estimate - ib.estimate
        if a.clustered and b.clustered:
            return Interval(est, est - half, est + half, min(ia.n, ib.n), "jackknife")
        return Interval(est, est - half, est + half, self.n_pairs, "normal")

    def cnn_map_cosine(self) -> Interval | None:
        return self.cnn_boot.map_cosine() if self.cnn_boot else None

    def single_pair_closest(self) -> Model:
        """The pretrained Transformer closest to the paper's Fig. 18 line: where `Model.single_pair_margin` is
        smallest."""
        return min(self.transformers(), key=lambda m: m.single_pair_margin().estimate)

    # ------------------------------------------------------------------ the drift test across layers (Fig. 5, App. A)

    def model_test(self, m: Model) -> LayerTest:
        return m.test()

    def speech_test(self) -> LayerTest | None:
        return self.speech_boot.test() if self.speech_boot else None

    def cnn_test(self) -> LayerTest | None:
        return self.cnn_boot.test() if self.cnn_boot else None

    def definition_caveat(self, models: list[Model]) -> str:
        """The caveat every verdict read from the paper's drift test carries: it is nearly a definition."""
        within, total = sum(m.identity()[0] for m in models), sum(m.identity()[1] for m in models)
        return (f"nearly a definition: the average cosine equals (‖x̄‖₂ / E‖x‖)² within {IDENTITY_TOL} on {within} "
                f"of these {total} layers, so the test measures that identity, blurred by how the scale E‖x‖ "
                "moves across layers")

    def significant_share(self) -> Interval:
        """Share of the pretrained Transformers whose anisotropy follows the drift by the paper's test
        (`LayerTest.follows`), with its exact binomial (Clopper–Pearson) interval over the models — which keeps a
        width when every model, or none, follows."""
        from scipy import stats as sps

        hits = [m.test().follows(alpha=ALPHA) for m in self.transformers()]
        k, n = int(sum(hits)), len(hits)
        ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        return Interval(k / n, float(ci.low), float(ci.high), n, "binomial")

    def share_counts(self) -> dict[str, int]:
        """Over the pretrained Transformers: how many follow the drift (Spearman, Pearson), how many have a
        significant Spearman test of either sign (the count the paper's bars give), and how many are negative
        among those."""
        tests = [m.test() for m in self.transformers()]
        sig = [t for t in tests if t.p_exact < ALPHA]
        return {"models": len(tests), "spearman": sum(t.follows(alpha=ALPHA) for t in tests),
                "pearson": sum(t.follows("pearson", ALPHA) for t in tests), "either_sign": len(sig),
                "negative": sum(t.rho < 0 for t in sig)}

    # ------------------------------------------------------------------ Biś et al.: the cosine once the mean is removed

    def centred_rows_by_layer(self) -> list[dict[str, Any]]:
        """Per pretrained Transformer, `Model.centred_reach`: the jackknife over inputs where measured
        (`centred_jack`)."""
        return [m.centred_reach(self.centred_jack_of(m.name)) for m in self.transformers()]

    def centred_jack_of(self, name: str) -> CentredJackknife | None:
        """The jackknife over inputs of model `name`'s mean-removed cosine (`centred_jack`), None when not run."""
        return next((j for j in self.centred_jack if j.name == name), None)

    def centred_decider(self) -> dict[str, Any] | None:
        """The layer that decides Biś et al.'s test: over the models read with the jackknife over inputs, the
        layer whose interval reaches furthest toward the isotropic line; without such a reading, the layer whose
        sampled pairs reach furthest. None without Transformers."""
        rows = self.centred_rows_by_layer()
        jk = [r for r in rows if "jackknife" in r]
        if jk:
            return max(jk, key=lambda r: r["jk_reach"])
        return max(rows, key=lambda r: r["pairs_reach"]) if rows else None

    def findings(self) -> list[Finding]:
        """The paper's §3 claims (and the drift explanation it cites), from the table `findings.FINDINGS`."""
        return findings(self)

    def sampling_z_median(self) -> float:
        """The median over every layer of every model of |sampled − exact| / standard error (`sampling_z`)."""
        return float(np.median(self.sampling_z()))
