"""The deep causal LM chapter's findings (Yu & Zhang Fig. 7, §3.4) as a table of `core.findings.Spec` rows, with
the readers the rows share, each a function of the chapter's `Result` (`result.py` imports this table to build
them, `Result.findings`; this module imports nothing of it, so the two point one way)."""

from __future__ import annotations

from ...core.findings import Spec
from .params import LEAKY, tau_arm


def _seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


#: the finding key of the de-escalated control at each τ of `Params.control_taus`
TAU_KEYS = {0.5: "deeplm-tau-0p5-rescues"}


# --- the findings, as a table (`core.findings.Spec`): what each row reads of the Result -------------------
WHERE = "Fig. 7, §3.4"
GAP_CLAIM = ("There is a huge performance gap between the post-norm model and the post-norm model with "
             "de-escalation at each FFN input.")


def _measured(res) -> str:
    n, ours = len(res.seeds), res.budget.get("ours", {})
    width = f", width {ours['d_model']}" if "d_model" in ours else ""
    return (f"causal LM of depth {res.depth}{width} on WikiText-103 {res.tokens}, {res.steps:,} steps, {n} "
            f"seed{'s' if n != 1 else ''} per variant")


def _scale(res) -> str:
    paper = res.budget.get("paper", {})
    return (f"{res.scale}: {res.steps:,} of the paper's {paper['steps']:,} steps, depth {res.depth} against "
            f"{paper.get('depth', 60)}" if paper else res.scale)


def _tau_controls(res) -> list[dict]:
    """The de-escalated control at each τ of `control_taus` against post-norm (one finding each)."""
    return [dict(case=t, quantity=f"de-escalated at τ = {t:g} − post-norm final training loss, nats per token",
                 effect=res.paired(tau_arm(t), "post-norm"), label=f"τ = {t:g}",
                 measured=(_measured(res) + f", the de-escalated model at τ = {t:g}: "
                           f"{_seeds(len(res.histories[tau_arm(t)]))}"),
                 reduced=", ".join(filter(None, (res.reduced(), f"at τ = {t:g} in place of {res.tau:g}"))))
            for t in res.control_taus if {tau_arm(t), "post-norm"} <= set(res.arms)]


_RUN = dict(scale=_scale, reduced=lambda res: res.reduced(), distance=lambda res: res.distance())


def _curve(a: str, b: str | None = None) -> dict:
    """The columns of a finding the budget curve carries to the paper's steps: its trend (`Result.trend`) and, in
    `extra["gap"]`, the gap (a, b) it reads (`CURVE_GAPS`)."""
    return dict(at_scale=lambda res: res.trend(a, b), extra={"gap": (a, b)})

FINDINGS = (
    Spec(key="deeplm-post-norm-fails", where=WHERE,
         claim="The deep post-norm Transformer 'essentially failed' to train.",
         measured=_measured, quantity="post-norm final training loss − unigram loss, nats per token",
         effect=lambda res: res.against_unigram("post-norm"), direction="above", reference=0.0,
         reference_label="the unigram predictor", claim_id="yu-fig7-post-fails", section="deeplm-loss",
         when=lambda res: "post-norm" in res.variants,
         more=dict(_RUN, **_curve("post-norm"))),
    Spec(key="deeplm-deesc-rescues", where=WHERE, claim=GAP_CLAIM, measured=_measured,
         quantity="de-escalated − post-norm final training loss, nats per token",
         effect=lambda res: res.paired("de-escalated", "post-norm"), direction="below",
         claim_id="yu-fig7-deesc-vs-post", section="deeplm-loss",
         when=lambda res: {"de-escalated", "post-norm"} <= set(res.variants),
         more=dict(_RUN, size_word="huge", label=lambda res: f"τ = {res.tau:g}",
                   **_curve("de-escalated", "post-norm"))),
    Spec(key="deeplm-deesc-like-pre-norm", where=WHERE,
         claim="The pre-norm and the de-escalated post-norm models 'performed similarly'.", measured=_measured,
         quantity="de-escalated − pre-norm final training loss, nats per token",
         effect=lambda res: res.paired("de-escalated", "pre-norm"), direction="equal",
         margin=lambda res: res.similar_margin(), claim_id="yu-fig7-deesc-like-pre", section="deeplm-loss",
         when=lambda res: {"de-escalated", "pre-norm"} <= set(res.variants),
         more=dict(_RUN, **_curve("de-escalated", "pre-norm"))),
    Spec(key="deeplm-leak-rescues", where=WHERE, claim=GAP_CLAIM,
         measured=lambda res: _measured(res) + f", the leakage control: {_seeds(len(res.histories[LEAKY]))}",
         quantity=("de-escalated with the whole sequence's mean (eq. 21 as written: each position sees the later "
                   "tokens through it) − post-norm final training loss, nats per token"),
         effect=lambda res: res.paired(LEAKY, "post-norm"), direction="below", section="deeplm-controls",
         claim_id="yu-fig7-deesc-vs-post", kind="control", when=lambda res: {LEAKY, "post-norm"} <= set(res.arms),
         more=_RUN),
    Spec(key=TAU_KEYS, where=WHERE, claim=GAP_CLAIM, direction="below", section="deeplm-controls",
         claim_id="yu-fig7-deesc-vs-post", read=_tau_controls, more=dict(_RUN, size_word="huge")),
    Spec(key="deeplm-paper-scale", where=WHERE,
         claim="Fig. 7 at the paper's scale: depth 60, width 410, 50,000 iterations.", measured="not run",
         quantity="the three findings above at the paper's scale", section="deeplm-differences",
         claim_id="yu-fig7-deesc-vs-post",
         more=dict(needs="a GPU", command="make rerun CHAPTER=deeplm SCALE=paper", reduced="", scale="paper")),
)
