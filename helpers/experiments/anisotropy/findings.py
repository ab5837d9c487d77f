"""The anisotropy chapter's findings, declared as data: `FINDINGS` is the table of Godey et al.'s §3 claims (and the
drift explanation it cites), in the paper's order, the test closest to the paper's setting first for each claim.
A row (`core.findings.Spec`) holds what is fixed (key, claim, kind, what is read, reference); its `read` gives what
the run measured, one `core.findings.Partial` per test (none when the run did not measure it). `findings(res)`
turns the table into `Finding`s. Every test names the models it measured (`members`)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core import anisotropy as A
from ...core.findings import Finding, Partial, Spec
from ...core.scale import Distance
from ...core.stats import Interval
from .params import ALPHA, PAPER_FIGURES, PAPER_NAMES, PAPER_OFFLINE, PAPER_TRANSFORMERS, SENTENCE_ENCODERS
from .params import PAPER_SPEECH_UNCORRELATED as UNCORRELATED

if TYPE_CHECKING:
    from .result import Result

#: the finding key of the byte-level model against each subword model (Fig. 2), by the subword model's name
BYTES_VS_KEYS = {"all-MiniLM-L6-v2": "anisotropy-bytes-vs-minilm",
                 "SmolLM2-135M-Instruct": "anisotropy-bytes-vs-smollm2",
                 "bert-base-uncased": "anisotropy-bytes-vs-bert", "roberta-base": "anisotropy-bytes-vs-roberta",
                 "gpt2": "anisotropy-bytes-vs-gpt2", "t5-base": "anisotropy-bytes-vs-t5"}
#: the finding key of each of the paper's speech models that loads offline (Fig. 3a), by its record's name
SPEECH_KEYS = {"whisper-base": "anisotropy-speech-whisper-base"}
#: what every finding of the chapter shares (which models stand in for the paper's: each finding's `reduced`)
COMMON = dict(paper="godey2024", chapter="anisotropy", scale="the models that load offline")

def findings(res: Result) -> list[Finding]:
    """The chapter's findings: each row of `FINDINGS` with each of its readings, in the table's order."""
    return [f for spec in FINDINGS for f in spec.findings(res, **COMMON)]


# ------------------------------------------------------------------ the readings


def _names(group) -> tuple[str, ...]:
    return tuple(m.name for m in group)


def _listed(names) -> str:
    """"A, B and C"."""
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


#: how a distance names the models of each kind it counts
KIND_WORDS = {"subword": "subword models", "character": "character- and byte-level models",
              "speech": "speech models", "vision": "vision Transformers", "cnn": "CNNs"}


def _count(what: str, ours: int, paper: tuple[str, ...] | None) -> tuple[Distance, ...]:
    """How many models a test measured against how many the paper's figure shows (`paper` None: the paper does not
    say which models it reads there)."""
    return (Distance(what, ours, len(paper) if paper is not None else None, "models"),)


def _instead(group, paper: str) -> str:
    """"" when every model of `group` is one of the paper's, else "on <models> in place of <paper>"."""
    if group and all(m.name in PAPER_NAMES for m in group):
        return ""
    return f"on {' and '.join(m.name for m in group)} in place of {paper}"


def _offline(res: Result) -> str:
    ts = res.transformers()
    return ("" if all(m.name in PAPER_NAMES for m in ts) else
            f"on {len(ts)} Transformers that load offline in place of the paper's")


def _peak(res: Result, group, kind: str = "") -> list[Partial]:
    """The weakest peak layer of `group` against the isotropic null of an `n_pairs` average; `kind`: the paper's
    figure (`PAPER_FIGURES`) it stands in for."""
    if not group:
        return []
    weak, layer = res.weakest_peak(group)
    return [_peak_partial(res, group, weak, layer, weak.layer_interval(layer), kind)]


def _peak_partial(res: Result, group, weak, layer: int, effect: Interval, kind: str = "") -> Partial:
    """The peak-layer test's reading of `group`, whose weakest peak is `weak`'s layer `layer` (`effect`, its
    level with its interval)."""
    null = res.null_of(group)
    listed = ", ".join(m.name for m in group)
    return Partial(measured=f"{listed}, every layer" + (f"; the weakest is {weak.name} (its layer {layer})"
                                                     if len(group) > 1 else f"; its peak is layer {layer}"),
                 effect=effect, reference=null,
                 reference_label=f"the isotropic null of a {res.n_pairs:,}-pair average, ≤ {null:.4f}",
                 reduced=_instead(group, _listed(PAPER_FIGURES[kind])) if kind else "", label=listed,
                 members=_names(group), distance=_count(KIND_WORDS[kind], len(group), PAPER_FIGURES[kind]) if kind
                 else (), **_units(weak))


def _units(m) -> dict[str, Any]:
    """What a level's interval is taken over (`Model.unit`) and how many: a model's inputs, or its sampled pairs."""
    return dict(unit=m.unit, units=m.inputs if m.clustered else None)


def _transformers(res: Result) -> list[Partial]:
    ts = res.transformers()
    if not ts:
        return []
    weak, layer = res.weakest_peak(ts)
    return [replace(_peak_partial(res, ts, weak, layer, weak.layer_interval(layer)),
                    measured=f"{len(ts)} pretrained Transformers ({', '.join(_names(ts))}), every layer; the weakest "
                             f"is {weak.name} (its layer {layer})",
                    reduced=_offline(res), label=f"{len(ts)} Transformers",
                    distance=_count("Transformers", len(ts), PAPER_TRANSFORMERS))]


def _centred_isotropy(res: Result) -> list[Partial]:
    ts = res.transformers()
    if not ts:
        return []
    dec, rows = res.centred_decider(), res.centred_rows_by_layer()
    if "jackknife" in dec:
        jk = [r for r in rows if "jackknife" in r]
        rest = [r for r in rows if "jackknife" not in r]
        others = (f"; the other models' layers, by {res.n_pairs:,} sampled pairs, reach at most "
                  f"{max(r['pairs_reach'] for r in rest):.0%} of their line" if rest else "")
        read = dict(measured=f"{', '.join(r['model'] for r in jk)}: every layer, the mean removed, a jackknife over "
                             f"their inputs (text chunks, images); the closest to the line is {dec['model']}'s layer "
                             f"{dec['jk_layer']} ({dec['inputs']} {dec['unit']}, d = {dec['d']}){others}",
                    effect=res.centred_jack_of(dec["model"]).layer_interval(dec["jk_layer"]),
                    quantity="average cosine after removing the mean, at the layer closest to the isotropic line "
                             "(jackknife over the inputs)",
                    alternatives=(("±1.96 SE over the sampled pairs", dec["jk_pairs"]),),
                    members=tuple(r["model"] for r in jk), unit="inputs", units=dec["inputs"])
    else:
        read = dict(measured=f"{len(ts)} pretrained Transformers, every layer, {res.n_pairs:,} sampled pairs, the "
                             f"mean removed; the closest to the line is {dec['model']}'s layer {dec['layer']} "
                             f"(d = {dec['d']})",
                    effect=res.model(dec["model"]).centred_pairs(dec["layer"]),
                    quantity="average cosine after removing the mean, at the layer closest to the isotropic line "
                             "(sampled pairs, ±1.96 SE)",
                    alternatives=(), members=tuple(r["model"] for r in rows))
    return [Partial(**read, margin=dec["line"], label=dec["model"],
                        reference_label=f"0, within the 95th percentile of one isotropic pair's cosine at d = "
                                        f"{dec['d']} (±{dec['line']:.3f}, the paper's Appendix B line)",
                        reduced=f"on {len(ts)} Transformers that load offline in place of Biś et al.'s language "
                                "models", distance=_count("Transformers", len(ts), None))]


def _centred_spread(res: Result) -> list[Partial]:
    share = res.pr_share_interval()
    if not res.transformers() or share is None:
        return []
    shaped = sorted({s_.name for s_ in res.shapes if s_.trained})
    return [Partial(measured=f"{len(shaped)} pretrained Transformers ({', '.join(shaped)}), every layer, a "
                          f"{res.shape_share:.0%} subsample of the tokens (covariance spectrum)",
                 effect=share, reduced=f"on {len(shaped)} Transformers that load offline, a {res.shape_share:.0%} "
                                       "subsample of the tokens",
                 label=f"{len(shaped)} Transformers", members=tuple(shaped),
                 distance=_count("Transformers", len(shaped), None))]


def _bytes_vs(res: Result) -> list[Partial]:
    """Each byte-level model against each subword model: a language model's subword objective first (the paper's
    subword models are LMs); a sentence encoder's last training is contrastive, known to lower anisotropy."""
    out = []
    for b in res.group("character"):
        for s_ in sorted(res.group("subword"), key=lambda m: m.name in SENTENCE_ENCODERS):
            short = "MiniLM" if "MiniLM" in s_.name else s_.name.split("-")[0]
            out.append(Partial(case=s_.name,
                            measured=f"{b.name} against {s_.name}, every layer of each on WikiText-103 test "
                                     "text",
                            effect=res.level_gap(b, s_),
                            reduced="" if all(m.name in PAPER_NAMES for m in (b, s_)) else
                            f"on {b.name} against {s_.name} (stand-ins)",
                            label=f"{b.name} vs {short}", members=(b.name,),
                            distance=_count(KIND_WORDS["character"], 1, PAPER_FIGURES["character"])
                            + _count(KIND_WORDS["subword"], 1, PAPER_FIGURES["subword"]),
                            unit=b.unit if b.clustered and s_.clustered else "token pairs"))
    return out


def _speech_paper_model(res: Result) -> list[Partial]:
    """The paper's own speech model first: it decides the claim."""
    return [Partial(case=m.name, effect=m.layer_interval(layer := int(np.argmin(m.cos_exact))),
                 measured=f"{m.name}'s encoder only, every layer; its lowest is layer {layer}",
                 reduced=f"on {m.name}'s encoder alone (one of the paper's three speech models), FSDD spoken "
                         "digits in place of Common Voice", label=f"{m.name} encoder", members=(m.name,),
                 distance=_count(KIND_WORDS["speech"], 1, PAPER_FIGURES["speech"]), **_units(m))
            for m in res.group("speech") if m.name in PAPER_OFFLINE]


def _speech(res: Result) -> list[Partial]:
    speech = res.group("speech")
    if not speech:
        return []
    low, layer = res.lowest(speech)
    listed = " and ".join(m.name for m in speech)
    return [Partial(measured=f"the encoders of {', '.join(m.name for m in speech)}: every layer; the lowest is "
                          f"{low.name}'s layer {layer}",
                 effect=low.layer_interval(layer),
                 reduced=f"on the encoders of {listed}, FSDD spoken digits in place of the paper's three models on "
                         "Common Voice", label=f"{listed} encoders", members=_names(speech),
                 distance=_count(KIND_WORDS["speech"], len(speech), PAPER_FIGURES["speech"]), **_units(low))]


def _cnn(res: Result) -> list[Partial]:
    cnn = res.cnn()
    if cnn is None or not res.cnn_boot:
        return []
    n_img = res.cnn_boot.images
    return [Partial(measured=f"{cnn.name} on {n_img} CIFAR-10 test images, whole maps flattened (one vector per image "
                          f"and block); {res.cnn_boot.draws:,} bootstrap resamples of the images",
                 effect=res.cnn_boot.map_cosine(), reduced=f"on one CNN ({cnn.name}), {n_img} images",
                 label=cnn.name, members=(cnn.name,), unit="images", units=n_img,
                 distance=_count(KIND_WORDS["cnn"], 1, PAPER_FIGURES["cnn"]))]


def _drift_share(res: Result) -> list[Partial]:
    ts = res.transformers()
    if not ts:
        return []
    c = res.share_counts()
    return [Partial(measured=f"{len(ts)} pretrained Transformers ({', '.join(_names(ts))}), every layer; "
                          f"{c['either_sign']} have p < {ALPHA} of either sign, {c['negative']} of them negative; by "
                          f"Pearson (App. A) {c['pearson']} follow the drift",
                 effect=res.significant_share(), reduced=_offline(res), caveat=res.definition_caveat(ts),
                 label=f"{len(ts)} Transformers", members=_names(ts), distance=_count("Transformers", len(ts), None))]


def _layer_test_extra(t: dict[str, Any]) -> dict[str, Any]:
    return {"p_exact": t.p_exact, "pearson_r": t.pearson_r, "pearson_p": t.pearson_p,
            "jackknife": t.jackknife.text(2), "input_bootstrap": t.input_bootstrap.text(2)}


def _speech_drift(res: Result, reading: str) -> list[Partial]:
    """Whisper base's drift test, as one of its two readings ("the literal test", "the paper's point"): one
    interval, two verdicts."""
    if res.speech_boot is None:
        return []
    t = res.speech_boot.test()
    b, ts = res.speech_boot, res.transformers()
    return [Partial(measured=f"{b.name}'s encoder only, on {b.clips} FSDD recordings ({b.frames:,} positions), "
                          f"{t.layers} layers (the stem's output and each block's): exact permutation p = "
                          f"{t.p_exact:.4f}; jackknife over the layers {t.jackknife.text(2)}; Pearson r = "
                          f"{t.pearson_r:.2f}, p = {t.pearson_p:.3f} (App. A); bootstrap over the recordings "
                          f"{t.input_bootstrap.text(2)} (a stable layer order: no width)",
                 effect=t.fisher, reduced=f"on {b.name}'s encoder alone (HuBERT does not load offline), FSDD "
                                             "spoken digits in place of Common Voice",
                 caveat=res.definition_caveat([m for m in ts if m.name == b.name] or ts),
                 members=(b.name,), label=f"{b.name} encoder, {reading}", extra=_layer_test_extra(t), unit="layers",
                 distance=_count(KIND_WORDS["speech"], 1, UNCORRELATED))]


def _cnn_drift(res: Result) -> list[Partial]:
    cnn = res.cnn()
    if cnn is None or res.cnn_boot is None:
        return []
    t = res.cnn_boot.test()
    pos, n_img = res.model_test(cnn), res.cnn_boot.images
    return [Partial(measured=f"{cnn.name} on {n_img} CIFAR-10 test images, {t.layers} layers, whole maps "
                          f"flattened: exact permutation p = {t.p_exact:.4f}; jackknife over the layers "
                          f"{t.jackknife.text(2)}; Pearson r = {t.pearson_r:.2f}, p = {t.pearson_p:.4f} "
                          f"(App. A); bootstrap over the images {t.input_bootstrap.text(2)}; every spatial "
                          f"position a vector instead: ρ = {pos.rho:.2f}, p = {pos.p_exact:.2f}",
                 effect=t.fisher, reduced=f"on one CNN ({cnn.name}), {n_img} images",
                 caveat=res.definition_caveat([cnn]), label=cnn.name, members=(cnn.name,),
                 extra=_layer_test_extra(t), unit="layers", distance=_count(KIND_WORDS["cnn"], 1, None))]


def _single_pair(res: Result) -> list[Partial]:
    ts = res.transformers()
    if not ts:
        return []
    low = res.single_pair_closest()
    return [Partial(measured=f"{len(ts)} pretrained Transformers, each model's average cosine over its layers; the "
                          f"closest to the line is {low.name}",
                 effect=low.single_pair_margin(), reduced=_offline(res), label=f"{len(ts)} Transformers",
                 members=_names(ts),
                 distance=_count("Transformers", len(ts), None), **_units(low))]


# ------------------------------------------------------------------ the table

#: the quantity every peak-layer test reads
PEAK = ("the smallest, over models, of the peak-layer average cosine (all pairs, with its jackknife over the inputs: "
        "sequences, recordings or images)")
#: Biś et al.'s claim, as Godey et al. cite it
CENTRED = dict(claim_id="godey-bis-centred", where="§2 (citing Biś et al. 2021)", section="anisotropy-shape")
#: Fig. 3a's claim, tested on the paper's own speech model and on every speech encoder
SPEECH = dict(claim_id="godey-fig3-speech", where="Fig. 3a", section="anisotropy-layers",
              claim="Every layer of every speech model has an average cosine of at least 0.2.",
              reference=0.2, reference_label="the paper's 0.2")
#: Fig. 5's claim on the speech models, read as the literal test and as its point
UNCORRELATED_CLAIM = (f"Some speech models ({_listed(UNCORRELATED)}) display anisotropy that cannot be correlated with "
                      "the drift effect")
SPEECH_DRIFT = dict(claim_id="godey-fig5-speech", where="Fig. 5", section="anisotropy-drift", more=dict(digits=2),
                    quantity="Spearman ρ across layers between ‖x̄‖₂ and the average cosine (Fisher-z interval over "
                             "the layers)")

FINDINGS: tuple[Spec, ...] = (
    Spec("anisotropy-transformers", "abstract; Figs. 1–3",
         "Transformers across tokenisations and modalities display significant anisotropy in at least one of their "
         "layers.", claim_id="godey-abstract-modalities", section="anisotropy-layers", read=_transformers,
         quantity=PEAK),
    Spec("anisotropy-subword", "Fig. 1", "Token-level (subword) language models display high average cosine across "
         "their layers.", claim_id="godey-fig1-subword", section="anisotropy-layers",
         read=lambda r: _peak(r, r.group("subword"), "subword"), quantity=PEAK),
    Spec("anisotropy-centred-isotropy", **CENTRED,
         claim="Removing the average component from all representations leads to a nearly perfect isotropy.",
         read=_centred_isotropy, direction="equal",
         more=dict(digits=4, caveat="centred vectors sum to zero, so their average cosine is near 0 whatever the "
                                    "cloud's shape: this test can hardly fail (the centred cloud's spread, the "
                                    "extension beside it, can)")),
    Spec("anisotropy-centred-spread", **CENTRED, kind="extension",
         claim="Once the mean is removed, the cloud spreads over as many directions as an isotropic Gaussian's of the "
               "same size (the shape, which the average cosine cannot see).",
         read=_centred_spread, direction="equal", reference=1.0, margin=1 - A.ISO_SHARE,
         reference_label="1 (an isotropic cloud)",
         quantity="participation ratio of the centred cloud over an isotropic Gaussian's of the same n and d: median "
                  "[smallest, largest] over layers",
         more=dict(digits=2, caveat="the interval is the range over layers (every layer must lie within the margin), "
                                    "not a sampling interval")),
    Spec("anisotropy-bytes", "Fig. 2", "Character- and byte-level language models display significant anisotropy in "
         "at least one of their layers.", claim_id="godey-fig2-character", section="anisotropy-layers",
         read=lambda r: _peak(r, r.group("character"), "character"), quantity=PEAK),
    Spec(BYTES_VS_KEYS, "Fig. 2", "Models based solely on characters or bytes display even higher anisotropy than "
         "subword models.", claim_id="godey-fig2-bytes-higher", section="anisotropy-layers", read=_bytes_vs,
         quantity="average cosine over layers (embeddings included), byte-level minus subword (all pairs, "
                  "jackknife over the inputs)"),
    Spec(SPEECH_KEYS, **SPEECH, read=_speech_paper_model,
         quantity="the lowest layer average cosine of its encoder (all pairs, jackknife over the inputs)"),
    Spec("anisotropy-speech", **SPEECH, read=_speech,
         quantity="the smallest layer average cosine over the speech encoders (all pairs, jackknife over the inputs)"),
    Spec("anisotropy-vision", "Fig. 3b", "Vision Transformers show significant anisotropy on some of their layers.",
         claim_id="godey-fig3-vision", section="anisotropy-layers",
         read=lambda r: _peak(r, r.group("vision"), "vision"), quantity=PEAK),
    Spec("anisotropy-cnn", "Fig. 4", "Most convolution-based vision models are isotropic (whole feature maps "
         "flattened); EfficientNet is among them.", claim_id="godey-fig4-cnn", section="anisotropy-cnn", read=_cnn,
         direction="equal", margin=0.1, reference_label="0 (isotropic)",
         quantity="average cosine of whole flattened maps, median over the block outputs (bootstrap over images)"),
    Spec("anisotropy-drift-correlation", "Fig. 5",
         "The anisotropy level correlates with the norm of the drift ‖x̄‖₂ across layers for several models "
         "(Spearman): it follows the drift.", claim_id="godey-fig5-transformers", section="anisotropy-drift",
         read=_drift_share, reference=0.5, reference_label="½ (the paper's \"most\": more than half of the models)",
         more=dict(digits=2),
         quantity=f"share of the models with a positive Spearman ρ across layers and exact permutation p < {ALPHA} "
                  "(exact binomial interval over the models)"),
    Spec("anisotropy-speech-drift", **SPEECH_DRIFT, direction="none",
         claim=f"{UNCORRELATED_CLAIM} — the literal test: no significant Spearman correlation across layers.",
         read=lambda r: _speech_drift(r, "the literal test"),
         reference_label="0 (no correlation: the paper's p > 0.05)"),
    Spec("anisotropy-speech-drift-sign", **SPEECH_DRIFT, direction="at most", margin=0.0,
         claim=f"{UNCORRELATED_CLAIM} — the paper's point: the drift does not explain it (a drift explanation needs a "
               "positive monotonic relation).",
         read=lambda r: _speech_drift(r, "the paper's point"),
         reference_label="0 (at most: a drift explanation needs ρ > 0)"),
    Spec("anisotropy-cnn-drift", "Fig. 5", "The anisotropy of CNNs is generally not correlated with the drift ‖x̄‖₂ "
         "across layers.", claim_id="godey-fig5-cnn", section="anisotropy-drift", read=_cnn_drift,
         direction="none", reference_label="0 (no correlation: the paper's p > 0.05)", more=dict(digits=2),
         quantity="Spearman ρ across layers between ‖x̄‖₂ and the average cosine of flattened maps (Fisher-z interval "
                  "over the layers)"),
    Spec("anisotropy-single-pair-null", "Fig. 18 (Appendix B)",
         "The average cosine levels of Transformers are significantly unlikely between isotropic Gaussian vectors: "
         "above the 95th percentile of a single pair's cosine at their width.", claim_id="godey-fig18-null",
         section="anisotropy-null", read=_single_pair, reference_label="0 (on the paper's line)",
         quantity="average cosine over layers minus the single-pair 95th percentile at the model's width, smallest "
                  "over models (all pairs, jackknife over the inputs)"),
)
