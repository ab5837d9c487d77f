"""The synthesis chapter's findings as one table (`FINDINGS`) of `core.findings.Spec` rows: the rank agreement
of two papers' measures (`agree`) and what an operation does at the most collapsed layer (`change`); each row reads
the Result (`Result.agreement`, `Result.change`)."""

from __future__ import annotations

from ...core.findings import Spec

#: the setting every finding is read at
SCALE = ("the book's offline models (those that load offline, not a sample of a population); the papers measure one "
         "model family each")
#: the paper whose measure a finding puts first
GODEY, YAN, YU = (dict(paper=p) for p in ("godey2024", "yan2022", "yu2024"))


def agree(key: str, where: str, claim: str, a: str, b: str, paper: dict[str, str]) -> Spec:
    """A finding that measures `a` and `b` rank a model's layers alike (`Result.agreement`)."""
    return Spec(key, where, claim, quantity="Spearman correlation across layers, mean over models",
                effect=lambda res: res.agreement(a, b), section="synthesis-agree", more=paper)


def change(key: str, where: str, claim: str, quantity: str, after: str, before: str, paper: dict[str, str],
           direction: str = "below") -> Spec:
    """A finding on what an operation does at the most collapsed layer: `after` − `before` (`Result.change`)."""
    return Spec(key, where, claim, quantity=quantity, effect=lambda res: res.change(after, before),
                direction=direction, section="synthesis-operations", more=paper)


#: t_sim after an operation against before
TSIM = "t_sim after − before, mean over inputs and models"

FINDINGS: tuple[Spec, ...] = (
    agree("synthesis-agree-cos-ev1", "§3 (mean cosine) with Yan eq. (5)",
          "Godey et al.'s anisotropy (mean cosine) and Yan et al.'s EV₁ rank a model's layers alike",
          "cos", "ev1", GODEY),
    agree("synthesis-agree-tsim-ev1", "Def. 1.1 (t_sim) with Yan eq. (5)",
          "Yu & Zhang's t_sim and Yan et al.'s EV₁ rank a model's layers alike", "t_sim", "ev1", YU),
    agree("synthesis-agree-cos-tsim", "§3 (mean cosine) with Yu Def. 1.1",
          "Godey et al.'s mean cosine over the whole probe and Yu & Zhang's within-input t_sim rank a model's layers "
          "alike", "cos", "t_sim", GODEY),
    change("synthesis-softdecay-ev1", "Algorithm 1", "SoftDecay applied to the most collapsed layer lowers each "
           "input's EV₁", "EV₁ after − before, mean over inputs and models", "ev1_softdecay", "ev1_raw", YAN),
    change("synthesis-softdecay-tsim", "Algorithm 1 with Yu Def. 1.1",
           "SoftDecay applied to the most collapsed layer lowers each input's t_sim too", TSIM,
           "t_sim_softdecay", "t_sim_raw", YAN),
    change("synthesis-whitening-tsim", "§5 (whitening baseline)",
           "whitening the most collapsed layer lowers each input's t_sim", TSIM, "t_sim_whitening", "t_sim_raw", YAN),
    change("synthesis-centring-anisotropy", "§3 (mean cosine)", "removing the mean vector removes the anisotropy of "
           "the most collapsed layer", "pooled mean cosine after − before removing the probe's mean",
           "cos_pooled_centred", "cos_pooled_raw", GODEY),
    change("synthesis-centring-skew", "eq. (21) (de-escalation's Π₁^⊥)",
           "removing each input's mean token leaves a dominant direction: EV₁ stays above an isotropic matrix's of "
           "the same shape", "EV₁ of the centred input − EV₁ of an isotropic Gaussian input, mean over models",
           "ev1_centred", "ev1_isotropic", YU, direction="above"),
)
