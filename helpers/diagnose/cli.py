"""The console script: `tokuni diagnose MODEL [--probe FILE] [--out PREFIX] [--device auto|cpu|cuda] …`.

A refusal is one line on stderr and exit status 2: a model that cannot be had offline (and how to get it), an
empty or undecodable probe file (naming it)."""

from __future__ import annotations

import argparse
import sys

from .run import OFFLINE_MODELS


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tokuni", description="The token-uniformity book's measures as a tool.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("diagnose", help="measure a model layer by layer beside its untrained twin",
                       description="Measure MODEL layer by layer (anisotropy, drift, the centred cloud's shape, "
                                   "EV1/TokenUni/RBF_dis, singular-value skew, t_sim, mean query/key alignment) "
                                   "with 95%% intervals over the probe's inputs, beside its untrained twin; write "
                                   "PREFIX.html and PREFIX.json. Offline models: " + ", ".join(OFFLINE_MODELS))
    d.add_argument("model", help="a hub id, a local folder, or an offline model name")
    d.add_argument("--probe", help="a text file, one input per line (image / WAV paths for vision / audio)")
    d.add_argument("-n", type=int, default=None, help="inputs in the default probe (text 128, vision 48, audio 32)")
    d.add_argument("--out", help="report prefix (default: tokuni-<model>)")
    d.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    d.add_argument("--no-twin", action="store_true", help="do not measure the untrained twin")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--draws", type=int, default=200, help="bootstrap draws over the probe's inputs")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    from ..hf.loading import ModelUnavailable
    from .probe import ProbeError
    from .report import write_report
    from .run import default_out, diagnose

    try:
        d = diagnose(args.model, args.probe, twin=not args.no_twin, n=args.n, seed=args.seed, draws=args.draws,
                     device=args.device, command="tokuni " + " ".join(argv))
        html_path, json_path = write_report(d, args.out or default_out(args.model))
    except ModelUnavailable as err:
        print(f"tokuni: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    except ProbeError as err:
        print(f"tokuni: {err}", file=sys.stderr)
        return 2
    for m, why in d.skipped.items():
        print(f"tokuni: skipped {m}: {why}", file=sys.stderr)
    print(f"{html_path}\n{json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
