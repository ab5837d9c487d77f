"""Several diagnoses side by side: `tokuni compare a.json b.json` (earlier runs, e.g. before and after
fine-tuning) and `tokuni diagnose A B …` (several models in one run) give one page and one JSON with every model
per measure and layer, and each model's difference from the first with its interval; `placement` ranks a model
among the book's reference models (the synthesis chapter's committed runs) without recomputing them.

A difference's interval is paired where both runs read the same probe (its SHA-256) with the same bootstrap
draws (seed and count): the two models' draws then resample the same inputs, and the interval is the percentile
interval of the draws' differences. Otherwise the two intervals are read as independent (the half-widths added
in quadrature), which overstates the interval when the probes overlap. Intervals are 95 % per cell."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..machinery.runtime import REPO_ROOT
from .checks import DiagnoseError, check_out, write_pair
from .measures import COLLAPSE_SIGN, MEASURES, interval

#: the synthesis chapter's committed runs, from which `placement` reads the reference models
REFERENCE = REPO_ROOT / "results" / "synthesis" / "book"


@dataclass
class Record:
    """One diagnosis as its JSON holds it."""

    data: dict[str, Any]
    path: str = ""

    @classmethod
    def read(cls, path: str | Path) -> Record:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise DiagnoseError(f"{path}: not a readable tokuni diagnose JSON ({type(err).__name__})") from None
        if not isinstance(data, dict) or data.get("tool") != "tokuni diagnose" or "measures" not in data:
            raise DiagnoseError(f"{path}: not the JSON of a tokuni diagnose run")
        return cls(data, str(path))

    @property
    def name(self) -> str:
        return str(self.data["model"])

    @property
    def layers(self) -> int:
        return len(self.data["layer_names"])

    def curve(self, m: str) -> dict[str, np.ndarray] | None:
        row = self.data["measures"].get(m)
        if row is None:
            return None
        return {k: np.array([np.nan if x is None else x for x in row["model"][k]], dtype=float)
                for k in ("estimate", "low", "high")}

    def draws(self, m: str) -> np.ndarray | None:
        rows = (self.data["measures"].get(m) or {}).get("model_draws")
        if not rows:
            return None
        return np.array([[np.nan if x is None else x for x in r] for r in rows], dtype=float)

    def pairing(self) -> tuple:
        """What must agree for two runs' bootstrap draws to resample the same inputs."""
        return (self.data["probe"].get("sha256"), self.data.get("seed"), self.data.get("draws"))


def difference(a: Record, b: Record, m: str, level: float = 0.95) -> dict[str, Any] | None:
    """b − a per layer with its interval (`paired` says which kind, module docstring); None where the measure is
    missing from either or the depths differ."""
    ca, cb = a.curve(m), b.curve(m)
    if ca is None or cb is None or a.layers != b.layers:
        return None
    est = cb["estimate"] - ca["estimate"]
    da, db = a.draws(m), b.draws(m)
    if da is not None and db is not None and da.shape == db.shape and a.pairing() == b.pairing():
        lo, hi = interval(db - da, est, level)
        return {"estimate": est, "low": lo, "high": hi, "paired": True}
    half = np.sqrt(((ca["high"] - ca["low"]) / 2) ** 2 + ((cb["high"] - cb["low"]) / 2) ** 2)
    return {"estimate": est, "low": est - half, "high": est + half, "paired": False}


def compare(records: list[Record]) -> dict[str, Any]:
    """Every model per measure and layer, and each model's difference from the first (`difference`)."""
    if len(records) < 2:
        raise DiagnoseError("a comparison needs two diagnoses at least")
    base = records[0]
    out: dict[str, Any] = {"tool": "tokuni compare", "models": [r.name for r in records],
                           "sources": [r.path for r in records],
                           "layer_names": [r.data["layer_names"] for r in records], "measures": {}}
    measures = [m for m in MEASURES if any(m in r.data["measures"] for r in records)]
    for m in measures:
        row: dict[str, Any] = {"label": MEASURES[m][0], "collapse_sign": COLLAPSE_SIGN.get(m, 0), "models": [],
                               "differences": []}
        for r in records:
            c = r.curve(m)
            row["models"].append(None if c is None else {k: _list(v) for k, v in c.items()})
        for r in records[1:]:
            d = difference(base, r, m)
            row["differences"].append(None if d is None else
                                      {**{k: _list(d[k]) for k in ("estimate", "low", "high")},
                                       "paired": d["paired"], "of": f"{r.name} − {base.name}"})
        out["measures"][m] = row
    out["notes"] = _notes(records)
    return out


def _notes(records: list[Record]) -> list[str]:
    notes = []
    base = records[0]
    for r in records[1:]:
        if r.layers != base.layers:
            notes.append(f"{r.name} has {r.layers} layers and {base.name} {base.layers}: shown side by side, no "
                         "differences")
        elif r.pairing() != base.pairing():
            notes.append(f"{r.name} and {base.name} were read on different probes or bootstrap draws: their "
                         "differences' intervals treat the two runs as independent")
    return notes


def _list(a: np.ndarray) -> list[float | None]:
    return [None if not np.isfinite(x) else round(float(x), 6) for x in np.asarray(a, dtype=float)]


def _fmt(x: float | None) -> str:
    from .verdict import num_text

    return "—" if x is None else num_text(float(x))


def compare_html(cmp: dict[str, Any], placements: dict[str, list[dict]] | None = None) -> str:
    """One page: per measure a table of layers × models (estimate [low, high]) and the differences from the first
    model; then, where given, each model's place among the reference models."""
    esc = html.escape
    names = cmp["models"]
    blocks = []
    for row in cmp["measures"].values():
        depth = max(len(x) for x in cmp["layer_names"])
        head = "".join(f"<th>{esc(n)}</th>" for n in names)
        head += "".join(f"<th>{esc(d['of'])}</th>" for d in row["differences"] if d)
        lines = []
        for i in range(depth):
            cells = []
            for c in row["models"]:
                ok = c is not None and i < len(c["estimate"]) and c["estimate"][i] is not None
                cells.append(f"<td>{_fmt(c['estimate'][i])} [{_fmt(c['low'][i])}, {_fmt(c['high'][i])}]</td>"
                             if ok else "<td></td>")
            for d in row["differences"]:
                if not d:
                    continue
                e, lo, hi = d["estimate"][i], d["low"][i], d["high"][i]
                mark = "" if e is None or lo is None or hi is None or lo <= 0 <= hi else " class=\"more\""
                cells.append(f"<td{mark}>{_fmt(e)} [{_fmt(lo)}, {_fmt(hi)}]</td>" if e is not None else "<td></td>")
            label = "embeddings" if i == 0 else f"block {i}"
            lines.append(f"<tr><td>{label}</td>{''.join(cells)}</tr>")
        blocks.append(f"<h2>{esc(row['label'])}</h2><table><tr><th>layer</th>{head}</tr>\n" + "\n".join(lines)
                      + "</table>")
    notes = "".join(f"<li>{esc(n)}</li>" for n in cmp["notes"])
    place = ""
    for name, rows in (placements or {}).items():
        place += f"<h2>{esc(name)} among the reference models</h2>" + placement_html(rows)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tokuni compare {esc(' · '.join(names))}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}}
.more{{color:#c0392b;font-weight:bold}}.small{{font-size:13px;color:#555}}</style></head><body>
<h1>{esc(' · '.join(names))}: layer by layer, side by side</h1>
<p class="small">Each cell: the estimate and its 95 % interval over the probe's inputs. Differences are from
{esc(names[0])}, with 95 % intervals per cell (paired where both runs read the same probe with the same bootstrap
draws, else the two runs read as independent); in red where the interval excludes 0.</p>
{"<ul>" + notes + "</ul>" if notes else ""}
{''.join(blocks)}
{place}
</body></html>
"""


def write_comparison(cmp: dict[str, Any], out: str | Path, placements: dict[str, list[dict]] | None = None
                     ) -> tuple[Path, Path]:
    out = Path(out)
    check_out(out)
    page = compare_html(cmp, placements)
    data = json.dumps({**cmp, "placement": placements or {}}, indent=1, ensure_ascii=False) + "\n"
    return write_pair(out, page, data)


# ------------------------------------------------------------------------------------------------ placement


def references(folder: Path = REFERENCE) -> dict[str, dict[str, Any]]:
    """The reference models' per-layer estimates, read from the synthesis chapter's committed runs: name ->
    {"modality", "probe", "curves": {measure: estimates}}."""
    out = {}
    for f in sorted(folder.glob("model-*.json")):
        try:
            r = json.loads(f.read_text(encoding="utf-8"))["results"]
        except (OSError, ValueError, KeyError):
            continue
        out[r["name"]] = {"modality": r.get("modality"), "probe": r.get("probe"),
                          "curves": {m: np.array([np.nan if x is None else x for x in c["model"]["estimate"]],
                                                 dtype=float) for m, c in r["curves"].items()}}
    return out


def placement(rec: Record, refs: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per measure, where the model's mean over its layers ranks among the reference models' (1: the lowest), with
    its neighbours below and above; a model of the same name is left out of the references. Different models
    were read on their own modality's probe, so this places a model, it does not test a difference."""
    refs = references() if refs is None else refs
    rows = []
    for m in MEASURES:
        c = rec.curve(m)
        if c is None:
            continue
        own = float(np.nanmean(c["estimate"])) if np.isfinite(c["estimate"]).any() else np.nan
        others = sorted((float(np.nanmean(r["curves"][m])), n) for n, r in refs.items()
                        if n != rec.name and m in r["curves"] and np.isfinite(r["curves"][m]).any())
        if not np.isfinite(own) or not others:
            continue
        below = [o for o in others if o[0] < own]
        above = [o for o in others if o[0] >= own]
        rows.append({"measure": m, "label": MEASURES[m][0], "value": own, "rank": len(below) + 1,
                     "of": len(others) + 1, "below": below[-1][1] if below else None,
                     "below_value": below[-1][0] if below else None, "above": above[0][1] if above else None,
                     "above_value": above[0][0] if above else None,
                     "range": [others[0][0], others[-1][0]]})
    return rows


def placement_html(rows: list[dict[str, Any]]) -> str:
    esc = html.escape
    if not rows:
        return "<p>No reference model shares a measure with this run.</p>"
    lines = []
    for r in rows:
        below = f"{esc(r['below'])} {_fmt(r['below_value'])}" if r["below"] else "—"
        above = f"{esc(r['above'])} {_fmt(r['above_value'])}" if r["above"] else "—"
        lines.append(f"<tr><td>{esc(r['label'])}</td><td>{_fmt(r['value'])}</td><td>{r['rank']} of {r['of']}</td>"
                     f"<td>{below}</td><td>{above}</td><td>{_fmt(r['range'][0])} – {_fmt(r['range'][1])}</td></tr>")
    return ("<table><tr><th>measure (mean over layers)</th><th>this model</th><th>rank, lowest first</th>"
            "<th>next below</th><th>next above</th><th>reference range</th></tr>\n" + "\n".join(lines) + "</table>"
            '<p class="small">Reference models: the synthesis chapter\'s committed runs, each on its own '
            "modality's default probe; a place, not a test.</p>")


__all__ = ["Record", "compare", "difference", "compare_html", "write_comparison", "references", "placement",
           "placement_html", "REFERENCE"]
