"""The drift chapter's findings (Godey et al. §4, Figs. 6-10), as a table of `core.findings.Spec` rows: what each
row reads of the `Result`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core.findings import Finding, Spec
from ...core.scale import Distance, model_distance
from ...hf import models
from .params import PAPER_REFERENCE

if TYPE_CHECKING:
    from .result import Result


def _dims(res: Result) -> str:
    return f"{res.n_seq} sequences of {res.seq_len} tokens"


def _what(res: Result) -> str:
    return f"an untrained BERT block ({res.hidden} wide), {_dims(res)} drawn from E, {len(res.seeds)} seeds"


def _scale(res: Result) -> str:
    return f"the paper's set-up ({_dims(res)}, one BERT block), {len(res.seeds)} seeds (the paper: one)"


def _against(res: Result) -> str:
    """The block, its inputs and the bias sweep are the paper's; a trained model's norms and cosines (N*'s order,
    the low-anisotropy level) come from the reference model, which the paper takes as BERT-base."""
    model = res.reference.model
    return "" if model == PAPER_REFERENCE else f"against {model} in place of BERT-base"


def _against_distance(res: Result) -> tuple[Distance, ...]:
    """How far the reference model is from BERT-base (`_against`): parameters, layers, width (`hf.models.SIZE`)."""
    model = res.reference.model
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
         effect=lambda res: res.cosine_gain(), direction="above",
         more=dict(size_word="slightly", label="rows of E", digits=6)),
    Spec(key="drift-fixed-point", where="§4.2, Fig. 6", claim_id="godey-fig6-fixed-point",
         section="drift-input-output",
         claim="There is a bias norm N* where the block's output norm equals its input norm, of the order of the "
               "hidden-state norms of the trained model.",
         measured=lambda res: (f"{_what(res)}; N* against {res.reference.model}'s layer norms on "
                               f"{res.reference.sentences} MRPC sentences"),
         quantity="log10(N* / mean hidden-state norm of the reference model), range over seeds and layers",
         effect=lambda res: res.fixed_point_ratio(), direction="equal", margin=1.0,
         reference_label="0 (equal norms; the margin is one order of magnitude)",
         more=dict(reduced=_against, distance=_against_distance, digits=2, unit="seeds and layers",
                   caveat=lambda res: ("N* is √d by the LayerNorm's construction, the same on every seed; what could "
                                       "fail is only its comparison with the trained model's hidden-state norms, and "
                                       "the spread shown is a range over seeds and layers"))),
    Spec(key="drift-score-spread", where="§4.3, Fig. 7", claim_id="godey-fig7-scores", section="drift-scores",
         claim="The pre-softmax attention scores move away from zero as the input bias norm grows.",
         measured=lambda res: f"{_what(res)}; pooled scores QKᵀ/√d_k",
         quantity=lambda res: f"log10 of the score sd at N = {max(res.hist_norms):g} over N = 0",
         effect=lambda res: res.score_growth(), direction="above", more=dict(digits=2)),
    Spec(key="drift-qk-norm", where="§4.3, Fig. 8b", claim_id="godey-fig8-qk-norm", section="drift-queries-keys",
         claim="Query and key representations increase in norm with the input bias norm.",
         measured=_on_norms,
         quantity=lambda res: f"log10 of the mean query norm at N = {max(res.norms):g} over N = 0",
         effect=lambda res: res.qk_norm_growth(), direction="above", more=dict(digits=2)),
    Spec(key="drift-qk-without-bias", where="§4.3, Fig. 8", claim_id="godey-fig8-qk-anisotropic",
         section="drift-queries-keys",
         claim="The queries and keys are anisotropic even when no bias is added.",
         measured=lambda res: f"{_what(res)}; N = 0",
         quantity="average cosine of the queries at N = 0",
         effect=lambda res: res.qk_cos_at_zero(), direction="above", more=dict(digits=5)),
    Spec(key="drift-sharper-softmax", where="§4.4, Figs. 9-10", claim_id="godey-fig9-sharper",
         section="drift-softmax",
         claim="As the input bias norm grows, the self-attention softmax becomes less entropic.",
         measured=lambda res: f"{_what(res)}; normalised row entropy",
         quantity=lambda res: f"entropy / log L at N = {max(res.norms):g} minus at N = 0",
         effect=lambda res: res.entropy_drop(), direction="below", more=dict(digits=3)),
    Spec(key="drift-low-anisotropy", where="§4.4", claim_id="godey-s44-low-anisotropy", section="drift-sharpness",
         claim="At low anisotropy levels the sharpening is not very important.",
         measured=lambda res: (f"{_what(res)}; at N = {res.norms[res.reference_level()]:.3g}, the largest bias "
                               f"whose input cosine stays at or below {res.reference.model}'s most anisotropic "
                               "layer"),
         quantity="mean row maximum × L − 1 (0 = uniform attention)",
         effect=lambda res: res.sharpening_at_reference(), direction="equal",
         margin=lambda res: res.uniform_tol - 1, reference_label="0 (uniform attention)",
         more=dict(reduced=_against, distance=_against_distance, digits=5)),
)


def findings(res: Result) -> list[Finding]:
    """The paper's §4 claims (Figs. 6-10) against the sweeps, with the inputs the paper describes (rows of E): one
    finding per row of `FINDINGS`."""
    return [f for spec in FINDINGS for f in spec.findings(res, paper="godey2024", chapter="drift", scale=_scale)]
