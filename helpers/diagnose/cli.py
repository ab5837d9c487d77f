"""The console script: `tokuni diagnose MODEL [MODEL …] [--probe FILE | -n N] [--twins K] [--out PREFIX | --out -]
[--format report|json] …`, `tokuni compare A.json B.json …`, `tokuni rerun X.json`; `tokuni --version`. The
options: `options.parser`.

Every option, the report's folder, the model (its folder's files, or the hub) and the probe are checked before
any model is loaded. A refusal is one line on stderr and exit status 2, never a traceback; Ctrl-C says
"interrupted, nothing written" and exits 130 (the report is written whole or not at all)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from .options import parser


def _version() -> str:
    import helpers  # the package's one version (pyproject reads it too)

    from .run import git_commit

    commit = git_commit()["commit"]
    return f"tokuni {helpers.__version__}" + (f" (commit {commit[:12]})" if commit else "")


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
        keep_freed_memory()
        if len(args.model) > 1:
            return _several(args, argv)
        return _one(args, argv)
    except (ModelUnavailable, ProbeError, DiagnoseError) as err:
        return _fail(str(err))


#: glibc's mallopt parameters: the size from which a block is mapped on its own (and unmapped when freed), and the
#: free memory at the top of the heap past which it is handed back to the system
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> bool:
    """Keep the memory a forward pass frees for the next one (glibc: blocks up to 1 GiB come from the heap and
    freed memory stays there), instead of handing it back to the system and having every page of the next
    block faulted in and zeroed again. Whisper's encoder allocates and frees hundreds of MB per layer of every
    30 s window (its attention probabilities): a whisper-base run with five twins took 72.8 million page faults
    and 110 of its 310 CPU-s in the kernel. No number changes. The command line calls it; a Python caller's
    process is left as it is. False where the C library is not glibc."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, 1 << 30)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


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
                         command="tokuni " + " ".join(argv), label=_short(model))
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
