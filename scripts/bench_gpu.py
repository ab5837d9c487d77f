"""What a `paper` run costs on one GPU, in one call: the training loops eager and compiled, SoftDecay's
overhead, and the grid cost with several runs sharing the card.

    python scripts/bench_gpu.py                      # on a GPU: the paper's shapes (under 5 minutes on an H100)
    make bench-gpu                                   # the same
    python scripts/bench_gpu.py --size tiny          # tiny shapes (what runs on a machine without a GPU, in CI)

For each loop — ViT depth 80, width 192, 4 × 4 patches, batch 128 (standard and Algorithm 1 blocks); the causal
LM of Figure 7 (depth 60, width 410, batch 40 × 150); the qk chapter's long MLM pretraining (4 × 256, batch
64 × 128) — it runs the real task adapter of `helpers.train` (its `batch`, `loss`, backward, optimiser and
schedule steps: what `fit` runs) on synthetic inputs of the real shapes, twice:

* eager: the model as written, the loss read back after every step (as `fit` runs with `compile=False`);
* compiled: `train.loop.compile_blocks` (each repeated block compiled; one graph serves every block of a
  shape), the statistics left on the device until the end (as `fit` runs by default on CUDA).

It reports the median seconds per step over the timed window (steps timed back to back and synchronised at
the ends, so a sync-free loop's overlap of host and device counts), the compile time (the first compiled
step less an eager one), the peak memory, one run's hours and the grid's GPU-hours (runs × steps × s/step),
and, with `--pack N`, the same loop in N processes at once on the card: their summed throughput gives the
packed grid's GPU-hours (`scripts/grid.py --jobs-per-gpu N`). Then SoftDecay at BERT-base width (batch
32 × 128, padding drawn from [64, 128]): encoder forward and training step, and SoftDecay's forward and
forward + backward by the eigensolver (`method="gram"`) and by matrix products (`method="poly"`), as overhead
ratios, with the polynomial's degree and its distance from the float64 result. Writes
`results/bench/gpu-<card>.json` (`gpu-cpu.json` for the tiny CPU run) with the device, versions and date.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_softdecay  # noqa: E402

from helpers.machinery import runtime  # noqa: E402
from helpers.train.loop import compile_blocks, optimiser_step  # noqa: E402

#: per loop: shapes at `paper` size and at `tiny` size, optimiser steps of one run, runs in the grid
LOOPS = {
    "vit-standard": dict(label="ViT depth 80, width 192, 4×4 patches, batch 128 — standard blocks",
                         paper=dict(depth=80, d_model=192, d_ff=384, n_heads=8, patch=4, batch=128, block="standard"),
                         tiny=dict(depth=3, d_model=32, d_ff=64, n_heads=4, patch=8, batch=8, block="standard"),
                         steps_per_run=58_593, runs=9),                  # 150 epochs of 50,000 images; 3 × 3
    "vit-algorithm1": dict(label="ViT depth 80, width 192, 4×4 patches, batch 128 — Algorithm 1 blocks",
                           paper=dict(depth=80, d_model=192, d_ff=384, n_heads=8, patch=4, batch=128,
                                      block="algorithm1"),
                           tiny=dict(depth=3, d_model=32, d_ff=64, n_heads=4, patch=8, batch=8, block="algorithm1"),
                           steps_per_run=58_593, runs=9),
    "lm": dict(label="causal LM depth 60, width 410, batch 40 × 150 (Fig. 7)",
               paper=dict(depth=60, d_model=410, n_heads=10, d_ff=820, seq_len=150, batch=40, vocab=30522),
               tiny=dict(depth=3, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch=4, vocab=256),
               steps_per_run=50_000, runs=9),
    "mlm": dict(label="qk long pretraining, 4 × 256 MLM, batch 64 × 128",
                paper=dict(layers=4, d_model=256, n_heads=4, d_ff=1024, seq_len=128, batch=64),
                tiny=dict(layers=1, d_model=32, n_heads=2, d_ff=64, seq_len=16, batch=4),
                steps_per_run=50_000, runs=6),
}


def build_task(name: str, shape: dict):
    if name.startswith("vit"):
        from PIL import Image

        from helpers.core.vit import ViT, ViTConfig
        from helpers.train.vit import TrainConfig, ViTTask

        rng = np.random.default_rng(0)
        n = 2 * shape["batch"]
        imgs = [Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)) for _ in range(n)]
        model = ViT(ViTConfig(variant="post-norm", depth=shape["depth"], d_model=shape["d_model"], d_ff=shape["d_ff"],
                              n_heads=shape["n_heads"], patch=shape["patch"], block=shape["block"]))
        tc = TrainConfig(epochs=150, batch_size=shape["batch"])
        return ViTTask(model, (imgs, [i % 10 for i in range(n)]), (imgs[:8], [0] * 8), tc)
    if name == "lm":
        from helpers.core.causal_lm import LMConfig
        from helpers.train.lm import LMTask, LMTrainConfig

        cfg = LMConfig(variant="pre-norm", vocab=shape["vocab"], depth=shape["depth"], d_model=shape["d_model"],
                       n_heads=shape["n_heads"], d_ff=shape["d_ff"], seq_len=shape["seq_len"])
        tc = LMTrainConfig(steps=50_000, batch_size=shape["batch"], eval_every=10**9, resume_every=10**9)
        seqs = torch.randint(0, shape["vocab"], (4 * shape["batch"], shape["seq_len"] + 1))
        return LMTask(cfg, tc, seqs, seqs[:shape["batch"]])
    from helpers.train import mlm

    tok = mlm.tokenizer()
    cfg = mlm.PretrainConfig(layers=shape["layers"], d_model=shape["d_model"], n_heads=shape["n_heads"],
                             d_ff=shape["d_ff"], seq_len=shape["seq_len"], batch_size=shape["batch"], steps=50_000,
                             checkpoint_steps=(0,), resume_every=50_000)
    chunks = torch.randint(2000, 28000, (4 * shape["batch"], shape["seq_len"]))
    return mlm.MLMTask(cfg, chunks, Path(os.devnull), tok, None)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def time_loop(name: str, shape: dict, dev: torch.device, precision: str, compiled: bool, steps: int) -> dict:
    """Seconds per step of one loop: one step alone (with compiled=True: it compiles), then a warm-up step,
    then `steps` steps back to back, synchronised at both ends (median of three windows)."""
    torch.manual_seed(0)
    task = build_task(name, shape)
    model, opt, sched = task.build(dev)
    if compiled:
        compile_blocks(model)
    params = [p for p in model.parameters() if p.requires_grad]
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)

    def step(i: int):
        model.train()
        batch = task.batch(0, i % task.steps_per_epoch, dev)
        loss, _, _ = optimiser_step(task, model, batch, opt, sched, params, dev, precision)
        return loss.detach() if compiled else float(loss.detach())       # eager: read back every step

    t = time.perf_counter()
    step(0)
    _sync(dev)
    first = time.perf_counter() - t
    step(1)
    _sync(dev)
    windows, losses = [], []
    per = max(1, steps // 3)
    for w in range(3):
        t = time.perf_counter()
        for i in range(per):
            losses.append(step(2 + w * per + i))
        _sync(dev)
        windows.append((time.perf_counter() - t) / per)
    finite = all(np.isfinite(float(v)) for v in losses)
    peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else None
    return {"seconds_per_step": statistics.median(windows), "first_step_s": first, "peak_gib": peak,
            "finite": finite}


def worker(name: str, size: str, device: str, precision: str, steps: int) -> None:
    """One process of a packing measurement: the compiled loop; prints its JSON line."""
    dev = runtime.choose_device(device)
    r = time_loop(name, LOOPS[name][size], dev, precision, True, steps)
    print("RESULT " + json.dumps(r), flush=True)


def packed(name: str, size: str, device: str, precision: str, steps: int, n: int) -> dict:
    """`n` processes of the compiled loop at once on the card: per-process s/step, and the card's s/step
    per run (wall per step / n)."""
    cmd = [sys.executable, __file__, "--worker", name, "--size", size, "--device", device,
           "--precision", precision, "--steps", str(steps)]
    t = time.perf_counter()
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(n)]
    outs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - t
    res = [json.loads(line[7:]) for o in outs for line in o.splitlines() if line.startswith("RESULT ")]
    if len(res) != n:
        return {"processes": n, "error": f"{n - len(res)} of {n} workers failed", "wall_s": wall}
    per_proc = statistics.median(r["seconds_per_step"] for r in res)
    return {"processes": n, "seconds_per_step_each": per_proc, "seconds_per_run_step": per_proc / n,
            "peak_gib_each": max((r["peak_gib"] or 0) for r in res) or None, "wall_s": wall}


def softdecay_overhead(dev: torch.device, size: str, reps: int) -> dict:
    """SoftDecay's overhead at BERT-base width (batch 32 × 128; tiny: 4 × 32 at width 64) by the eigensolver
    and by matrix products, as `scripts/bench_softdecay.py` measures it (1 + t(SoftDecay)/t(encoder))."""
    from transformers import BertConfig, BertModel

    from helpers.core import softdecay as S

    batch, seq = (32, 128) if size == "paper" else (4, 32)
    cfg = BertConfig(attn_implementation="sdpa") if size == "paper" else BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, attn_implementation="sdpa")
    runtime.seed_everything(0)
    model = BertModel(cfg).to(dev)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    mask = (torch.arange(seq).unsqueeze(0) < lengths.unsqueeze(1)).to(dev)
    ids = torch.randint(1000, 30000, (batch, seq), generator=g).to(dev)

    def timed(fn) -> float:
        return bench_softdecay.timed(fn, dev, reps)            # the one timer: warm-up, synchronised, median

    model.eval()
    with torch.no_grad():
        base_inf = timed(lambda: model(input_ids=ids, attention_mask=mask.long()))
        h = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state.detach().float()
    model.train()

    def train_step():
        model.zero_grad()
        model(input_ids=ids, attention_mask=mask.long()).last_hidden_state.square().mean().backward()

    base_tr = timed(train_step)
    ref = S.softdecay_transform(h.double(), -0.6, mask, method="gram", precision="double")
    smax = float(torch.linalg.matrix_norm((h * mask.unsqueeze(-1)).double(), 2).max())
    out = {"batch": batch, "seq": seq, "encoder_forward_s": base_inf, "training_step_s": base_tr, "methods": {}}
    info: dict = {}
    certified = S.gram_poly((h * mask.unsqueeze(-1)).double(), -0.6, mask, info) is not None
    for method in ("gram", "poly"):
        fwd = timed(lambda m=method: S.softdecay_transform(h, -0.6, mask, method=m))

        def fb(m=method):
            x = h.clone().requires_grad_(True)
            a = torch.tensor(-0.6, device=dev, requires_grad=True)
            (S.softdecay_transform(x, a, mask, method=m) * mask.unsqueeze(-1)).square().mean().backward()

        fwb = timed(fb)
        y = S.softdecay_transform(h, -0.6, mask, method=method)
        ops_f, gf_f = count_ops(lambda m=method: S.softdecay_transform(h, -0.6, mask, method=m))
        ops_fb, gf_fb = count_ops(fb)
        out["methods"][method] = {"forward_s": fwd, "forward_backward_s": fwb, "inference_x": 1 + fwd / base_inf,
                                  "training_x": 1 + fwb / base_tr, "ops_forward": ops_f,
                                  "ops_forward_backward": ops_fb, "matmul_gflop_forward": gf_f,
                                  "matmul_gflop_forward_backward": gf_fb,
                                  "max_error_over_sigma_max": float((y.double() - ref).abs().max()) / smax}
    out["poly"] = {"certified": certified, **info}
    return out


def count_ops(fn) -> tuple[int, float]:
    """(aten operator calls — on a GPU each is at least one kernel launch —, matmul GFLOPs) of one call of `fn`."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import FlopCounterMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with FlopCounterMode(display=False) as fc, Count():
        fn()
    return Count.n, fc.get_total_flops() / 1e9


def card_name(dev: torch.device) -> str:
    if dev.type != "cuda":
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", torch.cuda.get_device_name(dev).lower()).strip("-")


def save(record: dict, t_start: float, out: str | None) -> Path:
    """Write `record` (with the seconds since `t_start`) to `out` or `results/bench/gpu-<card>.json`."""
    record["total_s"] = time.time() - t_start
    path = Path(out) if out else ROOT / "results" / "bench" / f"gpu-{record['card']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--size", default=None, choices=("paper", "tiny"), help="default: paper on a GPU, tiny on a CPU")
    ap.add_argument("--loops", nargs="*", default=list(LOOPS), choices=list(LOOPS))
    ap.add_argument("--steps", type=int, default=None, help="timed steps per loop (default: 30 on a GPU, 3 tiny)")
    ap.add_argument("--precision", default=None, choices=("fp32", "bf16"), help="default: bf16 on a GPU, else fp32")
    ap.add_argument("--compile", dest="compile", action="store_true", default=None,
                    help="also time the compiled loops (default on a GPU; on a CPU compiling takes minutes)")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="eager only")
    ap.add_argument("--pack", type=int, default=None, help="processes sharing the card for the packing "
                    "measurement (default 4 on a GPU, none on a CPU; 1: none)")
    ap.add_argument("--pack-loop", default="vit-standard", choices=list(LOOPS))
    ap.add_argument("--no-softdecay", action="store_true")
    ap.add_argument("--out", default=None, help="default: results/bench/gpu-<card>.json")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dev = runtime.choose_device(args.device)
    size = args.size or ("paper" if dev.type == "cuda" else "tiny")
    precision = args.precision or ("bf16" if dev.type == "cuda" else "fp32")
    steps = args.steps or (30 if dev.type == "cuda" else 3)
    compiled = args.compile if args.compile is not None else dev.type == "cuda"
    if args.worker:
        worker(args.worker, size, args.device, precision, steps)
        return 0
    t_start = time.time()
    record = {"device": runtime.device_description(dev), "card": card_name(dev), "size": size,
              "precision": precision, "compiled": compiled, "steps_timed": steps,
              "date": time.strftime("%Y-%m-%d", time.gmtime()),
              "versions": runtime.package_versions(), "loops": {},
              "command": "python scripts/bench_gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"{record['device']}; {size} shapes, {precision}, {steps} timed steps per loop")
    print(f"{'loop':62s} {'eager s':>8s} {'comp. s':>8s} {'compile s':>9s} {'GiB':>5s} {'run h':>6s} "
          f"{'grid GPU-h':>10s}")
    for name in args.loops:
        record["loops"][name] = _loop_row(name, size, dev, precision, compiled, steps)
        save(record, t_start, args.out)           # a call cut short keeps the loops timed so far
    n_pack = args.pack if args.pack is not None else (4 if dev.type == "cuda" else 1)
    if n_pack > 1 and compiled:
        record["packed"] = _packed_row(args.pack_loop, size, args.device, precision, steps, n_pack)
        save(record, t_start, args.out)
    if not args.no_softdecay:
        record["softdecay"] = _softdecay_row(dev, size)
    out = save(record, t_start, args.out)
    print(f"written {out} ({record['total_s']:.0f} s)")
    return 0


def _loop_row(name: str, size: str, dev, precision: str, compiled: bool, steps: int) -> dict:
    """One training loop timed eager (and compiled), with what a run and the grid of runs would cost; printed as
    a row of the table."""
    spec = LOOPS[name]
    shape = spec[size]
    row = {"label": spec["label"], "shape": shape, "steps_per_run": spec["steps_per_run"], "runs": spec["runs"],
           "eager": time_loop(name, shape, dev, precision, False, steps)}
    best = row["eager"]["seconds_per_step"]
    if compiled:
        row["compiled"] = time_loop(name, shape, dev, precision, True, steps)
        row["compile_s"] = max(0.0, row["compiled"]["first_step_s"] - row["eager"]["first_step_s"])
        best = min(best, row["compiled"]["seconds_per_step"])
    row["run_hours"] = best * spec["steps_per_run"] / 3600
    row["grid_gpu_hours"] = row["run_hours"] * spec["runs"]
    c = row.get("compiled", {})
    label = spec["label"] if size == "paper" else f"[tiny shapes] {name}"
    print(f"{label[:62]:62s} {row['eager']['seconds_per_step']:8.4f} "
          f"{c.get('seconds_per_step', float('nan')):8.4f} {row.get('compile_s', float('nan')):9.1f} "
          f"{(c.get('peak_gib') or row['eager']['peak_gib'] or float('nan')):5.1f} {row['run_hours']:6.2f} "
          f"{row['grid_gpu_hours']:10.1f}")
    return row


def _packed_row(loop: str, size: str, device: str, precision: str, steps: int, n_pack: int) -> dict:
    """`n_pack` processes of `loop` sharing the card (`packed`), with the grid's GPU hours at that rate; printed."""
    pk = packed(loop, size, device, precision, steps, n_pack)
    spec = LOOPS[loop]
    if "error" not in pk:
        pk["grid_gpu_hours"] = pk["seconds_per_run_step"] * spec["steps_per_run"] * spec["runs"] / 3600
        print(f"packed: {n_pack} processes of '{loop}' on the card: {pk['seconds_per_step_each']:.4f} "
              f"s/step each, {pk['seconds_per_run_step']:.4f} s of card per step, grid "
              f"{pk['grid_gpu_hours']:.1f} GPU-h")
    else:
        print(f"packed: {pk['error']}")
    return {"loop": loop, **pk}


def _softdecay_row(dev, size: str) -> dict:
    """SoftDecay's overhead (`softdecay_overhead`), printed per method."""
    sd = softdecay_overhead(dev, size, reps=10 if dev.type == "cuda" else 3)
    print(f"SoftDecay, batch {sd['batch']} × {sd['seq']}: encoder forward {sd['encoder_forward_s']:.4f} s, "
          f"training step {sd['training_step_s']:.4f} s; poly certified: {sd['poly']}")
    for m, r in sd["methods"].items():
        print(f"  {m:5s} forward {r['forward_s']:.4f} s, fwd+bwd {r['forward_backward_s']:.4f} s: inference "
              f"×{r['inference_x']:.3f}, training ×{r['training_x']:.3f}; max error "
              f"{r['max_error_over_sigma_max']:.1e}·σ_max; operator calls {r['ops_forward']} / "
              f"{r['ops_forward_backward']}, matmul GFLOP {r['matmul_gflop_forward']:.1f} / "
              f"{r['matmul_gflop_forward_backward']:.1f}")
    return sd


if __name__ == "__main__":
    sys.exit(main())
