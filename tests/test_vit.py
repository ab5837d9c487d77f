"""The ViT of Yu & Zhang §3.3 (helpers only): blocks, AutoAugment, resume."""

import random

import numpy as np
import pytest
import torch
from PIL import Image

from helpers.core import vit as vit_model
from helpers.data import augment


def tiny(variant):
    return vit_model.ViT(vit_model.ViTConfig(variant=variant, depth=3, d_model=32, d_ff=64, n_heads=4, patch=8,
                                             image=32))


def fake_data(n, seed=0):
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(n)]
    return images, [int(v) for v in rng.integers(0, 10, n)]


@pytest.mark.parametrize("variant", vit_model.VARIANTS)
def test_shapes_and_block_types(variant):
    torch.manual_seed(0)
    m = tiny(variant)
    x = torch.randn(2, 3, 32, 32)
    logits, states = m(x, return_states=True)
    assert logits.shape == (2, 10) and len(states) == 4 and states[0].shape == (2, 17, 32)
    if variant == "de-escalated":   # τ = 1 after each block: zero column means, t_sim = 0
        assert torch.allclose(states[-1].mean(1), torch.zeros(2, 32), atol=1e-5)
        assert m.block_similarity(x)[-1] < 1e-6


def test_patchify_roundtrip():
    m = tiny("post-norm")
    x = torch.arange(2 * 3 * 32 * 32, dtype=torch.float32).reshape(2, 3, 32, 32)
    p = m.patches(x)
    assert p.shape == (2, 16, 3 * 8 * 8)
    assert torch.equal(p[0, 1].reshape(3, 8, 8), x[0, :, 0:8, 8:16])


def test_autoaugment_returns_image_and_is_seeded():
    img = fake_data(1)[0][0]
    a = [np.asarray(augment.autoaugment(img, random.Random(3))) for _ in range(2)]
    assert a[0].shape == (32, 32, 3) and np.array_equal(a[0], a[1])
    assert len(augment.CIFAR10_POLICY) == 25


def test_bad_config():
    with pytest.raises(ValueError, match="variant"):
        vit_model.ViTConfig(variant="sandwich")
    with pytest.raises(ValueError, match="divisible"):
        vit_model.ViTConfig(image=30)


def test_params_literal_choices_and_divisibility():
    from helpers.experiments.vit import Params
    from helpers.machinery.params import ParameterError

    with pytest.raises(ParameterError, match="variants"):
        Params.resolve("ci", variants=("post-norm", "sandwich"))
    with pytest.raises(ParameterError, match="deesc_place"):
        Params.resolve("ci", deesc_place="everywhere")
    with pytest.raises(ParameterError, match="n_heads"):
        Params.resolve("ci", d_model=100, n_heads=8)
    assert Params.resolve("book").seeds == 3 and Params.resolve("paper").seeds == 3
    with pytest.raises(ParameterError, match="depths"):
        Params.resolve("ci", depths=(2, 2))
    with pytest.raises(ParameterError, match="depths"):
        Params.resolve("ci", depths=(0,))


def test_cache_key_is_derived_per_run_and_checkpoints_live_outside_results():
    from helpers.experiments.vit import Params
    from helpers.machinery import results

    p = Params.resolve("book")
    key = p.cache_key(drop=("variants", "seeds"), variant="pre-norm", run_seed=0)
    assert "variants" not in key and "seeds" not in key and "device" not in key
    assert key["variant"] == "pre-norm" and key["run_seed"] == 0 and key["d_model"] == 96
    deeper = p.with_(depth=25).cache_key(drop=("variants", "seeds"), variant="pre-norm", run_seed=0)
    assert deeper != key and results.settings_hash(deeper) != results.settings_hash(key)
    folder = results.checkpoint_dir("vit", key)
    assert "results" not in folder.relative_to(results.REPO_ROOT).parts


def test_result_round_trips_through_json():
    from helpers.experiments.vit import Result

    h = {"epoch": [1, 2], "train_loss": [2.0, 1.5], "train_acc": [0.1, 0.2], "test_loss": [2.1, 1.9],
         "test_acc": [0.1, 0.3], "t_sim": {"1": [0.2, 0.5], "2": [0.2, 0.7]}, "lr": 1e-4, "wall_time_s": 4.0}
    r = Result(variants=["pre-norm"], seeds=[0], depth=1, epochs=2, train_images=10, scale="ci",
               histories={"pre-norm": [h]})
    back = Result.from_json(r.to_json())
    assert back.final("test_acc") == {"pre-norm": 0.3} and back.last_t_sim() == {"pre-norm": 0.7}
    assert back.table()["s per epoch"].tolist() == [2.0]


@pytest.mark.parametrize("block", ["algorithm1", "standard"])
@pytest.mark.parametrize("place", ["ffn_input", "output"])
def test_similarity_before_deescalation(block, place):
    """Before the de-escalation step t_sim is that of the block's own state; after it (τ = 1, step at
    the output) the tokens have zero mean, so t_sim = 0 there by construction."""
    from helpers.core.vit import ViT, ViTConfig

    torch.manual_seed(0)
    cfg = ViTConfig(variant="de-escalated", depth=3, d_model=32, d_ff=64, n_heads=4, block=block, deesc_place=place)
    m = ViT(cfg).eval()
    x = torch.randn(4, 3, 32, 32)
    before = m.similarity_before_deescalation(x)
    after = m.block_similarity(x)[1:]
    assert before.shape == (3,) and np.all(before > 0.01)
    if place == "output":
        assert np.all(after < 1e-6)
    model = ViT(ViTConfig(variant="post-norm", depth=2, d_model=32, d_ff=64, n_heads=4, block=block))
    assert model.similarity_before_deescalation(x) is None


def test_standard_block_has_the_vit_pytorch_parts():
    """The 'standard' block: per-channel LayerNorm with bias, Q/K/V and output projections with biases."""
    from helpers.core.vit import ViT, ViTConfig

    m = ViT(ViTConfig(variant="post-norm", depth=2, d_model=32, d_ff=64, n_heads=4, block="standard"))
    names = dict(m.named_parameters())
    assert names["blocks.0.ln1.weight"].shape == (32,) and names["blocks.0.ln1.bias"].shape == (32,)
    assert "blocks.0.attn.out.weight" in names and "blocks.0.attn.out.bias" in names
    with pytest.raises(ValueError, match="block"):
        ViTConfig(block="resnet")


@pytest.mark.parametrize("block", ["standard-scalar-ln", "standard-no-bias", "standard-no-proj", "standard-relu",
                                   "standard-all-four"])
def test_block_ablation_puts_back_exactly_one_algorithm1_part(block):
    """Each ablation block is the standard block with one part as Algorithm 1 has it, and only that part:
    its parameters are the standard block's minus (or with scalar versions of) that part's."""
    from helpers.core.vit import ViT, ViTConfig

    cfg = dict(variant="de-escalated", depth=2, d_model=32, d_ff=64, n_heads=4)
    std = {n: p.shape for n, p in ViT(ViTConfig(block="standard", **cfg)).named_parameters()}
    m = ViT(ViTConfig(block=block, **cfg))
    abl = {n: p.shape for n, p in m.named_parameters()}
    changed = {n for n in std if abl.get(n) != std[n]} | {n for n in abl if n not in std}
    if block == "standard-scalar-ln":
        assert changed == {f"blocks.{i}.{ln}.{w}" for i in range(2) for ln in ("ln1", "ln2")
                           for w in ("weight", "bias", "gamma", "beta")}
        assert abl["blocks.0.ln1.gamma"] == () and abl["blocks.0.ln1.beta"] == ()
    elif block == "standard-no-bias":
        assert changed == {f"blocks.{i}.{n}.bias" for i in range(2) for n in ("attn.qkv", "attn.out", "ffn.0", "ffn.2")}
        assert all(n in abl for n in ("blocks.0.ln1.bias", "blocks.1.ln2.bias"))     # LayerNorm keeps its λ
    elif block == "standard-no-proj":
        assert changed == {f"blocks.{i}.attn.out.{w}" for i in range(2) for w in ("weight", "bias")}
    elif block == "standard-relu":
        assert changed == set() and isinstance(m.blocks[0].ffn[1], torch.nn.ReLU)
    else:                                     # all four: Algorithm 1's parameters, in the standard block's code
        size = lambda model: sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks."))  # noqa: E731
        assert size(m) == size(ViT(ViTConfig(block="algorithm1", **cfg)))      # Q/K/V fused, the same numbers
        assert not any(n.endswith(".bias") for n in abl if n.startswith("blocks.")) and isinstance(
            m.blocks[0].ffn[1], torch.nn.ReLU) and "blocks.0.attn.out.weight" not in abl
    assert block in ("standard-relu", "standard-all-four") or isinstance(m.blocks[0].ffn[1], torch.nn.GELU)
    x = torch.randn(2, 3, 32, 32)
    assert m(x).shape == (2, 10) and m.similarity_before_deescalation(x).shape == (2,)


def test_block_ablation_runs_sit_beside_the_sweep(tmp_path, monkeypatch):
    """The ablation trains pre-norm and de-escalated at `ablation_depth` for Algorithm 1's block, the
    standard block and each reverted block, under the names and keys their own grids give them (so the
    Algorithm-1 and standard runs are the sweep's, read back, not trained again); the ablation settings
    are not part of any run's key."""
    from helpers.experiments import vit
    from helpers.machinery import results

    seen = []
    monkeypatch.setattr(results, "cached", lambda params, name, compute, drop=(), **extra:
                        (seen.append((name, params.block, params.depth)) or {"lr": 0, "train_loss": [1.0]}, True))
    p = vit.Params.resolve("ci", depths=(2,), variants=("pre-norm", "de-escalated"), standard_depths=(2,),
                           ablations=("standard-no-bias", "standard-relu"), ablation_depth=2, confirm_depths=())
    res = vit.run(p)
    abl = sorted(x for x in seen if x[1] in ("standard-no-bias", "standard-relu"))
    assert abl == sorted((f"{b}-d2-{v}-seed0", b, 2) for b in ("standard-no-bias", "standard-relu")
                         for v in ("pre-norm", "de-escalated"))
    assert seen.count(("d2-de-escalated-seed0", "algorithm1", 2)) == 1               # the sweep's runs, not again
    assert seen.count(("standard-d2-de-escalated-seed0", "standard", 2)) == 1
    assert res.ablation["standard"]["de-escalated"] is res.standard["2"]["de-escalated"]
    assert list(res.ablation) == ["algorithm1", "standard", "standard-no-bias", "standard-relu"]
    assert res.ablation_depth == 2 and set(res.ablation["standard"]) == {"pre-norm", "de-escalated"}
    seen.clear()                     # without the sweep at that depth, the ablation trains them (same names)
    vit.run(p.with_(depths=(), standard_depths=()))
    assert ("d2-pre-norm-seed0", "algorithm1", 2) in seen and ("standard-d2-pre-norm-seed0", "standard", 2) in seen
    seen.clear()                     # the confirmation: its blocks at `confirm_depth`, the main depth's runs reused
    res = vit.run(p.with_(ablation_depth=0, confirm_depths=(4,), confirm_blocks=("standard-relu",)))
    assert sorted(x for x in seen if x[1] == "standard-relu") == [
        ("standard-relu-de-escalated-seed0", "standard-relu", 4), ("standard-relu-pre-norm-seed0", "standard-relu", 4)]
    assert seen.count(("pre-norm-seed0", "algorithm1", 4)) == 1 and list(res.confirm) == ["4"] and res.ablation == {}
    assert list(res.confirm["4"]) == ["algorithm1", "standard", "standard-relu"]
    book = vit.Params.resolve("book")
    bare = book.with_(ablations=(), ablation_depth=0, confirm_blocks=(), confirm_depths=())
    assert book.cache_key() == bare.cache_key()
    assert (vit.Params.resolve("book", block="standard-no-bias").with_(depth=24, depths=()).cache_key()
            != vit.Params.resolve("book", block="standard").with_(depth=24, depths=()).cache_key())
    with pytest.raises(ValueError, match="ablations"):
        vit.Params.resolve("ci", ablations=("standard-gelu",))


def test_sweep_runs_are_keyed_by_their_own_depth_and_named_apart(tmp_path, monkeypatch):
    """A sweep depth's run is cached as `d<depth>-<variant>-seed<s>` (with a `standard-` prefix for
    standard blocks) under the key of `p` at that depth without the sweep, so it does not depend on which
    other depths were swept; `run_one` refuses a run outside the grid; post-norm-full-lr is the post-norm
    model at the others' learning rate."""
    from helpers.experiments import vit
    from helpers.machinery import results

    seen = []
    monkeypatch.setattr(results, "cached", lambda params, name, compute, drop=(), **extra:
                        (seen.append((name, params.depth, params.depths)) or {"lr": 0}, True))
    p = vit.Params.resolve("ci", depths=(2, 3), variants=("post-norm", "post-norm-full-lr"), standard_depths=(),
                           ablation_depth=0, confirm_depths=())
    res = vit.run(p)
    assert sorted(seen) == sorted([(f"{pre}{v}-seed0", d, ()) for d, pre in ((4, ""), (2, "d2-"), (3, "d3-"))
                                   for v in ("post-norm", "post-norm-full-lr")])
    assert res.depths == [2, 3, 4] and res.from_cache and res.standard == {} and res.standard_result() is None
    seen.clear()
    vit.run(p.with_(block="standard"))         # standard blocks sit beside the Algorithm-1 runs
    standard_names = sorted(f"standard-{pre}{v}-seed0" for pre in ("", "d2-", "d3-")
                            for v in ("post-norm", "post-norm-full-lr"))
    assert sorted(n for n, _d, _ds in seen) == standard_names
    # the block comparison: `standard_depths` adds the standard-block runs at those depths, under the same
    # names and keys as a standard-block grid would give them (so either way of running them is cached once)
    seen.clear()
    res = vit.run(p.with_(standard_depths=(2, 3, 4)))
    assert sorted(n for n, _d, _ds in seen if n.startswith("standard-")) == standard_names
    assert sorted(n for n, _d, _ds in seen if not n.startswith("standard-")) == sorted(
        f"{pre}{v}-seed0" for pre in ("", "d2-", "d3-") for v in ("post-norm", "post-norm-full-lr"))
    std = res.standard_result()
    assert sorted(res.standard) == ["2", "3", "4"] and std.depths == [2, 3, 4] and std.depth == 4
    assert std.histories is std.sweep["4"] and std.standard_result() is None
    key = vit.Params.resolve("book").with_(block="standard").cache_key()
    assert key == vit.Params.resolve("book", block="standard", standard_depths=()).cache_key()
    with pytest.raises(ValueError, match="not in this grid"):
        vit.run_one(p, 5, "post-norm", 0)
    with pytest.raises(ValueError, match="not in this grid"):
        vit.run_one(p, 2, "pre-norm", 0)
    assert vit.model_variant("post-norm-full-lr") == "post-norm" and vit.variant_lr("post-norm-full-lr", None) == 1e-4
    assert vit.variant_lr("post-norm", None) == 5e-5 and vit.variant_lr("post-norm-full-lr", 3e-4) == 3e-4
    assert vit.variant_lr("pre-norm") == vit.variant_lr("de-escalated") == 1e-4


def _hist(loss, acc=0.1, t_sim=(0.1,)):
    return {"epoch": [1], "train_loss": [loss], "train_acc": [0.1], "test_loss": [2.0], "test_acc": [acc],
            "t_sim": {"1": list(t_sim)}, "lr": 1e-4, "wall_time_s": 1.0}


def test_gap_interval_covers_a_planted_shift():
    """Result.gap: per-seed a − b with a t-interval; a planted constant shift plus noise is covered."""
    from helpers.experiments.vit import Result

    rng = np.random.default_rng(0)
    base = rng.normal(2.0, 0.1, 8)
    noise = [0.01, -0.01, 0.02, -0.02, 0.005, -0.005, 0.0, 0.0]          # mean zero: the shift is exactly -0.3
    sweep = {"6": {"a": [_hist(x - 0.3 + e) for x, e in zip(base, noise, strict=True)], "b": [_hist(x) for x in base]}}
    r = Result(variants=["a", "b"], seeds=list(range(8)), depth=6, epochs=1, train_images=10, scale="ci",
               histories=sweep["6"], sweep=sweep)
    d = r.gap("a", "b", 6)
    assert d.n == 8 and d.method == "t" and d.low < -0.3 < d.high and d.high - d.low < 0.05
    assert d == r.gap("a", "b") and r.gaps("a", "b") == {6: d}
    back = Result.from_json(r.to_json())
    assert back.depths == [6] and {k: v.shape for k, v in back.sweep_final().items()} == {"a": (1, 8), "b": (1, 8)}


def test_side_reads_the_interval():
    """side: +1 when the seed-paired interval lies above 0, −1 below, 0 when it covers 0 or has one seed."""
    from helpers.core.stats import Interval, t_interval
    from helpers.experiments.vit import side

    assert side(t_interval([0.5, 0.51, 0.49])) == 1 and side(t_interval([-0.5, -0.51, -0.49])) == -1
    assert side(t_interval([0.3, -0.3, 0.2, -0.2])) == 0 and side(t_interval([0.4])) == 0
    assert side(Interval(0.1, 0.0, 0.2, 3, "t")) == 0


def test_depth_readings_follow_the_intervals():
    """fails_from: the shallowest depth from which the variant ends clearly worse (interval above 0) at
    every deeper depth, a clear gap at a shallow depth followed by none not counting; ahead_depths,
    ahead_from and level_depths read the same intervals; at_chance counts seeds within 0.01 of ln 10."""
    from helpers.experiments.vit import Result

    b = [2.0, 2.1, 1.9]
    jitter = (0.01, -0.01, 0.0)
    gaps = {6: 0.3, 12: 0.0, 24: 0.2, 48: 0.3, 80: 0.4}            # clear at 6, none at 12, clear from 24 on
    sweep = {str(d): {"x": [_hist(x + g + e) for x, e in zip(b, jitter, strict=True)],
                      "pre-norm": [_hist(x) for x in b]} for d, g in gaps.items()}
    r = Result(variants=["x", "pre-norm"], seeds=[0, 1, 2], depth=80, epochs=1, train_images=10, scale="ci",
               histories=sweep["80"], sweep=sweep)
    assert r.fails_from("x") == 24 and r.fails_from("pre-norm", "x") is None
    assert r.ahead_from("pre-norm", "x") == 24 and r.ahead_from("x", "pre-norm") is None
    assert r.ahead_depths("pre-norm", "x") == [6, 24, 48, 80] and r.ahead_depths("x", "pre-norm") == []
    assert r.level_depths("x") == [12]
    assert r.at_chance("x", 12) == 0
    r.sweep["12"]["x"][0]["train_loss"][-1] = np.log(10) + 0.005
    assert r.at_chance("x", 12) == 1 and r.at_chance("pre-norm", 12) == 0


def test_run_t_sim_reads_before_deescalation_and_zero_for_round_off():
    from helpers.experiments.vit import Result

    post = _hist(2.0, t_sim=(0.5, 0.93))
    de = {**_hist(2.0, t_sim=(0.2, 1.2e-15)), "t_sim_before_deescalation": {"1": [0.3, 0.093]}}
    r = Result(variants=["post-norm", "de-escalated"], seeds=[0], depth=1, epochs=1, train_images=10, scale="ci",
               histories={"post-norm": [post], "de-escalated": [de]})
    assert r.run_t_sim("post-norm", 1) == 0.93 and r.run_t_sim("de-escalated", 1) == 0.093
    del de["t_sim_before_deescalation"]
    assert r.run_t_sim("de-escalated", 1) == 0.0
    assert r.alike_depth("post-norm") == 1               # no depth reaches 0.99: the deepest


@pytest.mark.parametrize("epochs", [1, 2, 4, 10])
def test_lr_factors_are_the_rates_the_task_steps_through(epochs):
    """`train.vit.lr_factors` is the rate `ViTTask.build`'s scheduler gives every optimiser step (×0.2 after 70 %
    and 90 % of the epochs, rounded down to whole epochs, at least one), read off the scheduler itself."""
    from helpers.train import vit as vit_train

    task = vit_train.ViTTask(tiny("pre-norm"), fake_data(20), fake_data(4, 1),
                             vit_train.TrainConfig(epochs=epochs, batch_size=4))
    _, opt, sched = task.build(torch.device("cpu"))
    base, seen = opt.param_groups[0]["lr"], []
    for _ in range(epochs * task.steps_per_epoch):
        seen.append(opt.param_groups[0]["lr"] / base)
        opt.step()
        sched.step()
    factors = vit_train.lr_factors(epochs, task.steps_per_epoch)
    assert seen == pytest.approx(factors) and len(factors) == epochs * 5
    if epochs == 4:      # the book's four epochs: the base rate for two, then 0.2 and 0.04 of it
        assert factors == pytest.approx([1.0] * 10 + [0.2] * 5 + [0.04] * 5)


def test_the_variants_of_one_seed_start_from_the_same_weights():
    """A seed pairs the initial weights as well as the data order: `run_variant` seeds torch before it
    builds the model, and the three variants draw their parameters in the same order (pre-norm adds a final
    LayerNorm at 1 and 0; de-escalation has no parameters), for either block type."""
    from helpers.core.vit import ViT, ViTConfig

    for block in ("algorithm1", "standard", "algorithm1-torch-ffn-init"):
        params = {}
        for v in ("post-norm", "pre-norm", "de-escalated"):
            torch.manual_seed(3)
            params[v] = dict(ViT(ViTConfig(variant=v, depth=3, d_model=32, d_ff=64, n_heads=4, patch=8,
                                           block=block)).named_parameters())
        post = params["post-norm"]
        assert set(params["pre-norm"]) - set(post) == {"final_norm.weight", "final_norm.bias"}
        for v in ("pre-norm", "de-escalated"):
            assert all(torch.equal(post[n], params[v][n]) for n in post), (block, v)


def test_block_cost_reads_the_bench_of_both_block_types():
    """The chapter's block-cost numbers come from the committed bench file, whose loop names are those
    of scripts/bench_training.py; the ratio is standard over Algorithm 1."""
    import importlib.util

    from helpers.experiments.vit import BLOCK_BENCH, block_cost
    from helpers.machinery.runtime import REPO_ROOT

    spec = importlib.util.spec_from_file_location("bench_training", REPO_ROOT / "scripts" / "bench_training.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert set(BLOCK_BENCH) <= set(bench.LOOPS) and not set(BLOCK_BENCH) & set(bench.DEFAULT_LOOPS)
    c = block_cost()
    if c is None:
        pytest.skip("results/bench/vit-blocks-cpu.json not committed")
    assert c["algorithm1_s"] > 0 and c["standard_s"] > 0
    assert c["ratio"] == pytest.approx(c["standard_s"] / c["algorithm1_s"])
    assert c["threads"] == 1 and "--runs bf16" in c["command"]
    assert c["ratio"] < 1.0        # the chapter: a standard-block sweep takes no more than the Algorithm-1 one


def test_init_ablation_changes_only_that_part_of_algorithm1s_initialisation():
    """'algorithm1-torch-v-init' draws the value maps with variance 1/(3d) (PyTorch's U(±1/√d)) instead of 1/d,
    'algorithm1-torch-ffn-init' the FFN maps as nn.Linear does (U(±1/√fan_in)) instead of Xavier; everything
    else, parameters and the rest of the initialisation, is Algorithm 1's."""
    from helpers.core.vit import ViT, ViTConfig

    cfg = dict(variant="de-escalated", depth=3, d_model=96, d_ff=192, n_heads=4)
    models = {}
    for b in ("algorithm1", "algorithm1-torch-v-init", "algorithm1-torch-ffn-init"):
        torch.manual_seed(0)
        models[b] = dict(ViT(ViTConfig(block=b, **cfg)).named_parameters())
    a1, v, f = models["algorithm1"], models["algorithm1-torch-v-init"], models["algorithm1-torch-ffn-init"]
    assert a1.keys() == v.keys() == f.keys()
    d, q = 96, 192
    wv = torch.cat([a1[f"blocks.{i}.attn.w_v"].flatten() for i in range(3)])
    assert wv.var().item() == pytest.approx(1 / d, rel=0.05)
    wv = torch.cat([v[f"blocks.{i}.attn.w_v"].flatten() for i in range(3)])
    assert wv.var().item() == pytest.approx(1 / (3 * d), rel=0.05)
    w1 = torch.cat([a1[f"blocks.{i}.ffn.w1.weight"].flatten() for i in range(3)])
    assert w1.abs().max().item() == pytest.approx((6 / (d + q)) ** 0.5, rel=0.01)          # Xavier-uniform
    w1, w2 = f["blocks.0.ffn.w1.weight"], f["blocks.0.ffn.w2.weight"]
    assert w1.abs().max().item() <= d ** -0.5 and w1.abs().max().item() > 0.99 * d ** -0.5
    assert w2.abs().max().item() <= q ** -0.5 and w2.abs().max().item() > 0.99 * q ** -0.5
    assert torch.equal(a1["blocks.0.attn.w_q"], f["blocks.0.attn.w_q"])                # same draws before the FFN
    w1 = torch.cat([v[f"blocks.{i}.ffn.w1.weight"].flatten() for i in range(3)])          # v-init keeps Xavier
    assert w1.abs().max().item() == pytest.approx((6 / (d + q)) ** 0.5, rel=0.01)


@pytest.mark.parametrize("block, scale", [("algorithm1-torch-ffn-init-x0.5", 0.5),
                                          ("algorithm1-torch-ffn-init-x4", 4.0)])
def test_ffn_scale_blocks_rescale_only_the_ffn_maps(block, scale):
    """The FFN-scale sweep's blocks: Algorithm 1's block with PyTorch's FFN initialisation whose W₁ and W₂ have
    `scale` times its variance; every other weight drawn as in 'algorithm1-torch-ffn-init'. They are valid
    ablation blocks and leave the book preset's cache keys alone."""
    from helpers.core.vit import ViT, ViTConfig
    from helpers.experiments import vit

    cfg = dict(variant="de-escalated", depth=2, d_model=96, d_ff=192, n_heads=4)
    torch.manual_seed(0)
    base = dict(ViT(ViTConfig(block="algorithm1-torch-ffn-init", **cfg)).named_parameters())
    torch.manual_seed(0)
    scaled = dict(ViT(ViTConfig(block=block, **cfg)).named_parameters())
    assert base.keys() == scaled.keys()
    for n, w in base.items():
        if ".ffn.w" in n:
            assert torch.allclose(scaled[n], w * scale ** 0.5), n
        else:
            assert torch.equal(scaled[n], w), n
    book = vit.Params.resolve("book")
    assert block in book.ablations                                  # the book preset reads the sweep
    assert book.with_(ablations=tuple(b for b in book.ablations if b != block)).cache_key() == book.cache_key()


def test_ffn_steps_block_keeps_xaviers_weights_and_scales_only_the_ffn_steps():
    """'algorithm1-torch-ffn-steps': Algorithm 1's block with its own (Xavier) weights, whose W₁ and W₂ learn at
    the base rate times Xavier's initial std over PyTorch's, so their AdamW steps relative to their initial scale
    are PyTorch-initialised maps'; every other parameter at the base rate. Checked on one AdamW step."""
    from helpers.core.blocks import ffn_weight_variances
    from helpers.core.vit import ViT, ViTConfig, ffn_step_scales
    from helpers.train.loop import adamw
    from helpers.train.vit import param_groups

    d, q = 96, 192
    (x1, x2), (t1, t2) = ffn_weight_variances(d, q, "xavier"), ffn_weight_variances(d, q, "torch")
    assert ffn_step_scales(d, q) == pytest.approx(((x1 / t1) ** 0.5, (x2 / t2) ** 0.5))
    assert ffn_step_scales(d, q) == pytest.approx((2 ** 0.5, 2.0))
    cfg = dict(variant="pre-norm", depth=2, d_model=d, d_ff=q, n_heads=4, patch=8)
    torch.manual_seed(0)
    base = ViT(ViTConfig(block="algorithm1", **cfg))
    torch.manual_seed(0)
    steps = ViT(ViTConfig(block="algorithm1-torch-ffn-steps", **cfg))
    assert all(torch.equal(a, b) for a, b in zip(base.state_dict().values(), steps.state_dict().values(),
                                                 strict=True))
    assert base.lr_scales == {} and len(param_groups(base, 1e-3)) == 1
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    moved = {}
    for name, m in (("base", base), ("steps", steps)):
        before = {n: p.detach().clone() for n, p in m.named_parameters()}
        opt = adamw(param_groups(m, 1e-3), weight_decay=0.0)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        moved[name] = {n: (p.detach() - before[n]).abs().max().item() for n, p in m.named_parameters()}
    s1, s2 = ffn_step_scales(d, q)
    for n, step in moved["base"].items():       # Adam's first step is lr·sign(g): the ratio is the multiplier
        ratio = moved["steps"][n] / step if step else 1.0
        want = s1 if n.endswith("ffn.w1.weight") else s2 if n.endswith("ffn.w2.weight") else 1.0
        assert ratio == pytest.approx(want, rel=1e-3), n
    steps.lr_scales["nope"] = 2.0
    with pytest.raises(ValueError):
        param_groups(steps, 1e-3)


def test_ablation_contrast_recovers_a_planted_move_of_the_gap():
    """Result.ablation_contrast: seed by seed, how far a block moves the de-escalated − pre-norm gap (or one
    variant's loss) against another block; a planted move is covered, a block not run gives NaN."""
    from helpers.experiments.vit import Result

    rng = np.random.default_rng(1)
    pre, de = rng.normal(2.0, 0.1, 6), rng.normal(2.0, 0.1, 6)
    noise = np.array([0.01, -0.01, 0.02, -0.02, 0.0, 0.0])
    grid = {"algorithm1": {"pre-norm": [_hist(v) for v in pre], "de-escalated": [_hist(v) for v in de]},
            "x": {"pre-norm": [_hist(v + 0.05) for v in pre],
                  "de-escalated": [_hist(v - 0.15 + e) for v, e in zip(de, noise, strict=True)]}}
    r = Result(variants=["pre-norm", "de-escalated"], seeds=list(range(6)), depth=24, epochs=1, train_images=10,
               scale="ci", ablation=grid, ablation_depth=24)
    gap = r.ablation_contrast("x", "algorithm1")
    assert gap.n == 6 and gap.low < -0.2 < gap.high and gap.high - gap.low < 0.05
    de_only = r.ablation_contrast("x", "algorithm1", variant="de-escalated")
    assert de_only.low < -0.15 < de_only.high
    assert r.ablation_contrast("x", "algorithm1", variant="pre-norm").estimate == pytest.approx(0.05)
    assert np.isnan(r.ablation_contrast("missing", "algorithm1").estimate)


def test_recipes_are_valid_and_costed_from_the_committed_runs():
    """Every recipe resolves on the book preset; its cost is the runs it adds to the book preset's (not in the
    cache, and not among the book preset's own missing runs) at the committed seconds per epoch of their depth
    (the nearest deeper depth when none ran there) times their epochs."""
    from helpers.experiments import vit
    from helpers.machinery.results import settings_hash

    per_epoch = {24: 30.0, 48: 60.0, 80: 150.0}
    book_lacks = {(s.name, settings_hash(s.key)) for s in vit.runs(vit.Params.resolve("book")) if not s.done()}
    for name, overrides in vit.RECIPES.items():
        q = vit.Params.resolve("book", **overrides)
        missing = [s for s in vit.runs(q) if not s.done() and (s.name, settings_hash(s.key)) not in book_lacks]
        want = sum(per_epoch[min(d for d in per_epoch if d >= s.key["depth"])] * s.key["epochs"]
                   for s in missing) / 3600
        assert vit.recipe_cost(name, per_epoch) == pytest.approx({"runs": len(missing), "hours": want}), name
    long = vit.Params.resolve("book", **vit.RECIPES["long"])
    assert long.epochs == 10 * vit.Params.resolve("book").epochs and long.depth == 48


def test_ffn_scale_slope_recovers_a_planted_slope():
    """Result.ffn_scale_slope: per seed, the least-squares slope of the de-escalated − pre-norm gap on log₂ of the
    FFN-variance factor (×0.5, ×1 = PyTorch's init, ×2, ×4), with a t-interval over seeds: a planted slope is
    covered, and its verdict for 'the larger the FFN's initial variance, the larger the gap' follows its sign
    (reproduced, not detected for a flat gap, contradicted); fewer than two scales give NaN."""
    from helpers.core.findings import CONTRADICTED, INCONCLUSIVE, REPRODUCED, verdict
    from helpers.experiments.vit import FFN_SCALE_BASE, FFN_SCALES, Result

    blocks = {1.0: FFN_SCALE_BASE, **{f: b for b, f in FFN_SCALES.items()}}
    rng = np.random.default_rng(3)
    pre = rng.normal(2.0, 0.1, 4)
    noise = {f: rng.normal(0, 0.01, 4) for f in blocks}

    def result(slope: float, only=None) -> Result:
        grid = {b: {"pre-norm": [_hist(v) for v in pre],
                    "de-escalated": [_hist(v - 0.1 + slope * np.log2(f) + e) for v, e in zip(pre, noise[f],
                                                                                              strict=True)]}
                for f, b in blocks.items() if only is None or f in only}
        return Result(variants=["pre-norm", "de-escalated"], seeds=list(range(4)), depth=24, epochs=1,
                      train_images=10, scale="ci", ablation=grid, ablation_depth=24)

    r = result(0.05)
    assert list(r.ffn_scale_blocks()) == [0.5, 1.0, 2.0, 4.0] and r.ffn_scale_missing() == []
    s = r.ffn_scale_slope()
    assert s.n == 4 and s.low < 0.05 < s.high and s.high - s.low < 0.05
    assert r.ffn_scale_gaps()[4.0].estimate == pytest.approx(-0.1 + 0.1 + float(np.mean(noise[4.0])))
    assert verdict(s, "above") == REPRODUCED
    assert verdict(result(0.0).ffn_scale_slope(), "above") == INCONCLUSIVE    # around zero, no size to fall short of
    assert verdict(result(-0.05).ffn_scale_slope(), "above") == CONTRADICTED
    assert np.isnan(result(0.05, only={1.0}).ffn_scale_slope().estimate)
    two = result(0.05, only={1.0, 4.0}).ffn_scale_slope()
    assert two.low < 0.05 < two.high
    r.missing = {"24": ["algorithm1-torch-ffn-init-x4", "algorithm1-torch-ffn-init-x0.5"]}
    assert r.ffn_scale_missing() == [0.5, 4.0] and r.ffn_scale_missing(48) == []


def test_book_build_lists_uncommitted_ffn_scales_instead_of_training_them(tmp_path, monkeypatch):
    """With `train_missing` False (the book build), an FFN-scale block whose runs the cache lacks is listed in
    `Result.missing`, not trained and not an error; allowed to train, the same grid trains it; any other missing
    block still stops the build (`MissingRuns`)."""
    from helpers.experiments import vit
    from helpers.machinery import results

    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path))
    made = []
    monkeypatch.setattr(results, "cached", lambda params, name, compute, drop=(), **extra:
                        (made.append(name) or {"lr": 0, "train_loss": [1.0]}, True))
    monkeypatch.setattr(results.RunSpec, "done", lambda self: "-x2-" not in self.name)
    p = vit.Params.resolve("ci", depths=(2,), variants=("pre-norm", "de-escalated"), standard_depths=(2,),
                           ablations=tuple(vit.FFN_SCALES), ablation_depth=2, confirm_depths=(), train_missing=False)
    res = vit.run(p)
    assert res.missing == {"2": ["algorithm1-torch-ffn-init-x2"]} and res.ffn_scale_missing() == [2.0]
    assert "algorithm1-torch-ffn-init-x2" not in res.ablation and "algorithm1-torch-ffn-init-x4" in res.ablation
    assert not any("-x2-" in n for n in made)
    res = vit.run(p.with_(train_missing=True))
    assert "algorithm1-torch-ffn-init-x2" in res.ablation and res.missing == {} and any("-x2-" in n for n in made)
    monkeypatch.setattr(results.RunSpec, "done", lambda self: "standard-relu" not in self.name)
    with pytest.raises(results.MissingRuns):
        vit.run(p.with_(ablations=("standard-relu",)))
