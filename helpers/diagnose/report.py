"""The report of a diagnosis: one self-contained HTML page (figures embedded as PNG) that opens with what the
model does differently from its untrained twins, and the JSON of every number and of how to rerun it, written
whole or not at all."""

from __future__ import annotations

import base64
import html
import io
import json
import time
from pathlib import Path

import numpy as np

from ..machinery.results import write_atomic
from .checks import check_out, write_pair
from .compare import Record, placement, placement_html
from .measures import COLLAPSE_SIGN, MEASURES
from .run import Diagnosis
from .verdict import disagreement, headline


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def curves_figure(d: Diagnosis, measures: list[str] | None = None, ncols: int = 4):
    """Per-layer curves of every measure: the model with its 95 % interval over the inputs, the untrained twins'
    mean with the twin test's 95 % prediction interval for a new draw from them (`Diagnosis.curve(m, "twin")`);
    a layer where the model differs from its twins (`Diagnosis.differs`) is marked with a dot on the model's
    curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = measures or d.measures
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.5 * nrows), squeeze=False)
    x = np.arange(d.layers)
    k = len(d.twins)
    twin_label = f"untrained twins ({k}): mean and 95 % prediction band" if k > 1 else "untrained twin"
    for ax, m in zip(axes.flat, names, strict=False):
        for which, colour in (("twin", "0.55"), ("model", "C0")):
            if which == "twin" and not d.twins:
                continue
            c = d.curve(m, which)
            ax.plot(x, c["estimate"], color=colour, lw=1.6, label=twin_label if which == "twin" else "model")
            ax.fill_between(x, c["low"], c["high"], color=colour, alpha=0.25, lw=0)
        if d.twins:
            diff = d.differs(m)
            est = d.model.estimate[m]
            ax.plot(x[diff], est[diff], "o", color="C3", ms=3.5, label="differs from the twins")
        ax.set_title(MEASURES[m][0], fontsize=10)
        ax.set_xlabel("layer (0 = embeddings)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=9, frameon=False, bbox_to_anchor=(0.5, 1.02))
    fig.tight_layout()
    return fig


def heads_figure(d: Diagnosis):
    """cos(q̄, k̄) of every head and block, model (and the first twin) as heat maps on one labelled colour
    scale."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    panels = [("model", d.model.qk_heads)]
    if d.twin is not None and d.twin.qk_heads is not None:
        panels.append((f"untrained twin (seed {d.meta['seed']})", d.twin.qk_heads))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels) + 0.8, 3.0), squeeze=False)
    for ax, (title, h) in zip(axes[0], panels, strict=True):
        im = ax.imshow(h[1:].T, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                       extent=(0.5, h.shape[0] - 0.5, h.shape[1] - 0.5, -0.5))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("block", fontsize=8)
        ax.set_ylabel("head", fontsize=8)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))         # blocks and heads are whole numbers
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    bar = fig.colorbar(im, ax=axes[0].tolist(), shrink=0.85)
    bar.set_label("cos(mean query, mean key) of the head\n(−1 opposite, 0 orthogonal, +1 aligned)", fontsize=8)
    return fig


def summary_html(d: Diagnosis) -> str:
    """The report's first lines: the headline (cells flagged, the rule, the run's power), one verdict line per
    measure with its numbers, and a sentence where the measures disagree on the direction (`verdict`)."""
    esc = html.escape
    if not d.twins:
        return f"<p>{esc(headline(d))}</p>"
    rows = [f"<li>{esc(r['verdict'])}</li>" for r in d.summary()]
    split = disagreement(d)
    return (f"<p><b>{esc(headline(d))}</b></p>\n<ul class=\"verdicts\">\n" + "\n".join(rows) + "</ul>\n"
            + (f"<p><b>{esc(split)}</b></p>\n" if split else "") + power_table(d))


def power_table(d: Diagnosis) -> str:
    """Per measure, the smallest shift from the twins' mean this run flags (`Diagnosis.detectable`, the median
    over layers), in the measure's units and in twin standard deviations, for a cell that moves alone and where
    every cell moves."""
    from .verdict import num_text

    if not d.twins:
        return ""
    esc = html.escape
    rows = []
    for m in d.measures:
        det = d.detectable(m)
        med = {k: float(np.nanmedian(v)) if np.isfinite(v).any() else float("nan") for k, v in det.items()}
        rows.append(f"<tr><td>{esc(MEASURES[m][0])}</td><td>{num_text(med['one'])}</td><td>{med['one_sd']:.1f}</td>"
                    f"<td>{num_text(med['all'])}</td><td>{med['all_sd']:.1f}</td></tr>")
    return ('<table class="power"><tr><th>smallest shift flagged (median over layers)</th><th>one cell alone</th>'
            "<th>in twin SDs</th><th>every cell</th><th>in twin SDs</th></tr>\n" + "\n".join(rows) + "</table>\n")


def differs_grid(d: Diagnosis) -> str:
    """Measures × layers: ▲ where the model lies above its twins by the rule, ▼ below, · within them; red
    where that is more collapsed, blue where less."""
    if not d.twins:
        return "<p>No twins measured.</p>"
    esc = html.escape
    head = "".join(f"<th>{i}</th>" for i in range(d.layers))
    rows = []
    for m in d.measures:
        c = d.curve(m, "difference")
        sign = COLLAPSE_SIGN.get(m, 0)
        cells = []
        for i, diff in enumerate(d.differs(m)):
            if not np.isfinite(c["estimate"][i]):
                cells.append("<td></td>")
            elif not diff:
                cells.append('<td class="same">·</td>')
            else:
                up = bool(c["estimate"][i] > 0)
                cls = "" if not sign else ("more" if up == (sign > 0) else "less")
                cells.append(f'<td class="{cls}">{"▲" if up else "▼"}</td>')
        rows.append(f"<tr><td>{esc(MEASURES[m][0])}</td>{''.join(cells)}</tr>")
    return ('<table class="grid"><tr><th>measure / layer</th>' + head + "</tr>\n" + "\n".join(rows) + "</table>\n"
            '<p class="small">▲ above the twins, ▼ below, · within them; <span class="more">red</span>: more '
            'collapsed than the twins, <span class="less">blue</span>: less collapsed (by the measure\'s direction '
            "of collapse); layer 0 is the embeddings.</p>")


def isoscore_note(d: Diagnosis) -> str:
    """How IsoScore relates to the participation ratio: IsoScore = (PR − 1)/(d − 1) for the covariance's
    eigenvalues (an identity of its definition), checked on the model's layers."""
    iso = d.model.isoscore
    if iso is None or np.isnan(iso).all():
        return d.skipped.get("isoscore", "IsoScore not computed")
    pred = (d.model.estimate["pr"] - 1) / (np.array(d.model.dims) - 1)
    gap = float(np.nanmax(np.abs(iso - pred)))
    return (f"IsoScore (the isoscore package) per layer: {', '.join(f'{v:.4f}' for v in iso)}. It is the "
            f"participation ratio rescaled, (PR − 1)/(d − 1): largest gap from that identity over the layers "
            f"{gap:.1e}. So it carries the same information as the centred cloud's participation ratio, and none "
            "of the mean's (it is computed on the covariance: a common drift does not change it).")


def _weights(meta: dict) -> str:
    """Where the weights came from: the hub id and the commit it resolved to, or the files' SHA-256 (the JSON
    keeps them all)."""
    w = meta.get("weights") or {}
    esc = html.escape
    if "hub_id" in w:
        return (f"hub id <code>{esc(str(w['hub_id']))}</code>, revision <code>{esc(str(w['revision']))}</code> "
                f"resolved to commit <code>{esc(str(w.get('resolved_commit')))}</code>")
    files = w.get("sha256", {})
    first = ", ".join(f"{esc(k)} <code>{v[:16]}…</code>" for k, v in list(files.items())[:2])
    more = f" and {len(files) - 2} more" if len(files) > 2 else ""
    pk = f"; packages {esc(', '.join(w['packages']))}" if w.get("packages") else ""
    return f"weights read from disk, SHA-256: {first}{more}{pk}"


def curves_caption(d: Diagnosis) -> str:
    """The curves' caption; without twins it speaks of the model alone."""
    model = "Blue: the model with its 95 % interval over the probe's inputs."
    if not d.twins:
        return model
    return (model + " Grey: the untrained twins' mean and the twin test's 95 % prediction interval for a new draw "
            "from the twins (their spread and the probe's), read at one layer alone: the model lies outside it "
            "where that cell's p-value is below 5 %. A red dot marks a layer where the model differs from its twins "
            f"by the summary's rule, a false-discovery rate over all {d.cells} cells at once, which asks for more "
            "than leaving the band.")


def render_html(d: Diagnosis) -> str:
    meta = d.meta
    esc = html.escape
    curves = _png(curves_figure(d))
    heads = (f'<img alt="per-head q/k alignment" src="data:image/png;base64,{_png(heads_figure(d))}">'
             if d.model.qk_heads is not None else "")
    skipped = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in d.skipped.items())
    notes = "".join(f"<li>{esc(n)}</li>" for n in d.notes)
    tw = meta.get("twins") or {}
    twins = ((f"{tw['count']} untrained twin{'s' if tw['count'] > 1 else ''} (seeds "
              f"{', '.join(map(str, tw['seeds']))}): {esc(tw['what'])}. Rule: {esc(tw['rule'])}.") if tw else
             "no untrained twins.")
    git = meta.get("git") or {}
    commit = (git.get("commit") or "not a git checkout")[:12] + (" (uncommitted changes)" if git.get("dirty") else "")
    secs = meta.get("seconds") or {}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tokuni diagnose {esc(meta['model'])}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;font-size:14px}}td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}}
table.grid td,table.grid th{{padding:2px 4px;text-align:center;font-size:13px}}
table.grid td:first-child{{text-align:left}}
.more{{color:#c0392b;font-weight:bold}}.less{{color:#2471a3;font-weight:bold}}.same{{color:#aaa}}
.small{{font-size:13px;color:#555}}img{{max-width:100%}}code{{background:#f4f4f4;padding:1px 4px}}</style></head><body>
<h1>{esc(meta['model'])}: layer by layer{", against its untrained twins" if d.twins else ""}</h1>
<p>{esc(meta['description'])}. {esc(meta['modality'])} model, {len(meta['layer_names'])} layers (embeddings
first), vectors: {esc(meta['units'])}.</p>
<h2>Summary</h2>
{summary_html(d)}
<h2>Every measure per layer</h2>
<p class="small">{curves_caption(d)}</p>
<img alt="per-layer curves" src="data:image/png;base64,{curves}">
{"<h2>Where the model differs from its twins, layer by layer</h2>" + differs_grid(d) if d.twins else ""}
{"<h2>Mean query against mean key, per head</h2>" + heads if heads else ""}
<h2>Among the book's reference models</h2>
{placement_html(placement(Record(d.to_json(), "")))}
<h2>IsoScore beside the book's measures</h2><p>{esc(isoscore_note(d))}</p>
{"<h2>Skipped</h2><ul>" + skipped + "</ul>" if skipped else ""}
{"<h2>Notes</h2><ul>" + notes + "</ul>" if notes else ""}
<h2>What was run</h2>
<p class="small">Probe: {esc(meta['probe']['description'])} (SHA-256 {esc(meta['probe']['sha256'][:16])}…);
{esc(meta['truncation']['rule'])} (max_tokens {meta['truncation']['max_tokens']}). Intervals: 95 % bootstrap over
the probe's inputs ({meta['draws']} draws, seed {meta['seed']}), the same draws for the model and every twin.
Twins: {twins} Weights: {_weights(meta)}.</p>
<p class="small">Command: <code>{esc(meta['command'])}</code>; tokuni {esc(meta['tool_version'])}, commit
{esc(commit)}; {esc(meta['written_at'] or '')}; {secs.get('diagnose_wall')} s ({secs.get('diagnose_cpu')} CPU-s) on
{esc(meta['device'])}; versions: {esc(', '.join(f'{k} {v}' for k, v in meta['versions'].items()))}.
Every number, and the arguments that rerun it: the JSON file beside this page.</p>
</body></html>
"""


def record(d: Diagnosis) -> dict:
    """The JSON record: `Diagnosis.to_json` with the process's CPU time up to now."""
    rec = d.to_json()
    rec["seconds"] = {**(rec.get("seconds") or {}), "process_cpu": round(time.process_time(), 1)}
    return rec


def json_text(d: Diagnosis) -> str:
    return json.dumps(record(d), indent=1, ensure_ascii=False) + "\n"


def write_json(d: Diagnosis, out: str | Path) -> Path:
    """Write `<out>.json` alone (atomically; the folder made if needed)."""
    out = Path(out)
    check_out(out)
    json_path = out.with_name(out.name + ".json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_path, json_text(d))
    json_path.chmod(0o644)
    return json_path


def write_report(d: Diagnosis, out: str | Path) -> tuple[Path, Path]:
    """Write `<out>.html` and `<out>.json` (the folder made if needed; `checks.check_out` first). Both are
    rendered in memory and then written atomically, so a failure or an interrupt leaves neither (or the previous
    pair) behind, never half a file. The JSON records the process's CPU time up to the writing."""
    import matplotlib.pyplot as plt

    out = Path(out)
    check_out(out)
    page = render_html(d)
    plt.close("all")
    return write_pair(out, page, json_text(d))


__all__ = ["write_report", "write_json", "json_text", "record", "power_table",
           "render_html", "curves_figure", "heads_figure", "isoscore_note", "summary_html",
           "differs_grid"]
