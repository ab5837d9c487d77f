"""Re-execute one chapter with papermill at a chosen scale, with parameter overrides.

    python scripts/rerun.py tse --scale paper -p depth 80 -p taus "[0.1, 1.0]"
    python scripts/rerun.py sts --scale paper --update-lock   # make rerun ... PARAMS=--update-lock

The chapter's jupytext source is converted in memory (papermill cannot read .md). Parameter names,
types and values are validated against the chapter's `helpers.experiments.<chapter>.Params` *before* the
run starts. The executed notebook and the chapter's results (JSON) land in
`results/<chapter>/<scale>-<timestamp>/`.

Hub models and datasets load at the commits `hub.lock` pins (README: Pinned revisions); a run that resolves
another fails in one line naming both. `--update-lock` is the one way to move the pins: the run asks the hub for
`main` of every model and dataset it reads and writes the commits it resolved into `hub.lock` (review the diff,
commit it with the results).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import helpers.experiments  # noqa: E402,F401  (registers every chapter's Params)
from helpers.machinery.notebooks import read_chapter  # noqa: E402
from helpers.machinery.params import SCALES, ParameterError, for_chapter  # noqa: E402


def parse_value(text: str):
    """YAML scalar/list parsing: '80' -> 80, '1e-3' -> 0.001, '[0.1, 1]' -> list, 'bert' -> 'bert'."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str) and value.lower() in ("none", "null"):
        return None
    if isinstance(value, str):
        try:
            return float(value)  # yaml 1.1 reads '1e-3' as a string
        except ValueError:
            return value
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter", help="chapter name, e.g. tse or subspace (book/<name>.md)")
    ap.add_argument("--scale", default="book", choices=SCALES)
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("--out", default=None, help="output folder (default results/<chapter>/<scale>-<timestamp>)")
    ap.add_argument("--dry-run", action="store_true", help="validate the parameters and stop")
    ap.add_argument("--update-lock", action="store_true",
                    help="load every hub model and dataset at main and write the commits it resolves into hub.lock")
    args = ap.parse_args(argv)

    src = ROOT / "book" / f"{args.chapter}.md"
    try:
        cls = for_chapter(args.chapter)
        if not src.is_file():
            raise ParameterError(f"no chapter source {src}")
        overrides = {name: parse_value(value) for name, value in args.parameter}
        if "scale" in overrides:
            raise ParameterError("give the scale with SCALE=... (or --scale), not as -p scale")
        params = cls.resolve(args.scale, **overrides)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else ROOT / "results" / args.chapter / f"{args.scale}-{stamp}"
    print(f"chapter {args.chapter} at scale {args.scale}: {params}")
    if args.dry_run:
        return 0
    out.mkdir(parents=True, exist_ok=True)

    import papermill as pm

    from helpers.data import hublock

    before = hublock.read_lock() if args.update_lock else None
    if args.update_lock:            # the chapter's kernel inherits it (helpers.data.hublock.updating)
        os.environ[hublock.UPDATE_ENV] = "1"

    nb = read_chapter(src)
    tmp = out / f"{args.chapter}.source.ipynb"
    nbformat.write(nb, str(tmp))
    command = "make rerun CHAPTER={} SCALE={}{}".format(
        args.chapter, args.scale,
        " PARAMS='" + " ".join(f"-p {n} {shlex.quote(v)}" for n, v in args.parameter) + "'" if args.parameter else "")
    # the chapter's parameters cell holds `scale` and an `overrides` mapping (STYLE.md)
    parameters = {"scale": args.scale, "overrides": {**overrides, "results_dir": str(out), "command": command}}
    pm.execute_notebook(str(tmp), str(out / f"{args.chapter}.ipynb"), parameters=parameters,
                        cwd=str(ROOT / "book"), kernel_name="python3", progress_bar=True)
    tmp.unlink()
    print(f"executed notebook and results: {out}")
    if before is not None:
        hublock.forget_read_lock()
        after = hublock.read_lock()
        moved = [f"  {section} {rid}: {(before[section].get(rid) or {}).get('revision')} -> {e['revision']}"
                 for section in hublock.SECTIONS.values() for rid, e in after[section].items()
                 if (before[section].get(rid) or {}).get("revision") != e.get("revision")]
        print(f"{hublock.lock_path()}: {len(moved)} pin(s) moved" + "".join("\n" + m for m in moved))
    return 0


if __name__ == "__main__":
    sys.exit(main())
