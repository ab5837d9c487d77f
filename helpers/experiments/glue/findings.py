"""The GLUE chapter's findings, declared as data: `SPECS` is one row per finding (its key, the claim, what is
measured, the quantity and how it is read, the reference, the setting), its text written as templates; a reader
per kind of finding (`READERS`) computes the values the templates name from a `Result`, and `findings` turns the
table into `Finding`s. To follow a number from the page, grep its key here: the row names its reader."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.findings import Finding
from ...core.stats import t_interval
from ...hf.models import about
from .params import METRIC_NAMES, READINGS, expdecay_margin, paper_model_for, paper_tables, primary_metric
from .result import Result

#: how a finding says each ExpDecay reading
READING_TEXT = {"top5": "the five largest singular values, the authors' commented-out K",
                "all": "every singular value, the formula as printed",
                "squared": "the squared form of Wang et al. (2020)"}


@dataclass(frozen=True)
class Spec:
    """One finding of the chapter: `key`; `reads`, the reader (`READERS`) that computes its quantity, and `case`,
    which of the reader's cases it is (a task, (task, model), an ExpDecay reading, or None); the paper's `where`,
    `claim_id` and `claim`; what is `measured`, the `quantity`, the `reference` and how it is named; the setting
    (`scale`, and `reduced`: how it falls short of the paper's, said only when the model is not the paper's).
    The text fields are templates filled with the values the reader returns."""

    key: str
    reads: str
    case: Any
    where: str
    claim_id: str
    claim: str
    measured: str
    quantity: str
    section: str
    scale: str = ""
    reduced: str = ""
    label: str = ""
    direction: str = "above"
    reference: float = 0.0
    reference_label: str = "0"
    digits: int = 3
    needs: str = ""
    command: str = ""


_TABLE2_CLAIM = ("Fine-tuning {paper_model} with SoftDecay raises its {task} validation {name} from {paper_base:.2f} "
                 "to {paper_sd:.2f}")
_TABLE6_CLAIM = ("An exponential-decay regulariser of the singular values (ExpDecay) brings no substantial "
                 "improvement: on {tasks} it changes {paper_model}'s score by {paper_ed:+.2f} points on average")
_TABLE6_MEASURED = ("{model} fine-tuned on {tasks} with ExpDecay read as `{reading}` ({reading_text}), {n} seeds "
                    "paired with the baseline")
_TABLE6_QUANTITY = "ExpDecay ({reading}) − baseline, mean over {tasks} of each task's first metric, points"
_TABLE6_REFERENCE = ("+{margin:.2f} (no substantial improvement: at most the largest change the paper still calls "
                     "none; a loss does not contradict it)")


def _table2(key: str, task: str) -> Spec:
    return Spec(key, "softdecay", task, "Table 2", "yan-table2-gain", _TABLE2_CLAIM,
                measured=("{model} fine-tuned on {task} ({n_train:,} training examples, {epochs} epochs, lr {lr:g}, "
                          "α₀ {alpha:+.1f}), {n} seeds paired with the baseline"),
                quantity="SoftDecay − baseline validation {name}, points", section="glue-scores", digits=2,
                reduced="on {model} in place of {paper_model}", label="{task}, {model}",
                scale="{scale}: {model} in place of {paper_model}; {n} seeds where the paper reports one run")


def _wide(key: str, task: str, model: str) -> Spec:
    return Spec(key, "wide", (task, model), "Table 2", "yan-table2-gain", _TABLE2_CLAIM,
                measured=("{model} fine-tuned on {task} ({n_train:,} training examples, {epochs} epochs, lr {lr:g}, "
                          "α₀ {alpha:+.1f}, neither selected), {n} seeds paired with the baseline{what}"),
                quantity="SoftDecay − baseline validation {name} on {task}, points", section="glue-rte-wide", digits=2,
                reduced="on {model} in place of {paper_model}, with α₀ {alpha:+.1f} fixed, not selected",
                label="{task}, {model}",
                scale=("{scale}: {model} in place of {paper_model}; {n} seeds where the paper reports one run; lr "
                       "{lr:g} (the paper's) and α₀ {alpha:+.1f} fixed, where the paper selects α₀ from -0.2, -0.5 "
                       "and -0.8"))


def _table6(key: str, reading: str) -> Spec:
    return Spec(key, "expdecay", reading, "Table 6, App. D.1", "yan-table6-expdecay", _TABLE6_CLAIM,
                _TABLE6_MEASURED, _TABLE6_QUANTITY, section="glue-expdecay", direction="at most",
                reference_label=_TABLE6_REFERENCE, digits=2, reduced="on {model} in place of {paper_model}",
                label="{reading}",
                scale="{scale}: {model} in place of {paper_model}; {n} seeds where the paper reports one run")


#: the chapter's findings; within a reader, the findings come out in the order its cases are run
SPECS: tuple[Spec, ...] = (
    _table2("glue-softdecay-cola", "CoLA"),
    _table2("glue-softdecay-sst-2", "SST-2"),
    _table2("glue-softdecay-mrpc", "MRPC"),
    _table2("glue-softdecay-qnli", "QNLI"),
    _table2("glue-softdecay-rte", "RTE"),
    _wide("glue-softdecay-rte-mpnet", "RTE", "all-mpnet-base-v2"),
    _wide("glue-softdecay-rte-minilm", "RTE", "all-MiniLM-L6-v2"),
    Spec("glue-flatter-spectrum", "flatter", None, "App. D, Fig. 9", "yan-fig9-flatter",
         claim=("Fine-tuned with SoftDecay, {paper_model}'s last layer has a flatter singular-value CDF than "
                "fine-tuned without it"),
         measured=("{model} fine-tuned on {tasks} with and without SoftDecay, {n} paired seeds, validation "
                   "sentences"),
         quantity="SoftDecay − baseline median normalised singular value of the last layer (mean over tasks)",
         section="glue-spectra", reduced="on {model} in place of {paper_model}",
         scale="{scale}: {model} in place of {paper_model}"),
    Spec("glue-size", "size", None, "App. D.2, Fig. 8", "yan-size-uniformity",
         claim=("Fine-tuned on a larger training set, a model's last layer has a more skewed spectrum (a smaller "
                "normalised singular value at CDF 0.8): QNLI (105k) against RTE (2.5k) for BERT"),
         measured=("{model} fine-tuned without SoftDecay on {large} ({n_large:,} training examples) and {small} "
                   "({n_small:,}), {n} seeds; {n_spectra} validation examples each, read before and after "
                   "fine-tuning"),
         quantity="change fine-tuning makes to the last layer's value at CDF 0.8, {large} − {small}",
         section="glue-fig8", direction="below",
         reduced="on {model}, {large} against {small}, in place of {paper_model}, QNLI against RTE",
         scale="{scale}: {model} in place of {paper_model}; {large} and {small} in place of QNLI and RTE"),
    _table6("glue-expdecay-all", "all"),
    _table6("glue-expdecay-top5", "top5"),
    _table6("glue-expdecay-squared", "squared"),
    Spec("glue-paper-models", "paper-models", None, "Table 2, Table 6", "yan-table2-gain",
         claim=("SoftDecay improves BERT-base, ALBERT and DistilBERT on most of CoLA, SST-2, MRPC, QNLI and RTE, "
                "and ExpDecay brings no substantial improvement"),
         measured="not run: the paper's models and QNLI's training split come from the Hugging Face hub",
         quantity="SoftDecay − baseline per model and task, points", section="glue-differs",
         needs="the Hugging Face hub (and a GPU for SST-2 and QNLI in hours, not days)",
         command="make rerun CHAPTER=glue SCALE=paper"),
)

Values = dict[str, Any]


def _softdecay(res: Result) -> Iterator[tuple[Any, Values]]:
    """Table 2 on the grid model: SoftDecay − baseline per task, paired over the comparison seeds."""
    for task in res.tasks:
        d = res.differences(task)
        if not d:
            continue
        row = res.summary_row(task)
        run = res.run_for(task, "softdecay", res.seeds[0])
        yield task, dict(task=task, name=METRIC_NAMES[primary_metric(task)], paper_base=row["paper baseline"],
                         paper_sd=row["paper softdecay"], n_train=run.train_examples, epochs=res.epochs,
                         lr=row["lr"], alpha=row["α₀"], n=len(d), effect=t_interval(d),
                         paper_value=res.paper_gain(task), extra={"detectable_80": res.detectable(task)})


def _wide_encoder(res: Result) -> Iterator[tuple[Any, Values]]:
    """Table 2's RTE gain on the larger encoder (after the grid's; a reduced test, it decides beside them)."""
    d = res.wide_differences()
    if not d:
        return
    model, first = res.wide_model, res.wide_run("softdecay", res.wide_seeds()[0])
    base, sd = res.wide_paper()
    what = about(model)
    yield (first.task, model), dict(
        model=model, paper_model=paper_model_for(model, set(paper_tables().model)), task=first.task,
        name="accuracy", paper_base=base, paper_sd=sd, n_train=first.train_examples, epochs=len(first.val_acc),
        lr=first.lr, alpha=first.alpha, n=len(d), what=f"; {model} is {what}" if what else "",
        effect=t_interval(d), paper_value=sd - base, extra={"detectable_80": res.wide_detectable()})


def _flatter(res: Result) -> Iterator[tuple[Any, Values]]:
    """App. Fig. 9: the flatter last-layer spectrum (`Result.flattening`)."""
    flat = res.flattening()
    if flat.n:
        yield None, dict(n=flat.n, effect=flat)


def _size(res: Result) -> Iterator[tuple[Any, Values]]:
    """App. D.2, Fig. 8: the training-set size (`Result.size_effect`)."""
    size = res.size_effect()
    if size.n:
        sizes = res.train_sizes()
        small, large = next(iter(sizes)), list(sizes)[-1]
        yield None, dict(small=small, large=large, n_small=sizes[small], n_large=sizes[large], n=size.n,
                         n_spectra=res.spectra_n(large), effect=size)


def _expdecay(res: Result) -> Iterator[tuple[Any, Values]]:
    """Table 6, per reading (the printed formula first): "no substantial improvement", read as at most the
    paper's own largest ExpDecay change (`params.expdecay_margin`)."""
    paper_ed, margin = res.paper_expdecay_gain(), expdecay_margin()
    order = [READINGS[r][1] for r in ("all", "top5", "squared")]
    for label in sorted(res.expdecay_labels(), key=order.index):
        reading = next(k for k, (_s, lab) in READINGS.items() if lab == label)
        eff = res.expdecay_effect(label)
        if eff.n:
            yield reading, dict(reading=reading, reading_text=READING_TEXT[reading], paper_ed=paper_ed, n=eff.n,
                                effect=eff, margin=margin, paper_value=None if np.isnan(paper_ed) else paper_ed)


def _paper_models(res: Result) -> Iterator[tuple[Any, Values]]:
    """The paper's own models: not testable offline (listed when the grid ran none of them)."""
    if not set(res.models) & set(paper_tables().model):
        yield None, dict(effect=None)


#: the readers, in the order their findings are listed
READERS: dict[str, Callable[[Result], Iterator[tuple[Any, Values]]]] = {
    "softdecay": _softdecay, "wide": _wide_encoder, "flatter": _flatter, "size": _size, "expdecay": _expdecay,
    "paper-models": _paper_models}


def spec_for(reads: str, case: Any) -> Spec:
    """The row of `SPECS` for a reader's case; a case without one raises KeyError (keys are literals)."""
    spec = next((s for s in SPECS if (s.reads, s.case) == (reads, case)), None)
    if spec is None:
        raise KeyError(f"glue.SPECS has no finding for {reads} {case!r}: add a row there (keys are literals, "
                       "never built)")
    return spec


def build(spec: Spec, values: Values) -> Finding:
    """One `Finding` from its row and the values its reader computed (the templates filled with them)."""
    v = dict(values)
    text = {name: getattr(spec, name).format(**v) for name in
            ("claim", "measured", "quantity", "scale", "label", "reference_label")}
    return Finding(key=spec.key, paper="yan2022", where=spec.where, claim_id=spec.claim_id, effect=v["effect"],
                   direction=spec.direction, reference=spec.reference, paper_value=v.get("paper_value"),
                   margin=v.get("margin"), digits=spec.digits, section=spec.section, chapter="glue",
                   reduced="" if v.get("model") == v.get("paper_model") else spec.reduced.format(**v),
                   needs=spec.needs, command=spec.command, extra=v.get("extra", {}), **text)


def findings(res: Result) -> list[Finding]:
    """The chapter's findings: SoftDecay − baseline per task (Table 2), then on RTE with the larger encoder, the
    flatter last-layer spectrum (App. Fig. 9), the training-set size (App. D.2, Fig. 8), ExpDecay − baseline per
    reading over the tasks (Table 6), and the paper's own models (not testable offline)."""
    model = res.models[0]
    common = dict(model=model, paper_model=paper_model_for(model, set(paper_tables().model)), scale=res.scale,
                  tasks=", ".join(res.tasks))
    return [build(spec_for(reads, case), common | values)
            for reads, reader in READERS.items() for case, values in reader(res)]
