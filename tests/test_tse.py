"""What the tse experiment computes: one trajectory (core.escalation), the loops over trials and τ
(experiments.tse) and the transformers profile (hf.escalation), on tiny sizes."""

import math

import numpy as np
import pytest
import torch

from helpers.core import escalation as E
from helpers.core import measures as M
from helpers.experiments import tse
from helpers.hf import escalation as H
from helpers.hf.walk import transformer_layers
from helpers.machinery.params import ParameterError


def test_trials_are_independent_trajectories_with_derived_seeds():
    runs = tse.postnorm_trials(8, 16, 2, depth=3, trials=2, seed=4)
    assert runs["t_sim"].shape == (2, 4) and runs["xi_ratio"].shape == (2, 3, 4) and runs["delta"].shape == (2, 3)
    one = E.postnorm_trajectory(8, 16, 2, 3, seed=4 * 100_003 + 1)
    for k in one:
        assert np.array_equal(runs[k][1], one[k], equal_nan=True), k
    assert not np.array_equal(runs["t_sim"][0], runs["t_sim"][1])


def test_deescalation_with_tau_one_centres_every_block_output():
    div = tse.deescalated_diversity(8, 16, 2, depth=4, runs=2, taus=(1.0, 0.1), seed=1)
    assert np.allclose(div[1.0][:, 1:], 1.0, atol=1e-6)
    assert not np.allclose(div[0.1][:, 1:], 1.0, atol=1e-3)


def test_trajectory_records_the_blocks_own_measures():
    """t_sim of block ℓ's input is that of the previous block's output: recompute block 0 by hand."""
    out = E.postnorm_trajectory(8, 16, 2, 2, seed=3)
    torch.manual_seed(3)
    from helpers.core.blocks import PostNormBlock

    blk = PostNormBlock(16, 2, 64)
    X = E.random_input(8, 16, 10)
    with torch.no_grad():
        Y = blk(X)
    assert out["t_sim"][0] == pytest.approx(float(M.t_sim(X)))
    assert out["t_sim"][1] == pytest.approx(float(M.t_sim(Y)), rel=1e-6)


def test_prop23_error_is_round_off():
    assert E.prop23_error(16, 32, seed=0) < 1e-12


def test_lemma24_monte_carlo_matches_the_formula_and_detects_a_wrong_variance():
    chk = E.lemma24_at_init(16, 32, 4, alpha=1.0, value_scale=1.0, draws=2000, seed=0)
    assert abs(chk.mc_xi1 - chk.formula_xi1) < 4 * chk.mc_xi1_se
    X = E.random_input(16, 32, 0)
    P = torch.softmax(torch.randn(4, 16, 16, generator=torch.Generator().manual_seed(1)), -1)
    wrong = E.lemma24_monte_carlo(X, P, 1.0, value_scale=4.0, draws=2000, seed=0)
    f1, _ = M.expected_xi(X, P, 1.0, 1.0)                 # the formula for a different variance
    assert abs(wrong.mc_xi1 - float(f1)) > 10 * wrong.mc_xi1_se


def test_w_resampling_keeps_its_estimates_consistent():
    out = E.w_resampling(16, 32, 4, depth=3, draws=200, seed=0)
    assert np.allclose(out["r_est2"], 1 + out["est2"] * out["t_sim"])
    assert np.all(np.abs(out["mc_xi1"] - out["formula_xi1"]) / out["formula_xi1"] < 0.05)


def test_prenorm_normalised_input_has_norm_sqrt_nd():
    out = E.prenorm_trajectory(8, 16, 2, depth=3, seed=0)
    assert np.allclose(out["norm_Xhat"], math.sqrt(8 * 16), rtol=1e-3)
    assert np.all(np.diff(out["norm_X"]) > 0)


def test_first_block_above():
    t = np.array([[0.1, 0.5, 0.995, 1.0], [0.1, 0.6, 0.99, 1.0]])
    assert E.first_block_above(t) == 2
    assert E.first_block_above(t[:, :2]) is None


@pytest.mark.parametrize("kind, layers", [("bert", 2), ("albert", 1)])
def test_random_encoder_profile(kind, layers):
    model = H.random_encoder(kind, depth=2, hidden=32, heads=2, intermediate=64, seed=0)
    assert len(transformer_layers(model)) == layers
    ids = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    prof = H.escalation_profile(model, ids, mask, grad=(kind == "bert"))
    assert prof["t_sim"].shape == (3,) and prof["t_cos"].shape == (3,)
    if kind == "bert":
        assert prof["grad_norm"].shape == (2,) and np.all(prof["grad_norm"] > 0)
    with pytest.raises(ValueError):
        H.random_encoder("gpt", 2, 32, 2, 64, 0)


def test_bert_step_log_odds_add_up_to_each_layers_growth():
    """The four steps of a BERT layer (SA + residual, LN, FFN + residual, LN) telescope: their log-odds
    changes add up to the layer's, read independently from the hidden states; the recorded t_sim is the
    layers' inputs' (and the last output's)."""
    model = H.random_encoder("bert", depth=3, hidden=32, heads=2, intermediate=64, seed=1)
    ids = torch.randint(5, 100, (3, 7), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[2, 5:] = 0
    st = H.step_log_odds(model, ids, mask)
    assert st["increments"].shape == (3, 4) and st["t_sim"].shape == (4,)
    with torch.no_grad():
        hs = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
    t = np.stack([M.t_sim(h.double(), mask.bool()).numpy() for h in hs])           # (layers + 1, sentences)
    growth = np.diff(np.log(t / (1 - t)), axis=0).mean(1)
    assert np.allclose(st["increments"].sum(1), growth, atol=1e-6)
    assert np.allclose(st["t_sim"], t.mean(1), atol=1e-6)
    # a layer whose attention output is zero has no SA step: its first increment vanishes
    with torch.no_grad():
        model.encoder.layer[0].attention.output.dense.weight.zero_()
        model.encoder.layer[0].attention.output.dense.bias.zero_()
    assert H.step_log_odds(model, ids, mask)["increments"][0, 0] == pytest.approx(0.0, abs=1e-9)


def test_params_reject_heads_that_do_not_divide_the_width():
    with pytest.raises(ParameterError, match="d_model"):
        tse.Params.resolve("ci", d_model=100, n_heads=8)
    assert tse.Params.resolve("book").other_value_scale == 8.0
    assert tse.Params.resolve("book", value_scale=8.0).other_value_scale == 1.0


def test_paper_figure2_values_come_from_the_claims_csv():
    claims = tse.paper_claims("Figure 2")
    assert claims["mean xi1/xi2 of step 1 at the first block"] == 2.0
    assert claims["first block where t_sim > 0.99"] == 15.0 and len(claims) == 3


# ------------------------------------------------------------------ FFN, shares, Figure 8, bounds (11)


def test_ffn_initialisations_and_ablations():
    from helpers.core.blocks import FFN

    d, q = 64, 256
    torch.manual_seed(0)
    default, xavier = FFN(d, q, init="torch"), FFN(d, q, init="xavier")
    # nn.Linear's default is U(±1/sqrt(fan_in)); Xavier-uniform is U(±sqrt(6/(fan_in + fan_out)))
    assert default.w1.weight.abs().max() <= 1 / math.sqrt(d) and default.w1.weight.abs().max() > 0.9 / math.sqrt(d)
    assert default.w2.weight.abs().max() <= 1 / math.sqrt(q)
    bound = math.sqrt(6 / (d + q))
    assert xavier.w1.weight.abs().max() <= bound and xavier.w1.weight.abs().max() > 0.9 * bound
    x = torch.randn(4000, d, generator=torch.Generator().manual_seed(1))   # isotropic, unit-variance rows
    assert torch.equal(FFN(d, q, kind="none")(x), torch.zeros_like(x))
    centred = FFN(d, q, kind="centred-relu")
    centred.load_state_dict(default.state_dict())
    h_relu = torch.relu(default.w1(x))
    h_centred = h_relu - default.w1.weight.norm(dim=1) / math.sqrt(2 * math.pi)
    assert torch.allclose(centred(x), default.w2(h_centred), atol=1e-6)
    assert h_relu.mean().item() > 0.2 * (1 / math.sqrt(3))               # ReLU: a positive mean
    assert abs(h_centred.mean().item()) < 0.01                            # centred: zero mean
    with pytest.raises(ValueError):
        FFN(d, q, init="kaiming")
    with pytest.raises(ValueError):
        FFN(d, q, kind="gelu")


def test_ffn_weight_variances_are_those_the_inits_draw():
    """`ffn_weight_variances` (quoted by the ViT ablation's prose) against the variances of drawn weights:
    Xavier's are 2× (W₁) and 4× (W₂) PyTorch's at q = 2d."""
    from helpers.core.blocks import FFN, ffn_weight_variances

    d, q = 96, 192
    torch.manual_seed(0)
    for init in ("xavier", "torch"):
        f, (v1, v2) = FFN(d, q, init=init), ffn_weight_variances(d, q, init)
        assert f.w1.weight.var().item() == pytest.approx(v1, rel=0.03)
        assert f.w2.weight.var().item() == pytest.approx(v2, rel=0.03)
    (x1, x2), (t1, t2) = ffn_weight_variances(d, q, "xavier"), ffn_weight_variances(d, q, "torch")
    assert (x1 / t1, x2 / t2) == (pytest.approx(2.0), pytest.approx(4.0))
    with pytest.raises(ValueError):
        ffn_weight_variances(d, q, "kaiming")


def test_step_shares_on_planted_ratios_and_identity_attention():
    planted = np.array([[1.0, 1.0, 4.0, 1.0], [1.0, 1.0, 2.0, 1.0]])   # only the FFN step raises the odds
    assert np.allclose(E.step_shares(planted), [0, 0, 1, 0])
    both = np.array([[2.0, 1.0, 2.0, 1.0]])                             # equal factors: equal shares
    assert np.allclose(E.step_shares(both), [0.5, 0, 0.5, 0])
    trials = np.stack([np.array([[4.0, 1.0, 2.0, 1.0]]), np.array([[4.0, 1.0, np.nan, 1.0]])])
    assert np.allclose(E.step_shares(trials), [2 / 3, 0, 1 / 3, 0])     # NaN (unresolved) ignored
    # identity attention (alpha = 0: Y1 = X): step 1 leaves the odds unchanged, its share is 0
    out = E.postnorm_trajectory(16, 32, 2, 3, seed=0, alpha=0.0)
    assert np.allclose(out["xi_ratio"][:, 0], 1.0)
    assert E.step_shares(out["xi_ratio"][None])[0] == pytest.approx(0.0, abs=1e-6)


def test_log_odds_increments_add_up_to_the_blocks_log_odds_growth():
    """Prop. 2.3 per step: the odds of each step's output are its input's times ξ₁/ξ₂, so the four
    increments of a block sum to logit(t_sim(out)) − logit(t_sim(in))."""
    out = E.postnorm_trajectory(16, 64, 4, 3, seed=2, ffn_init="torch")
    growth = np.diff(E.log_odds(out["t_sim"]))
    assert np.allclose(E.log_odds_increments(out["xi_ratio"]).sum(-1), growth, rtol=1e-3, atol=1e-4)


def test_ffn_initialisation_changes_the_ffn_step_but_not_the_attention_step():
    a = E.postnorm_trajectory(32, 128, 4, 1, seed=5, ffn_init="torch")
    b = E.postnorm_trajectory(32, 128, 4, 1, seed=5, ffn_init="xavier")
    assert a["xi_ratio"][0, 0] == pytest.approx(b["xi_ratio"][0, 0])   # same attention draw
    assert b["xi_ratio"][0, 2] > a["xi_ratio"][0, 2] > 1                # Xavier's larger FFN raises the odds more
    c = E.postnorm_trajectory(32, 128, 4, 1, seed=5, ffn_kind="none")
    assert c["xi_ratio"][0, 2] == pytest.approx(1.0)


def test_eta_has_zero_mean_when_the_diverse_part_is_untouched():
    """Uniform P: Π₂PX = 0, so ξ₂ = E[ξ₂] = 1 and η = E[ξ₁] − ξ₁, whose mean over draws is 0 when
    Lemma 2.4's E[ξ₁] is right (and is not for a wrong variance)."""
    n, d = 50, 20
    X = E.rank_one_plus_noise(n, d, 0.5, torch.randn(d, dtype=torch.float64), torch.randn(n, d, dtype=torch.float64))
    P = torch.full((n, n), 1 / n, dtype=torch.float64)
    eta = E.eta_samples(X, P, 4000, torch.Generator().manual_seed(0))
    assert abs(eta.mean().item()) < 4 * eta.std().item() / math.sqrt(4000)
    # the same statistic against the E[ξ₁] of a wrong variance (W drawn with c = 2, formula for c = 1)
    W = torch.randn(4000, d, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * math.sqrt(2 / d)
    x1, _ = M.xi(X, X + (P @ X) @ W)
    f1, _ = M.expected_xi(X, P, 1.0, 1.0)
    wrong = f1 - x1
    assert abs(wrong.mean().item()) > 10 * wrong.std().item() / math.sqrt(4000)


def test_eta_concentrates_as_d_grows():
    out = E.eta_concentration(60, (8, 32, 128), (0.2, 0.6, 1.0), draws=300, seed=0)
    sd = out["sd"].mean(1)
    assert sd[0] > sd[1] > sd[2]
    assert sd[0] / sd[2] == pytest.approx(4.0, rel=0.5)                   # about 1/sqrt(d)
    assert np.allclose(out["se"], out["sd"] / math.sqrt(300))


def test_bounds_11_hold_on_generic_stochastic_p_and_fail_without_stochasticity():
    res = E.bounds11_check(12, 6, samples=10, seed=0)
    for fam, v in res.items():
        assert v["min_slack_mu1"] >= -1e-12 and v["min_slack_mu2"] >= -1e-12, fam
    assert abs(res["doubly stochastic (Sinkhorn)"]["min_slack_mu1"]) < 1e-10   # Cor. 2.7: equality
    g = torch.Generator().manual_seed(3)
    for fam in E.STOCHASTIC_FAMILIES:
        assert torch.allclose(E.random_stochastic(fam, 9, g).sum(-1), torch.ones(9, dtype=torch.float64))
    X = E.rank_one_plus_noise(12, 6, 0.5, torch.randn(6, dtype=torch.float64), torch.randn(12, 6, dtype=torch.float64))
    assert E.bound11_margins(X, 0.5 * torch.eye(12, dtype=torch.float64))[0] < -0.5   # rows sum to 1/2: violated


def test_the_sweep_trajectory_is_the_figure5_trajectory():
    """`deescalated_diversity_trajectory` runs the same stack as `postnorm_trajectory` with τ (same seed,
    same blocks, same X), without the per-step diagnostics; τ = 0 is the plain post-norm stack; the block
    odds factor is ξ₁/ξ₂ of the whole block before its de-escalation."""
    from helpers.core import escalation as E

    for tau in (0.0, 0.3):
        lean = E.deescalated_diversity_trajectory(16, 32, 4, 5, seed=3, tau=tau)
        full = E.postnorm_trajectory(16, 32, 4, 5, seed=3, tau=tau if tau else None)
        assert np.allclose(lean["t_div"], 1 - full["t_sim"], atol=1e-5)
        assert lean["block_odds"].shape == (5,) and np.all(lean["block_odds"] > 1)
    plain = E.postnorm_trajectory(16, 32, 4, 5, seed=3)
    assert np.allclose(E.deescalated_diversity_trajectory(16, 32, 4, 5, seed=3, tau=0.0)["block_odds"],
                       np.prod(plain["xi_ratio"], axis=1), rtol=1e-3)
