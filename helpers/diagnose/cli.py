"""The console script: `tokuni diagnose MODEL [--probe FILE | -n N] [--twins K] [--out PREFIX | --out -]
[--format report|json] …`; `tokuni --version`.

Every option, the report's folder, the model (its folder's files, or the hub) and the probe are checked before
any model is loaded. A refusal is one line on stderr and exit status 2, never a traceback; Ctrl-C says
"interrupted, nothing written" and exits 130 (the report is written whole or not at all)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from .run import MAX_TOKENS, MAX_TWINS, OFFLINE_MODELS, TWIN_BUDGET_S, TWINS


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as the tool's one line (usage left out) and exit status 2."""

    def error(self, message: str):
        print(f"tokuni: {message}", file=sys.stderr)
        raise SystemExit(2)


def _version() -> str:
    import helpers  # the package's one version (pyproject reads it too)

    from .run import git_commit

    commit = git_commit()["commit"]
    return f"tokuni {helpers.__version__}" + (f" (commit {commit[:12]})" if commit else "")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tokuni", description="The token-uniformity book's measures as a tool.")
    p.add_argument("--version", action="store_true", help="print the version (and git commit) and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    d = sub.add_parser("diagnose", help="measure a model layer by layer beside its untrained twins",
                       description="Measure MODEL layer by layer (anisotropy, drift, the centred cloud's shape, "
                                   "EV1/TokenUni/RBF_dis, singular-value skew, t_sim, mean query/key alignment) "
                                   "with 95% intervals over the probe's inputs, beside untrained twins (the same "
                                   "architecture with random weights); write PREFIX.html and PREFIX.json. Offline "
                                   "models: " + ", ".join(OFFLINE_MODELS))
    d.add_argument("model", help="a hub id, a local folder, or an offline model name")
    d.add_argument("--probe", help="a text file, one input per line (image / WAV paths for vision / audio)")
    d.add_argument("-n", type=int, default=None,
                   help="inputs in the default probe (text 128, vision 48, audio 32); not with --probe")
    d.add_argument("--out", help="report prefix (default: tokuni-<model>); - writes the JSON to stdout")
    d.add_argument("--format", choices=("report", "json"), default="report",
                   help="report (default): PREFIX.html and PREFIX.json; json: the JSON alone, to stdout unless "
                        "--out is given (then PREFIX.json)")
    d.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    d.add_argument("--twins", type=int, default=None,
                   help=f"untrained twins, seeds SEED, SEED+1, … (default: {TWINS}, then more while they take under "
                        f"{TWIN_BUDGET_S:.0f} s in all, up to {MAX_TWINS}; 0: none; at least 2 for a comparison)")
    d.add_argument("--no-twin", action="store_true", help="the same as --twins 0")
    d.add_argument("--seed", type=int, default=0, help="bootstrap draws, default probe and first twin (default 0)")
    d.add_argument("--draws", type=int, default=200, help="bootstrap draws over the probe's inputs (20 to 10,000)")
    d.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                   help=f"a text is cut to its first MAX_TOKENS tokens; images and recordings keep at most "
                        f"MAX_TOKENS vectors, evenly spaced (default {MAX_TOKENS})")
    d.add_argument("--revision", help="a hub id's branch, tag or commit (recorded with the commit it resolves to)")
    return p


def _fail(message: str) -> int:
    print(f"tokuni: {message.splitlines()[0] if message else 'failed'}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("tokuni: interrupted, nothing written", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as done:
        return int(done.code or 0)
    if args.version:
        print(_version())
        return 0
    if args.command != "diagnose":
        return _fail("give a command: tokuni diagnose MODEL (tokuni diagnose --help)")
    from ..hf.loading import ModelUnavailable
    from .checks import DiagnoseError, OutLock, check_out
    from .probe import ProbeError
    from .report import json_text, write_json, write_report
    from .run import default_out, diagnose

    twins = 0 if args.no_twin else args.twins
    to_stdout = args.out == "-" or (args.format == "json" and args.out is None)
    if args.out == "-" and args.format == "report":
        args.format = "json"                            # --out - : the JSON to stdout, no page
    out = None if to_stdout else Path(args.out or default_out(args.model))
    try:
        if out is not None:
            check_out(out)
        with OutLock(out) if out is not None else contextlib.nullcontext():
            d = diagnose(args.model, args.probe, twins=twins, n=args.n, seed=args.seed, draws=args.draws,
                         device=args.device, max_tokens=args.max_tokens, revision=args.revision,
                         command="tokuni " + " ".join(argv))
            if to_stdout:
                text = json_text(d)
            elif args.format == "json":
                written = [write_json(d, out)]
            else:
                written = list(write_report(d, out))
    except (ModelUnavailable, ProbeError, DiagnoseError) as err:
        return _fail(str(err))
    for m, why in d.skipped.items():
        print(f"tokuni: skipped {m}: {why}", file=sys.stderr)
    if to_stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        print("\n".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
