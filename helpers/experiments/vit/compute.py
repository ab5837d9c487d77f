"""The vit chapter's runs: `run(params)` trains every variant for every seed (through `helpers.train.vit`) at
`depth` and at every depth of the sweep `depths`, the standard-block sweep and the block ablation, each run read
back from the committed results when its settings match, and returns the training histories. `run_one` trains (or
reads back) one depth × variant × seed, so that separate single-threaded processes can share a grid; `runs` lists
every heavy run as the grid runner takes them."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.core.vit import FFN_SCALES
from helpers.data import load_cifar10
from helpers.data.loaders import CIFAR10_IMAGES
from helpers.machinery import results, runtime
from helpers.train import vit as vit_train

from .params import ABLATION_VARIANTS, CURVE, RECIPES, Params
from .result import Result


def recipe_cost(name: str, seconds_per_epoch: dict[int, float]) -> dict[str, float]:
    """The runs recipe `name` adds to the book preset's runs (those of the recipe the cache lacks, less those the
    book preset itself lacks) and their CPU-hours, each estimated from `seconds_per_epoch` at its depth (the
    committed runs' mean wall time per epoch, one thread each) times its epochs; a depth without a committed run
    is costed at the nearest deeper one."""
    def ident(s: results.RunSpec) -> tuple[str, str]:
        return s.name, results.settings_hash(s.key)
    book_lacks = {ident(s) for s in runs(Params.resolve("book")) if not s.done()}
    q = Params.resolve("book", **RECIPES[name])
    missing = [s for s in runs(q) if not s.done() and ident(s) not in book_lacks]
    depths = sorted(seconds_per_epoch)

    def per_epoch(d: int) -> float:
        return seconds_per_epoch[next((x for x in depths if x >= d), depths[-1])]
    hours = sum(per_epoch(s.key["depth"]) * s.key["epochs"] for s in missing) / 3600
    return {"runs": len(missing), "hours": float(hours)}


def seconds_per_epoch(res: Result) -> dict[int, float]:
    """Mean wall time per epoch of every run of `res` (any block, any variant) by depth."""
    out: dict[int, list[float]] = {}
    for grid in (res.sweep or {str(res.depth): res.histories}, res.standard):
        for d, by_variant in grid.items():
            out.setdefault(int(d), []).extend(h["wall_time_s"] / res.epochs for hs in by_variant.values() for h in hs)
    return {d: float(np.mean(v)) for d, v in out.items() if v}


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
    missing: dict[str, list[str]] = {}
    grids = [(p.ablation_depth, p.ablations, ablation)] if p.ablation_depth else []
    grids += [(d, p.confirm_blocks, confirm[str(d)]) for d in sorted(p.confirm_depths)]
    for depth, blocks, out in grids:
        hits += _ablation_grid(p, depth, blocks, sweep, standard, seeds, dev, datasets, out,
                               missing.setdefault(str(depth), []))
    res = Result(variants=list(p.variants), seeds=seeds, depth=p.depth, epochs=p.epochs,
                 train_images=p.train_images or CIFAR10_IMAGES["train"], scale=p.scale, histories=sweep[str(p.depth)],
                 from_cache=all(hits), sweep=sweep if p.depths else {}, batch_size=p.batch_size,
                 d_model=p.d_model, n_heads=p.n_heads, d_ff=p.d_ff, patch=p.patch,
                 test_images=p.test_images or CIFAR10_IMAGES["test"],
                 standard=standard, ablation=ablation, ablation_depth=p.ablation_depth, confirm=confirm,
                 missing={d: b for d, b in missing.items() if b})
    res.curve, res.curve_missing, res.curve_images = _curve(p)
    if p.scale == "book":
        per_epoch = seconds_per_epoch(res)
        res.recipe_costs = {name: recipe_cost(name, per_epoch) for name in RECIPES}
    return res


def curve_params(p: Params) -> Params | None:
    """The budget curve's settings (`CURVE` over `p`: constant-rate runs at `p.depth`), None when `p` reads none."""
    return p.with_(**CURVE) if p.curve else None


def curve_specs(p: Params) -> list[results.RunSpec]:
    """The budget curve's runs, seed by seed (a seed's variants, then the next seed's)."""
    q = curve_params(p)
    if q is None:
        return []
    specs = _specs(q, q.depth, q.variants, runtime.run_seeds(q.seed, q.seeds), _lazy_datasets(q))
    order = {v: i for i, v in enumerate(q.variants)}
    return sorted(specs, key=lambda s: (s.extra["run_seed"], order[s.extra["variant"]]))


def _curve(p: Params) -> tuple[dict[str, list[dict | None]], list[str], int]:
    """The budget curve's runs (`curve_specs`): trained where missing when `p.train_missing`, else those the results
    hold (the others None, named in the list returned beside), each as its per-step training loss and wall time; and
    the curve's training images."""
    specs = curve_specs(p)
    if not specs:
        return {}, [], 0
    q = curve_params(p)
    held = [s for s in specs if p.train_missing or s.done()]
    outs = dict(zip((s.name for s in held), results.execute_all(held, train_missing=p.train_missing), strict=True))
    seeds = runtime.run_seeds(q.seed, q.seeds)
    curve: dict[str, list[dict | None]] = {v: [None] * len(seeds) for v in q.variants}
    for s in specs:
        if s.name in outs:
            h = outs[s.name][0]
            curve[s.extra["variant"]][seeds.index(s.extra["run_seed"])] = {"loss": h["loss"],
                                                                          "wall_time_s": h["wall_time_s"]}
    return curve, [s.name for s in specs if s.name not in outs], q.train_images


def _ablation_grid(p: Params, depth: int, blocks, sweep, standard, seeds, dev, datasets, out: dict,
                   missing: list[str]) -> list[bool]:
    """Pre-norm and de-escalated post-norm at `depth` for Algorithm 1's block, the standard block and
    `blocks`, into `out` ({block: {variant: [history per seed]}}); runs the sweeps above already made are
    taken from them, the others trained (or read back) under their own block's names and keys. A block of the
    FFN-scale sweep whose runs the cache lacks, when `p` may not train them (the book build), goes into
    `missing` instead (the chapter lists it with `MISSING_COMMAND`)."""
    d, hits = str(depth), []
    done = {p.block: sweep.get(d, {}), **({"standard": standard[d]} if d in standard else {})}
    for block in ("algorithm1", "standard", *blocks):
        if all(v in done.get(block, {}) for v in ABLATION_VARIANTS):      # trained above: the same runs
            out[block] = {v: done[block][v] for v in ABLATION_VARIANTS}
            continue
        q = p.with_(block=block, standard_depths=(), ablations=(), confirm_blocks=())
        if (block in FFN_SCALES and not p.train_missing and results.persists(p.scale)
                and not all(s.done() for s in _specs(q, depth, ABLATION_VARIANTS, seeds, datasets))):
            missing.append(block)
            continue
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


class _Trainer:
    """Trains one variant and run seed of `p` at one depth (`train(variant, seed, checkpoint)`); CIFAR-10 is read
    once per process. An object rather than a closure, so a grid job (`make grid`) can carry it."""

    def __init__(self, p: Params, depth: int, datasets):
        self.p, self.depth, self.datasets = p, depth, datasets

    def __call__(self, variant: str, s: int, ckpt):
        train_set, test_set = self.datasets()
        return vit_train.run_variant(self.p, self.depth, variant, s, train_set, test_set, checkpoint=ckpt,
                                     device=runtime.choose_device(self.p.device))


def _specs(p: Params, depth: int, variants, seeds, datasets) -> list[results.RunSpec]:
    """Every variant × seed at one depth, as runs: those at `p.depth` are named `<variant>-seed<s>`, those at
    another depth `d<depth>-<variant>-seed<s>`, both with a `<block>-` prefix for blocks other than Algorithm
    1's (so they sit beside the Algorithm-1 runs instead of replacing them), and a `constant-lr-` prefix before
    all for runs under a constant rate (the budget curve); the key is `p` at that depth without the sweep (so a
    run does not depend on which other depths were swept)."""
    q = p.with_(depth=depth, depths=())
    prefix = (("" if p.schedule == "step" else f"{p.schedule}-lr-") + ("" if p.block == "algorithm1" else f"{p.block}-")
              + ("" if depth == p.depth else f"d{depth}-"))
    return results.variant_specs(q, variants, seeds, _Trainer(p, depth, datasets), prefix=prefix)


def _grid(p: Params, depth: int, variants, seeds, dev, datasets):
    """`_specs` made (or read back) in order: ({variant: [history per seed]}, [cache hit per run])."""
    specs = _specs(p, depth, variants, seeds, datasets)
    outs = results.execute_all(specs, train_missing=p.train_missing)
    hist: dict[str, list[dict]] = {v: [] for v in variants}
    for spec, (h, _) in zip(specs, outs, strict=True):
        hist[spec.extra["variant"]].append(h)
    return hist, [hit for _, hit in outs]


def runs(p: Params) -> list[results.RunSpec]:
    """Every heavy run `run(p)` makes, in its order, as the grid runner takes them (`make grid`): the sweep, the
    standard-block sweep, the ablation and its confirmations, the budget curve (a run the sweeps already make is listed
    once)."""
    datasets, seeds = _lazy_datasets(p), runtime.run_seeds(p.seed, p.seeds)
    out = [s for d in sorted({p.depth, *p.depths}) for s in _specs(p, d, p.variants, seeds, datasets)]
    if p.block != "standard":
        q = p.with_(block="standard", standard_depths=())
        out += [s for d in sorted(p.standard_depths) for s in _specs(q, d, p.variants, seeds, datasets)]
    grids = [(p.ablation_depth, p.ablations)] if p.ablation_depth else []
    grids += [(d, p.confirm_blocks) for d in sorted(p.confirm_depths)]
    swept = {p.block: {p.depth, *p.depths}, "standard": set(p.standard_depths) if p.block != "standard" else set()}
    for depth, blocks in grids:
        for block in ("algorithm1", "standard", *blocks):
            if depth in swept.get(block, set()) and set(ABLATION_VARIANTS) <= set(p.variants):
                continue                                    # trained by a sweep above: the same runs
            q = p.with_(block=block, standard_depths=(), ablations=(), confirm_blocks=())
            out += _specs(q, depth, ABLATION_VARIANTS, seeds, datasets)
    out += curve_specs(p)
    seen, unique = set(), []
    for s in out:
        ident = (s.name, results.settings_hash(s.key))
        if ident not in seen:
            seen.add(ident)
            unique.append(s)
    return unique


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
