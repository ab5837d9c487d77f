"""The queries-and-keys chapter's findings: Godey et al. §5's claims read from the trajectories (alignment beyond
chance, its sign in the first layer, the growth of |Q̄·K̄|, the fall of attention entropy), the centring test, the
released models' end state, and the trained-model bar a CPU cannot reach. `findings(res)` builds them; `measured`,
`scale`, `reduced` and `cannot_test_trajectory` say what was run and why a trajectory may give no verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...core.findings import Finding
from .params import ALMOST_ALL, LONG_COMMAND, MULTIBERT_TOKENS, TARGET_BELOW_UNIGRAM

if TYPE_CHECKING:
    from .result import Result


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
    """Godey et al. §5's claims on these runs: alignment of Q̄ and K̄ beyond chance (Fig. 13), its sign in
    the first layer, the growth of |Q̄·K̄| (Fig. 14), the fall of attention entropy (Fig. 15) — read from
    the book's own pretraining, which gives no verdict while that model has not learned
    (`cannot_test_trajectory`) —, the released models' end state, the centring test (the book's own
    question), and the trained-model bar a CPU cannot reach."""
    traj = dict(reduced=reduced(res), cannot_test=cannot_test_trajectory(res))
    base = dict(paper="godey2024", chapter="qk", measured=measured(res), scale=scale(res),
                reduced=traj["reduced"])
    rows = res.layer_rows()
    per_layer = ", ".join(f"layer {r['layer']} {r['aligned'].estimate:.1f}" for r in rows)   # mean over seeds
    layers = res.aligned_layers()
    where_aligned = ("no layer" if not layers else f"layer {layers[0]}" if len(layers) == 1 else
                     "layers " + ", ".join(str(li) for li in layers[:-1]) + f" and {layers[-1]}")
    out = [
        Finding(key="qk-aligned-heads", where="Fig. 13", section="qk-alignment",
                claim_id="godey-fig13-aligned", cannot_test=traj["cannot_test"], **{**base, "measured":
                f"{base['measured']}; aligned heads per seed of {res.n_heads}: {per_layer} "
                f"(aligned heads only in {where_aligned})"},
                claim="Almost all heads see the mean query and the mean key align, in common or opposite "
                      "directions, along training; in a 64-dimensional head such an alignment is very "
                      "unlikely by chance.",
                quantity=f"share of heads with |cos(Q̄, K̄)| ≥ {res.threshold} at the last step",
                effect=res.aligned_share(), direction="above", reference=res.chance_share,
                reference_label=f"chance {res.chance_share:.1e}", paper_value=ALMOST_ALL, digits=2),
        Finding(key="qk-first-layer-common", where="Fig. 13, §5", section="qk-alignment",
                claim_id="godey-fig13-layers", cannot_test=traj["cannot_test"], **base,
                claim="The first layers display a common-direction dynamic (cos(Q̄, K̄) increases); the last "
                      "layers an opposite-direction one.",
                quantity="final cos(Q̄, K̄) of layer 0, mean over its heads",
                effect=res.first_layer_cos(), direction="above", reference=0.0, digits=2),
        Finding(key="qk-dot-growth", where="Fig. 14", section="qk-scalar-products",
                claim_id="godey-fig14-dot", cannot_test=traj["cannot_test"], **base,
                claim="The drift of the mean query and key increases the magnitude of their scalar product.",
                quantity="log10 growth of |Q̄·K̄| from step 0 to the last step, in the layer where it grows least",
                effect=res.dot_growth(), direction="above", reference=0.0,
                reference_label="0 (no growth)", digits=2),
        Finding(key="qk-entropy-falls", where="Fig. 15", section="qk-entropy",
                claim_id="godey-fig15-entropy", cannot_test=traj["cannot_test"], **base,
                claim="Training induces a decay of the attention entropy in all layers.",
                quantity="fall of the mean attention-row entropy from step 0 to the last step, in the layer "
                         "where it falls least (nats)",
                effect=res.entropy_fall(), direction="above", reference=0.0, digits=2),
    ]
    # one finding on either branch: measured, or what it needs
    centring = dict(key="qk-centring", where="§6–7, Limitations", section="qk-centring",
                    claim_id="godey-s6-sharp-attention", kind="extension")
    if res.ablation_summary:
        out.append(Finding(
            **centring, **{**base, "measured":
                f"{base['measured']}; each seed also pretrained with every block output centred over its "
                "sequence (same initialisation and batches); layers 1 and up, where centring removes the drift"},
            claim="The drift of queries and keys along a common direction allows sharper attention patterns "
                  "(the paper does not prove that sharp attention cannot emerge without it).",
            quantity="entropy fall with centred blocks minus with plain blocks, layers 1 and up, seed-paired "
                     "(nats)",
            effect=res.ablation_summary.later_interval("diff_drop"), direction="below", reference=0.0, digits=2))
    else:
        out.append(Finding(
            **centring, **base,
            claim="The drift of queries and keys along a common direction allows sharper attention patterns.",
            quantity="entropy fall with centred minus plain blocks, layers 1 and up (nats)", effect=None,
            needs="our own pretraining (not MultiBERT)", command="make rerun CHAPTER=qk SCALE=book"))
    if res.end_state:
        tw = res.end_state_aligned("twin")
        names = ", ".join(res.end_state)
        missing = (f"; not measured: {', '.join(res.end_state_missing)}" if res.end_state_missing else "")
        out.append(Finding(
            key="qk-end-state", paper="godey2024", chapter="qk", where="Fig. 13, §5", section="qk-end-state",
            claim_id="godey-fig13-aligned",
            reduced=f"on {len(res.end_state)} released models' end state in place of MultiBERT's trajectory",
            measured=f"{names}, as released, on about {max(r.n_sequences for r in res.end_state.values())} "
                     "in-domain sequences each (antibody chains, reaction SMILES, WikiText-103); rotary queries "
                     "and keys after the rotation; the untrained twins (same architectures, random init) have "
                     f"{tw.estimate:.1%} of heads aligned{missing}",
            scale="the released models' own pretraining (no trajectory: the end state only)",
            claim="Almost all heads see the mean query and the mean key align, in common or opposite "
                  "directions, along training; in a 64-dimensional head such an alignment is very unlikely "
                  "by chance.",
            quantity=f"share of heads with |cos(Q̄, K̄)| ≥ {res.threshold} in the pretrained models, pooled "
                     "(bootstrap over heads within each model)",
            effect=res.end_state_aligned(), direction="above", reference=res.end_state_chance_share(),
            reference_label=f"chance {res.end_state_chance_share():.1e}", paper_value=ALMOST_ALL, digits=2))
    out.append(Finding(
        key="qk-trained-model", where="§5", section="qk-pretraining", claim_id="godey-s5-multibert", **base,
        claim="These dynamics are those of BERT's pretraining to its end (MultiBERT: 2M steps of 256 × 512 "
              "tokens), in a model that has learned to use its context.",
        quantity=f"the same measurements on a model whose held-out MLM loss ends {TARGET_BELOW_UNIGRAM} nats "
                 "or more below the unigram predictor",
        effect=None, needs="a GPU", command=LONG_COMMAND))
    return out
