"""The queries-and-keys chapter's findings, declared as data: `FINDINGS` is a table of specs (`core.findings.Spec`),
one per finding in the chapter's order — Godey et al. §5's claims read from the trajectories (alignment beyond
chance, its sign in the first layer, the growth of |Q̄·K̄|, the fall of attention entropy), the centring test (the
book's own question), the released models' end state, and the trained-model bar a CPU cannot reach — and
`findings(res)` turns it into `Finding`s. A spec's key is written here once; its other columns are values or
functions of the `Result`. `measured`, `scale`, `reduced` and `cannot_test_trajectory` say what was run and why a
trajectory may give no verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.findings import Finding, Partial, Spec
from ...core.scale import Distance
from .params import (
    ALMOST_ALL,
    LONG_COMMAND,
    MULTIBERT_LAYERS,
    MULTIBERT_TOKENS,
    MULTIBERT_WIDTH,
    TARGET_BELOW_UNIGRAM,
)

if TYPE_CHECKING:
    from .result import Result
else:
    Result = Any


def measured(res: Result) -> str:
    """What was run: the checkpoints or the pretraining, and the samples read."""
    if res.source == "multiberts":
        return f"MultiBERT checkpoints of {len(res.seeds)} seeds at steps {res.steps[0]:,}–{res.steps[-1]:,}"
    return (f"{res.what}, pretrained here: {len(res.seeds)} seeds × {max(res.steps):,} steps of "
            f"{res.batch_size} × {res.seq_len} tokens; read on {res.n_samples} held-out WikiText-103 paragraphs")


def scale(res: Result) -> str:
    """The scale the trajectories were read at."""
    if res.source == "multiberts":
        return "paper: MultiBERT"
    return f"{res.scale}: {res.tokens_seen:,} tokens per seed"     # the share of MultiBERT's: `reduced`


def reduced(res: Result) -> str:
    """How the trajectories fall short of the paper's setting: "" on MultiBERT's checkpoints."""
    if res.source == "multiberts":
        return ""
    return (f"on the book's own {res.what.removeprefix('our ').split(',')[0]} BERT at about "
            f"1/{float(f'{MULTIBERT_TOKENS / res.tokens_seen:.2g}'):,.0f} of MultiBERT's tokens")


def distance(res: Result) -> tuple[Distance, ...]:
    """How far the book's own pretraining is from MultiBERT's: training tokens per seed, layers, width (none on
    MultiBERT's checkpoints). Parameters are left out: the paper does not state MultiBERT's count."""
    if res.source == "multiberts":
        return ()
    return (Distance("training tokens", res.tokens_seen, MULTIBERT_TOKENS, "tokens"),
            Distance("layers", res.n_layers, MULTIBERT_LAYERS),
            Distance("width", res.n_heads * res.d_k, MULTIBERT_WIDTH))


def cannot_test_trajectory(res: Result) -> str:
    """Why these trajectories cannot test the paper's claims on BERT's pretraining ("" when they can: on
    MultiBERT's checkpoints, or on a model whose held-out loss ends `TARGET_BELOW_UNIGRAM` nats or more below
    the unigram predictor)."""
    if res.source == "multiberts":
        return ""
    below = res.pretraining_reading()["below_unigram"]
    if np.isfinite(below) and below >= TARGET_BELOW_UNIGRAM:
        return ""
    ends = (f"ends {below:.2f} nats below the unigram predictor" if np.isfinite(below)
            else "has no unigram baseline recorded")
    return (f"the book's own model {ends}, short of the {TARGET_BELOW_UNIGRAM} nats of a model that uses its "
            "context: its trajectory cannot stand for BERT's pretraining (section 'How far the model learned')")


def findings(res: Result) -> list[Finding]:
    """The chapter's findings on `res`, in the order of `FINDINGS` (the end state's only where models were
    measured)."""
    return [spec.finding(res, paper="godey2024", chapter="qk") for spec in FINDINGS if spec.when(res)]


# ------------------------------------------------------------------ what the findings read


def aligned_measured(res: Result) -> str:
    """The run, with the aligned heads per seed in each layer (mean over seeds) and the layers that have any."""
    per_layer = ", ".join(f"layer {r['layer']} {r['aligned'].estimate:.1f}" for r in res.layer_rows())
    layers = res.aligned_layers()
    where = ("no layer" if not layers else f"layer {layers[0]}" if len(layers) == 1 else
             "layers " + ", ".join(str(li) for li in layers[:-1]) + f" and {layers[-1]}")
    return f"{measured(res)}; aligned heads per seed of {res.n_heads}: {per_layer} (aligned heads only in {where})"


def centring_measured(res: Result) -> str:
    """The run, with its centred twins where the ablation ran."""
    if not res.ablation_summary:
        return measured(res)
    return (f"{measured(res)}; each seed also pretrained with every block output centred over its sequence (same "
            "initialisation and batches); layers 1 and up, where centring removes the drift")


def centring_effect(res: Result):
    """Centred − plain entropy fall in layers 1.., seed-paired (None without the ablation)."""
    return res.ablation_summary.later_interval("diff_drop") if res.ablation_summary else None


def end_state_measured(res: Result) -> str:
    """The released models, their data, and how many of their untrained twins' heads are aligned."""
    missing = f"; not measured: {', '.join(res.end_state_missing)}" if res.end_state_missing else ""
    return (f"{', '.join(res.end_state)}, as released, on about {max(r.n_sequences for r in res.end_state.values())} "
            "in-domain sequences each (antibody chains, reaction SMILES, WikiText-103); rotary queries and keys "
            "after the rotation; the untrained twins (same architectures, random init) have "
            f"{res.end_state_aligned('twin').estimate:.1%} of heads aligned{missing}")


#: what the findings read from the book's own pretraining share: how it falls short of MultiBERT's, and why it
#: gives no verdict while that model has not learned
RUN = dict(reduced=reduced, scale=scale, distance=distance)
TRAJECTORY = dict(RUN, cannot_test=cannot_test_trajectory, digits=2)


def trend(quantity: str) -> dict:
    """A trajectory finding's columns with its trend to MultiBERT's tokens (`Result.trend`), the quantity named in
    its `extra` (`Result.trend_finding`)."""
    return dict(TRAJECTORY, at_scale=lambda res: res.trend(quantity), extra={"trend": quantity})


#: the claim of Fig. 13, tested on the trajectories and on the released models' end state
ALIGNED = ("Almost all heads see the mean query and the mean key align, in common or opposite directions, along "
           "training; in a 64-dimensional head such an alignment is very unlikely by chance.")

FINDINGS: tuple[Spec, ...] = (
    Spec("qk-aligned-heads", where="Fig. 13", section="qk-alignment", claim_id="godey-fig13-aligned",
         claim=ALIGNED, measured=aligned_measured,
         quantity=lambda res: f"share of heads with |cos(Q̄, K̄)| ≥ {res.threshold} at the last step",
         read=lambda res: Partial(res.aligned_share()), direction="above", reference=ALMOST_ALL,
         reference_label=lambda res: f"almost all: {ALMOST_ALL:g} (chance {res.chance_share:.1e})",
         more=trend("aligned")),
    Spec("qk-first-layer-common", where="Fig. 13, §5", section="qk-alignment", claim_id="godey-fig13-layers",
         claim="The first layers display a common-direction dynamic (cos(Q̄, K̄) increases); the last layers an "
               "opposite-direction one.",
         measured=measured, quantity="final cos(Q̄, K̄) of layer 0, mean over its heads",
         read=lambda res: Partial(res.first_layer_cos()), direction="above", more=trend("first_layer_cos")),
    Spec("qk-dot-growth", where="Fig. 14", section="qk-scalar-products", claim_id="godey-fig14-dot",
         claim="The drift of the mean query and key increases the magnitude of their scalar product.",
         measured=measured,
         quantity="log10 growth of |Q̄·K̄| from step 0 to the last step, in the layer where it grows least",
         read=lambda res: Partial(res.dot_growth()), direction="above", reference_label="0 (no growth)",
         more=trend("dot_growth")),
    Spec("qk-entropy-falls", where="Fig. 15", section="qk-entropy", claim_id="godey-fig15-entropy",
         claim="Training induces a decay of the attention entropy in all layers.", measured=measured,
         quantity="fall of the mean attention-row entropy from step 0 to the last step, in the layer where it "
                  "falls least (nats)",
         read=lambda res: Partial(res.entropy_fall()), direction="above", more=trend("entropy_fall")),
    # measured where the centring ablation ran; otherwise (MultiBERT) what it needs
    Spec("qk-centring", where="§6–7, Limitations", section="qk-centring", claim_id="godey-s6-sharp-attention",
         kind="extension",
         claim="The drift of queries and keys along a common direction allows sharper attention patterns (the "
               "paper does not prove that sharp attention cannot emerge without it).",
         measured=centring_measured,
         quantity="entropy fall with centred blocks minus with plain blocks, layers 1 and up, seed-paired (nats)",
         read=lambda res: Partial(centring_effect(res)), direction="below",
         more=dict(RUN, digits=2,
                   needs=lambda res: "" if res.ablation_summary else "our own pretraining (not MultiBERT)",
                   command=lambda res: "" if res.ablation_summary else "make rerun CHAPTER=qk SCALE=book")),
    Spec("qk-end-state", where="Fig. 13, §5", section="qk-end-state", claim_id="godey-fig13-aligned",
         claim=ALIGNED, measured=end_state_measured,
         quantity=lambda res: f"share of heads with |cos(Q̄, K̄)| ≥ {res.threshold} in the pretrained models, pooled "
                              "(bootstrap over heads within each model)",
         read=lambda res: Partial(res.end_state_aligned()), direction="above", reference=ALMOST_ALL,
         reference_label=lambda res: f"almost all: {ALMOST_ALL:g} (chance {res.end_state_chance_share():.1e})",
         when=lambda res: bool(res.end_state),
         more=dict(digits=2, unit="heads", units=lambda res: res.end_state_summary()["n_heads"],
                   reduced=lambda res: f"on {len(res.end_state)} released models' end state in place of "
                                       "MultiBERT's trajectory",
                   distance=lambda res: (Distance("released models read at their end state, in place of MultiBERT's "
                                                  "checkpoints", len(res.end_state), None, "models"),),
                   scale="the released models' own pretraining (no trajectory: the end state only)")),
    Spec("qk-trained-model", where="§5", section="qk-pretraining", claim_id="godey-s5-multibert",
         claim="These dynamics are those of BERT's pretraining to its end (MultiBERT: 2M steps of 256 × 512 "
               "tokens), in a model that has learned to use its context.",
         measured=measured,
         quantity=f"the same measurements on a model whose held-out MLM loss ends {TARGET_BELOW_UNIGRAM} nats or "
                  "more below the unigram predictor",
         direction="above", more=dict(RUN, needs="a GPU", command=LONG_COMMAND)),
)
