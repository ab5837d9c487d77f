"""The ViT chapter (Yu & Zhang §3.3, Figure 6): post-norm vs pre-norm vs de-escalated deep ViTs on CIFAR-10.

Read in this order: `params` (Params, presets, variants, blocks, margins, recipes), `compute` (the runs: `run`,
`run_one`, `runs`), `result` (the `Result` and its seed-paired readings; the ablation's in `ablation`), `findings`
(the findings, a table of specs)."""

from helpers.core.vit import ALGORITHM1_INITS, FFN_SCALES, FFN_STEPS, STANDARD_REVERTS
from helpers.core.vit import VARIANTS as MODEL_VARIANTS

from .ablation import AblationReadings
from .compute import (
    BLOCK_BENCH,
    block_cost,
    curve_params,
    curve_specs,
    recipe_cost,
    run,
    run_one,
    runs,
    seconds_per_epoch,
)
from .findings import FINDINGS, Spec
from .params import (
    ABLATION_BLOCKS,
    ABLATION_VARIANTS,
    ALIKE,
    CHANCE_MARGIN,
    CURVE,
    CURVE_EPOCHS,
    CURVE_GAPS,
    CURVE_WINDOW,
    FFN_SCALE_BASE,
    LEVEL_MARGIN,
    LR_DECAY,
    LR_DECAY_AT,
    MISSING_COMMAND,
    RECIPES,
    VARIANTS,
    Block,
    Params,
    Variant,
    model_variant,
    side,
    variant_lr,
)
from .result import Result

__all__ = ["Params", "Result", "run", "run_one", "runs", "RECIPES", "FFN_SCALES", "FFN_SCALE_BASE",
           "MISSING_COMMAND", "recipe_cost", "seconds_per_epoch", "block_cost", "BLOCK_BENCH", "ABLATION_VARIANTS",
           "ABLATION_BLOCKS", "VARIANTS", "MODEL_VARIANTS", "model_variant", "variant_lr", "side", "ALIKE",
           "CHANCE_MARGIN", "LEVEL_MARGIN", "LR_DECAY", "LR_DECAY_AT", "Block", "Variant", "STANDARD_REVERTS",
           "ALGORITHM1_INITS", "FFN_STEPS", "FINDINGS", "Spec", "AblationReadings", "CURVE", "CURVE_EPOCHS",
           "CURVE_GAPS", "CURVE_WINDOW", "curve_params", "curve_specs"]
