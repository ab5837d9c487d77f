"""Throughput of the book's three training loops, fp32 against bf16 autocast, on one thread.

    python scripts/bench_training.py [--steps 8] [--threads 1] [--compile] [--out results/bench/training-cpu.json]
    python scripts/bench_training.py --runs bf16 --out results/bench/vit-blocks-cpu.json
        --loops "ViT depth 80, Algorithm 1 blocks (vit book sweep)" "ViT depth 80, standard blocks (vit book sweep)"
    (one command on one line: the loops to time, then the precision and the output file)

For each loop — MLM pretraining (the qk book model: 4 × 256 BERT, batch 8 × 128 tokens), ViT training
(the vit book model: depth 24, width 192, 4 × 4 patches, batch 128) and GLUE fine-tuning (all-MiniLM-L6-v2,
batch 32 × 128 tokens) — it runs the real task adapter of `helpers.train` (`batch`, `loss`, backward,
optimiser step: what `fit` runs each step) on synthetic inputs of the real shapes, and reports the
median step time, examples (or tokens) per second, and the achieved FLOP/s (FLOPs of one step counted
by torch's FlopCounterMode) against this machine's measured matmul peak in the same precision. The
ratios are measured in the same run: bf16 against fp32, and the loop as it runs now (bf16, fused AdamW)
against the loop before the training core (fp32, foreach AdamW). One thread by default: the book runs
one single-threaded process per seed on its 2 cores. The second command times the vit chapter's two
block types at the sweep's deepest setting (bf16, as the book runs them), for the chapter's cost ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.machinery import runtime  # noqa: E402
from helpers.train.loop import autocast  # noqa: E402


def matmul_peak(dtype: torch.dtype, n: int = 1024, reps: int = 6) -> float:
    """Best-of FLOP/s of an n×n matmul in `dtype` on this thread."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def mlm_task():
    from helpers.train import mlm

    tok = mlm.tokenizer()
    cfg = mlm.PretrainConfig(layers=4, d_model=256, n_heads=4, d_ff=1024, seq_len=128, batch_size=8, steps=1000,
                             checkpoint_steps=(0,), resume_every=1000)
    chunks = torch.randint(2000, 28000, (256, 128))
    return mlm.MLMTask(cfg, chunks, Path("/nonexistent"), tok, None), cfg.batch_size * cfg.seq_len, "tokens"


def vit_task(depth: int = 24, hidden: int = 192, ffn: int = 384, heads: int = 8, patch: int = 4, batch: int = 128,
             block: str = "algorithm1"):
    from PIL import Image

    from helpers.core.vit import ViT, ViTConfig
    from helpers.train.vit import TrainConfig, ViTTask

    rng = np.random.default_rng(0)
    imgs = [Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)) for _ in range(256)]
    model = ViT(ViTConfig(variant="post-norm", depth=depth, d_model=hidden, d_ff=ffn, n_heads=heads, patch=patch,
                          block=block))
    tc = TrainConfig(epochs=4, batch_size=batch)
    return ViTTask(model, (imgs, [i % 10 for i in range(256)]), (imgs[:8], [0] * 8), tc), tc.batch_size, "images"


def vit_sweep_task(block: str):
    """The vit book sweep's deepest model (depth 80, width 96, FFN 192, 4 heads, 8 × 8 patches, batch 64)
    with Algorithm 1 blocks or the standard (vit-pytorch-like) blocks."""
    return lambda: vit_task(depth=80, hidden=96, ffn=192, heads=4, patch=8, batch=64, block=block)


def glue_task():
    from helpers.data.glue import Encoded
    from helpers.train.glue import FinetuneConfig, GlueTask, load_classifier

    cfg = FinetuneConfig(task="RTE", variant="baseline", batch_size=32, max_length=128)
    model, tok = load_classifier(cfg, 2)
    rng = random.Random(0)
    feats = [{"input_ids": [101] + [rng.randrange(2000, 28000) for _ in range(126)] + [102],
              "token_type_ids": [0] * 128, "attention_mask": [1] * 128} for _ in range(128)]
    enc = Encoded("RTE", "train", feats, [rng.randrange(2) for _ in range(128)])
    return GlueTask(cfg, model, tok, enc, enc), cfg.batch_size, "examples"


LOOPS = {"MLM pretraining (qk book)": mlm_task, "ViT training (vit book)": vit_task,
         "GLUE fine-tuning (glue book)": glue_task,
         "ViT depth 80, Algorithm 1 blocks (vit book sweep)": vit_sweep_task("algorithm1"),
         "ViT depth 80, standard blocks (vit book sweep)": vit_sweep_task("standard")}
#: the loops of the default run (the training core's speed-up); the two sweep loops compare the ViT blocks
DEFAULT_LOOPS = list(LOOPS)[:3]
RUNS = {"before": ("fp32", False, True), "fp32": ("fp32", False, False), "bf16": ("bf16", False, False)}


def time_steps(task, precision: str, steps: int, compile_: bool = False, before: bool = False
               ) -> tuple[float, float]:
    """(median seconds per optimiser step, FLOPs of one step) of `task` in `precision`. `before`: with
    the optimiser the loops had before the training core (foreach AdamW, not fused)."""
    from torch.utils.flop_counter import FlopCounterMode

    dev = torch.device("cpu")
    model, opt, sched = task.build(dev)
    if before:
        groups = [{k: v for k, v in g.items() if k not in ("fused", "foreach")} for g in opt.param_groups]
        opt = torch.optim.AdamW(groups, foreach=True)
    fwd = torch.compile(model) if compile_ else model

    def step(i: int) -> None:
        batch = task.batch(0, i % task.steps_per_epoch, dev)
        with autocast(dev, precision):
            loss, _, _ = task.loss(fwd, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(0)                                                                   # warm-up (and compilation)
    with FlopCounterMode(display=False) as fc:
        step(1)
    flops = fc.get_total_flops()
    times = []
    for i in range(steps):
        t = time.perf_counter()
        step(i + 2)
        times.append(time.perf_counter() - t)
    return statistics.median(times), flops


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile (bf16)")
    ap.add_argument("--loops", nargs="*", default=DEFAULT_LOOPS, choices=list(LOOPS))
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS),
                    help="which settings to time (the ratios need before, fp32 and bf16)")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench" / "training-cpu.json"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]                  # other processes on the machine slow every loop alike
    runtime.seed_everything(0)
    peak = {"fp32": matmul_peak(torch.float32), "bf16": matmul_peak(torch.bfloat16)}
    native = runtime.native_bf16("cpu")
    print(f"matmul peak on {args.threads} thread(s): fp32 {peak['fp32'] / 1e9:.1f} GFLOP/s, "
          f"bf16 {peak['bf16'] / 1e9:.1f} GFLOP/s (native bf16: {'yes' if native else 'no, emulated'})")
    rows = []
    for name in args.loops:
        task, per_step, unit = LOOPS[name]()
        runs = [RUNS[r] for r in args.runs] + ([("bf16", True, False)] if args.compile else [])
        out = {}
        for precision, comp, before in runs:
            label = "before (fp32, foreach AdamW)" if before else precision + (" + compile" if comp else "")
            sec, flops = time_steps(task, precision, args.steps, comp, before)
            out[label] = {"seconds_per_step": sec, f"{unit}_per_second": per_step / sec,
                          "gflop_per_step": flops / 1e9, "achieved_gflops": flops / sec / 1e9,
                          "fraction_of_matmul_peak": flops / sec / peak[precision]}
            print(f"{name:30s} {label:28s} {sec:7.3f} s/step  {per_step / sec:9.1f} {unit}/s  "
                  f"{flops / sec / 1e9:6.1f} GFLOP/s ({100 * flops / sec / peak[precision]:.0f} % of peak)")
        if {"fp32", "bf16", "before"} <= set(args.runs):
            out["speedup_bf16_over_fp32"] = out["fp32"]["seconds_per_step"] / out["bf16"]["seconds_per_step"]
            before_s = out["before (fp32, foreach AdamW)"]["seconds_per_step"]
            out["speedup_over_before"] = before_s / out["bf16"]["seconds_per_step"]
            print(f"{name:30s} bf16 over fp32 ×{out['speedup_bf16_over_fp32']:.2f}; the loop now (bf16, fused AdamW) "
                  f"over before ×{out['speedup_over_before']:.2f}")
        rows.append({"loop": name, **out})
        del task
    record = {"device": runtime.device_description("cpu"), "threads": args.threads, "steps": args.steps,
              "load_average_at_start": load, "native_bf16": native,
              "versions": runtime.package_versions(), "matmul_peak_gflops": {k: v / 1e9 for k, v in peak.items()},
              "loops": rows, "command": "python scripts/bench_training.py " + " ".join(argv or sys.argv[1:])}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(record, indent=1))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
