"""The Q/K chapter's pretraining at the length the 1.5-nat bar needs (issue 16): every seed, plain and centred,
as parallel processes on one machine (a GPU: the six small models share it), within a wall-clock budget, so
that a GPU lent for 10-minute calls can run it in several calls. Each run resumes from its checkpoints
(`_build/checkpoints/qk/…`); a finished run is written, with provenance, through the book's results cache
— beside the committed book runs as `results/qk/book/<name>@<hash of its settings>.json`, never over them —
and copied to `--out` (the device tool's $OUT) so that it comes back.

    python scripts/qk_long.py --device cuda --budget-s 540 --out "$OUT"     # call again until all are done
    python scripts/qk_long.py --device cpu --ci --budget-s 120              # the mechanics, at ci size
    python scripts/qk_long.py --bundle .device                              # here, before the first call

A GPU machine of the device tool has PyTorch and transformers but neither the data mirror nor the package the
tokenizer ships in: `--bundle DIR` writes both (WikiText, GLUE, STS: ~30 MB; BERT's tokenizer) into DIR, an
ignored folder to carry; each call then runs (see the README's "GPU" section)

    export TOKUNI_DATA=.device/data TOKUNI_TOKENIZER=.device/tokenizer PYTHONUNBUFFERED=1
    python3 scripts/qk_long.py --device cuda --budget-s 540 --out "$OUT"

The recipe is `helpers.experiments.qk.LONG_PRETRAINING` on top of the book preset (the mixed corpus, bf16,
the centring ablation). It prints each run's held-out MLM loss at its checkpoints beside the unigram
baseline as runs finish, and a line per run still training (its last checkpoint step) when the budget ends."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def params(ci: bool, device: str):
    from helpers.experiments import qk

    if ci:
        return qk.Params.resolve("ci", device=device)
    return qk.Params.resolve("book", **qk.LONG_PRETRAINING, device=device)


def one(args) -> None:
    """Child: one run seed (plain or centred), through the results cache (resumes from its checkpoints)."""
    import torch

    from helpers.experiments import qk

    if args.device == "cpu":
        torch.set_num_threads(1)
    p = params(args.ci, args.device).with_(centre=args.centre)
    traj, hit = qk.run_seed(p, args.seed, device=args.device)
    print(json.dumps({"seed": args.seed, "centre": args.centre, "cache_hit": hit,
                      "eval_loss": traj["eval_loss"], "unigram_nats": traj.get("unigram_nats"),
                      "pretrain_wall_time_s": traj.get("pretrain_wall_time_s")}), flush=True)


def bundle(folder: Path) -> None:
    """The mirror's part the mixed corpus and the analysis samples read, and BERT's tokenizer, in `folder`."""
    from helpers.data import data_root
    from helpers.train import mlm

    root = data_root()
    if root is None:
        raise SystemExit("no data mirror here (../shared/data or $TOKUNI_DATA) to bundle")
    for sub in ("wikitext", "glue", "sts"):
        shutil.copytree(root / sub, folder / "data" / sub, dirs_exist_ok=True)
    mlm.tokenizer().save_pretrained(folder / "tokenizer")
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"bundle in {folder}: {size / 2**20:.1f} MiB (carry it; add it to .git/info/exclude)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop (and checkpoint) the runs after this")
    ap.add_argument("--out", default=os.environ.get("OUT"), help="copy the finished runs' results here")
    ap.add_argument("--ci", action="store_true", help="the ci preset (a check of the mechanics)")
    ap.add_argument("--seeds", type=int, default=None, help="default: the preset's")
    ap.add_argument("--bundle", metavar="DIR", help="write the data and tokenizer a bare GPU machine needs to DIR")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--centre", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from helpers.book.results import committed_results_path
    if args.child:
        one(args)
        return 0
    if args.bundle:
        bundle(Path(args.bundle))
        return 0
    if args.budget_s <= 0:
        ap.error("--budget-s must be > 0")

    p = params(args.ci, args.device)
    seeds = range(p.seed, p.seed + (args.seeds or p.seeds))
    jobs = [(s, c) for s in seeds for c in ((False, True) if p.ablation else (False,))]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOKUNI_NO_PROGRESS="1",
               OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    procs = {}
    for s, c in jobs:
        cmd = [sys.executable, __file__, "--child", "--seed", str(s), "--device", args.device]
        cmd += ["--ci"] * args.ci + ["--centre"] * c
        procs[(s, c)] = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    t0, started, done = time.monotonic(), time.time(), {}
    while procs and time.monotonic() - t0 < args.budget_s:
        for k, pr in list(procs.items()):
            if pr.poll() is not None:
                out = (pr.stdout.read() or "").strip().splitlines()
                done[k] = json.loads(out[-1]) if pr.returncode == 0 and out else {"returncode": pr.returncode}
                print(f"finished seed {k[0]}{' centred' if k[1] else ''}: {json.dumps(done[k])}", flush=True)
                del procs[k]
        time.sleep(2)
    for (s, c), pr in procs.items():               # out of budget: stop; the next call resumes
        os.killpg(pr.pid, signal.SIGTERM)
        pr.wait()
        print(f"stopped seed {s}{' centred' if c else ''} at the budget (resumes from its last checkpoint)",
              flush=True)
    folder = committed_results_path("qk", "seed0", p.scale).parent
    written = [f for f in folder.glob("*.json") if f.stat().st_mtime >= started] if folder.is_dir() else []
    if args.out and written:
        dest = Path(args.out) / "qk-long"           # the device tool returns files at most two folders down
        dest.mkdir(parents=True, exist_ok=True)
        for f in written:
            shutil.copy2(f, dest / f.name)
    print(f"{len(done)} finished, {len(procs)} stopped in {time.monotonic() - t0:.0f} s; "
          f"written: {[f.name for f in written] or 'nothing'}")
    return 0 if not procs and all("eval_loss" in d for d in done.values()) else 3


if __name__ == "__main__":
    raise SystemExit(main())
