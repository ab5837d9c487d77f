"""Figures, table and glued numbers of the ViT chapter (Yu & Zhang §3.3, Figure 6)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from ..experiments.vit import VARIANTS, Result
from . import common


def fig6(res: Result) -> plt.Figure:
    """Figure 6: training and test loss of the variants per epoch (mean ± 1 sd over seeds)."""
    common.set_theme()
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, ("train_loss", "test_loss"), strict=True):
        common.layer_curves(ax, res.curves(key), x0=1, xlabel="epoch", ylabel=key.replace("_", " "),
                            title=key.replace("_", " "))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"Figure 6 — ViT depth {res.depth}, {res.train_images:,} training images, {res.epochs} epochs, "
                 f"{len(res.seeds)} seed(s) ({res.scale} scale)")
    return common.figure("vit-fig6", fig)


def tsim(res: Result) -> plt.Figure:
    """t_sim of every block's input on a fixed test batch after each epoch, one panel per variant."""
    common.set_theme()
    n = len(res.variants)
    fig, axes = plt.subplots(1, n, figsize=(max(10, 3.4 * n), 3.8), sharey=True, squeeze=False)
    for ax, v in zip(axes[0], res.variants, strict=True):
        common.layer_curves(ax, {f"epoch {e}": s for e, s in res.t_sim(v).items()}, ylabel="t_sim", title=v,
                            markers=False)
    fig.suptitle("t_sim per block (block 0 = patch embeddings + positions) along training")
    return common.figure("vit-tsim", fig)


def final_table(res: Result):
    """The final numbers per variant (mean over seeds), formatted for reading (lr as 5.00e-05)."""
    return common.table(res.table(), digits=3)


def publish(res: Result) -> None:
    """Draw and glue the figures, and glue every number the prose quotes (variants not run: NaN)."""
    fig6(res)
    tsim(res)
    train, test_acc, last = res.final("train_loss"), res.final("test_acc"), res.last_t_sim()
    values: dict[str, object] = {
        "epochs": res.epochs, "train-images": f"{res.train_images:,}", "seeds": len(res.seeds), "depth": res.depth,
        "order": " < ".join(sorted(train, key=train.get)),
    }
    for v in VARIANTS:
        values[f"final-train-{v}"] = train.get(v, np.nan)
        values[f"final-acc-{v}"] = test_acc.get(v, np.nan)
        values[f"last-tsim-{v}"] = last.get(v, np.nan)
    common.publish("vit", values)


__all__ = ["fig6", "tsim", "final_table", "publish"]
