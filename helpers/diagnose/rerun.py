"""`tokuni rerun X.json`: check that the weights and the probe a diagnosis recorded are still what it read (the
SHA-256 of every weight file read from disk, the probe's own SHA-256), run the same measurement again from the
JSON's arguments, and say which numbers moved and by how much."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .checks import DiagnoseError
from .compare import Record
from .measures import MEASURES

#: numbers the JSON keeps to six decimals: a change below this is rounding
TOLERANCE = 2e-6
#: the parts of a measure's row that `moved` compares
PARTS = {"model": ("estimate", "low", "high"), "twin": ("estimate", "low", "high"),
         "difference": ("estimate", "low", "high")}


def check_weights(rec: Record) -> str:
    """The recorded weight files hash as recorded (a folder, a weight package); a hub id's commit is checked once
    the model is loaded again (`moved`). Raises `DiagnoseError` naming the first file that differs."""
    from .run import sha256_of

    w = rec.data.get("weights") or {}
    if "sha256" not in w:
        return f"weights: hub id {w.get('hub_id')} at commit {w.get('resolved_commit')}"
    folder = Path(w["folder"])
    for name, digest in w["sha256"].items():
        f = folder / name
        if not f.is_file():
            raise DiagnoseError(f"rerun: the weight file {f} the run read is gone")
        if sha256_of(f) != digest:
            raise DiagnoseError(f"rerun: {f} is not the file the run read (its SHA-256 differs)")
    return f"weights: {len(w['sha256'])} files under {folder} hash as recorded"


def rebuild_probe(rec: Record, args):
    """The probe again (the default probe from its recipe, or the probe file), refused unless its SHA-256 is the
    recorded one."""
    from .probe import default_probe, read_probe

    modality = rec.data["modality"]
    probe = read_probe(args.probe, modality) if args.probe else default_probe(modality, args.n, args.seed)
    if probe.fingerprint() != rec.data["probe"]["sha256"]:
        raise DiagnoseError("rerun: the probe is not the one the run read (its SHA-256 differs: "
                            f"{args.probe or 'the default probe'})")
    return probe


def moved(old: dict[str, Any], new: dict[str, Any], tolerance: float = TOLERANCE) -> list[dict[str, Any]]:
    """Per measure and part (model, twin, difference): how many numbers moved beyond `tolerance`, by at most how
    much, and where; an empty list where every number came back."""
    out = []
    names = old["layer_names"]
    for m in MEASURES:
        a, b = old["measures"].get(m), new["measures"].get(m)
        if a is None and b is None:
            continue
        if a is None or b is None:
            out.append({"measure": m, "part": "all", "count": None, "largest": None, "where": None,
                        "text": f"{MEASURES[m][0]}: measured in {'the rerun' if a is None else 'the first run'} only"})
            continue
        for part, keys in PARTS.items():
            if part not in a or part not in b:
                continue
            x = np.array([[np.nan if v is None else v for v in a[part][k]] for k in keys], dtype=float)
            y = np.array([[np.nan if v is None else v for v in b[part][k]] for k in keys], dtype=float)
            if x.shape != y.shape:
                out.append({"measure": m, "part": part, "count": None, "largest": None, "where": None,
                            "text": f"{MEASURES[m][0]} ({part}): {x.shape[1]} layers, now {y.shape[1]}"})
                continue
            gap = np.abs(x - y)
            gap[np.isnan(x) & np.isnan(y)] = 0
            gap[np.isnan(x) ^ np.isnan(y)] = np.inf
            hit = gap > tolerance
            if hit.any():
                i, j = np.unravel_index(np.argmax(gap), gap.shape)
                out.append({"measure": m, "part": part, "count": int(hit.sum()), "largest": float(gap[i, j]),
                            "where": f"{names[j]} ({keys[i]})",
                            "text": f"{MEASURES[m][0]} ({part}): {int(hit.sum())} of {gap.size} numbers moved, by "
                                    f"at most {gap[i, j]:.3g} ({names[j]}, {keys[i]})"})
    return out


def rerun(path: str | Path, out: str | Path | None = None) -> tuple[list[str], list[dict[str, Any]], Any]:
    """Check, run again, compare: (the checks' lines, `moved`'s rows, the new `Diagnosis`). Raises
    `DiagnoseError` where the weights or the probe are no longer what the run read."""
    from .options import parser
    from .report import record
    from .run import diagnose

    rec = Record.read(path)
    argv = rec.data.get("argv")
    if not argv or argv[0] != "diagnose":
        raise DiagnoseError(f"{path}: records no arguments to run again")
    try:
        args = parser().parse_args(argv)
    except SystemExit:
        raise DiagnoseError(f"{path}: its arguments are not ones this version takes: {' '.join(argv)}") from None
    lines = [check_weights(rec)]
    probe = rebuild_probe(rec, args)
    lines.append(f"probe: {probe.description}, SHA-256 as recorded")
    twins = 0 if args.no_twin else args.twins
    d = diagnose(args.model[0], probe, twins=twins, seed=args.seed, draws=args.draws, device=args.device,
                 max_tokens=args.max_tokens, revision=args.revision, command="tokuni rerun " + str(path))
    new = record(d)
    w_old, w_new = rec.data.get("weights") or {}, new.get("weights") or {}
    if "resolved_commit" in w_old and w_old["resolved_commit"] != w_new.get("resolved_commit"):
        lines.append(f"weights: the hub id now resolves to {w_new.get('resolved_commit')}, the run read "
                     f"{w_old['resolved_commit']}")
    if rec.data.get("device_used") and rec.data["device_used"] != new.get("device_used"):
        lines.append(f"device: the run used {rec.data['device_used']}, the rerun {new.get('device_used')}")
    return lines, moved(rec.data, new), d


__all__ = ["rerun", "moved", "check_weights", "rebuild_probe", "TOLERANCE"]
