"""The vit chapter's parameters: `Params` (presets, rules), the chapter's variants and blocks, the margins its
readings use, and the named recipes of extra runs (`RECIPES`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from helpers.core.stats import Interval
from helpers.core.vit import ALGORITHM1_INITS, FFN_SCALES, FFN_STEPS, STANDARD_REVERTS
from helpers.machinery.params import ChapterParams, check_heads, nonneg, positive, rules
from helpers.train import vit as vit_train

Variant = Literal["post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"]
#: the chapter's variants: the model's three, plus post-norm trained at the others' learning rate
#: (the paper halves it for post-norm; at a short budget that alone can separate the curves)
VARIANTS = ("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated")
#: the block ablation trains these two variants (its question: what puts de-escalation ahead of pre-norm)
ABLATION_VARIANTS = ("pre-norm", "de-escalated")
#: a run "at chance": final training loss within this many nats of ln 10 (the loss of predicting the class
#: frequencies of CIFAR-10, whatever the image)
CHANCE_MARGIN = 0.01
#: "level": the seed-paired interval covers 0 and is narrower than ±LEVEL_MARGIN nats (a wide interval that
#: covers 0 only says the seeds disagree)
LEVEL_MARGIN = 0.1
#: tokens "alike": a last-block t_sim at or above this on every seed
ALIKE = 0.99
Block = Literal["algorithm1", "standard", "standard-scalar-ln", "standard-no-bias", "standard-no-proj",
                "standard-relu", "standard-all-four", "algorithm1-torch-ffn-init", "algorithm1-torch-v-init",
                "algorithm1-torch-ffn-init-x0.5", "algorithm1-torch-ffn-init-x2", "algorithm1-torch-ffn-init-x4",
                "algorithm1-torch-ffn-steps"]
#: the blocks an ablation may train (besides Algorithm 1's and the standard block, which the sweeps train)
ABLATION_BLOCKS = (*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS)
#: the FFN-scale sweep's factor-1 block: PyTorch's FFN initialisation as drawn (`FFN_SCALES` multiplies its variance)
FFN_SCALE_BASE = "algorithm1-torch-ffn-init"
#: makes the book preset's runs the cache lacks (resumable; the book build lists them instead of training them)
MISSING_COMMAND = "make grid CHAPTER=vit SCALE=book GRID_ARGS='--parallel 1'"


def side(iv: Interval) -> int:
    """Where a seed-paired interval lies: +1 wholly above 0, −1 wholly below, 0 covering 0 (or one seed)."""
    return 0 if not iv.has_interval else 1 if iv.low > 0 else -1 if iv.high < 0 else 0


#: the model behind a chapter variant, and the one learning-rate rule (`helpers.train.vit`)
model_variant, variant_lr = vit_train.model_variant, vit_train.variant_lr
#: §3.3's step decay: the factor the rate is multiplied by at each of these fractions of training (`helpers.train.vit`)
LR_DECAY, LR_DECAY_AT = vit_train.DECAY, vit_train.DECAY_AT


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[Variant, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    #: the depth sweep: these depths train every variant and seed too, at the same settings
    #: (the same budget of optimiser steps); `depth` is the one Figure 6 and the t_sim figure show
    depths: tuple[int, ...] = ()
    d_model: int = 192
    d_ff: int = 384
    n_heads: int = 8
    patch: int = 4
    epochs: int = 150
    train_images: int = 0            # 0 = all 50,000
    test_images: int = 0             # 0 = all 10,000
    batch_size: int = 128
    lr: float | None = None          # None: 5e-5 post-norm, 1e-4 otherwise (§3.3)
    tau: float = 1.0
    deesc_place: Literal["input", "after_attention", "ffn_input", "output"] = "output"
    augment: bool = True
    #: "algorithm1": Yu & Zhang's blocks as written (the committed runs); "standard": the vit-pytorch-style
    #: block (per-channel LN with bias, output projection, biases, GELU) in the same three variants
    #: or a standard block with one part put back to Algorithm 1's (`core.vit.STANDARD_REVERTS`)
    block: Block = "algorithm1"
    #: the block comparison: these depths also train every variant and seed with standard blocks (beside
    #: the `block` grid, same settings); each run is cached on its own under a `standard-` name
    standard_depths: tuple[int, ...] = ()
    #: the block ablation: at `ablation_depth` (0 = none), pre-norm and de-escalated post-norm are also
    #: trained, every seed, with each of these blocks: a standard block with one part (or all four) reverted
    #: to Algorithm 1's, or Algorithm 1's block with one part of its initialisation made PyTorch's
    ablations: tuple[str, ...] = ()
    ablation_depth: int = 0
    #: the ablation's confirmation at deeper depths: these blocks (beside Algorithm 1's and the standard
    #: block, read from the sweeps) at each of `confirm_depths`
    confirm_blocks: tuple[str, ...] = ()
    confirm_depths: tuple[int, ...] = ()
    seeds: int = 3
    sim_every: int = 1
    #: the learning rate's schedule: "step", §3.3's (×0.2 at 70 % and 90 % of training); "constant", the base
    #: rate throughout, so that every epoch's end is the end of a shorter run (the budget curve, `RECIPES["curve"]`)
    schedule: Literal["step", "constant"] = "step"
    #: read the budget curve (`CURVE`: constant-rate runs whose every epoch is a budget) beside these runs
    curve: bool = False
    #: "auto": bf16 autocast (fp32 weights and optimiser) where the device computes bf16 natively
    #: (`runtime.native_bf16`: ≥ 2× faster on an AVX-512-BF16 CPU and on GPUs, and it follows the fp32 loss
    #: curve, tests/test_train.py), fp32 elsewhere (emulated bf16 is ~100× slower); the book's committed runs
    #: are bf16, and its preset says so
    precision: Literal["fp32", "bf16", "auto"] = "auto"

    CHAPTER: ClassVar[str] = "vit"
    #: which depths are swept does not change any one run's result (each run's key has its own depth)
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("standard_depths", "ablations", "ablation_depth", "confirm_blocks",
                                                 "confirm_depths", "curve")
    #: the committed step-decay runs were keyed before `schedule` existed
    KEYED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ("schedule",)
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # the book's width and patches (96 wide, 4 heads of 24, 8x8 patches: 16 tokens)
        "ci": dict(depth=4, depths=(2,), d_model=96, d_ff=192, n_heads=4, patch=8, epochs=1, train_images=256,
                   test_images=128, batch_size=64, seeds=1,
                   variants=VARIANTS, standard_depths=(2,),
                   ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES),
                   ablation_depth=2, confirm_blocks=("algorithm1-torch-ffn-init",), confirm_depths=(4,)),
        # the depth sweep a 2-core CPU runs: width 96 (4 heads of 24, as the paper's heads), 8x8 patches,
        # 1,000 optimiser steps of batch 64 per run (16,000 images, 4 epochs), 3 seeds, depths 6 to 80
        # (each run is cached on its own, so adding a depth reruns nothing)
        "book": dict(depth=80, depths=(6, 12, 24, 48), d_model=96, d_ff=192, n_heads=4, patch=8, epochs=4,
                     train_images=16000, test_images=1000, batch_size=64, seeds=3, precision="bf16",
                     variants=("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"),
                     standard_depths=(6, 12, 24, 48, 80),
                     ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS),
                     ablation_depth=24, confirm_blocks=("algorithm1-torch-ffn-init",),
                     confirm_depths=(48,), curve=True),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs distinct variants"),
        depth=positive, depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        standard_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        ablations=(lambda v: len(set(v)) == len(v) and set(v) <= set(ABLATION_BLOCKS),
                   f"needs distinct blocks from {ABLATION_BLOCKS}"),
        ablation_depth=nonneg,
        confirm_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        confirm_blocks=(lambda v: len(set(v)) == len(v) and set(v) <= set(ABLATION_BLOCKS),
                        f"needs distinct blocks from {ABLATION_BLOCKS}"),
        d_model=positive, d_ff=positive, n_heads=positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=positive, train_images=nonneg,
        test_images=nonneg, batch_size=positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"), seeds=positive, sim_every=positive,
        schedule=(lambda v: v in vit_train.SCHEDULES, f"must be one of {vit_train.SCHEDULES}"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)



#: named sets of overrides of the `book` preset (`make grid CHAPTER=vit SCALE=book GRID_ARGS='--recipe NAME'`):
#: `ffn-steps`, Algorithm 1's block with PyTorch-sized relative FFN steps at the ablation's depth (what separates
#: the FFN's initial scale from its relative step size); `ffn-scale`, the FFN-scale sweep at the ablation's depth
#: and its confirmation depth, and that block at both; `depth80-ffn`, Algorithm 1's block with
#: PyTorch's FFN initialisation at depth 80; `long`, persistence: depth 48 with both blocks at 10x the optimiser
#: steps (one seed; the schedule's decays at 70 % and 90 % of the longer run); `curve`, the budget curve: the
#: three variants at depth 80, 3 seeds, under a constant rate for 16 epochs of 4,000 images (63 steps each, 1,008
#: in all), so that each epoch's end is a budget, 63 to 1,008 steps (16×)
RECIPES: dict[str, dict[str, Any]] = {
    "ffn-steps": dict(ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_STEPS)),
    "ffn-scale": dict(ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS, *FFN_SCALES, *FFN_STEPS),
                      confirm_blocks=("algorithm1-torch-ffn-init", *FFN_SCALES, *FFN_STEPS)),
    "depth80-ffn": dict(confirm_depths=(48, 80)),
    "long": dict(depth=48, depths=(), standard_depths=(48,), ablation_depth=0, ablations=(), confirm_blocks=(),
                 confirm_depths=(), seeds=1, epochs=40, variants=("post-norm", "pre-norm", "de-escalated")),
    "curve": dict(depths=(), standard_depths=(), ablation_depth=0, ablations=(), confirm_blocks=(),
                  confirm_depths=(), schedule="constant", epochs=16, train_images=4000,
                  variants=("post-norm", "pre-norm", "de-escalated"), curve=False),
}
#: the budget curve's settings, over the chapter's own (`Params.curve`; the recipe that makes its runs alone)
CURVE = RECIPES["curve"]
#: the gaps the budget curve reads, a − b, in the order of the findings
CURVE_GAPS = (("post-norm", "pre-norm"), ("de-escalated", "post-norm"), ("de-escalated", "pre-norm"))
#: the budgets the curve is read at, in epochs of its runs (each twice the last: 63 to 1,008 steps, 16×)
CURVE_EPOCHS = (1, 2, 4, 8, 16)
#: a budget's final loss: the mean training loss over this share of its own last steps (the chapter's runs read
#: their last epoch, a quarter of their steps)
CURVE_WINDOW = 0.25


