"""The queries-and-keys chapter's settings: `Params` with its presets and rules, the recipes the grid runner
takes, the models whose end state it measures, and the chapter's constants (the loss bar, "almost all")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ...hf.models import SIZE
from ...hf.qk import MULTIBERT_STEPS
from ...machinery import runtime
from ...machinery.params import ChapterParams, ParameterError, check_heads, nonneg, positive, rules
from ..anisotropy.params import BYTE_MLM, BYTE_MLM_NAME

#: how far below the unigram predictor the held-out MLM loss must go for "a model that uses its context"
#: (the bar the book's CPU runs do not reach and `LONG_PRETRAINING` is sized for)
TARGET_BELOW_UNIGRAM = 1.5
#: MultiBERT's pretraining (BERT-base's): 2M steps of 256 sequences of 512 tokens (Sellam et al. 2022)
MULTIBERT_TOKENS = 2_000_000 * 256 * 512
#: MultiBERT's architecture (BERT-base's, `hf.models.SIZE`): 12 layers, 768 wide
MULTIBERT_LAYERS, MULTIBERT_WIDTH = SIZE["bert-base-uncased"].layers, SIZE["bert-base-uncased"].width
#: the tokens of pretraining of the end-state models where a source here states them: only the byte-level MLM
#: trained here (its tokens are bytes). The sources here give AntiBERTy's data in sequences (558M antibodies), and
#: no budget for rxnmapper's ALBERT, all-MiniLM-L6-v2 (distilled, then fine-tuned) or SmolLM2-135M-Instruct
PRETRAINING_TOKENS: dict[str, int] = {BYTE_MLM_NAME: BYTE_MLM.steps * BYTE_MLM.batch_size * BYTE_MLM.seq_len}
#: the forms a trajectory finding's trend to MultiBERT's tokens is fitted with (`core.scale.FORMS`), and why
TREND_FORMS = ("log", "inverse square root")
TREND_WHY = ("log: the quantity keeps moving by the same amount per doubling of the tokens; inverse square root: "
             "it settles to a limit. Read from the checkpoints from the end of warm-up on (before it the learning "
             "rate is still rising); the rate then decays linearly to zero at the last step, so each checkpoint is "
             "a point of one run's decay, not the end of a shorter run")
#: "almost all heads" (the caption of the paper's Fig. 13) read as a share: nine heads in ten
ALMOST_ALL = 0.9
#: the command that trains the model the chapter's loss bar needs (a GPU; README, "GPU")
LONG_COMMAND = "make grid CHAPTER=qk SCALE=book GRID_ARGS='--recipe long --gpus 0'"

#: BERT's uncased WordPiece vocabulary (the book model's tokenizer): a uniform guess costs log of it in nats
BERT_VOCAB = 30_522
#: one MultiBERT checkpoint on the hub (MB): what the `paper` preset downloads per seed and step
MULTIBERT_CHECKPOINT_MB = 441

#: bump when the analysis changes what a trajectory's results hold (part of every cache key)
ANALYSIS_VERSION = 2


#: The pretraining the 1.5-nat bar needs, for a GPU (`LONG_COMMAND`: the grid runner's `--recipe long`
#: over the book preset, every seed plain and centred): the book runs see 15.4M tokens and end 0.56 nats below unigram;
#: the recipe probes (`recipe_probes`, one seed each) found no change from a 3x lower learning rate or a 4x
#: larger batch at the same tokens (model size, a higher rate and the vocabulary were not probed); this sees 27x
#: more — 50,000 steps of batch 64 x 128 (410M tokens, ~160 passes over the mixed
#: corpus, hence BERT's dropout 0.1) — with log-spaced checkpoints from step 0.
LONG_PRETRAINING: dict[str, Any] = dict(
    batch_size=64, dropout=0.1, resume_every=1000,
    steps=(0, 10, 30, 100, 300, 1000, 2000, 3000, 5000, 10000, 20000, 30000, 50000))
#: named sets of overrides the grid runner takes (`scripts/grid.py qk --recipe long`)
RECIPES: dict[str, dict[str, Any]] = {"long": LONG_PRETRAINING}


#: real models that learned, measured at the end of their own pretraining against their untrained twins,
#: by the names `helpers.hf.models.load` takes; "byte-MLM" is the anisotropy chapter's byte-level MLM, measured
#: only when its checkpoint is on this machine (never trained for this chapter)
END_STATE_MODELS = ("AntiBERTy", "rxnmapper-ALBERT", "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "byte-MLM")
#: the Params fields the end-state measurements depend on; the trajectories' cache keys leave them out
END_STATE_FIELDS = ("end_state", "end_state_samples", "end_state_length")


@dataclass(frozen=True)
class Params(ChapterParams):
    """Godey et al. §5, App. C-D: queries and keys along pretraining (Figures 11-15, 19-23).

    `source="pretrain"` (ci, book): our own small MLM BERT trained from scratch here, checkpointed at
    `steps`, for run seeds `seed`, `seed`+1, … (`seeds` of them); `source="multiberts"` (paper):
    google/multiberts-seed_{run seed}-step_{step/1000}k from the hub. `seed` also draws the analysis samples."""

    source: Literal["pretrain", "multiberts"] = "pretrain"
    seeds: int = 2
    steps: tuple[int, ...] = (0, 10, 20, 50, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000)  # 0 = initialisation
    n_samples: int = 128              # §5: "128 samples from Wikitext-103" (test split paragraphs, drawn with `seed`)
    max_length: int = 128
    svd_fraction: float = 0.2         # §5 footnote: 20 % of the representations for the SVD
    n_display: int = 200              # tokens per step in the scatter plots (Figs. 11, 19, 20)
    threshold: float = 0.5            # |cos(Q̄, K̄)| from which a head counts as aligned (reading of Fig. 13)
    # our pretraining (ignored for multiberts)
    layers: int = 4
    d_model: int = 256
    n_heads: int = 4
    d_ff: int = 1024
    seq_len: int = 128
    batch_size: int = 8
    lr: float = 1e-3
    warmup: float = 0.06
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    train_split: Literal["validation", "test"] = "validation"
    #: "validation": WikiText-103 validation only (the committed book runs); "mixed": validation + test
    #: minus the analysis and held-out paragraphs + the mirror's GLUE/STS sentences (`mlm.corpus`, ~2.5M
    #: tokens), with the unigram baseline recorded beside the held-out loss
    corpus: Literal["validation", "mixed"] = "validation"
    dropout: float = 0.1              # BERT's; 0 learns faster on a small budget
    #: the causal test: subtract every block output's token mean during pretraining (and
    #: analysis), so the hidden states cannot drift along a common direction (Q̄ = b_Q, K̄ = b_K)
    centre: bool = False
    #: the centring ablation beside the plain runs: every seed is also pretrained with `centre=True`
    #: (same data, steps and initialisation seed), and the chapter compares loss, entropy and alignment
    ablation: bool = False
    resume_every: int = 100
    #: "auto": bf16 autocast for pretraining where the device computes bf16 natively (≥ 2× faster on an
    #: AVX-512-BF16 CPU; tests/test_train.py checks it follows fp32), fp32 elsewhere; the committed book
    #: trajectories are bf16 (the book preset pins it)
    precision: Literal["fp32", "bf16", "auto"] = "auto"
    #: the end state of real pretraining: these models (`END_STATE_MODELS`) as released and as
    #: untrained twins (same architecture, random init), each on `end_state_samples` in-domain sequences of at
    #: most `end_state_length` tokens
    end_state: tuple[str, ...] = ()
    end_state_samples: int = 256
    end_state_length: int = 128

    CHAPTER: ClassVar[str] = "qk"
    #: resume points and the reading threshold do not change a trajectory's results
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ("resume_every", "threshold")
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "ci": dict(layers=2, d_model=128, n_heads=2, d_ff=512, seq_len=64, batch_size=8, lr=1e-3,
                   steps=(0, 5, 15, 30, 60), n_samples=32, max_length=64, n_display=100, resume_every=30,
                   ablation=True, end_state=("rxnmapper-ALBERT",), end_state_samples=16, end_state_length=64),
        # the mixed corpus, 15,000 steps, no dropout, bf16, with the centring ablation; three seeds
        # (one single-threaded process per run, ≈ 45-55 min each on this CPU; six runs committed)
        "book": dict(corpus="mixed", dropout=0.0, precision="bf16", seeds=3, ablation=True, resume_every=250,
                     steps=(0, 10, 20, 50, 100, 200, 500, 1000, 2000, 3000, 5000, 7500, 10000, 15000),
                     end_state=END_STATE_MODELS),
        "paper": dict(source="multiberts", seeds=5, steps=MULTIBERT_STEPS, n_samples=128),
    }
    RULES: ClassVar = rules(
        seeds=positive,
        steps=(lambda v: len(v) >= 2 and all(b > a for a, b in zip(v, v[1:], strict=False)) and v[0] >= 0,
               "needs >= 2 increasing checkpoint steps >= 0"),
        n_samples=(lambda v: v >= 2, "needs >= 2 samples"),
        max_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
        svd_fraction=(lambda v: 0 < v <= 1, "must lie in (0, 1]"), n_display=positive,
        threshold=(lambda v: 0 < v < 1, "must lie in (0, 1)"),
        layers=positive, d_model=positive, n_heads=positive, d_ff=positive,
        seq_len=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"), batch_size=positive, lr=positive,
        warmup=(lambda v: 0 <= v < 1, "must lie in [0, 1)"), weight_decay=nonneg,
        mask_prob=(lambda v: 0 < v < 1, "must lie in (0, 1)"), resume_every=positive,
        dropout=(lambda v: 0 <= v < 1, "must lie in [0, 1)"),
        end_state=(lambda v: all(m in END_STATE_MODELS for m in v), f"models must be among {END_STATE_MODELS}"),
        end_state_samples=(lambda v: v >= 2, "needs >= 2 sequences"),
        end_state_length=(lambda v: 8 <= v <= 512, "must lie in [8, 512]"),
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source == "multiberts":
            bad = [s for s in self.steps if s not in MULTIBERT_STEPS]
            if bad:
                raise ParameterError(f"parameter 'steps': {bad} are not released MultiBERT checkpoints "
                                     "(every 20k steps to 200k, every 100k to 2M)")
            if self.seed + self.seeds > 5:
                raise ParameterError("parameter 'seeds': MultiBERT intermediate checkpoints exist for seeds 0-4 only "
                                     f"(asked for seeds {runtime.run_seeds(self.seed, self.seeds)})")
        else:
            check_heads(self)

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads if self.source == "pretrain" else 64


#: the MultiBERT checkpoints the `paper` preset reads (its seeds × its steps)
PAPER_CHECKPOINTS = Params.PRESETS["paper"]["seeds"] * len(Params.PRESETS["paper"]["steps"])
#: the MultiBERT steps of a first `paper` run the chapter suggests (one seed, `overrides = {"seeds": 1, "steps": …}`)
FIRST_RUN_STEPS = (0, 20000, 100000, 200000, 500000, 1000000, 1500000, 2000000)
