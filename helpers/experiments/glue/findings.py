"""The GLUE chapter's findings, declared as data: `FINDINGS` is a table of `core.findings.Spec` rows, one per
finding or per table of keys (a task, a reading), each with its claim, where, section and what it predicts; its
`read`, a reader below, computes the rest from a `Result` (the effect, what was measured, the setting), one
`core.findings.Partial` per case it has (none when the run has none). To follow a number from the page, grep its
key: it is in a row, or in a table of keys a row names. `findings(res)` turns the table into `Finding`s, in the
table's order."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.findings import Finding, Partial, Spec
from ...core.scale import Distance, model_distance
from ...core.stats import t_interval
from ...hf.models import SIZE, about
from .params import METRIC_NAMES, READINGS, expdecay_margin, paper_model_for, paper_tables, primary_metric
from .result import Result

#: how a finding says each ExpDecay reading
READING_TEXT = {"top5": "the five largest singular values, the authors' commented-out K",
                "all": "every singular value, the formula as printed",
                "squared": "the squared form of Wang et al. (2020)"}
#: the finding key of Table 2's gain on the grid model, by task
TABLE2_KEYS = {"CoLA": "glue-softdecay-cola", "SST-2": "glue-softdecay-sst-2", "MRPC": "glue-softdecay-mrpc",
               "QNLI": "glue-softdecay-qnli", "RTE": "glue-softdecay-rte"}
#: the finding key of Table 2's gain on the larger encoder, by (task, model)
WIDE_KEYS = {("RTE", "all-mpnet-base-v2"): "glue-softdecay-rte-mpnet",
             ("RTE", "all-MiniLM-L6-v2"): "glue-softdecay-rte-minilm"}
#: the finding key of Table 6 under each reading of ExpDecay
TABLE6_KEYS = {"all": "glue-expdecay-all", "top5": "glue-expdecay-top5", "squared": "glue-expdecay-squared"}

TABLE2_CLAIM = ("Fine-tuning {paper_model} with SoftDecay raises its {task} validation {name} from {paper_base:.2f} "
                "to {paper_sd:.2f}")
#: how a finding with several seeds says the paper's single run
SEEDS = "; {n} seeds where the paper reports one run"


def findings(res: Result) -> list[Finding]:
    """The chapter's findings: SoftDecay − baseline per task (Table 2), then on RTE with the larger encoder, the
    flatter last-layer spectrum (App. Fig. 9), the training-set size (App. D.2, Fig. 8), ExpDecay − baseline per
    reading over the tasks (Table 6), and the paper's own models (not testable offline)."""
    return [f for spec in FINDINGS for f in spec.findings(res, paper="yan2022", chapter="glue")]


# ------------------------------------------------------------------ the readers


def paper_model(model: str) -> str:
    """The paper's model `model` stands in for."""
    return paper_model_for(model, set(paper_tables().model))


def stand_in(res: Result, model: str, reduced: str = "", scale: str = "",
             baseline: tuple[Distance, ...] = ()) -> dict[str, Any]:
    """A finding's `reduced` and `scale` on `model` in place of the paper's model (`reduced` is empty when it is the
    paper's), each followed by what else falls short of the paper's setting; and its `distance` from the paper's
    model: parameters, layers, width (`hf.models.SIZE`), then the `baseline` scores the reader compares."""
    paper, instead = paper_model(model), f"{model} in place of {paper_model(model)}"
    if model == paper:
        return dict(reduced="", scale=f"{res.scale}: {instead}{scale}")
    return dict(reduced=f"on {instead}{reduced}", scale=f"{res.scale}: {instead}{scale}",
                distance=model_distance(SIZE.get(model), SIZE.get(paper)) + baseline)


def baseline(what: str, ours: float | None, paper: float) -> tuple[Distance, ...]:
    """Our tuned baseline's score against the paper's (Table 2), as one `Distance` (unit "score"; the paper's None
    where it reports none); none where our summary holds no baseline score."""
    paper, ours = _number(paper), _number(ours)
    if np.isnan(ours):
        return ()
    return (Distance(f"baseline {what}", ours, None if np.isnan(paper) else paper, "score"),)


def _number(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def table2(model: str, task: str, name: str, d: list[float], base: float, sd: float, run, epochs: int, lr: float,
           alpha: float, fixed: str = "", what: str = "") -> dict[str, Any]:
    """A Table 2 finding on `model` and `task` (its metric `name`), the seed-paired differences `d` (`run`: its
    first SoftDecay run; `fixed`: what was fixed rather than selected; `what`: what the model is)."""
    return dict(claim=TABLE2_CLAIM.format(paper_model=paper_model(model), task=task, name=name, paper_base=base,
                                          paper_sd=sd),
                measured=f"{model} fine-tuned on {task} ({run.train_examples:,} training examples, {epochs} epochs, "
                         f"lr {lr:g}, α₀ {alpha:+.1f}{fixed}), {len(d)} seeds paired with the baseline{what}",
                label=f"{task}, {model}", effect=t_interval(d))


def _softdecay(res: Result) -> list[Partial]:
    """Table 2 on the grid model: SoftDecay − baseline per task, paired over the comparison seeds."""
    model, out = res.models[0], []
    for task in res.tasks:
        if d := res.differences(task):
            row = res.summary_row(task)
            name = METRIC_NAMES[primary_metric(task)]
            out.append(Partial(**table2(model, task, name, d, row["paper baseline"], row["paper softdecay"],
                              res.run_for(task, "softdecay", res.seeds[0]), res.epochs, row["lr"], row["α₀"])
                       | stand_in(res, model, scale=SEEDS.format(n=len(d)),
                                  baseline=baseline(f"{task} {name}", row.get("baseline"), row["paper baseline"]))
                       | dict(case=task, quantity=f"SoftDecay − baseline validation {name}, points",
                              paper_value=res.paper_gain(task), extra={"detectable_80": res.detectable(task)})))
    return out


def _wide(res: Result) -> list[Partial]:
    """Table 2's RTE gain on the larger encoder (after the grid's; a reduced test, it decides beside them)."""
    if not (d := res.wide_differences()):
        return []
    model, first = res.wide_model, res.wide_run("softdecay", res.wide_seeds()[0])
    (base, sd), what, a = res.wide_paper(), about(model), f"α₀ {first.alpha:+.1f}"
    return [Partial(**table2(model, first.task, "accuracy", d, base, sd, first, len(first.val_acc), first.lr,
                             first.alpha, ", neither selected", f"; {model} is {what}" if what else "")
            | stand_in(res, model, f", with {a} fixed, not selected",
                       SEEDS.format(n=len(d)) + f"; lr {first.lr:g} (the paper's) and {a} fixed, where the paper "
                                                "selects α₀ from -0.2, -0.5 and -0.8",
                       baseline(f"{first.task} accuracy", np.mean(res.wide_scores("baseline")), base))
            | dict(case=(first.task, model), paper_value=sd - base, extra={"detectable_80": res.wide_detectable()},
                   quantity=f"SoftDecay − baseline validation accuracy on {first.task}, points"))]


def _flatter(res: Result) -> Partial | None:
    """App. Fig. 9: the flatter last-layer spectrum (`Result.flattening`)."""
    flat, model = res.flattening(), res.models[0]
    if not flat.n:
        return None
    return Partial(claim=f"Fine-tuned with SoftDecay, {paper_model(model)}'s last layer has a flatter singular-value "
                      "CDF than fine-tuned without it",
                measured=f"{model} fine-tuned on {', '.join(res.tasks)} with and without SoftDecay, {flat.n} paired "
                         "seeds, validation sentences", effect=flat, **stand_in(res, model))


def _size(res: Result) -> Partial | None:
    """App. D.2, Fig. 8: the training-set size (`Result.size_effect`)."""
    size, model = res.size_effect(), res.models[0]
    if not size.n:
        return None
    sizes = res.train_sizes()
    small, large = next(iter(sizes)), list(sizes)[-1]
    paper = paper_model(model)
    return Partial(measured=f"{model} fine-tuned without SoftDecay on {large} ({sizes[large]:,} training examples) and "
                         f"{small} ({sizes[small]:,}), {size.n} seeds; {res.spectra_n(large)} validation examples "
                         "each, read before and after fine-tuning",
                quantity=f"change fine-tuning makes to the last layer's value at CDF 0.8, {large} − {small}",
                effect=size, scale=f"{res.scale}: {model} in place of {paper}; {large} and {small} in place of QNLI "
                                   "and RTE",
                reduced="" if model == paper else f"on {model}, {large} against {small}, in place of {paper}, QNLI "
                                                  "against RTE",
                distance=() if model == paper else model_distance(SIZE.get(model), SIZE.get(paper)))


def _expdecay(res: Result) -> list[Partial]:
    """Table 6, per reading (the printed formula first): "no substantial improvement", read as at most the
    paper's own largest ExpDecay change (`params.expdecay_margin`)."""
    paper_ed, margin, model, tasks = res.paper_expdecay_gain(), expdecay_margin(), res.models[0], ", ".join(res.tasks)
    order = [READINGS[r][1] for r in ("all", "top5", "squared")]
    rows = [r for t in res.tasks if (r := res.summary_row(t)) and "baseline" in r]
    over_tasks = baseline(f"mean over {tasks}", np.mean([r["baseline"] for r in rows]),
                          np.mean([_number(r.get("paper baseline")) for r in rows])) if rows else ()
    out = []
    for label in sorted(res.expdecay_labels(), key=order.index):
        reading = next(k for k, (_s, lab) in READINGS.items() if lab == label)
        if (eff := res.expdecay_effect(label)).n:
            out.append(Partial(
                case=reading, effect=eff, margin=margin, paper_value=None if np.isnan(paper_ed) else paper_ed,
                claim=("An exponential-decay regulariser of the singular values (ExpDecay) brings no substantial "
                       f"improvement: on {tasks} it changes {paper_model(model)}'s score by {paper_ed:+.2f} points "
                       "on average"),
                measured=f"{model} fine-tuned on {tasks} with ExpDecay read as `{reading}` ({READING_TEXT[reading]}), "
                         f"{eff.n} seeds paired with the baseline",
                quantity=f"ExpDecay ({reading}) − baseline, mean over {tasks} of each task's first metric, points",
                reference_label=f"+{margin:.2f} (no substantial improvement: at most the largest change the paper "
                                "still calls none; a loss does not contradict it)",
                label=reading, **stand_in(res, model, scale=SEEDS.format(n=eff.n), baseline=over_tasks)))
    return out


def _paper_models(res: Result) -> Partial | None:
    """The paper's own models: not testable offline (listed when the grid ran none of them)."""
    return None if set(res.models) & set(paper_tables().model) else Partial(None)


# ------------------------------------------------------------------ the table

#: the chapter's findings; a row with a table of keys gives its findings in the order its reader runs the cases
FINDINGS: tuple[Spec, ...] = (
    Spec(TABLE2_KEYS, "Table 2", claim_id="yan-table2-gain", section="glue-scores", read=_softdecay,
         more=dict(digits=2)),
    Spec(WIDE_KEYS, "Table 2", claim_id="yan-table2-gain", section="glue-rte-wide", read=_wide,
         more=dict(digits=2)),
    Spec("glue-flatter-spectrum", "App. D, Fig. 9", claim_id="yan-fig9-flatter", section="glue-spectra",
         quantity="SoftDecay − baseline median normalised singular value of the last layer (mean over tasks)",
         read=_flatter),
    Spec("glue-size", "App. D.2, Fig. 8", claim_id="yan-size-uniformity", section="glue-fig8", direction="below",
         claim=("Fine-tuned on a larger training set, a model's last layer has a more skewed spectrum (a smaller "
                "normalised singular value at CDF 0.8): QNLI (105k) against RTE (2.5k) for BERT"),
         read=_size),
    Spec(TABLE6_KEYS, "Table 6, App. D.1", claim_id="yan-table6-expdecay", section="glue-expdecay",
         direction="at most", read=_expdecay, more=dict(digits=2)),
    Spec("glue-paper-models", "Table 2, Table 6", claim_id="yan-table2-gain", section="glue-differs",
         claim=("SoftDecay improves BERT-base, ALBERT and DistilBERT on most of CoLA, SST-2, MRPC, QNLI and RTE, "
                "and ExpDecay brings no substantial improvement"),
         measured="not run: the paper's models and QNLI's training split come from the Hugging Face hub",
         quantity="SoftDecay − baseline per model and task, points", read=_paper_models,
         more=dict(needs="the Hugging Face hub (and a GPU for SST-2 and QNLI in hours, not days)",
                   command="make rerun CHAPTER=glue SCALE=paper")),
)
