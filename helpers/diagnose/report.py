"""The report of a diagnosis: one self-contained HTML page (figures embedded as PNG) and the JSON of every
number, written whole or not at all."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path

import numpy as np

from ..book.results import write_atomic
from .measures import MEASURES
from .run import Diagnosis


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def curves_figure(d: Diagnosis, measures: list[str] | None = None, ncols: int = 4):
    """Per-layer curves of every measure, the model against its untrained twin, with their 95 % intervals;
    a layer where the two differ beyond their intervals is marked with a dot on the model's curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = measures or d.measures
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 2.5 * nrows), squeeze=False)
    x = np.arange(d.layers)
    for ax, m in zip(axes.flat, names, strict=False):
        for which, colour in (("twin", "0.55"), ("model", "C0")):
            if which == "twin" and d.twin is None:
                continue
            c = d.curve(m, which)
            ax.plot(x, c["estimate"], color=colour, lw=1.6, label="untrained twin" if which == "twin" else "model")
            ax.fill_between(x, c["low"], c["high"], color=colour, alpha=0.25, lw=0)
        if d.twin is not None:
            diff = d.differs(m)
            est = d.model.estimate[m]
            ax.plot(x[diff], est[diff], "o", color="C3", ms=3.5, label="differs from twin")
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
    """cos(q̄, k̄) of every head and block, model (and twin) as heat maps."""
    import matplotlib.pyplot as plt

    panels = [("model", d.model.qk_heads)]
    if d.twin is not None and d.twin.qk_heads is not None:
        panels.append(("untrained twin", d.twin.qk_heads))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.0), squeeze=False)
    for ax, (title, h) in zip(axes[0], panels, strict=True):
        im = ax.imshow(h[1:].T, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                       extent=(0.5, h.shape[0] - 0.5, h.shape[1] - 0.5, -0.5))
        ax.set_title(f"cos(q̄, k̄) per head: {title}", fontsize=10)
        ax.set_xlabel("block", fontsize=8)
        ax.set_ylabel("head", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    return fig


def _differs_rows(d: Diagnosis) -> str:
    if d.twin is None:
        return "<tr><td colspan=4>no twin measured (--no-twin)</td></tr>"
    rows = []
    for m in d.measures:
        diff = d.differs(m)
        layers = [d.meta["layer_names"][i] for i in np.flatnonzero(diff)]
        rows.append(f"<tr><td>{html.escape(MEASURES[m][0])}</td><td>{html.escape(MEASURES[m][1])}</td>"
                    f"<td>{int(diff.sum())} of {int(np.isfinite(d.model.estimate[m]).sum())}</td>"
                    f"<td>{html.escape(', '.join(layers) or '—')}</td></tr>")
    return "\n".join(rows)


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


def _source(meta: dict) -> str:
    """Where the weights came from: the hub id and its commit, the weight package, or the folder (the JSON keeps
    the full path)."""
    src, rev = str(meta["source"]), str(meta["revision"])
    if Path(src).is_absolute() and rev != src:
        return f"weights <code>{html.escape(rev)}</code>"
    return f"source <code>{html.escape(src)}</code>" + (f", revision <code>{html.escape(rev)}</code>" if rev != src
                                                        else "")


def render_html(d: Diagnosis) -> str:
    meta = d.meta
    curves = _png(curves_figure(d))
    heads = f'<img alt="per-head q/k alignment" src="data:image/png;base64,{_png(heads_figure(d))}">' \
        if d.model.qk_heads is not None else ""
    skipped = "".join(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in d.skipped.items())
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in d.notes)
    esc = html.escape
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tokuni diagnose {esc(meta['model'])}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;font-size:14px}}td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left}}
img{{max-width:100%}}code{{background:#f4f4f4;padding:1px 4px}}</style></head><body>
<h1>{esc(meta['model'])}: layer by layer, against its untrained twin</h1>
<p>{esc(meta['description'])}<br>{_source(meta)}; {esc(meta['modality'])} model, {len(meta['layer_names'])} layers
(embeddings first), vectors: {esc(meta['units'])}.</p>
<p>Probe: {esc(meta['probe']['description'])} (sha256 {esc(meta['probe']['sha256_16'])}). Intervals: 95 %
bootstrap over the probe's inputs ({meta['draws']} draws, seed {meta['seed']}), the same draws for the model and
its twin, so a difference is paired. Twin: {esc(str(meta['twin']))}.</p>
<h2>Every measure per layer</h2>
<img alt="per-layer curves" src="data:image/png;base64,{curves}">
<h2>Where the model differs from its twin beyond the intervals</h2>
<table><tr><th>measure</th><th>what it is</th><th>layers that differ</th><th>which</th></tr>
{_differs_rows(d)}</table>
{"<h2>Mean query against mean key, per head</h2>" + heads if heads else ""}
<h2>IsoScore beside the book's measures</h2><p>{esc(isoscore_note(d))}</p>
{"<h2>Skipped</h2><ul>" + skipped + "</ul>" if skipped else ""}
{"<h2>Notes</h2><ul>" + notes + "</ul>" if notes else ""}
<p style="color:#666;font-size:13px">Command: <code>{esc(meta['command'])}</code>; {meta['seconds']} s on
{esc(meta['device'])}; versions: {esc(', '.join(f'{k} {v}' for k, v in meta['versions'].items()))}.
Every number: the JSON file beside this page.</p>
</body></html>
"""


def write_report(d: Diagnosis, out: str | Path) -> tuple[Path, Path]:
    """Write `<out>.html` and `<out>.json`. Both are rendered in memory first and then written atomically, so a
    failure leaves neither (or the previous pair) behind, never half a file."""
    import matplotlib.pyplot as plt

    out = Path(out)
    page = render_html(d)
    plt.close("all")
    data = json.dumps(d.to_json(), indent=1, ensure_ascii=False)
    html_path, json_path = out.with_name(out.name + ".html"), out.with_name(out.name + ".json")
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_path, data)
    try:
        write_atomic(html_path, page)
    except BaseException:
        json_path.unlink(missing_ok=True)
        raise
    for f in (html_path, json_path):
        f.chmod(0o644)                      # a report to share: readable like any other file written here
    return html_path, json_path


__all__ = ["write_report", "render_html", "curves_figure", "heads_figure", "isoscore_note"]
