"""Rewrite the committed STS results once so that every stored key is the name its record reads it by.

The STS records (`helpers/experiments/sts/records.py`) once read four stored keys under other names: a main run's
(`sts-<model>.json`, `sts-extra-<model>.json`) `scores` as `Run.spearman` and `flips` as `Run.sign_flips`, a
reading's (`sts-readings-*`, `sts-full-*`, `sts-path-*`) `ci` as `Reading.intervals` and `anisotropy` as
`Reading.anisotropies`. This renames those keys of each file's `results` in place (their order kept) and changes
nothing else: no number, no cache key (a key is made from the Params, never from what a run stored), no other
entry. A file already migrated is left as it is.

    python scripts/migrate_sts_names.py [FOLDER ...]      # default: results/sts/book
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: per results file kind (its name's prefix), stored name → the record field's name
RENAMES = {"run": {"scores": "spearman", "flips": "sign_flips"},
           "reading": {"ci": "intervals", "anisotropy": "anisotropies"}}


def kind(path: Path) -> str | None:
    """Which record a results file holds: "run", "reading", or None (maps, same-fit: nothing renamed)."""
    name = path.stem.split("@")[0]
    if name.startswith(("sts-readings-", "sts-full-", "sts-path-")):
        return "reading"
    if name.startswith(("sts-maps-", "sts-samefit-")):
        return None
    return "run" if name.startswith("sts-") else None


def migrate(path: Path) -> list[str]:
    """Rename `path`'s stored keys; returns the renames made (none: already migrated or nothing to rename)."""
    text = path.read_text(encoding="utf-8")
    rec = json.loads(text)
    if json.dumps(rec, indent=1) != text:
        raise SystemExit(f"{path}: not in the layout `save_results` writes; left as it is")
    renames = RENAMES.get(kind(path) or "", {})
    done = [f"{a} → {b}" for a, b in renames.items() if a in rec["results"]]
    if done:
        rec["results"] = {renames.get(k, k): v for k, v in rec["results"].items()}
        path.write_text(json.dumps(rec, indent=1), encoding="utf-8")
    return done


def main(folders: list[str]) -> None:
    for folder in folders or [str(REPO_ROOT / "results" / "sts" / "book")]:
        for path in sorted(Path(folder).glob("sts-*.json")):
            if done := migrate(path):
                print(f"{path.name}: {', '.join(done)}")


if __name__ == "__main__":
    main(sys.argv[1:])
