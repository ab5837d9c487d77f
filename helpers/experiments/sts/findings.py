"""The STS chapter's findings, declared as data: `FINDINGS` is a table of `core.findings.Spec` rows, one per finding
(its key, the paper's claim, what kind of test it is, the quantity read, the reference it is held against and the
setting: which encoder, which measure), in the order the chapter lists them. `build` turns the table into
`Finding`s: each row's `read` is the reader above it with the row's setting (`On`: a reader and the encoder and
measure it reads), which measures it on a `Result` and returns a `core.findings.Partial` (effect, what was measured,
at which scale, how the interval is made); a row whose encoder this scale did not run becomes a finding that says
what it needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.findings import Finding, Partial, Spec
from ...core.findings import verdict as verdict_of
from ...core.scale import Distance, model_distance
from ...hf.models import SIZE
from .params import (
    ALPHA_MARGIN,
    BOOK_BERT,
    COMMANDS,
    CONTRASTIVE_SCOPE,
    CROSSFIT_HOW,
    KIND_TEXT,
    LABEL,
    MPNET,
    PAPER_BERT,
    POOLING_TEXT,
    SIZE_TEXT,
    SMOL,
)
from .records import SD

#: a row's encoder when it is the first of the run's `models` (all-MiniLM-L6-v2 at every scale but `paper`)
FIRST = "first model"
#: the claims: Table 1's with the paper's BERT-base-cased numbers ({raw}, {sd}, {wb}), Table 4's per measure
GAIN = ("SoftDecay applied without training to a pretrained encoder's sentence embeddings raises unsupervised STS: "
        "BERT-base-cased from {raw:.2f} to {sd:.2f} average Spearman ×100")
WHITE = ("SoftDecay scores above whitening fitted on the test sentences (WhiteBERT): {sd:.2f} against {wb:.2f} on "
         "BERT-base-cased")
UNIFORM = "SoftDecay makes sentence embeddings more uniform: {name} falls on every STS set"
CONTROL = ("SoftDecay's {name} after the transform is what it imposes on any matrix of this shape: a Gaussian set "
           "with the embeddings' mean and spread ends where the sentence embeddings end")
LSDS = "SoftDecay preserves local neighbourhoods better than whitening: lower LSDS on every STS set"
#: Table 4's measures: stored name, and as a finding says it
MEASURES = {"EV1": "EV₁", "RBF_dis": "RBF_dis", "TokenUni": "TokenUni"}


@dataclass(frozen=True)
class On:
    """A row's `read`: the reader that measures it (`_gain`, `_whitening`, …, below) with what it reads — the
    encoder (`FIRST`: the run's first model) and the measure (a Table 4 measure, an LSDS reading). Called on a
    Result, it gives the reader's `Partial`."""

    reader: Callable[[Any, On], Partial | None]
    encoder: str
    measure: str = ""

    def __call__(self, res) -> Partial | None:
        return self.reader(res, self)


def table1(template: str) -> Callable[[Any], str]:
    """A Table 1 claim with the paper's BERT-base-cased numbers (raw, SoftDecay, WhiteBERT) filled in."""
    return lambda res: template.format(**{name: res.paper_value(m, against=None) for name, m in
                                          (("raw", "vanilla"), ("sd", "SoftDecay"), ("wb", "WhiteBERT"))})


def measure(row: dict[str, Any], name: str) -> dict[str, Any]:
    """`row`'s claim and quantity for the Table 4 measure `name` (stored name)."""
    return row | {c: row[c].format(name=MEASURES[name]) for c in ("claim", "quantity")}


_T1 = dict(where="Table 1", section="sts-anisotropic", more=dict(digits=2))
_GAIN = dict(claim_id="yan-table1-gain", claim=table1(GAIN), **_T1,
             quantity="SoftDecay − raw model, Spearman ×100, mean over the sets")
_WHITE = dict(claim_id="yan-table1-whitening", claim=table1(WHITE), direction="below", **_T1,
              quantity="whitening − SoftDecay, Spearman ×100, mean over the sets")
_T4 = dict(where="Table 4", claim=UNIFORM, direction="below", section="sts-uniformity",
           quantity="{name} after SoftDecay − before, mean over the sets")
_CONTROL = dict(where="Table 4", claim=CONTROL, direction="equal", section="sts-uniformity",
                kind="control",
                quantity="{name} after SoftDecay of the Gaussian set − of the sentence embeddings, mean over the sets")
_LSDS = dict(where="Fig. 6", claim_id="yan-fig6-lsds", claim=LSDS, direction="below",
             section="sts-lsds", quantity="LSDS of SoftDecay − LSDS of whitening, mean over the sets")
_TABLE4 = (("ev1", "EV1"), ("rbf", "RBF_dis"), ("tokenuni", "TokenUni"))
_EV1, _RBF, _UNI = ({**measure(_T4, s), "claim_id": f"yan-table4-{m}"} for m, s in _TABLE4)
_CONTROL_EV1, _CONTROL_RBF, _CONTROL_UNI = ({**measure(_CONTROL, s), "claim_id": f"yan-table4-{m}"} for m, s in _TABLE4)

# --- what a finding says was run -----------------------------------------------------------------------------

def scale_text(res, model: str) -> str:
    """'book: SmolLM2-135M-Instruct on 2,800 of the 18,850 pairs the paper scores' (the total known when the
    first model ran every pair); the encoder is named, as several findings share one claim."""
    n, first = res.run_of(model).n_pairs, res.models[0]
    if res.max_pairs == 0 and set(res.runs[first].pairs) == set(res.run_of(model).pairs):
        total = res.runs[first].n_pairs
        return f"{res.scale}: {model} on " + ("every pair, as the paper" if n == total else
                                              f"{n:,} of the {total:,} pairs the paper scores")
    return f"{res.scale}: {model} on {n:,} pairs ({len(res.datasets)} sets)"


def reading_scale_text(res, model: str) -> str:
    """The scale of a finding read from `model`'s re-reading: its pairs per set and subsample draws (the
    main run's `scale_text` when the model was not re-read on a subsample)."""
    per = res.extra_max_pairs if model in res.extras else (res.reading_pairs or res.max_pairs)
    if res.read(model) is None or not per:
        return scale_text(res, model)
    n = res.readings[model].n_draws
    return f"{res.scale}: {model} on {per:,} pairs per set" + (f", {n} subsample draws" if n > 1 else "")


def encoder_text(res, model: str, pooling: str | None = None) -> str:
    """What was run for `model`: its main run, or with `pooling` its re-reading (`readings`)."""
    sets = len(res.run_of(model).pairs)
    per = res.per_run(model)
    if pooling is not None and res.read(model) is not None and model not in res.extras:
        per = res.reading_pairs
    sub = f"{per} pairs per set" if per else "every pair"
    pooling = pooling or (res.extra_pooling if model in res.extras else res.pooling)
    return f"{model}, {sets} STS sets ({sub}), {POOLING_TEXT[pooling]}, α = {res.alpha}"


def full_text(res, model: str) -> str:
    return (f"{model}, {len(res.datasets)} STS sets (every pair, {res.full_readings[model].n_pairs:,}), "
            f"{POOLING_TEXT[res.paper_pooling]}, α = {res.alpha}")


def reduced(model: str, per: int = 0, draws: int = 1) -> str:
    """A finding's setting phrase: the encoder in place of the paper's BERT-base-cased, and the subsample
    ("" for BERT-base-cased on every pair, the paper's setting)."""
    what = f" ({KIND_TEXT[model]})" if model in KIND_TEXT else ""
    parts = [] if model == PAPER_BERT else [f"on {model}{what} in place of BERT-base-cased"]
    if per:
        parts.append(f"{per:,} pairs per set" + (f", {draws} subsample draws" if draws > 1 else ""))
    return ", ".join(parts)


def raw_score(res, model: str) -> float:
    """`model`'s raw Table 1 Avg under the reading its Table 1 findings use."""
    if model in res.full_readings:
        return float(res.full_readings[model].scores()["vanilla"].mean())
    if res.read(model) is not None:
        return res.readings[model].raw_avg()
    return res.averages[model]["subset-mean"]["vanilla"]


def standin(res, model: str) -> str:
    """How far `model` is from BERT-base-cased on the baseline the paper reports (Table 1's raw Avg), under
    the reading its Table 1 findings use."""
    return (f"raw STS {raw_score(res, model):.2f} against BERT-base-cased's "
            f"{res.paper_value('vanilla', against=None):.2f} (Table 1 Avg)")


def _scope(res, model: str) -> dict[str, Any]:
    """A row's encoder: its label, its scope, and its distance from BERT-base-cased in size
    (`core.scale.model_distance`)."""
    return dict(label=LABEL.get(model, model), members=(model,),
                out_of_scope=CONTRASTIVE_SCOPE if model in (res.models[0], MPNET) else "",
                distance=model_distance(SIZE.get(model), SIZE[PAPER_BERT]))


def _raw_distance(res, model: str) -> Distance:
    """`model`'s raw Table 1 Avg against BERT-base-cased's: the baseline the paper reports."""
    return Distance("raw STS (Table 1 Avg)", raw_score(res, model), res.paper_value("vanilla", against=None), "score")


def _untested(res, model: str, needs: dict[str, str]) -> Partial:
    """A Table 1 finding this scale did not measure: what it needs and the command that runs it."""
    return Partial(measured="not run at this scale", effect=None, **_scope(res, model), **needs,
                section="sts-full" if model == MPNET else "sts-anisotropic")


_RERUN = dict(needs="the book preset's anisotropic encoders (a run of this scale did not include them)",
              command=COMMANDS["book"])
_UNREAD = {MPNET: dict(needs=f"{MPNET} read on every pair of the seven sets (the book preset's full_readings; about "
                             "forty CPU-minutes)", command=COMMANDS["book"])}
_SAMEFIT_NEEDS = dict(needs="the encoder's same-fit run on every pair (cross-fitting and half-sampling of whitening − "
                            "SoftDecay; it encodes every pair again)", command=COMMANDS["book"])


def _full_or_reading(res, model: str) -> dict[str, Any]:
    full = model in res.full_readings
    scope = _scope(res, model)
    scope["distance"] = (*scope["distance"], _raw_distance(res, model))
    return dict(scale=f"{res.scale}: {model} on every pair" if full else reading_scale_text(res, model),
                section="sts-full" if full else "sts-anisotropic", standin=standin(res, model), **scope)


# --- the readers: what each kind of row measures ---------------------------------------------------------------

def model_of(res, on: On) -> str:
    """The encoder a row reads (`FIRST`: the run's first model)."""
    return res.models[0] if on.encoder == FIRST else on.encoder


#: what a Student-t interval over the STS sets is taken over
SETS = "STS sets"


def _gain(res, on: On) -> Partial:
    """SoftDecay − raw for Table 1, from the closest reading there is: every pair (`full_readings`), else the
    re-reading under the paper-comparison pooling (over its draws), else the main run."""
    model = model_of(res, on)
    if model not in res.all_runs() and model not in res.full_readings:
        return _untested(res, model, _UNREAD.get(model, _RERUN))
    unit: dict[str, Any] = dict(unit="sentence pairs")
    if model in res.full_readings:
        eff, measured = res.full_readings[model].vs_raw(SD), full_text(res, model)
        how, red = "paired bootstrap over the pairs", reduced(model)
        unit["units"] = res.full_readings[model].n_pairs
    elif (rd := res.read(model)) is not None:
        eff = rd.over_draws(SD) if rd.n_draws > 1 else rd.vs_raw(SD)
        how = f"Student-t over {rd.n_draws} subsample draws" if rd.n_draws > 1 else "paired bootstrap over the pairs"
        measured, red = encoder_text(res, model, res.paper_pooling), reduced(model, rd.per_set, rd.n_draws)
        if rd.n_draws > 1:
            unit = dict(unit="subsample draws of sentence pairs")
    else:
        eff, measured = res.run_of(model).vs_raw(SD), encoder_text(res, model)
        how, red = "paired bootstrap over the pairs", reduced(model, res.per_run(model))
    if model == BOOK_BERT:
        measured += f"; anisotropic (mean EV₁ {res.run_of(model).mean_metric('vanilla'):.2f})"
    if model in KIND_TEXT:
        measured += f"; {KIND_TEXT[model]} ({SIZE_TEXT[model]})"
    trend = res.trend_reading(eff, raw_score(res, model), "SoftDecay") if eff.has_interval else ""
    return Partial(measured=measured, how=how, effect=eff, paper_value=res.paper_value("SoftDecay"),
                reduced=red, caveat=trend, at_scale=res.path_trend(SD) if model == BOOK_BERT else None, **unit,
                **_full_or_reading(res, model))


def _whitening(res, on: On) -> Partial:
    """whitening − SoftDecay for Table 1: cross-fitted, with the half-sampling procedure as its alternative, where
    the encoder's same-fit run exists; else as `Result.white_minus_sd` (one procedure)."""
    model = model_of(res, on)
    ran = set(res.all_runs())
    if model not in ran | set(res.full_readings) or (model not in ran and model not in res.samefit):
        return _untested(res, model, _SAMEFIT_NEEDS if model in res.full_readings else _UNREAD.get(model, _RERUN))
    if (same := res.samefit.get(model)) is not None:
        full = model in res.full_readings and same.n_pairs == res.full_readings[model].n_pairs
        measured = full_text(res, model) if full else encoder_text(res, model, res.paper_pooling)
        eff, how = same.iv(), CROSSFIT_HOW
        red = reduced(model, 0 if full else res.per_reading(model) or res.max_pairs)
        alt = (("half-samples without replacement", same.iv(how="halfsample")),)
        caveat = (f"transforms fitted once on all {same.n_pairs:,} pairs (the paper's estimate, no interval of its "
                  f"own): {same.point():+.2f}")
        unit: dict[str, Any] = dict(unit="sentence pairs", units=same.n_pairs)
    else:
        eff, how = res.white_minus_sd(model)
        alt, caveat = (), ("one procedure only: the cross-fitted reading needs the encoder's sentence embeddings"
                           + (", hence its weights (`python scripts/export_book_model.py --train`)"
                              if model == BOOK_BERT else ""))
        rd = res.read(model)
        unit = dict(unit="subsample draws of sentence pairs" if rd and rd.n_draws > 1 else "sentence pairs")
        measured = encoder_text(res, model, res.paper_pooling) if rd else encoder_text(res, model)
        red = reduced(model, rd.per_set, rd.n_draws) if rd else reduced(model, res.per_run(model))
    if model in KIND_TEXT:
        measured += f"; {KIND_TEXT[model]} ({SIZE_TEXT[model]})"
    margin = res.match_margin()
    if eff is not None and eff.has_interval:
        caveat = "; ".join(c for c in (caveat, res.trend_reading(eff, raw_score(res, model), "WhiteBERT",
                                                                   "SoftDecay")) if c)
    return Partial(measured=measured, how=how, effect=eff, reduced=red, alternatives=alt, caveat=caveat,
                paper_value=-res.paper_value("SoftDecay", against="WhiteBERT"),
                at_scale=res.path_trend("whitening", SD) if model == BOOK_BERT else None,
                extra={"likeness": verdict_of(eff, "equal", margin=margin), "margin": margin}, **unit,
                **_full_or_reading(res, model))


def _flipfree(res) -> Partial:
    """Flip-free SoftDecay on the first anisotropic encoder re-read (the book's own question: the paper's
    SoftDecay flips directions)."""
    reread = [m for m in (BOOK_BERT, SMOL) if m in res.extras and res.read(m) is not None]
    rd = res.readings[reread[0]] if reread else None
    several = rd is not None and rd.n_draws > 1
    how = (f"Student-t interval over {rd.n_draws} subsample draws" if several else
           "paired bootstrap over the pairs of one subsample draw")
    if rd is None:
        needs = res.unavailable.get(BOOK_BERT, "") or "the anisotropic encoders re-read under the authors' pooling"
        return Partial(measured="the book's MLM BERT and SmolLM2 are not re-read here", how=how,
                    effect=None, needs=needs + "; SmolLM2: re-read by the book preset (3 subsample draws, about twenty "
                    "CPU-minutes)", command=COMMANDS["book"])
    return Partial(measured=f"{encoder_text(res, rd.encoder, res.paper_pooling)}; σ clamped at |α|, so no direction "
                           "flips", how=how,
                effect=rd.over_draws("SoftDecay (clamped)") if several else rd.vs_raw("SoftDecay (clamped)"),
                scale=reading_scale_text(res, rd.encoder), reduced=reduced(rd.encoder, res.extra_max_pairs, rd.n_draws),
                unit="subsample draws of sentence pairs" if several else "sentence pairs")


def _table4(res, on: On) -> Partial | None:
    """SoftDecay's change of a Table 4 measure, per set (none where the encoder's run is not here)."""
    model = model_of(res, on)
    if model not in res.all_runs() or not res.run_of(model).table4:
        return None
    run, m = res.run_of(model), on.measure
    paper = np.mean([float(r["BERT"]) for r in res.paper_table4 if r["metric"] == m])
    return Partial(measured=encoder_text(res, model), how="Student-t over the seven sets",
                effect=run.metric_change(m), paper_value=res.paper_table4_change(m),
                reduced=reduced(model, res.per_run(model)), scale=scale_text(res, model),
                standin=f"raw {MEASURES[m]} {run.mean_metric('vanilla', m):.3f} against BERT's {paper:.3f} "
                        "(Table 4)",
                unit=SETS, **_scope(res, model))


def _control(res, on: On) -> Partial | None:
    """A Gaussian set of the embeddings' shape through SoftDecay against the embeddings (none without the
    first model's control)."""
    model = model_of(res, on)
    run = res.runs.get(model)
    if run is None or not run.control:
        return None
    return Partial(measured=f"{model}, {len(run.control)} STS sets: each set's sentence embeddings and a Gaussian set "
                         "of the same shape, mean and spread, both through SoftDecay",
                how="Student-t over the sets", effect=run.control_gap(on.measure),
                margin=0.1 * abs(run.metric_change(on.measure).estimate),
                reference_label="0 (alike within a tenth of the embeddings' own change)",
                reduced=reduced(model, res.per_run(model)), scale=scale_text(res, model), label=LABEL.get(model, model),
                unit=SETS)


_LSDS_WHAT = {"authors": ("the authors' code: LLE barycentre weights, self included", "the authors' code"),
              "eq. 6": ("eq. (6) as printed: raw RBF weights", "eq. (6) as printed"),
              "normalised": ("RBF weights normalised to sum to one", "normalised weights")}


def _lsds(res, on: On) -> Partial | None:
    """LSDS of SoftDecay − of whitening under one reading of eq. (6) (none without the first model's re-reading)."""
    model = model_of(res, on)
    if res.read(model) is None or not res.readings[model].lsds:
        return None
    what, label = _LSDS_WHAT[on.measure]
    return Partial(measured=f"{encoder_text(res, model, res.paper_pooling)}; LSDS with 12 neighbours, {what}",
                how="Student-t over the sets", effect=res.lsds_reading_gap(on.measure),
                reduced=reduced(model, res.reading_pairs), scale=reading_scale_text(res, model), members=(model,),
                label=label, out_of_scope=_scope(res, model)["out_of_scope"], unit=SETS)


#: the quantity of App. B's α sweep, with its grid's two ends
ALPHA_QUANTITY = "score at α = {hi} − at α = {lo}, Spearman ×100, mean over the sets"


def _alpha(res, on: On) -> Partial:
    """The α grid's two ends against the registry's fixed margin (`ALPHA_MARGIN`)."""
    model = model_of(res, on)
    run = res.runs[model]
    alphas = run.alpha_scores()
    return Partial(measured=f"{model}, {len(res.datasets)} STS sets, α swept over {len(alphas)} values",
                quantity=ALPHA_QUANTITY.format(hi=alphas.index.max(), lo=alphas.index.min()),
                effect=run.alpha_effect(),
                margin=ALPHA_MARGIN, reduced=reduced(model, res.max_pairs), scale=scale_text(res, model),
                out_of_scope=_scope(res, model)["out_of_scope"], unit=SETS)


#: the chapter's findings, in the order it lists them: per claim the encoder closest to the paper's BERT-base-cased
#: first (the book's MLM BERT, as anisotropic), then MiniLM and SmolLM2, then all-mpnet-base-v2 (read on every pair
#: only: a contrastive sentence encoder of BERT-base's size)
FINDINGS = (
    Spec("sts-gain-bert", read=On(_gain, BOOK_BERT), **_GAIN),
    Spec("sts-gain-minilm", read=On(_gain, FIRST), **_GAIN),
    Spec("sts-gain-smollm2", read=On(_gain, SMOL), **_GAIN),
    Spec("sts-gain-mpnet", read=On(_gain, MPNET), **_GAIN),
    Spec("sts-vs-whitening-bert", read=On(_whitening, BOOK_BERT), **_WHITE),
    Spec("sts-vs-whitening-minilm", read=On(_whitening, FIRST), **_WHITE),
    Spec("sts-vs-whitening-smollm2", read=On(_whitening, SMOL), **_WHITE),
    Spec("sts-vs-whitening-mpnet", read=On(_whitening, MPNET), **_WHITE),
    Spec("sts-flipfree", read=_flipfree, where="Table 1, property 1", claim_id="", kind="extension",
         claim="SoftDecay raises unsupervised STS with a transform that keeps the order of the singular values and the "
               "sign of every direction (property 1)",
         quantity="flip-free SoftDecay (σ clamped at |α|) − raw model, Spearman ×100, mean over the sets",
         section="sts-flips", more=dict(digits=2)),
    Spec("sts-ev1-bert", read=On(_table4, BOOK_BERT, "EV1"), **_EV1),
    Spec("sts-ev1-minilm", read=On(_table4, FIRST, "EV1"), **_EV1),
    Spec("sts-ev1-smollm2", read=On(_table4, SMOL, "EV1"), **_EV1),
    Spec("sts-control-ev1", read=On(_control, FIRST, "EV1"), **_CONTROL_EV1),
    Spec("sts-rbf-bert", read=On(_table4, BOOK_BERT, "RBF_dis"), **_RBF),
    Spec("sts-rbf-minilm", read=On(_table4, FIRST, "RBF_dis"), **_RBF),
    Spec("sts-rbf-smollm2", read=On(_table4, SMOL, "RBF_dis"), **_RBF),
    Spec("sts-control-rbf", read=On(_control, FIRST, "RBF_dis"), **_CONTROL_RBF),
    Spec("sts-tokenuni-bert", read=On(_table4, BOOK_BERT, "TokenUni"), **_UNI),
    Spec("sts-tokenuni-minilm", read=On(_table4, FIRST, "TokenUni"), **_UNI),
    Spec("sts-tokenuni-smollm2", read=On(_table4, SMOL, "TokenUni"), **_UNI),
    Spec("sts-control-tokenuni", read=On(_control, FIRST, "TokenUni"), **_CONTROL_UNI),
    # Fig. 6 under the three readings of eq. (6), the authors' code first (it drew the figure)
    Spec("sts-lsds-authors", read=On(_lsds, FIRST, "authors"), **_LSDS),
    Spec("sts-lsds-eq6", read=On(_lsds, FIRST, "eq. 6"), **_LSDS),
    Spec("sts-lsds", read=On(_lsds, FIRST, "normalised"), **_LSDS),
    Spec("sts-alpha", read=On(_alpha, FIRST), where="App. B", claim_id="yan-alpha", direction="equal",
         claim="The STS results do not change significantly across α ∈ {−0.2, …, −1.0}, so α = −0.6 is fixed",
         section="sts-alpha",
         more=dict(digits=2)),
)


def build(res) -> list[Finding]:
    """The findings of `FINDINGS` measured on `res`, in the table's order (a row its reader skips — a Table 4
    measure of an encoder not run, the LSDS readings without the first model's re-reading — is left out)."""
    return [f for spec in FINDINGS for f in spec.findings(res, paper="yan2022", chapter="sts")]
