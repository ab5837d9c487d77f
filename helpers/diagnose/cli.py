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
    d.add_argument("model", nargs="+",
                   help="a hub id, a local folder, or an offline model name; several: each is diagnosed on the same "
                        "probe, and PREFIX.html / PREFIX.json put them side by side (each model's own report in "
                        "PREFIX-<model>.html / .json)")
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
    c = sub.add_parser("compare", help="put earlier diagnoses side by side (e.g. before and after fine-tuning)",
                       description="Read two or more JSON files written by tokuni diagnose and write one report with "
                                   "the models side by side per measure and layer, each one's difference from the "
                                   "first with its 95% interval, and each model's place among the book's reference "
                                   "models.")
    c.add_argument("records", nargs="+", metavar="JSON", help="JSON files written by tokuni diagnose")
    c.add_argument("--out", default="tokuni-compare", help="report prefix (default: tokuni-compare)")
    r = sub.add_parser("rerun", help="check a diagnosis's weights and probe, run it again, say what moved",
                       description="Check that the weights and the probe a diagnosis's JSON recorded hash as "
                                   "recorded, run the same measurement again from the JSON's arguments, and list "
                                   "the numbers that moved and by how much; the new report goes to PREFIX.")
    r.add_argument("record", metavar="JSON", help="a JSON file written by tokuni diagnose")
    r.add_argument("--out", help="the new report's prefix (default: the JSON's name with -rerun)")
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
    if args.command is None:
        return _fail("give a command: tokuni diagnose MODEL, tokuni compare A.json B.json or tokuni rerun X.json "
                     "(tokuni diagnose --help)")
    from ..hf.loading import ModelUnavailable
    from .checks import DiagnoseError
    from .probe import ProbeError

    try:
        if args.command == "compare":
            return _compare(args)
        if args.command == "rerun":
            return _rerun(args)
        if len(args.model) > 1:
            return _several(args, argv)
        return _one(args, argv)
    except (ModelUnavailable, ProbeError, DiagnoseError) as err:
        return _fail(str(err))


def _one(args, argv: list[str]) -> int:
    from .checks import OutLock, check_out
    from .report import json_text, write_json, write_report
    from .run import default_out, diagnose

    model = args.model[0]
    twins = 0 if args.no_twin else args.twins
    to_stdout = args.out == "-" or (args.format == "json" and args.out is None)
    if args.out == "-" and args.format == "report":
        args.format = "json"                            # --out - : the JSON to stdout, no page
    out = None if to_stdout else Path(args.out or default_out(model))
    if out is not None:
        check_out(out)
    with OutLock(out) if out is not None else contextlib.nullcontext():
        d = diagnose(model, args.probe, twins=twins, n=args.n, seed=args.seed, draws=args.draws,
                     device=args.device, max_tokens=args.max_tokens, revision=args.revision,
                     command="tokuni " + " ".join(argv))
        if to_stdout:
            text = json_text(d)
        elif args.format == "json":
            written = [write_json(d, out)]
        else:
            written = list(write_report(d, out))
    for m, why in d.skipped.items():
        print(f"tokuni: skipped {m}: {why}", file=sys.stderr)
    if to_stdout:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        print("\n".join(map(str, written)))
    return 0


def _several(args, argv: list[str]) -> int:
    """Each model diagnosed on the same probe (its own report at PREFIX-<model>), then PREFIX side by side."""
    from .checks import DiagnoseError, OutLock, check_out
    from .compare import Record, compare, placement, write_comparison
    from .report import record, write_report
    from .run import diagnose

    if args.out == "-" or args.format == "json":
        raise DiagnoseError("several models write several files: give --out PREFIX (not -) and no --format json")
    out = Path(args.out or "tokuni-compare")
    outs = [out.with_name(out.name + "-" + _short(m)) for m in args.model]
    if len(set(outs)) < len(outs):
        raise DiagnoseError("two of the models would write the same report: give them different names")
    for o in (out, *outs):
        check_out(o)
    twins = 0 if args.no_twin else args.twins
    written, records = [], []
    with OutLock(out):
        for model, o in zip(args.model, outs, strict=True):
            d = diagnose(model, args.probe, twins=twins, n=args.n, seed=args.seed, draws=args.draws,
                         device=args.device, max_tokens=args.max_tokens, revision=args.revision,
                         command="tokuni " + " ".join(argv))
            for m, why in d.skipped.items():
                print(f"tokuni: {model}: skipped {m}: {why}", file=sys.stderr)
            written += write_report(d, o)
            records.append(Record(record(d), str(o.with_name(o.name + ".json"))))
        cmp = compare(records)
        written += write_comparison(cmp, out, {r.name: placement(r) for r in records})
    print("\n".join(map(str, written)))
    return 0


def _short(model: str) -> str:
    """A model's name in a file name: a folder's own name, an offline name or hub id with "/" as "_"."""
    from .run import kind_of

    if kind_of(model) == "folder":
        return Path(model).expanduser().resolve().name or "model"
    return model.replace("/", "_").replace(":", "_").lstrip("._~") or "model"


def _compare(args) -> int:
    from .checks import OutLock, check_out
    from .compare import Record, compare, placement, write_comparison

    records = [Record.read(p) for p in args.records]
    out = Path(args.out)
    check_out(out)
    with OutLock(out):
        cmp = compare(records)
        written = write_comparison(cmp, out, {r.name: placement(r) for r in records})
    for note in cmp["notes"]:
        print(f"tokuni: {note}", file=sys.stderr)
    print("\n".join(map(str, written)))
    return 0


def _rerun(args) -> int:
    from .checks import OutLock, check_out
    from .report import write_report
    from .rerun import rerun

    src = Path(args.record)
    out = Path(args.out) if args.out else src.with_name(src.stem + "-rerun")
    check_out(out)
    with OutLock(out):
        lines, moves, d = rerun(src)
        written = write_report(d, out)
    for line in lines:
        print(line)
    if moves:
        print(f"{len(moves)} parts moved:")
        for m in moves:
            print("  " + m["text"])
    else:
        print("every number came back (to the JSON's six decimals)")
    print("\n".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
