"""The command line of `tokuni`: its subcommands (diagnose, compare, rerun) and their options, with argparse's
errors as one line and exit status 2."""

from __future__ import annotations

import argparse
import sys

from .run import MAX_TOKENS, MAX_TWINS, OFFLINE_MODELS, TWIN_BUDGET_S, TWINS


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as the tool's one line (usage left out) and exit status 2."""

    def error(self, message: str):
        print(f"tokuni: {message}", file=sys.stderr)
        raise SystemExit(2)


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


__all__ = ["parser"]
