"""The summary's sentences: one verdict line per measure with its numbers and direction, a sentence where the
measures disagree, and layer lists in words — on diagnoses built from planted numbers."""

from __future__ import annotations

import numpy as np

from helpers.diagnose import measures, report, run, verdict

LAYERS = 6
NAMES = ["embeddings"] + [f"block {i}" for i in range(1, LAYERS)]


def measured(values: dict[str, np.ndarray], seed: int, noise: float = 0.01) -> measures.Measured:
    rng = np.random.default_rng(seed)
    est = {m: np.asarray(v, dtype=float) + noise * rng.standard_normal(LAYERS) for m, v in values.items()}
    draws = {m: e + 1e-4 * rng.standard_normal((50, LAYERS)) for m, e in est.items()}
    return measures.Measured(est, draws)


def diagnosis(model: dict[str, np.ndarray], twins: dict[str, np.ndarray], k: int = 10) -> run.Diagnosis:
    return run.Diagnosis({"seed": 0, "layer_names": NAMES}, measured(model, 99, 0.0),
                         [measured(twins, s) for s in range(k)])


def test_layers_in_words():
    assert verdict.layers_text([0, 1, 2, 3, 4, 5], 6) == "every layer"
    assert verdict.layers_text([2, 3, 4], 6) == "blocks 2–4"
    assert verdict.layers_text([0, 1, 3], 6) == "the embeddings and blocks 1, 3"
    assert verdict.layers_text([5], 6) == "block 5" and verdict.layers_text([0], 6) == "the embeddings"
    assert verdict.layers_text([], 6) == "no layer"


def test_a_verdict_line_per_measure_with_numbers_and_direction():
    flat = np.full(LAYERS, 0.36)
    d = diagnosis({"cos": np.linspace(0.03, 0.25, LAYERS), "top3": flat}, {"cos": flat, "top3": flat})
    lines = {r["measure"]: r["verdict"] for r in d.summary()}
    assert lines["cos"].startswith("mean cosine 0.0300–0.250 across layers, against 0.3")
    assert lines["cos"].endswith("less collapsed than at initialisation in every layer")
    assert (lines["top3"].startswith("top-3 share 0.360 across layers")
            and "within what random initialisation" in lines["top3"]
            and "twin standard deviations, would go unseen" in lines["top3"])
    assert verdict.disagreement(d) is None


def test_measures_that_disagree_get_one_sentence():
    """Less collapsed by the mean cosine in every layer, more collapsed by the top-3 share in blocks 1-5 (what
    MiniLM shows): the summary says so in one sentence."""
    flat = np.full(LAYERS, 0.36)
    top3 = np.array([0.36, 0.6, 0.6, 0.6, 0.6, 0.6])
    d = diagnosis({"cos": np.full(LAYERS, 0.1), "top3": top3}, {"cos": flat, "top3": flat})
    s = verdict.disagreement(d)
    assert s == ("The measures disagree: less collapsed than at initialisation by mean cosine; more collapsed by "
                 "top-3 share (blocks 1–5).")
    assert s in report.summary_html(d) and d.to_json()["disagreement"] == s


def test_a_measure_without_a_direction_says_higher_or_lower():
    flat = np.zeros(LAYERS)
    d = diagnosis({"qk_cos": np.array([np.nan, -0.5, -0.5, 0, 0, 0])}, {"qk_cos": flat})
    line = d.summary()[0]["verdict"]
    assert line.endswith("lower than at initialisation in blocks 1, 2") and "-0.500 to 0" in line


def test_a_measure_that_goes_both_ways_is_named_so():
    flat = np.full(LAYERS, 0.36)
    d = diagnosis({"cos": np.full(LAYERS, 0.1), "top3": np.array([0.36, 0.6, 0.6, 0.1, 0.1, 0.36])},
                  {"cos": flat, "top3": flat})
    assert verdict.disagreement(d) == ("The measures disagree: less collapsed than at initialisation by mean cosine; "
                                       "top-3 share goes both ways across layers.")
    line = next(r["verdict"] for r in d.summary() if r["measure"] == "top3")
    assert line.endswith("more collapsed than at initialisation in blocks 1, 2; less collapsed in blocks 3, 4")
    assert verdict.span(np.array([7.62e-5, 0.0321])) == "7.6e-05–0.0321"
