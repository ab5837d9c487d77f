"""The deep causal LM chapter's claims (Yu & Zhang §3.4, Figure 7), on its `ci` result; the claims
the chapter reads from the committed `book` histories are asserted on those (when present)."""

import math

import numpy as np
import pytest
from testutil import ci_result

from helpers.experiments import deeplm


@pytest.fixture(scope="module")
def res():
    return ci_result(deeplm)


def test_every_variant_has_a_full_history(res):
    assert res.variants == ["post-norm", "pre-norm", "de-escalated", deeplm.LEAKY]
    assert res.arms == res.variants + [deeplm.tau_arm(0.5)] and res.control_taus == [0.5]
    for v in res.arms:
        (h,) = res.histories[v]
        assert len(h["loss"]) == res.steps and h["eval_step"][0] == 0 and h["eval_step"][-1] == res.steps
        assert len(h["t_sim"][-1]) == res.depth + 1
    assert res.uniform_nats == pytest.approx(math.log(256)) and 0 < res.unigram_nats < res.uniform_nats


def test_every_variant_learns_at_ci_scale(res):
    """Even the tiny ci model gets below the uniform predictor (the loop trains what it should); the leakage
    control, whose FFN inputs mix every position, starts slowest at this size."""
    for v, losses in res.final_eval().items():
        assert losses[0] < res.uniform_nats - (0.05 if v == deeplm.LEAKY else 0.3), v


def test_deescalation_lowers_token_similarity(res):
    """The prefix-mean de-escalation at the FFN input leaves the last block's tokens far less alike
    than the plain post-norm stack's."""
    t = res.last_t_sim()
    assert t["de-escalated"] < t["post-norm"] - 0.1


def _committed(p):
    """Skip unless every run of `p` (every variant, seed and control τ; the budget curve aside) is in the committed
    results."""
    if not all(s.done() for s in deeplm.runs(p, curve=False)):
        pytest.skip("book runs not all committed")


def _book_params():
    """The book preset, read back and never trained (a budget-curve run not yet committed is left out)."""
    return deeplm.Params.resolve("book", train_missing=False)


def _book():
    p = _book_params()
    _committed(p)
    return deeplm.run(p)


def test_book_histories_when_committed():
    """The committed book runs (results/deeplm/book) are complete: every variant and seed, every step."""
    p = deeplm.Params.resolve("book")
    from helpers.machinery.runtime import REPO_ROOT

    files = sorted(f for f in (REPO_ROOT / "results" / "deeplm" / "book").glob("*.json")
                   if "@" not in f.name and f.stem.rsplit("-seed", 1)[0] in p.variants)
    if not files:
        pytest.skip("no committed book runs")
    assert len(files) == (len(p.variants) - 1) * p.seeds + p.leak_seeds
    import json

    for f in files:
        h = json.loads(f.read_text())["results"]
        assert len(h["loss"]) == p.steps or h.get("diverged")
        assert np.isfinite(h["eval_loss"][0])


def test_book_verdict_on_the_committed_runs():
    """The chapter's reading, on the committed book runs (read from the cache, seconds): the post-norm
    stack trains (well below the unigram predictor), pre-norm is ahead of post-norm on every seed, and
    de-escalation leaves post-norm where it is (|same-seed difference| < 0.05 nats on average)."""
    r = _book()
    assert r.from_cache
    tr = r.final_train()
    assert np.all(tr["post-norm"] < r.unigram_nats - 0.3)
    assert r.differences("post-norm", "pre-norm").min() > 0.05
    assert abs(r.paired("de-escalated", "post-norm").estimate) < 0.05


def test_book_plateau_is_shorter_with_deescalation():
    """The early trace the chapter reports: on every seed the de-escalated model leaves the plateau
    (moving-average training loss below 3.0) before post-norm does, and pre-norm before both."""
    p = _book_params()
    _committed(p)
    s = deeplm.run(p).steps_to(3.0)
    assert max(s["pre-norm"]) < min(s["de-escalated"]) and max(s["de-escalated"]) < min(s["post-norm"])


def test_book_initial_similarity_is_higher_in_pre_norm():
    """The chapter's reading of the t_sim figure: at initialisation the last block's t_sim is higher for
    pre-norm than for post-norm on every seed (the reverse of the paper's Figure 4 order)."""
    p = _book_params()
    _committed(p)
    r = deeplm.run(p)
    pre = [h["t_sim"][0][-1] for h in r.histories["pre-norm"]]
    post = [h["t_sim"][0][-1] for h in r.histories["post-norm"]]
    assert min(pre) > max(post)


def test_book_deescalated_profile_jumps_only_at_the_top():
    """The chapter's reading of the trained t_sim profile: the de-escalated model stays near zero below
    the last three blocks (mean over seeds < 0.1 there) and its last block reaches the level of the
    others (within 0.15 of post-norm's)."""
    p = _book_params()
    _committed(p)
    r = deeplm.run(p)
    prof = {v: np.mean([h["t_sim"][-1] for h in r.histories[v]], axis=0) for v in r.variants}
    d = prof["de-escalated"]
    assert d[1:-3].max() < 0.1 and abs(d[-1] - prof["post-norm"][-1]) < 0.15
    assert all(prof[v][-1] > prof[v][len(prof[v]) // 2] for v in deeplm.VARIANTS)   # all three rise to the top


def test_paired_differences_carry_t_intervals(res):
    """The ci run has one seed: the interval is undefined (the prose never reads a same-seed range as an
    interval), and every finding with an interval is inconclusive."""
    d = res.paired("de-escalated", "post-norm")
    assert d.n == len(res.seeds) == 1 and not d.has_interval
    assert d.estimate == pytest.approx(float(res.differences("de-escalated", "post-norm")[0]))


def test_findings_on_the_ci_run(res):
    fs = {f.key: f for f in res.findings()}
    assert list(fs) == ["deeplm-post-norm-fails", "deeplm-deesc-rescues", "deeplm-deesc-like-pre-norm",
                        "deeplm-leak-rescues", "deeplm-tau-0p5-rescues", "deeplm-paper-scale"]
    assert all(f.chapter == "deeplm" and f.paper == "yu2024" for f in fs.values())
    for key in ("deeplm-post-norm-fails", "deeplm-deesc-rescues", "deeplm-deesc-like-pre-norm", "deeplm-leak-rescues",
                "deeplm-tau-0p5-rescues"):
        assert fs[key].verdict == "inconclusive", key          # one seed: no interval
    assert fs["deeplm-paper-scale"].verdict == "not testable here" and "SCALE=paper" in fs["deeplm-paper-scale"].command
    assert fs["deeplm-deesc-like-pre-norm"].margin == pytest.approx(res.similar_margin())
    assert res.similar_margin() > 0


def test_book_findings():
    """The book verdicts, pinned with their effects: post-norm trains (contradicted), de-escalation
    changes nothing detectable, and pre-norm is not 'similar' to the de-escalated model."""
    fs = {f.key: f for f in _book().findings()}
    expected = {"deeplm-post-norm-fails": ("contradicted", -0.53), "deeplm-deesc-rescues": ("inconclusive", 0.00),
                "deeplm-deesc-like-pre-norm": ("contradicted", 0.19)}
    for key, (verdict, effect) in expected.items():
        assert fs[key].verdict == verdict, key
        assert fs[key].effect.estimate == pytest.approx(effect, abs=0.01), key
        assert fs[key].effect.n == 3 and fs[key].effect.method == "t"
    assert fs["deeplm-deesc-like-pre-norm"].margin == pytest.approx(0.071, abs=0.002)
    assert fs["deeplm-deesc-like-pre-norm"].effect.estimate > 2 * fs["deeplm-deesc-like-pre-norm"].margin
    assert fs["deeplm-paper-scale"].verdict == "not testable here"
    assert fs["deeplm-leak-rescues"].verdict == "reproduced" and fs["deeplm-leak-rescues"].effect.n == 3
    assert fs["deeplm-leak-rescues"].effect.estimate == pytest.approx(-0.346, abs=0.01)
    assert fs["deeplm-tau-0p5-rescues"].verdict == "direction only" and fs["deeplm-tau-0p5-rescues"].effect.n == 3
    assert fs["deeplm-tau-0p5-rescues"].effect.estimate == pytest.approx(-0.100, abs=0.01)


def test_book_findings_name_their_claims_and_settings():
    """Each finding names the registry claim it tests; the leakage control (each position sees later tokens)
    validates the Fig. 7 gap claim and is never counted; the reduced phrase says the budget once, after the
    verdict; the τ = 0.5 run says it is not the paper's τ, and the claim's verdict is the τ = 1 run's."""
    from helpers.core.findings import judge
    from helpers.experiments.findings import claims

    fs = {f.key: f for f in _book().findings()}
    assert {k: (f.claim_id, f.kind) for k, f in fs.items()} == {
        "deeplm-post-norm-fails": ("yu-fig7-post-fails", "claim"),
        "deeplm-deesc-rescues": ("yu-fig7-deesc-vs-post", "claim"),
        "deeplm-deesc-like-pre-norm": ("yu-fig7-deesc-like-pre", "claim"),
        "deeplm-leak-rescues": ("yu-fig7-deesc-vs-post", "control"),
        "deeplm-tau-0p5-rescues": ("yu-fig7-deesc-vs-post", "claim"),
        "deeplm-paper-scale": ("yu-fig7-deesc-vs-post", "claim")}
    assert fs["deeplm-deesc-rescues"].reduced == "at 2.0 % of the paper's steps, depth 48 of 60, width 64 of 410"
    assert fs["deeplm-tau-0p5-rescues"].reduced.endswith("at τ = 0.5 in place of 1")
    assert fs["deeplm-paper-scale"].reduced == ""
    by_id = {c.id: c for c in claims("yu2024")}
    j = judge(by_id["yu-fig7-deesc-vs-post"], list(fs.values()))
    assert j.lead.key == "deeplm-deesc-rescues" and j.verdict == "inconclusive"
    assert [c.key for c in j.controls] == ["deeplm-leak-rescues"]


def test_book_controls_as_the_chapter_reads_them():
    """The controls' reading: the leaky de-escalation ends far below the causal one and below pre-norm on every
    seed; τ = 0.5 ends below post-norm on every seed and above pre-norm beyond its interval."""
    r = _book()
    assert r.paired(deeplm.LEAKY, "de-escalated").high < -0.2
    assert np.all(r.differences(deeplm.LEAKY, "pre-norm") < 0) and r.paired(deeplm.LEAKY, "pre-norm").high < 0
    half = deeplm.tau_arm(0.5)
    assert len(r.differences(half, "post-norm")) == 3 and np.all(r.differences(half, "post-norm") < 0)
    assert r.paired(half, "pre-norm").low > 0 and r.paired(half, "de-escalated").high < 0


def _shifted(r, variant, by):
    """A copy of `r` with every loss of `variant`'s histories shifted by `by` nats (a planted effect)."""
    import copy

    r2 = copy.deepcopy(r)
    for h in r2.histories[variant]:
        h["loss"] = [x + by for x in h["loss"]]
    return r2


def test_controls_are_keyed_by_their_own_settings():
    """The leakage control is the de-escalated model with the whole sequence's mean, and the control τ run is the
    de-escalated model at that τ: each keyed by its own settings (the τ = 1 runs' keys do not change), and
    neither retrains a committed run."""
    p = deeplm.Params.resolve("book")
    specs = {(s.name, s.params.tau): s for s in deeplm.runs(p, curve=False)}
    assert len(specs) == (len(p.variants) - 1) * p.seeds + p.leak_seeds + len(p.control_taus) * p.tau_seeds
    half, one = specs[("de-escalated-seed0", 0.5)], specs[("de-escalated-seed0", 1.0)]
    assert half.key == {**one.key, "tau": 0.5}
    assert specs[("de-escalated-sequence-mean-seed0", 1.0)].key == {**one.key, "variant": deeplm.LEAKY}
    assert "control_taus" not in one.key
    paper = deeplm.Params.resolve("paper")
    assert paper.control_taus == () and deeplm.LEAKY not in paper.variants


def test_an_old_pickled_params_takes_the_new_fields_defaults():
    """A grid job unpickles the Params its runner pickled: one from before `control_taus` existed reads it
    with its default."""
    p = deeplm.Params.resolve("book")
    state = {k: v for k, v in p.__dict__.items() if k != "control_taus"}
    q = object.__new__(deeplm.Params)
    q.__setstate__(state)
    assert q == p and q.cache_key() == p.cache_key()


def test_planted_effects_change_the_verdicts():
    r = _book()
    planted = {f.key: f for f in _shifted(r, "de-escalated", -0.5).findings()}
    # the paper calls the rescue "huge" and gives it no number: a rescue of any size reads direction only
    assert planted["deeplm-deesc-rescues"].verdict == "direction only"
    assert {f.key: f for f in _shifted(r, "de-escalated", +5.0).findings()}["deeplm-deesc-rescues"].verdict == (
        "contradicted")
    gap = r.unigram_nats - float(r.final_train()["post-norm"].mean())
    failed = {f.key: f for f in _shifted(r, "post-norm", gap + 0.2).findings()}
    assert failed["deeplm-post-norm-fails"].verdict == "reproduced"
    like = {f.key: f for f in _shifted(r, "de-escalated", -r.paired("de-escalated", "pre-norm").estimate).findings()}
    assert like["deeplm-deesc-like-pre-norm"].verdict == "reproduced"
    # a leakage control that gains nothing over post-norm, and a τ = 0.5 run far below it
    none = {f.key: f for f in _shifted(r, deeplm.LEAKY, -r.paired(deeplm.LEAKY, "post-norm").estimate).findings()}
    assert none["deeplm-leak-rescues"].verdict in ("not detected", "inconclusive")
    # a τ = 0.5 arm of three seeds, each 0.5 nats below the τ = 1 model
    import copy

    r3 = copy.deepcopy(r)
    r3.histories[deeplm.tau_arm(0.5)] = copy.deepcopy(r.histories["de-escalated"])
    half = {f.key: f for f in _shifted(r3, deeplm.tau_arm(0.5), -0.5).findings()}
    assert half["deeplm-tau-0p5-rescues"].verdict == "direction only" and half["deeplm-tau-0p5-rescues"].effect.n == 3


def test_first_position_cost_is_a_sixty_fourth_of_the_gain_over_unigram():
    r = _book()
    gain = r.unigram_nats - float(r.final_train()["de-escalated"].mean())
    assert r.first_position_cost() == pytest.approx(gain / 64) and 0.005 < r.first_position_cost() < 0.015


def test_budget_against_the_paper():
    """The training budgets the chapter compares: 50 times the steps but, with 40 × 150 tokens per step
    against 16 × 64, about 293 times the tokens."""
    p = deeplm.Params.resolve("book")
    q = deeplm.Params.resolve("paper")
    r = deeplm.Result(variants=[], seeds=[0], depth=1, steps=p.steps, tokens="bytes", parameters=0, uniform_nats=1.0,
                      unigram_nats=1.0, scale="book",
                      budget={k: {"steps": x.steps, "batch_size": x.batch_size, "seq_len": x.seq_len}
                              for k, x in (("ours", p), ("paper", q))})
    t = r.token_ratio()
    assert t["steps"] == pytest.approx(q.steps / p.steps) == pytest.approx(50)
    assert t["tokens"] == pytest.approx(t["steps"] * t["tokens_per_step"])
    assert t["tokens"] == pytest.approx(50 * 6000 / 1024)


def test_steps_to_and_steps_near_on_planted_histories():
    """A loss of 5 for 30 steps, then 1: its 4-step moving average first falls below 3 in the window ending
    at step 33 (steps 30-33, mean 2); it lies within ±0.05 of 5 for the 27 windows inside the plateau. A history shorter
    than the window is read unsmoothed."""
    r = deeplm.Result(variants=["pre-norm"], seeds=[0], depth=1, steps=40, tokens="bytes", parameters=0,
                      uniform_nats=1.0, unigram_nats=1.0, scale="ci",
                      histories={"pre-norm": [{"loss": [5.0] * 30 + [1.0] * 10}, {"loss": [5.0, 0.5]},
                                              {"loss": [5.0] * 5}]})
    assert r.steps_to(3.0, window=4)["pre-norm"] == [33, 2, None]
    assert r.steps_near(5.0, tol=0.05, window=4)["pre-norm"][0] == 27


def test_book_intervals_as_the_chapter_reads_them():
    """95 % t-intervals over the three seeds: post-norm and de-escalated both above pre-norm, and the
    interval of de-escalated − post-norm covers zero."""
    r = _book()
    assert r.paired("post-norm", "pre-norm").low > 0
    assert r.paired("de-escalated", "pre-norm").low > 0
    assert r.paired("de-escalated", "post-norm").covers(0.0)


def test_book_only_plain_post_norm_dwells_at_the_unigram_loss():
    """The plateau reading: on every seed plain post-norm stays within 0.05 nats of the unigram loss
    more than twice as long as the de-escalated model, which passes through it (under 60 steps)."""
    r = _book()
    near = r.steps_near(r.unigram_nats, deeplm.PLATEAU_TOL)
    assert min(near["post-norm"]) > 2 * max(near["de-escalated"])
    assert max(near["de-escalated"]) < 60 and max(near["pre-norm"]) < min(near["de-escalated"])


# --- the budget curve: the gaps after b steps of a constant-rate run, carried to the paper's steps --------------

CURVE_KEYS = ("deeplm-post-norm-fails", "deeplm-deesc-rescues", "deeplm-deesc-like-pre-norm")


def test_the_schedule_default_keeps_the_committed_keys():
    """`schedule` came after the committed cosine runs: at its default it stays out of their keys (and out of the
    trainer's stored settings), so every committed run still reads back; the constant-rate runs are keyed by it
    and named for it, so none of them is written over a cosine run."""
    p = deeplm.Params.resolve("book")
    assert p.schedule == "cosine" and "schedule" not in p.cache_key()
    assert p.with_(schedule="constant").cache_key() == {**p.cache_key(), "schedule": "constant"}
    main = deeplm.runs(p, curve=False)
    assert all("schedule" not in s.key for s in main)
    from helpers.machinery.runtime import REPO_ROOT

    if (REPO_ROOT / "results" / "deeplm" / "book" / "post-norm-seed0.json").is_file():
        assert all(s.done() for s in main)                  # the committed runs' keys are the keys asked for
    cosine = {(s.extra["variant"], s.extra["run_seed"]): s for s in main if s.params.tau == p.tau}
    curve = deeplm.curve_runs(p)
    assert len(curve) == 3 * p.seeds and not {s.name for s in curve} & {s.name for s in main}
    assert all(s.name.startswith("constant-lr-") for s in curve)
    # seed by seed: a seed's three variants, then the next seed's
    assert [(s.extra["run_seed"], s.extra["variant"]) for s in curve] == [
        (seed, v) for seed in range(p.seeds) for v in deeplm.VARIANTS]
    for s in curve:
        assert s.key == {**cosine[(s.extra["variant"], s.extra["run_seed"])].key, "schedule": "constant"}
    from helpers.train import lm

    assert "schedule" not in lm.LMTrainConfig().stored()
    assert lm.LMTrainConfig(schedule="constant").stored()["schedule"] == "constant"
    assert deeplm.curve_budgets(p) == [62, 125, 250, 500, 1000]
    assert deeplm.curve_params(deeplm.Params.resolve("paper")) is None


def test_the_constant_schedule_holds_the_learning_rate():
    import torch

    from helpers.core.causal_lm import LMConfig
    from helpers.train import lm

    cfg = LMConfig(variant="post-norm", vocab=256, depth=1, d_model=8, n_heads=2, d_ff=16, seq_len=4)
    seqs = torch.zeros(2, 5, dtype=torch.long)
    rates = {}
    for schedule in ("cosine", "constant"):
        _, opt, sched = lm.LMTask(cfg, lm.LMTrainConfig(steps=8, schedule=schedule), seqs, seqs).build("cpu")
        rates[schedule] = []
        for _ in range(8):
            rates[schedule].append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    assert rates["constant"] == [2.5e-4] * 8
    assert rates["cosine"][0] == 2.5e-4 and rates["cosine"][-1] < 1e-5


def test_the_ci_curve_reads_every_budget(res):
    """At ci scale the constant-rate runs give the three gaps at five budgets (one seed), each read as the
    findings read the final loss, and a trend to the paper's steps."""
    assert len(res.curve_steps) >= 4 and res.curve_steps[-1] == res.steps and not res.curve_missing
    for a, b in (("post-norm", None), ("de-escalated", "post-norm"), ("de-escalated", "pre-norm")):
        assert len(res.curve_complete(a, b)) >= 4
    loss = np.asarray(res.curve["post-norm"][0]["loss"], float)
    b = res.curve_steps[-2]
    k = max(1, int(0.05 * b))
    assert res.curve_final(b)["post-norm"][0] == pytest.approx(loss[b - k:b].mean())
    fs = {f.key: f for f in res.findings()}
    for key in CURVE_KEYS:
        t = fs[key].at_scale
        assert t is not None and t.points >= 4 and t.target == deeplm.Params.resolve("paper").steps
        assert t.forms == deeplm.CURVE_FORMS
    assert fs["deeplm-leak-rescues"].at_scale is None
    assert [d.what for d in fs["deeplm-deesc-rescues"].distance] == ["training steps", "blocks", "model width",
                                                                       "parameters"]


def _planted_curve(gaps, seeds=3, held=None, steps=1000):
    """A Result whose constant-rate runs have flat losses: pre-norm 2.0, post-norm 2.0 + gap(b) and de-escalated
    2.0 + gap(b) / 2 over the budget ending at b (`gaps`: b -> gap); `held`: the seeds whose runs are held."""
    budgets = sorted(gaps)
    held = range(seeds) if held is None else held

    def loss(scale):
        out, start = [], 0
        for b in budgets:
            out += [2.0 + scale * gaps[b]] * (b - start)
            start = b
        return out

    curve = {v: [{"loss": loss(c), "wall_time_s": 1.0, "diverged": None} if s in held else None
                 for s in range(seeds)] for v, c in (("post-norm", 1.0), ("pre-norm", 0.0), ("de-escalated", 0.5))}
    p, q = deeplm.Params.resolve("book"), deeplm.Params.resolve("paper")
    return deeplm.Result(variants=list(deeplm.VARIANTS), seeds=list(range(seeds)), depth=48, steps=steps,
                         tokens="bytes", parameters=1, uniform_nats=5.5, unigram_nats=3.0, scale="book",
                         budget={k: {"steps": x.steps, "batch_size": x.batch_size, "seq_len": x.seq_len,
                                     "depth": x.depth, "d_model": x.d_model} for k, x in (("ours", p), ("paper", q))},
                         curve=curve, curve_steps=budgets)


def test_a_planted_curve_is_read_back_and_partial_seeds_give_no_trend():
    import math

    gaps = {b: 0.8 - 0.1 * math.log2(b / 62) for b in (62, 125, 250, 500, 1000)}
    r = _planted_curve(gaps)
    g = r.curve_gaps("post-norm", "pre-norm")
    assert g.shape == (3, 5) and np.allclose(g, [gaps[b] for b in r.curve_steps])
    assert np.allclose(r.curve_gaps("post-norm"), g + 2.0 - 3.0)
    t = r.trend("de-escalated", "post-norm")
    assert t.points == 5 and t.target == 50_000
    assert t.band.estimate == pytest.approx(-gaps[62] / 2 + 0.05 * math.log2(50_000 / 62), abs=0.02)
    assert r.curve_at("de-escalated", "post-norm").estimate == pytest.approx(-gaps[1000] / 2)
    # two of three seeds held: no budget has all its seeds, so no trend (and no verdict at the paper's scale)
    part = _planted_curve(gaps, held=(0, 1))
    assert part.curve_complete("post-norm") == [] and part.trend("post-norm") is None
    # three budgets only: below the fewest a trend is read from
    short = _planted_curve({b: gaps[b] for b in (250, 500, 1000)})
    assert short.trend("post-norm") is None


def test_book_trends_to_the_papers_steps():
    """On the committed budget curve: each of the three gaps is carried from five budgets to the paper's 50,000
    steps. While the curve's runs are not all committed, no budget has every seed and the findings read no trend
    to the paper's scale."""
    from helpers.core import findings as F

    r = _book()
    fs = {f.key: f for f in r.findings()}
    if r.curve_missing:
        for key in CURVE_KEYS:
            assert fs[key].at_scale is None and fs[key].paper_scale_verdict == F.NOT_JUDGED, key
        pytest.skip(f"budget curve not all committed: {len(r.curve_missing)} of 9 runs missing")
    for key in CURVE_KEYS:
        t = fs[key].at_scale
        assert t.points == 5 and t.x == (62, 125, 250, 500, 1000) and t.units == 3, key
        assert t.target == 50_000 and t.forms == deeplm.CURVE_FORMS, key
    # the verdicts at the paper's steps, each band read alone at 95 % (the chapter and the findings page read them at
    # the family's level: test_book_budget_curve_as_the_chapter_reads_it): post-norm keeps pulling away from the
    # unigram predictor (contradicted there too); neither gap between variants is decided there
    assert {k: fs[k].paper_scale_verdict for k in CURVE_KEYS} == {
        "deeplm-post-norm-fails": F.CONTRADICTED, "deeplm-deesc-rescues": F.SCALE_INCONCLUSIVE,
        "deeplm-deesc-like-pre-norm": F.SCALE_INCONCLUSIVE}
    bands = {k: fs[k].at_scale.band for k in CURVE_KEYS}
    assert bands["deeplm-post-norm-fails"].estimate == pytest.approx(-3.00, abs=0.01)
    assert bands["deeplm-post-norm-fails"].high == pytest.approx(-0.443, abs=0.005)
    assert bands["deeplm-deesc-rescues"].low == pytest.approx(-0.625, abs=0.005)
    assert bands["deeplm-deesc-rescues"].high == pytest.approx(0.959, abs=0.005)
    assert bands["deeplm-deesc-like-pre-norm"].low == pytest.approx(0.051, abs=0.005)
    assert bands["deeplm-deesc-like-pre-norm"].high == pytest.approx(1.198, abs=0.005)


def test_book_budget_curve_as_the_chapter_reads_it():
    """The reading of the budget curve, its bands read at the family of Yu & Zhang's trends' level: post-norm −
    unigram falls at every doubling, and at the paper's steps the log form lies below zero while the form that
    settles reaches past it (inconclusive there); de-escalated − post-norm changes sign over the budgets, ends above
    zero under the constant rate where the cosine runs end level, and its band holds both signs; de-escalated −
    pre-norm is negative at the first two budgets and positive after, and its band holds zero and the margin of
    likeness alike."""
    from helpers.core import findings as F

    r = _book()
    if r.curve_missing:
        pytest.skip(f"budget curve not all committed: {len(r.curve_missing)} of 9 runs missing")
    fs = r.curve_findings()
    post = fs[("post-norm", None)].at_scale
    log, isqrt = post.fits
    assert np.all(np.diff(post.y) < 0) and log.at_target.high < 0 < isqrt.at_target.high
    assert fs[("post-norm", None)].paper_scale_verdict == F.SCALE_INCONCLUSIVE and post.level > 0.99
    assert r.curve_at("post-norm").estimate < r.gap("post-norm").estimate
    rescue = fs[("de-escalated", "post-norm")]
    assert min(rescue.at_scale.y) < 0 < max(rescue.at_scale.y)
    assert r.curve_at("de-escalated", "post-norm").low > 0 and r.paired("de-escalated", "post-norm").covers(0.0)
    assert rescue.at_scale.band.low < 0 < rescue.at_scale.band.high
    like = fs[("de-escalated", "pre-norm")]
    y = np.array(like.at_scale.y)
    assert np.all(y[:2] < 0) and np.all(y[2:] > 0)
    assert like.at_scale.band.low < 0 < like.margin < like.at_scale.band.high
