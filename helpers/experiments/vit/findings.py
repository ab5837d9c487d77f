"""The vit chapter's findings on Yu & Zhang's Figure 6 (§3.3), declared as data: `FINDINGS` is a table of specs in
the chapter's order — at the main depth with Algorithm 1's blocks, post-norm (at the paper's half rate) against
pre-norm, de-escalated against that post-norm and against pre-norm; the last with standard blocks, and with
Algorithm 1's block under PyTorch's FFN initialisation (the ablation's deepest confirmation); the FFN's initial
scale; whether tokens that are all but identical stop plain post-norm from training level with pre-norm; and the
paper's run — and `findings(res)` turns it into `Finding`s.

A spec's key is written here once. Its other columns are values or functions of the `Result` (`R`): `effect` is the
quantity read (an `Interval`, None where it needs a GPU or runs not committed), `setting` the depth its runs are at
(what makes the finding's `reduced` and its `distance` from the paper's setting), `when` whether the result holds the
runs it needs. The three gaps at the main depth carry a trend to the paper's steps (`at_scale`, `Result.trend`) from
the budget curve: constant-rate runs whose every epoch is a budget (under §3.3's step decay an epoch's end is the end
of a shorter run only after the first epoch and the last, `Result.budget_epochs`, fewer budgets than a trend needs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from helpers.core.findings import Finding, Partial, Spec, value_of

from .params import ALIKE, MISSING_COMMAND

if TYPE_CHECKING:
    from .result import Result as R
else:
    R = Any

A1 = "Algorithm 1's blocks, §2.1 initialisation"
TORCH_FFN = "algorithm1-torch-ffn-init"


def build(spec: Spec, res: R) -> Finding:
    """The `Finding` a spec gives on `res`; its `setting` (a function of the Result) says the depth its runs are
    at, from which the finding's `reduced` and `distance`."""
    fixed = {"paper": "yu2024", "chapter": "vit", "scale": res.scale_text()}
    if spec.setting is not None:
        depth = spec.setting(res)
        fixed["reduced"], fixed["distance"] = res.reduced(depth), res.distance(depth)
    return spec.finding(res, **fixed)


def findings(res: R) -> list[Finding]:
    """The chapter's findings, every number from the runs, in the chapter's order (`FINDINGS`)."""
    return [build(s, res) for s in FINDINGS if s.when(res)]


# ------------------------------------------------------------------ what the specs read


def main(a: str, b: str, runs: str | Callable[[R], str], **more: Any) -> dict[str, Any]:
    """The columns of a finding at the main depth with Algorithm 1's blocks: `a` − `b` final training loss (`runs`:
    the runs compared, as `measured` names them), its trend to the paper's steps, and `more` of the row's fields."""
    return dict(measured=lambda res: res.measured_text(res.depth, A1, value_of(runs, res)),
                quantity=lambda res: f"{a} − {b} final training loss at depth {res.depth}, Algorithm 1's blocks (nats)",
                read=lambda res: Partial(res.gap(a, b)), setting=lambda res: res.depth,
                section="vit-depth80-section",
                more=dict(at_scale=lambda res: res.trend(a, b), extra={"gap": (a, b)}, **more))


def standard(res: R) -> R:
    return res.standard_result()


def confirmed(res: R) -> bool:
    c = res.confirm_depth
    return c is not None and TORCH_FFN in res.confirm[str(c)]


def scales_tested(res: R) -> bool:
    return len(res.ffn_scale_blocks()) >= 2


def scale_factors(res: R) -> str:
    return ", ".join(f"×{f:g}" for f in sorted({*res.ffn_scale_blocks(), *res.ffn_scale_missing()}))


def alike(res: R) -> int:
    return standard(res).alike_depth()


# ------------------------------------------------------------------ the table

FINDINGS: tuple[Spec, ...] = (
    Spec(key="vit-post-behind-pre", where="§3.3, Fig. 6", claim_id="yu-fig6-post-behind-pre",
         claim="A deep (80-block) post-norm ViT trains far worse than its pre-norm counterpart, "
               "even at half the learning rate.", direction="above",
         **main("post-norm", "pre-norm",
                lambda res: f"post-norm (lr {res.lr_text('post-norm')}) and pre-norm (lr {res.lr_text('pre-norm')})",
                size_word="far worse")),
    Spec(key="vit-deesc-vs-post", where="§3.3, Fig. 6", claim_id="yu-fig6-deesc-vs-post",
         claim="De-escalation (eq. 21, τ = 1, after every block) opens a significant gap between "
               "the 80-block post-norm ViT and its de-escalated version.", direction="below",
         **main("de-escalated", "post-norm", lambda res: f"de-escalated (lr {res.lr_text('de-escalated')}) and plain "
                                                         f"post-norm (lr {res.lr_text('post-norm')})")),
    Spec(key="vit-deesc-vs-pre", where="§3.3, Fig. 6", claim_id="yu-fig6-deesc-vs-pre",
         claim="The de-escalated 80-block post-norm ViT slightly outperforms its pre-norm "
               "counterpart in training loss.", direction="below",
         **main("de-escalated", "pre-norm", "de-escalated and pre-norm", label="Algorithm 1's blocks",
                size_word="slightly")),
    Spec(key="vit-deesc-vs-pre-standard", where="§3.3, Fig. 6", claim_id="yu-fig6-deesc-vs-pre",
         claim="The de-escalated 80-block post-norm ViT slightly outperforms its pre-norm counterpart in "
               "training loss (with the vit-pytorch block the paper's code points to).",
         measured=lambda res: standard(res).measured_text(standard(res).depth, "standard vit-pytorch blocks, PyTorch's "
                                                      "initialisation", "de-escalated and pre-norm"),
         quantity=lambda res: (f"de-escalated − pre-norm final training loss at depth {standard(res).depth}, "
                               "standard blocks (nats)"),
         read=lambda res: Partial(standard(res).gap("de-escalated", "pre-norm")), direction="below",
         setting=lambda res: standard(res).depth, section="vit-depth80-section",
         when=lambda res: standard(res) is not None, more=dict(label="standard blocks", size_word="slightly")),
    Spec(key="vit-deesc-vs-pre-torch-ffn", where="§3.3, Fig. 6; §2.4", claim_id="yu-fig6-deesc-vs-pre",
         claim="The de-escalated post-norm ViT slightly outperforms its pre-norm counterpart in training "
               "loss (Algorithm 1's block, other weights initialised by 'the default method in the code').",
         measured=lambda res: res.measured_text(res.confirm_depth, "Algorithm 1's blocks, PyTorch's default FFN "
                                            "initialisation", "de-escalated and pre-norm"),
         quantity=lambda res: (f"de-escalated − pre-norm final training loss at depth {res.confirm_depth}, "
                               "Algorithm 1's blocks with PyTorch's FFN initialisation (nats)"),
         read=lambda res: Partial(res.ablation_gaps(res.confirm_depth)[TORCH_FFN]), direction="below",
         setting=lambda res: res.confirm_depth, section="vit-ablation-section", when=confirmed,
         more=dict(label="Algorithm 1's blocks, PyTorch's FFN initialisation", size_word="slightly")),
    Spec(key="vit-ffn-scale", where="§2.1, §2.4; Fig. 6", kind="extension",
         claim="The FFN's initial scale decides how far the de-escalated post-norm ViT ends below pre-norm: "
               "the larger the FFN's initial variance, the smaller its lead.",
         measured=lambda res: res.measured_text(res.ablation_depth, "Algorithm 1's blocks, PyTorch's FFN "
                                            f"initialisation, its variance {scale_factors(res)}",
                                            "de-escalated and pre-norm"),
         quantity=lambda res: (f"change of the de-escalated − pre-norm final training loss per doubling of the FFN's "
                               f"initial variance at depth {res.ablation_depth} (per-seed least-squares slope over "
                               f"{', '.join(f'×{f:g}' for f in res.ffn_scale_blocks()) or 'the scales run'}; "
                               "nats)"),
         read=lambda res: Partial(res.ffn_scale_slope() if scales_tested(res) else None), direction="above",
         setting=lambda res: res.ablation_depth, section="vit-ffn-scale-section",
         when=lambda res: bool(res.ffn_scale_blocks() or res.ffn_scale_missing()),
         more=dict(needs=lambda res: ("" if scales_tested(res)
                                      else f"the FFN-scale runs at depth {res.ablation_depth} (not committed)"),
                   command=lambda res: "" if scales_tested(res) else MISSING_COMMAND)),
    Spec(key="vit-alike-tokens", where="abstract; §4", claim_id="yu-tse-causes-depth-problem",
         claim="Token similarity escalation, tokens growing alike block after block, is what makes deep "
               "post-norm Transformers hard to train.",
         measured=lambda res: standard(res).measured_text(
             alike(res), f"standard blocks; plain post-norm's last-block token similarity at least {ALIKE} on "
                         "every seed",
             f"post-norm and pre-norm (both lr {standard(res).lr_text('pre-norm', alike(res))})"),
         quantity=lambda res: (f"post-norm − pre-norm final training loss at depth {alike(res)}, standard blocks, "
                               "where post-norm's tokens are alike (nats)"),
         read=lambda res: Partial(standard(res).gap("post-norm-full-lr", "pre-norm", alike(res))), direction="above",
         setting=alike, section="vit-tsim-section",
         when=lambda res: standard(res) is not None),
    Spec(key="vit-paper-scale", where="§3.3, Fig. 6", claim_id="yu-fig6-deesc-vs-pre",
         claim="After 150 epochs at depth 80, width 192 and 4×4 patches, the de-escalated post-norm ViT ends "
               "slightly below pre-norm and far below plain post-norm in training loss.",
         measured="the paper's setting (the `paper` preset: all 50,000 images, 150 epochs, 3 seeds)",
         quantity="de-escalated − pre-norm final training loss at depth 80, the paper's setting (nats)",
         direction="below", section="vit-differences",
         more=dict(needs="a GPU", command="make rerun CHAPTER=vit SCALE=paper", scale="paper")),
)
