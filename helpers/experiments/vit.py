"""The ViT chapter (Yu & Zhang §3.3, Figure 6): post-norm vs pre-norm vs de-escalated deep ViTs on CIFAR-10.

`run(params)` trains every variant for every seed (through `helpers.train.vit`) at `depth` and at every
depth of the sweep `depths`, each run read back from the committed results when its settings match,
and returns the training histories. `run_one` trains (or reads back) one depth × variant × seed, so
that separate single-threaded processes can share a grid."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from ..book import results, runtime
from ..book.params import ChapterParams, check_heads, nonneg, positive, rules
from ..core.vit import ALGORITHM1_INITS, STANDARD_REVERTS
from ..core.vit import VARIANTS as MODEL_VARIANTS
from ..data import load_cifar10
from ..train import vit as vit_train

Variant = Literal["post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"]
#: the chapter's variants: the model's three, plus post-norm trained at the others' learning rate
#: (the paper halves it for post-norm; at a short budget that alone can separate the curves)
VARIANTS = ("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated")
FULL_LR = 1e-4
#: the block ablation trains these two variants (its question: what puts de-escalation ahead of pre-norm)
ABLATION_VARIANTS = ("pre-norm", "de-escalated")
Block = Literal["algorithm1", "standard", "standard-scalar-ln", "standard-no-bias", "standard-no-proj",
                "standard-relu", "standard-all-four", "algorithm1-torch-ffn-init", "algorithm1-torch-v-init"]


def model_variant(variant: str) -> str:
    """The model behind a chapter variant (`post-norm-full-lr` is the post-norm model)."""
    return "post-norm" if variant == "post-norm-full-lr" else variant


def variant_lr(variant: str, lr: float | None) -> float | None:
    """The learning rate a variant trains at: `lr` when given; otherwise None (the paper's rule in
    `helpers.train.vit`: 5e-5 post-norm, 1e-4 otherwise), except 1e-4 for `post-norm-full-lr`."""
    return lr if lr is not None else (FULL_LR if variant == "post-norm-full-lr" else None)


@dataclass(frozen=True)
class Params(ChapterParams):
    """Yu & Zhang §3.3: post-norm vs pre-norm vs de-escalated post-norm ViT on CIFAR-10 (Figure 6)."""

    variants: tuple[Variant, ...] = ("post-norm", "pre-norm", "de-escalated")
    depth: int = 80
    #: the depth sweep (issue 16): these depths train every variant and seed too, at the same settings
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
    #: "auto": bf16 autocast (fp32 weights and optimiser) where the device computes bf16 natively
    #: (`runtime.native_bf16`: ≥ 2× faster on an AVX-512-BF16 CPU and on GPUs, and it follows the fp32 loss
    #: curve, tests/test_train.py), fp32 elsewhere (emulated bf16 is ~100× slower); the book's committed runs
    #: are bf16, and its preset says so
    precision: Literal["fp32", "bf16", "auto"] = "auto"

    CHAPTER: ClassVar[str] = "vit"
    #: which depths are swept does not change any one run's result (each run's key has its own depth)
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("standard_depths", "ablations", "ablation_depth", "confirm_blocks",
                                                 "confirm_depths")
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(depth=4, depths=(2,), epochs=1, train_images=256, test_images=128, batch_size=64, seeds=1,
                   variants=VARIANTS, standard_depths=(2,), ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS),
                   ablation_depth=2, confirm_blocks=("algorithm1-torch-ffn-init",), confirm_depths=(4,)),
        # the depth sweep a 2-core CPU runs: width 96 (4 heads of 24, as the paper's heads), 8x8 patches,
        # 1,000 optimiser steps of batch 64 per run (16,000 images, 4 epochs), 3 seeds, depths 6 to 80
        # (each run is cached on its own, so adding a depth reruns nothing)
        "book": dict(depth=80, depths=(6, 12, 24, 48), d_model=96, d_ff=192, n_heads=4, patch=8, epochs=4,
                     train_images=16000, test_images=1000, batch_size=64, seeds=3, precision="bf16",
                     variants=("post-norm", "post-norm-full-lr", "pre-norm", "de-escalated"),
                     standard_depths=(6, 12, 24, 48, 80), ablations=(*STANDARD_REVERTS, *ALGORITHM1_INITS),
                     ablation_depth=24, confirm_blocks=("algorithm1-torch-ffn-init",),
                     confirm_depths=(48,)),
        "paper": dict(),
    }
    RULES: ClassVar = rules(
        variants=(lambda v: len(v) > 0 and len(set(v)) == len(v), "needs distinct variants"),
        depth=positive, depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        standard_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        ablations=(lambda v: len(set(v)) == len(v) and set(v) <= {*STANDARD_REVERTS, *ALGORITHM1_INITS},
                   f"needs distinct blocks from {(*STANDARD_REVERTS, *ALGORITHM1_INITS)}"),
        ablation_depth=nonneg,
        confirm_depths=(lambda v: all(d > 0 for d in v) and len(set(v)) == len(v), "needs distinct depths > 0"),
        confirm_blocks=(lambda v: len(set(v)) == len(v) and set(v) <= {*STANDARD_REVERTS, *ALGORITHM1_INITS},
                        f"needs distinct blocks from {(*STANDARD_REVERTS, *ALGORITHM1_INITS)}"),
        d_model=positive, d_ff=positive, n_heads=positive,
        patch=(lambda v: v > 0 and 32 % v == 0, "must divide 32"), epochs=positive, train_images=nonneg,
        test_images=nonneg, batch_size=positive, lr=(lambda v: v is None or v > 0, "must be > 0"),
        tau=(lambda v: 0 < v <= 1, "must lie in (0, 1] (eq. 21)"), seeds=positive, sim_every=positive,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_heads(self)


@dataclass
class Result(results.Result):
    """One training history per variant and seed (`histories[variant][i]` for run seed `seeds[i]`):
    per epoch `train_loss`, `train_acc`, `test_loss`, `test_acc`, `t_sim` (per block, keyed by the
    epoch as a string), plus `lr` and `wall_time_s`."""

    variants: list[str]
    seeds: list[int]
    depth: int
    epochs: int
    train_images: int                # effective number (50,000 when the preset says 0 = all)
    scale: str
    histories: dict[str, list[dict]] = field(default_factory=dict)
    from_cache: bool = False
    #: the depth sweep: {str(depth): {variant: [history per seed]}} for every depth run (`depth` included)
    sweep: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    batch_size: int = 128
    d_model: int = 192
    n_heads: int = 8
    d_ff: int = 384
    test_images: int = 10_000        # effective number
    #: the block comparison: {str(depth): {variant: [history per seed]}} of the standard-block runs at
    #: `standard_depths` (empty when none were run)
    standard: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    #: the block ablation at `ablation_depth`: {block: {variant: [history per seed]}} for Algorithm 1's
    #: block, the standard block and each standard block with one part reverted (empty when not run)
    ablation: dict[str, dict[str, list[dict]]] = field(default_factory=dict)
    ablation_depth: int = 0
    #: the same at each confirmation depth for Algorithm 1's block, the standard block and `confirm_blocks`:
    #: {str(depth): {block: {variant: [history per seed]}}}
    confirm: dict[str, dict[str, dict[str, list[dict]]]] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        """Optimiser steps per run."""
        return self.epochs * -(-self.train_images // self.batch_size)

    @property
    def depths(self) -> list[int]:
        return sorted(int(d) for d in self.sweep) or [self.depth]

    def sweep_final(self, key: str = "train_loss") -> dict[str, np.ndarray]:
        """Per variant, (depths, seeds) of the last epoch's `key` over the depth sweep."""
        return {v: np.array([[h[key][-1] for h in self.sweep[str(d)][v]] for d in self.depths], dtype=float)
                for v in self.variants}

    def before_t_sim(self) -> dict[str, float]:
        """t_sim of the last block just before its de-escalation step, after training (first seed;
        variants without de-escalation are left out)."""
        out = {}
        for v in self.variants:
            b = self.histories[v][0].get("t_sim_before_deescalation")
            if b:
                out[v] = float(b[max(b, key=int)][-1])
        return out

    def standard_result(self) -> Result | None:
        """The standard-block runs as a Result of their own (their sweep, `depth` = the deepest of them),
        so that every sweep reading applies to them; None when no standard-block run was made."""
        if not self.standard:
            return None
        deep = max(self.standard, key=int)
        return dataclasses.replace(self, depth=int(deep), histories=self.standard[deep], sweep=self.standard,
                                   standard={})

    def curves(self, key: str) -> dict[str, np.ndarray]:
        """Per variant, (seeds, epochs) of one per-epoch history entry (`train_loss`, `test_acc`, …)."""
        return {v: np.array([h[key] for h in self.histories[v]], dtype=float) for v in self.variants}

    def final(self, key: str) -> dict[str, float]:
        """Per variant, the last epoch's value of `key`, mean over seeds."""
        return {v: float(c[:, -1].mean()) for v, c in self.curves(key).items()}

    def t_sim(self, variant: str, seed_index: int = 0) -> dict[int, np.ndarray]:
        """t_sim per block (block 0 = patch embeddings + positions) after each measured epoch."""
        return {int(e): np.asarray(s, dtype=float) for e, s in self.histories[variant][seed_index]["t_sim"].items()}

    def last_t_sim(self) -> dict[str, float]:
        """t_sim of the last block's output after training (first seed)."""
        return {v: float(self.t_sim(v)[self.epochs][-1]) for v in self.variants}

    def table(self):
        """Final numbers per variant (mean over seeds): lr, losses, accuracy, seconds per epoch."""
        import pandas as pd

        rows = [{"variant": v, "lr": self.histories[v][0]["lr"],
                 "final train loss": self.final("train_loss")[v], "final test loss": self.final("test_loss")[v],
                 "final test acc": self.final("test_acc")[v],
                 "s per epoch": float(np.mean([h["wall_time_s"] for h in self.histories[v]])) / self.epochs}
                for v in self.variants]
        return pd.DataFrame(rows)


def run(p: Params) -> Result:
    """Train (or read back) every variant for every seed of `p`."""
    runtime.seed_everything(p.seed)
    dev = runtime.choose_device(p.device)
    datasets = _lazy_datasets(p)

    seeds = runtime.run_seeds(p.seed, p.seeds)
    sweep, hits = {}, []
    for d in sorted({p.depth, *p.depths}):
        sweep[str(d)], h = _grid(p, d, p.variants, seeds, dev, datasets)
        hits += h
    standard = {}
    if p.block != "standard":
        q = p.with_(block="standard", standard_depths=())
        for d in sorted(p.standard_depths):
            standard[str(d)], h = _grid(q, d, p.variants, seeds, dev, datasets)
            hits += h
    ablation: dict = {}
    confirm: dict = {str(d): {} for d in sorted(p.confirm_depths)}
    grids = [(p.ablation_depth, p.ablations, ablation)] if p.ablation_depth else []
    grids += [(d, p.confirm_blocks, confirm[str(d)]) for d in sorted(p.confirm_depths)]
    for depth, blocks, out in grids:
        hits += _ablation_grid(p, depth, blocks, sweep, standard, seeds, dev, datasets, out)
    return Result(variants=list(p.variants), seeds=seeds, depth=p.depth, epochs=p.epochs,
                  train_images=p.train_images or 50_000, scale=p.scale, histories=sweep[str(p.depth)],
                  from_cache=all(hits), sweep=sweep if p.depths else {}, batch_size=p.batch_size,
                  d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff, test_images=p.test_images or 10_000,
                  standard=standard, ablation=ablation, ablation_depth=p.ablation_depth, confirm=confirm)


def _ablation_grid(p: Params, depth: int, blocks, sweep, standard, seeds, dev, datasets, out: dict) -> list[bool]:
    """Pre-norm and de-escalated post-norm at `depth` for Algorithm 1's block, the standard block and
    `blocks`, into `out` ({block: {variant: [history per seed]}}); runs the sweeps above already made are
    taken from them, the others trained (or read back) under their own block's names and keys."""
    d, hits = str(depth), []
    done = {p.block: sweep.get(d, {}), **({"standard": standard[d]} if d in standard else {})}
    for block in ("algorithm1", "standard", *blocks):
        if all(v in done.get(block, {}) for v in ABLATION_VARIANTS):      # trained above: the same runs
            out[block] = {v: done[block][v] for v in ABLATION_VARIANTS}
            continue
        q = p.with_(block=block, standard_depths=(), ablations=(), confirm_blocks=())
        out[block], h = _grid(q, depth, ABLATION_VARIANTS, seeds, dev, datasets)
        hits += h
    return hits


def _lazy_datasets(p: Params):
    """A function returning (train, test) CIFAR-10 of `p`, read from the mirror on the first call only
    (a grid whose runs are all cached never reads the images)."""
    data: dict[str, Any] = {}

    def datasets():
        if not data:
            data["train"] = load_cifar10("train", p.train_images or None, p.seed)
            data["test"] = load_cifar10("test", p.test_images or None, p.seed + 1)
        return data["train"], data["test"]
    return datasets


def _grid(p: Params, depth: int, variants, seeds, dev, datasets):
    """Every variant × seed at one depth, through the cache: the runs at `p.depth` are named
    `<variant>-seed<s>`, those at another depth `d<depth>-<variant>-seed<s>`, both with a `standard-`
    prefix for standard blocks (so they sit beside the Algorithm-1 runs instead of replacing them); the
    key is `p` at that depth without the sweep (so a run does not depend on which other depths were swept)."""
    q = p.with_(depth=depth, depths=())

    def train(variant: str, s: int, ckpt):
        tc = vit_train.TrainConfig(epochs=p.epochs, batch=p.batch_size, lr=variant_lr(variant, p.lr),
                                   augment=p.augment, seed=s, sim_every=p.sim_every)
        train_set, test_set = datasets()
        return vit_train.run_variant(model_variant(variant), depth, p.d_model, p.d_ff, p.n_heads, p.patch, p.tau,
                                     p.deesc_place, tc, train_set, test_set, checkpoint=ckpt, device=dev,
                                     precision=p.precision, block=p.block)

    prefix = ("" if p.block == "algorithm1" else f"{p.block}-") + ("" if depth == p.depth else f"d{depth}-")
    return results.variant_runs(q, variants, seeds, train, prefix=prefix)


def run_one(p: Params, depth: int, variant: str, seed: int) -> tuple[dict, bool]:
    """One run of the grid of `p` (a depth of `p.depth`/`p.depths`, a variant, a run seed), through
    the same cache as `run`: (history, cache hit)."""
    if depth not in {p.depth, *p.depths, p.ablation_depth, *p.confirm_depths} - {0} or variant not in p.variants:
        raise ValueError(f"depth {depth} / variant {variant!r} is not in this grid")
    runtime.seed_everything(p.seed)
    dev = runtime.choose_device(p.device)
    datasets = _lazy_datasets(p)

    hist, hits = _grid(p, depth, [variant], [seed], dev, datasets)
    return hist[variant][0], hits[0]


BLOCK_BENCH = ("ViT depth 80, Algorithm 1 blocks (vit book sweep)", "ViT depth 80, standard blocks (vit book sweep)")


def block_cost() -> dict[str, Any] | None:
    """The committed step times of the two block types at the sweep's deepest setting
    (`results/bench/vit-blocks-cpu.json`, written by `scripts/bench_training.py`; bf16, one thread):
    seconds per step of each, their ratio, the load average when measured and the command. None when
    the file is missing."""
    import json

    path = runtime.REPO_ROOT / "results" / "bench" / "vit-blocks-cpu.json"
    if not path.is_file():
        return None
    rec = json.loads(path.read_text())
    loops = {r["loop"]: r for r in rec["loops"]}
    alg1, std = (loops[name]["bf16"]["seconds_per_step"] for name in BLOCK_BENCH)
    return {"algorithm1_s": alg1, "standard_s": std, "ratio": std / alg1, "threads": rec["threads"],
            "load": rec.get("load_average_at_start"), "command": rec["command"]}


__all__ = ["Params", "Result", "run", "run_one", "block_cost", "BLOCK_BENCH", "ABLATION_VARIANTS",
           "VARIANTS", "MODEL_VARIANTS", "model_variant", "variant_lr"]
