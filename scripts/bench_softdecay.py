"""SoftDecay overhead at BERT-base width (Yan et al. report 1.5x even with approximations).

    python scripts/bench_softdecay.py [--batch 32 --seq 128 --reps 3 --device auto --out FILE]

Measures, for a randomly initialised 12-layer, 768-wide BERT (timing needs no trained weights),
batch 32, sequence length 128 with realistic padding (lengths drawn from [64, 128]):
  inference:  (encoder forward + SoftDecay on the last layer) / (encoder forward)
  training:   (forward + SoftDecay + backward) / (forward + backward)
for three SoftDecay implementations: the authors' per-example `torch.svd` loop, one batched
`torch.linalg.svd`, and ours (`helpers.softdecay`, Gram-matrix form, padding-aware).

End-to-end ratios of two multi-second runs are at the mercy of timing noise (a few per cent on a
shared CPU), so the headline ratio is 1 + t(SoftDecay)/t(encoder), with t(SoftDecay) timed on its
own (forward, or forward + backward for training) on the encoder's real last-layer output, median
of many repetitions; the end-to-end ratios (runs interleaved) are printed beside it as a check.
Prints a table and writes JSON with the device and versions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.core.softdecay import softdecay_loop_reference, softdecay_transform  # noqa: E402
from helpers.machinery import runtime  # noqa: E402

VARIANTS = {
    "per-example torch.svd loop (authors)": lambda h, m: softdecay_loop_reference(h, -0.6),
    "batched torch.linalg.svd": lambda h, m: softdecay_transform(h, -0.6, m, method="svd"),
    "ours (Gram, padding-aware)": lambda h, m: softdecay_transform(h, -0.6, m, method="gram"),
}


def _sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, dev, reps):
    fn()                                   # warm-up
    _sync(dev)
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        _sync(dev)
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from transformers import BertConfig, BertModel

    dev = runtime.choose_device(args.device)
    runtime.seed_everything(0)
    model = BertModel(BertConfig(attn_implementation="sdpa")).to(dev)
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(args.seq // 2, args.seq + 1, (args.batch,), generator=g)
    mask = (torch.arange(args.seq).unsqueeze(0) < lengths.unsqueeze(1)).to(dev)
    ids = torch.randint(1000, 30000, (args.batch, args.seq), generator=g).to(dev)

    def forward(sd=None, grad=False):
        with torch.set_grad_enabled(grad):
            h = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state
            if sd is not None:
                h = sd(h, mask)
            if grad:
                (h * mask.unsqueeze(-1)).square().mean().backward()
            return h

    res = {"device": runtime.device_description(dev), "versions": runtime.package_versions(), "batch": args.batch,
           "seq": args.seq, "reps": args.reps, "inference": {}, "training": {}, "end_to_end": {},
           "softdecay_s": {}}
    model.eval()
    base_inf = timed(lambda: forward(), dev, args.reps)
    model.train()
    base_tr = timed(lambda: (model.zero_grad(), forward(grad=True)), dev, args.reps)
    res["baseline_s"] = {"inference": base_inf, "training": base_tr}
    with torch.no_grad():
        model.eval()
        h = model(input_ids=ids, attention_mask=mask.long()).last_hidden_state.detach()
    for name, sd in VARIANTS.items():
        t_sd = timed(lambda sd=sd: sd(h, mask), dev, max(10, 3 * args.reps))

        def fb(sd=sd):
            x = h.clone().requires_grad_(True)
            (sd(x, mask) * mask.unsqueeze(-1)).square().mean().backward()

        t_sd_fb = timed(fb, dev, max(10, 3 * args.reps))
        res["softdecay_s"][name] = {"forward": t_sd, "forward_backward": t_sd_fb}
        res["inference"][name] = 1 + t_sd / base_inf
        res["training"][name] = 1 + t_sd_fb / base_tr
        model.eval()
        e2e_base = timed(lambda: forward(), dev, args.reps)
        e2e_inf = timed(lambda sd=sd: forward(sd), dev, args.reps)
        model.train()
        e2e_base_tr = timed(lambda: (model.zero_grad(), forward(grad=True)), dev, args.reps)
        e2e_tr = timed(lambda sd=sd: (model.zero_grad(), forward(sd, grad=True)), dev, args.reps)
        res["end_to_end"][name] = {"inference": e2e_inf / e2e_base, "training": e2e_tr / e2e_base_tr}
    print(f"device: {res['device']}; encoder forward {base_inf:.3f} s, training step {base_tr:.3f} s "
          f"(batch {args.batch}, seq {args.seq}, median of {args.reps})")
    print(f"{'variant':40s} {'SD fwd s':>9s} {'SD f+b s':>9s} {'infer x':>8s} {'train x':>8s} "
          f"{'e2e infer':>10s} {'e2e train':>10s}")
    for name in VARIANTS:
        t = res["softdecay_s"][name]
        e = res["end_to_end"][name]
        print(f"{name:40s} {t['forward']:9.4f} {t['forward_backward']:9.4f} {res['inference'][name]:8.4f} "
              f"{res['training'][name]:8.4f} {e['inference']:10.4f} {e['training']:10.4f}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
