"""Write the golden file of the book's findings: every finding's key, verdict, estimate, interval, n and method,
and every claim's verdict, as `experiments.findings.collect("book")` gives them from the committed results.

    python scripts/golden_findings.py            (writes tests/golden/findings-book.json)
    python scripts/golden_findings.py --check    (exit 1, listing what differs, when the collection moved)

`tests/test_claims_golden.py` holds the book to this file: a change to the code that moves a number or a verdict
fails it. Rewrite the file only with a change whose purpose is to move them (a new run, a new rule), and say which
moved in the commit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "findings-book.json"
#: significant digits kept: the committed results read back exactly, so this only spares float noise
DIGITS = 10


def _num(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if not math.isfinite(x) else float(f"{x:.{DIGITS}g}")


def golden(col) -> dict:
    """The golden record of a collection: {"findings": {key: {...}}, "claims": {id: verdict}}."""
    out = {"scale": col.scale, "findings": {}, "claims": {}}
    for f in col.findings:
        e = f.effect
        out["findings"][f.key] = {
            "verdict": f.verdict, "kind": f.kind, "claim_id": f.claim_id,
            "estimate": _num(e.estimate) if e is not None else None, "low": _num(e.low) if e is not None else None,
            "high": _num(e.high) if e is not None else None, "n": int(e.n) if e is not None else None,
            "method": e.method if e is not None else None, "uncorrected_verdict": f.uncorrected_verdict,
            "family_level": _num(f.family_level)}
    for j in col.judged():
        out["claims"][j.claim.id] = j.verdict
    return out


def differences(now: dict, then: dict) -> list[str]:
    """What moved between two golden records, one line each."""
    lines = []
    for part in ("findings", "claims"):
        a, b = then[part], now[part]
        lines += [f"{part}: {k} gone" for k in sorted(set(a) - set(b))]
        lines += [f"{part}: {k} new" for k in sorted(set(b) - set(a))]
        lines += [f"{part}: {k}: {a[k]} -> {b[k]}" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the golden file instead of writing it")
    args = ap.parse_args(argv)
    os.environ["TOKUNI_TRAIN_MISSING"] = "0"        # read the committed runs; compute nothing
    sys.path.insert(0, str(REPO))
    from helpers.experiments.findings import FAMILY_PATH, collect, family_p_values, scale_family

    col = collect("book")
    now, family = golden(col), family_record(family_p_values(col.findings), scale_family(col.findings))
    if args.check:
        lines = differences(now, json.loads(GOLDEN.read_text()))
        if not FAMILY_PATH.is_file() or json.loads(FAMILY_PATH.read_text()) != family:
            lines.append(f"{FAMILY_PATH.relative_to(REPO)} differs from the collection's family")
        print("\n".join(lines) or "the collection equals the golden file")
        return 1 if lines else 0
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    FAMILY_PATH.write_text(json.dumps(family, indent=1, sort_keys=True) + "\n")
    print(f"{len(now['findings'])} findings, {len(now['claims'])} claims -> {GOLDEN.relative_to(REPO)}; "
          f"the family -> {FAMILY_PATH.relative_to(REPO)}")
    return 0


def family_record(p_values: dict, trends: dict) -> dict:
    """What `results/findings-family.json` holds: how it was made, the p-values of each paper's family, and each
    paper's family of trends to its setting."""
    return {"about": "Each paper's family of tests at book scale: every in-scope claim test and book's own question "
                     "with a sampled interval, and its p-value. Holm's correction over each family sets the level "
                     "its verdict is read at. And each paper's family of trends (the tests carried to the paper's "
                     "setting by a measured trend): each band is read at 1 - 0.05/m for m trends (Bonferroni). "
                     "Made by scripts/golden_findings.py from the committed results.",
            "p_values": p_values, "trends": trends}


if __name__ == "__main__":
    raise SystemExit(main())
