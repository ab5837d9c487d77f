"""The synthesis chapter's findings as one table (`FINDINGS`) of `core.findings.Spec` rows: the rank agreement
of two papers' measures (`AGREE`) and what an operation does at the most collapsed layer (`OPERATION`); each row
reads the Result (`Result.agreement`, `Result.change`)."""

from __future__ import annotations

from ...core.findings import Partial, Spec

#: the setting every finding is read at
SCALE = ("the book's offline models (those that load offline, not a sample of a population); the papers measure one "
         "model family each")
#: the paper whose measure a finding puts first
GODEY, YAN, YU = (dict(paper=p) for p in ("godey2024", "yan2022", "yu2024"))
#: the columns of a finding that two measures rank a model's layers alike (`Result.agreement`)
AGREE = dict(quantity="Spearman correlation across layers, mean over models", section="synthesis-agree")
#: the section of a finding on what an operation does at the most collapsed layer: after − before (`Result.change`)
OPERATION = dict(section="synthesis-operations")
#: t_sim after an operation against before
TSIM = "t_sim after − before, mean over inputs and models"

FINDINGS: tuple[Spec, ...] = (
    Spec("synthesis-agree-cos-ev1", "§3 (mean cosine) with Yan eq. (5)",
         "Godey et al.'s anisotropy (mean cosine) and Yan et al.'s EV₁ rank a model's layers alike",
         read=lambda res: Partial(res.agreement("cos", "ev1")), more=GODEY, **AGREE),
    Spec("synthesis-agree-tsim-ev1", "Def. 1.1 (t_sim) with Yan eq. (5)",
         "Yu & Zhang's t_sim and Yan et al.'s EV₁ rank a model's layers alike",
         read=lambda res: Partial(res.agreement("t_sim", "ev1")), more=YU, **AGREE),
    Spec("synthesis-agree-cos-tsim", "§3 (mean cosine) with Yu Def. 1.1",
         "Godey et al.'s mean cosine over the whole probe and Yu & Zhang's within-input t_sim rank a model's layers "
         "alike", read=lambda res: Partial(res.agreement("cos", "t_sim")), more=GODEY, **AGREE),
    Spec("synthesis-softdecay-ev1", "Algorithm 1", "SoftDecay applied to the most collapsed layer lowers each "
         "input's EV₁", quantity="EV₁ after − before, mean over inputs and models", direction="below",
         read=lambda res: Partial(res.change("ev1_softdecay", "ev1_raw")), more=YAN, **OPERATION),
    Spec("synthesis-softdecay-tsim", "Algorithm 1 with Yu Def. 1.1",
         "SoftDecay applied to the most collapsed layer lowers each input's t_sim too", quantity=TSIM,
         direction="below", read=lambda res: Partial(res.change("t_sim_softdecay", "t_sim_raw")), more=YAN,
         **OPERATION),
    Spec("synthesis-whitening-tsim", "§5 (whitening baseline)",
         "whitening the most collapsed layer lowers each input's t_sim", quantity=TSIM, direction="below",
         read=lambda res: Partial(res.change("t_sim_whitening", "t_sim_raw")), more=YAN, **OPERATION),
    Spec("synthesis-centring-anisotropy", "§3 (mean cosine)", "removing the mean vector removes the anisotropy of "
         "the most collapsed layer", quantity="pooled mean cosine after − before removing the probe's mean",
         direction="below", read=lambda res: Partial(res.change("cos_pooled_centred", "cos_pooled_raw")),
         more=GODEY, **OPERATION),
    Spec("synthesis-centring-skew", "eq. (21) (de-escalation's Π₁^⊥)",
         "removing each input's mean token leaves a dominant direction: EV₁ stays above an isotropic matrix's of "
         "the same shape", quantity="EV₁ of the centred input − EV₁ of an isotropic Gaussian input, mean over models",
         direction="above", read=lambda res: Partial(res.change("ev1_centred", "ev1_isotropic")), more=YU,
         **OPERATION),
)
