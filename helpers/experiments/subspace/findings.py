"""The subspace chapter's findings (Yan et al. §3.1-3.2, Appendix A), as a table of `core.findings.Spec` rows: what
each row reads of the `Result`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.findings import Finding, Spec
from ...core.scale import Distance, model_distance
from ...core.stats import Interval
from ...hf import models
from .params import BOOTSTRAP, EXACT_TOLERANCE, Params

if TYPE_CHECKING:
    from .result import Result


def _n_last(res: Result) -> int:
    return len(res.second_task_stats) - 1


def _on_task(res: Result) -> str:
    s = res.settings
    return (f"{s.model}, {res.n_sentences} {s.second_task} validation sentences, embeddings to layer "
            f"{_n_last(res)}")


#: the paper's model (BERT-base)
PAPER_MODEL = Params.PRESETS["paper"]["model"]


def _scale(res: Result) -> str:
    model = res.settings.model
    return (f"{model} ({_n_last(res)} layers) in place of BERT-base ({models.SIZE[PAPER_MODEL].layers})"
            if model != PAPER_MODEL else "the paper's model")


def _reduced(res: Result) -> str:
    model = res.settings.model
    return (f"on {model} ({_n_last(res)} layers) in place of BERT-base ({models.SIZE[PAPER_MODEL].layers}), "
            f"{res.n_sentences} sentences" if model != PAPER_MODEL else "")


def _distance(res: Result) -> tuple[Distance, ...]:
    """How far the run is from the paper's: our model's parameters, layers and width against BERT-base's
    (`hf.models.SIZE`), and the sentences read (the paper does not say how many)."""
    model = res.settings.model
    if model == PAPER_MODEL:
        return ()
    return model_distance(models.SIZE.get(model), models.SIZE[PAPER_MODEL]) + (
        Distance("sentences", res.n_sentences, None, "sentences"),)


def _boot(res: Result) -> str:
    return f"{BOOTSTRAP} resamples of the {res.n_sentences} sentences"


def _bound_ratio(res: Result) -> Interval:
    return Interval.exact(max([r["max_ratio"] for r in res.random] + [r["max_ratio"] for r in res.real_model]))


def _exact(why: str, scale: str) -> dict[str, Any]:
    """The columns of a row that is a computation, not a sample: its tolerance, why, and its scale."""
    return dict(tolerance=EXACT_TOLERANCE, reduced="", exact_why=why, scale=scale)


def _trend(name: str, section: str, **more: Any) -> dict[str, Any]:
    """The columns of a §3.2 layer trend on the second task."""
    return dict(effect=lambda res: res.trend(name), section=section,
                more=dict(scale=_scale, reduced=_reduced, distance=_distance, **more))


FINDINGS = (
    Spec(key="subspace-bound", where="§3.1", claim_id="yan-theorem",
         claim="Every token lies within C of the span of the first k right singular vectors, for any C between "
               "λₖ₊₁ and λₖ",
         measured=lambda res: (f"{len(res.random)} random token matrices ({len(res.settings.random_shapes)} "
                               f"sizes, 3 kinds) and every hidden state of {res.settings.model} on "
                               f"{res.n_sentences} {res.settings.task} validation sentences, every row and cut"),
         quantity="largest distance to the span / λₖ₊₁, over rows, cuts and matrices",
         effect=_bound_ratio, direction="below", reference=1.0, reference_label="1 (the bound)",
         section="subspace-random",
         more=_exact("a maximum over every row and cut of fixed matrices: a bound, not a sample",
                     "every row and cut; the paper proves it")),
    Spec(key="subspace-gamma-step", where="App. A, line before eq. (8)", claim_id="yan-eq8-step",
         claim="The constant of the line before eq. (8) is at most eq. (8)'s 2/(k(n−k)·B(k/2, (n−k)/2))",
         measured=lambda res: f"both constants evaluated in log space for {len(res.gamma_steps)} (n, k)",
         quantity="smallest ratio of the line before (8) to eq. (8)'s constant",
         effect=lambda res: Interval.exact(min(r["ratio"] for r in res.gamma_steps)), direction="below",
         reference=1.0, reference_label="1", section="subspace-eq8",
         more=_exact("a ratio of Gamma functions computed for each (n, k): an identity, no sampling", "exact")),
    Spec(key="subspace-eq8", where="App. A, eq. (8)", claim_id="yan-eq8",
         claim="For u uniform on the sphere, P(‖u₁..ₖ‖ ≤ d) is at most "
               "2·d²ᵏ(1 − dⁿ⁻ᵏ) / (k(n−k)·B(k/2, (n−k)/2))",
         measured=lambda res: (f"the exact probability (a Beta law) in {res.appendix_a_summary.cases} cases "
                               f"(n, k, d), n in {', '.join(map(str, res.settings.sphere_dims))}; Monte Carlo "
                               "for both readings"),
         quantity="largest exact probability − eq. (8) over the cases",
         effect=lambda res: Interval.exact(res.eq8_excess()), direction="below", reference=0.0,
         section="subspace-eq8",
         more=_exact("the probability is a regularised Beta function evaluated exactly: no sampling",
                     "exact; no sampling")),
    Spec(key="subspace-median", where="§3.2, Fig. 2", claim_id="yan-fig2-median",
         claim=lambda res: (f"The median normalised singular value falls with depth, from {res.paper_medians[0]:g} "
                            f"to {res.paper_medians[-1]:g} (BERT-base, MRPC)"),
         measured=_on_task,
         quantity=lambda res: f"last − first hidden state median normalised singular value ({_boot(res)})",
         direction="below",
         **_trend("median", "subspace-cdf", paper_value=lambda res: res.paper_medians[-1] - res.paper_medians[0])),
    Spec(key="subspace-token-uniformity", where="§3.2, Fig. 2", claim_id="yan-fig2-token-uniformity",
         claim="Token uniformity (the mean cosine between a sentence's tokens) increases as the layers go deeper "
               "(BERT-base, MRPC)",
         measured=_on_task, quantity=lambda res: f"last − first hidden state token uniformity ({_boot(res)})",
         direction="above", **_trend("token_uni", "subspace-cdf")),
    Spec(key="subspace-cls-uniformity", where="§3.2, Fig. 2", claim_id="yan-fig2-cls-uniformity",
         claim="[CLS] uniformity (the mean cosine between sentences' [CLS] vectors) increases as the layers go "
               "deeper (BERT-base, MRPC)",
         measured=lambda res: _on_task(res) + " (from layer 1: at the embeddings every [CLS] vector is the same)",
         quantity=lambda res: f"last layer − layer 1 [CLS] uniformity ({_boot(res)})",
         direction="above", **_trend("cls_uni", "subspace-cls")),
    Spec(key="subspace-bert", where="§3.2, Fig. 1", claim_id="yan-fig1-cdf",
         claim="In BERT-base the singular-value spectrum grows more skewed, layer by layer",
         measured="not run: bert-base-uncased comes from the Hugging Face hub",
         quantity="the §3.2 statistics on BERT-base", section="subspace-differs",
         when=lambda res: res.settings.model != "bert-base-uncased",
         more=dict(needs="the Hugging Face hub", command="make rerun CHAPTER=subspace SCALE=paper")),
)


def findings(res: Result) -> list[Finding]:
    """The theorem (§3.1) on random matrices and real hidden states, eq. (8) and the Γ-step of Appendix A, and the
    §3.2 layer trends (median, token and [CLS] uniformity) on MRPC: one finding per row of `FINDINGS`."""
    return [f for spec in FINDINGS for f in spec.findings(res, paper="yan2022", chapter="subspace", unit="sentences",
                                                          units=res.n_sentences)]
