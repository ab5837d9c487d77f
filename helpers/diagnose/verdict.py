"""The sentences of a diagnosis: one verdict line per measure with its numbers ("mean cosine 0.03–0.25 across
layers, against 0.34–0.38 for random twins: less collapsed than at initialisation in every layer"), a sentence
where the measures disagree on the direction, and the run's power. Built from `Diagnosis` alone, so the HTML page
and the JSON say the same."""

from __future__ import annotations

from typing import Any

import numpy as np

from .measures import COLLAPSE_SIGN, MEASURES

#: a `run.Diagnosis` (not imported: `run` imports this module)
Diagnosis = Any


def num_text(x: float) -> str:
    """Three significant figures, no exponent below 1e5."""
    if not np.isfinite(x):
        return "—"
    if x == 0:
        return "0"
    a = abs(x)
    if a < 1e-3:
        return f"{x:.1e}"
    if a >= 100:
        return f"{x:.0f}"
    digits = max(0, 2 - int(np.floor(np.log10(a))))
    return f"{x:.{digits}f}"


def span(values: np.ndarray) -> str:
    """"lo–hi" over the finite values (one number where they agree to three figures)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return "—"
    lo, hi = num_text(float(v.min())), num_text(float(v.max()))
    return lo if lo == hi else f"{lo} to {hi}" if float(v.min()) < 0 else f"{lo}–{hi}"


def layers_text(indices, total: int) -> str:
    """Layer indices as words: "every layer", "the embeddings", "blocks 2–4", "the embeddings and blocks 1, 3"
    (index 0 is the embeddings, index i block i)."""
    idx = sorted(int(i) for i in indices)
    if not idx:
        return "no layer"
    if len(idx) == total:
        return "every layer"
    parts = ["the embeddings"] if idx[0] == 0 else []
    blocks = [i for i in idx if i > 0]
    runs: list[list[int]] = []
    for i in blocks:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    if blocks:
        words = [f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs]
        parts.append(("blocks " if len(blocks) > 1 else "block ") + ", ".join(words))
    return " and ".join(parts)


def _directions(d: Diagnosis, m: str) -> dict[str, np.ndarray]:
    """Indices of the flagged layers above and below the twins, and (for a measure with a direction of
    collapse) more and less collapsed."""
    flagged = d.differs(m)
    est = d.curve(m, "difference")["estimate"]
    up, down = np.flatnonzero(flagged & (est > 0)), np.flatnonzero(flagged & (est < 0))
    sign = COLLAPSE_SIGN.get(m, 0)
    out = {"higher": up, "lower": down}
    if sign:
        out["more"], out["less"] = (up, down) if sign > 0 else (down, up)
    return out


def measure_line(d: Diagnosis, m: str) -> str:
    """One line: the measure's range across layers, the twins' range, and what the test says, per direction."""
    label = MEASURES[m][0]
    head = f"{label} {span(d.model.estimate[m])} across layers"
    if not d.twins:
        return head
    twins = d.curve(m, "twin")["estimate"]
    head += f", against {span(twins)} for random twins"
    if len(d.twins) < 2:
        return head + ": not interpretable with one twin (its spread cannot be measured)"
    dirs = _directions(d, m)
    total = int(np.isfinite(d.model.estimate[m]).sum())
    said = []
    if "more" in dirs:
        if dirs["more"].size:
            said.append(f"more collapsed than at initialisation in {layers_text(dirs['more'], total)}")
        if dirs["less"].size:
            said.append(f"less collapsed {'' if said else 'than at initialisation '}in "
                        f"{layers_text(dirs['less'], total)}")
    else:
        if dirs["higher"].size:
            said.append(f"higher than at initialisation in {layers_text(dirs['higher'], total)}")
        if dirs["lower"].size:
            said.append(f"lower {'' if said else 'than at initialisation '}in {layers_text(dirs['lower'], total)}")
    if not said:
        det = d.detectable(m)
        said.append("within what random initialisation gives in every layer (a shift smaller than "
                    f"{num_text(float(np.nanmedian(det['one'])))}, {float(np.nanmedian(det['one_sd'])):.1f} twin "
                    "standard deviations, would go unseen)")
    return head + ": " + "; ".join(said)


def disagreement(d: Diagnosis) -> str | None:
    """One sentence where some measures call the model less collapsed than at initialisation and others more:
    each measure by the direction of most of its flagged layers (its layers named unless it is every layer), and
    the measures that go both ways; None where they agree (or nothing is flagged)."""
    if not d.twins:
        return None
    groups: dict[str, list[str]] = {"less": [], "more": [], "both": []}
    for m in d.measures:
        dirs = _directions(d, m)
        if "more" not in dirs or not (dirs["more"].size or dirs["less"].size):
            continue
        total = int(np.isfinite(d.model.estimate[m]).sum())
        label = MEASURES[m][0]
        if dirs["more"].size and dirs["less"].size:
            groups["both"].append(label)
            continue
        way = "more" if dirs["more"].size else "less"
        where = layers_text(dirs[way], total)
        groups[way].append(label if where == "every layer" else f"{label} ({where})")
    if not (groups["more"] and groups["less"]) and not groups["both"]:
        return None

    def listed(items: list[str]) -> str:
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]

    parts = []
    if groups["less"]:
        parts.append(f"less collapsed than at initialisation by {listed(groups['less'])}")
    if groups["more"]:
        parts.append(f"more collapsed by {listed(groups['more'])}")
    if groups["both"]:
        parts.append(f"{listed(groups['both'])} {'goes' if len(groups['both']) == 1 else 'go'} both ways across "
                     "layers")
    return "The measures disagree: " + "; ".join(parts) + "."


def headline(d: Diagnosis) -> str:
    """What was compared, how many cells are flagged, and what the run could have seen."""
    k = len(d.twins)
    if not k:
        return "No untrained twins were measured (--twins 0), so nothing is compared."
    if k == 1:
        return ("One untrained twin was measured: its spread cannot be measured, so the comparison is not "
                "interpretable and no cell is flagged (it says neither that the model differs nor that it does not).")
    flagged = sum(int(d.differs(m).sum()) for m in d.measures)
    head = (f"The model differs from its {k} untrained twins in {flagged} of {d.cells} (layer, measure) cells. "
            "A cell is flagged where the model is unlike a new draw from its twins (their spread and the probe's "
            f"sampling), at a false-discovery rate of {d.alpha:.0%} over all {d.cells} cells: where the model is "
            f"no different from a random one, the chance of any flag is about {d.alpha:.0%}.")
    return head + " " + power_line(d)


def power_line(d: Diagnosis) -> str:
    p = d.power()
    if p is None:
        return ""
    return (f"Power: the smallest shift this run flags is about {p['one_sd']:.1f} twin standard deviations in a cell "
            f"that moves alone, {p['all_sd']:.1f} where every cell moves (medians over the cells); a smaller change "
            "reads as none, so 0 flagged cells means no change larger than that, not no change.")


__all__ = ["measure_line", "disagreement", "headline", "power_line", "layers_text", "span"]
