"""One seaborn theme, the recurring figure types of the book, and publishing to the page: numbers and
figures glued for myst-nb (`{glue:text}` / `{glue:figure}`), tables formatted for reading."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from pandas.io.formats.style import Styler  # jinja2, which it needs, comes with torch


def set_theme() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind", font_scale=1.0)
    plt.rcParams.update({"figure.dpi": 120, "savefig.dpi": 150, "axes.titlesize": 11, "figure.autolayout": True,
                         "figure.figsize": (10, 4)})


def _paste():
    """myst-nb's `glue` (the book build); None where myst-nb is not installed: a chapter's notebook on
    Colab or in a fresh venv, where the `{glue:...}` roles are not rendered anyway."""
    try:
        from myst_nb import glue
    except ImportError:
        return None
    return glue


def publish(values: Mapping[str, object]) -> None:
    """Hand every value to myst-nb under its key, for the chapter's `{glue:text}` roles (not displayed;
    without myst-nb, nothing to do). A chapter calls it with one literal dict whose keys are the full keys
    the `.md` uses (`publish({"vit-steps": …, …})`), so `grep` finds where a number comes from
    (`tests/test_page_keys.py` checks it)."""
    paste = _paste()
    if paste is None:
        return
    for key, value in values.items():
        # a NumPy scalar as a Python number: its text is `77.18`, not `np.float64(77.18)`, which a role's
        # format (`{glue:text}`key:.2f``) cannot read and which would be printed as it is
        paste(key, value.item() if isinstance(value, np.generic) else value, display=False)


#: the figures this run drew, by name: what `show` displays in a chapter's generated notebook
FIGURES: dict[str, plt.Figure] = {}

#: the width a chapter shows a figure at in a 1280 px window (px; its text column less the figure's margins), and
#: the smallest text a figure may show there: a figure wider than that is shown shrunk to it, and its text with it
COLUMN_PX = 672
MIN_TEXT_PX = 11.0
#: the PNG text chunk in which a glued figure records its smallest text, in px of the image; the page check reads
#: it and scales it by how much the page shrinks the image
TEXT_KEY = "Smallest text px"


def _drawn(fig: plt.Figure, **savefig) -> tuple[bytes, list[float]]:
    """`fig` as PNG bytes (at its own dpi, cropped to what is drawn, as a notebook shows it), and the size in pt
    of every non-empty text drawn into it (tick labels, titles, legends, annotations; what lies outside the view
    is not drawn and not counted)."""
    import io

    from matplotlib.backends.backend_agg import RendererAgg

    sizes: list[float] = []
    draw_text = RendererAgg.draw_text

    def recording(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if str(s).strip():
            sizes.append(float(prop.get_size_in_points()))
        return draw_text(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    buf = io.BytesIO()
    RendererAgg.draw_text = recording
    try:
        fig.savefig(buf, format="png", dpi=fig.dpi, bbox_inches="tight", **savefig)
    finally:
        RendererAgg.draw_text = draw_text
    return buf.getvalue(), sizes


def _png_width(png: bytes) -> int:
    return int.from_bytes(png[16:20], "big")   # the IHDR chunk's width, right after the signature


def _legible(fig: plt.Figure, column: float, smallest: float) -> tuple[bytes, list[float]]:
    """`legible`'s work: the figure's PNG and text sizes as last drawn, after its text was raised."""
    from matplotlib.text import Text

    png, sizes = _drawn(fig)
    for _ in range(4):    # a larger text widens the figure a little (its margins), which shrinks it a little more
        scale = min(1.0, column / _png_width(png))
        need = smallest / scale * 72 / fig.dpi          # pt
        if min(sizes, default=math.inf) >= need - 0.01:
            break
        need = math.ceil(need * 10) / 10
        for ax in fig.axes:
            for which in ("major", "minor"):
                for axis, labels in (("x", ax.xaxis.get_ticklabels(which=which)),
                                     ("y", ax.yaxis.get_ticklabels(which=which))):
                    if labels and min(t.get_fontsize() for t in labels) < need:
                        ax.tick_params(axis=axis, which=which, labelsize=need)
        for t in fig.findobj(Text):
            if t.get_fontsize() < need:
                t.set_fontsize(need)
        if fig.get_layout_engine() is None and fig.axes:
            fig.tight_layout()
        png, sizes = _drawn(fig)
    return png, sizes


def legible(fig: plt.Figure, column: float = COLUMN_PX, smallest: float = MIN_TEXT_PX) -> plt.Figure:
    """Raise every text of `fig` that would show smaller than `smallest` px in a `column` px text column to that
    size (texts already larger keep theirs), and lay the figure out again: a wide figure is shrunk to the column,
    so its text must be drawn larger than a narrow one's. Returns the figure."""
    _legible(fig, column, smallest)
    return fig


def _with_text(png: bytes, key: str, value: str) -> bytes:
    """`png` with a tEXt chunk `key`: `value` after its header (what `savefig(metadata=...)` writes, without
    drawing the figure again)."""
    import struct
    import zlib

    body = key.encode("latin-1") + b"\0" + value.encode("latin-1")
    chunk = struct.pack(">I", len(body)) + b"tEXt" + body + struct.pack(">I", zlib.crc32(b"tEXt" + body))
    end = 8 + 8 + int.from_bytes(png[8:12], "big") + 4          # the signature, then the IHDR chunk
    return png[:end] + chunk + png[end:]


def figure(name: str, fig: plt.Figure) -> plt.Figure:
    """Glue `fig` as `name` for a numbered, captioned `{glue:figure}` directive, keep it for `show(name)`,
    and close it (so it is not drawn where it was made). Its text is first made `legible` at the text column's
    width, and the PNG glued records its smallest text (`TEXT_KEY`) for the page check. Returns the figure."""
    FIGURES[name] = fig
    png, sizes = _legible(fig, COLUMN_PX, MIN_TEXT_PX)
    paste = _paste()
    if paste is not None:
        from IPython.display import Image

        png = _with_text(png, TEXT_KEY, f"{min(sizes, default=0.0) * fig.dpi / 72:.2f}")
        paste(name, Image(data=png, format="png"), display=False)
    plt.close(fig)
    return fig


def show(name: str) -> None:
    """Display the figure this run drew as `name`: a chapter's generated notebook (Colab) has this cell
    where the book's page has the `{glue:figure}`, with the caption beneath."""
    from IPython.display import display

    if name not in FIGURES:     # a scale that does not draw it (or the cells above not run yet)
        print(f"(no figure {name!r} in this run: run the cells above; at some scales it is not drawn)")
        return
    display(FIGURES[name])


def fmt_number(v: object, digits: int = 3) -> str:
    """A number for reading: fixed `digits` decimals, scientific below 0.01 and from 1e5 (5e-05, not 0.000)."""
    if isinstance(v, bool | np.bool_) or not isinstance(v, int | float | np.integer | np.floating):
        return str(v)
    if isinstance(v, int | np.integer):
        return f"{v:,}"
    if not np.isfinite(v):
        return "–"
    if v != 0 and (abs(v) < 1e-2 or abs(v) >= 1e5):
        return f"{v:.{max(digits - 1, 1)}e}"
    return f"{v:.{digits}f}"


def plural(n: int, noun: str, plural_form: str | None = None) -> str:
    """'one seed', '3 seeds': a count with its noun, for figure titles and glued prose (never "seed(s)")."""
    n = int(n)
    if n == 1:
        return f"one {noun}"
    return f"{n:,} {plural_form or noun + 's'}"


def seeds_text(n: int) -> str:
    """'one seed' / '3 seeds'."""
    return plural(n, "seed")


def mean_sd(mean: float, sd: float, digits: int = 3) -> str:
    """`mean ± sd` as the book's tables print it; the mean alone when sd is not finite (one seed)."""
    return f"{mean:.{digits}f} ± {sd:.{digits}f}" if np.isfinite(sd) else f"{mean:.{digits}f}"


#: the box every table of the book is shown in: it scrolls sideways where the table is wider than the page
#: (`_assets/book.css` styles `.table-scroll`; the inline style holds where that file is absent, on Colab)
SCROLL_BOX = '<div class="table-scroll" style="overflow-x:auto;max-width:100%">{}</div>'


def _whole(col: pd.Series) -> bool:
    """A float column whose values are all whole numbers (not all zero): counts that a missing value or a
    mixed frame turned into floats, to be printed as integers ("768", not "768.000")."""
    if not pd.api.types.is_float_dtype(col.dtype):
        return False
    v = col.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return v.size > 0 and bool(np.all(v == np.round(v))) and bool(np.any(v != 0)) and bool(np.all(np.abs(v) < 2**53))


def _cell(digits: int, whole: bool = False):
    def fmt(v: object) -> str:
        if whole and isinstance(v, float | np.floating) and np.isfinite(v):
            return fmt_number(int(v))
        return fmt_number(v, digits)

    return fmt


class Table(Styler):
    """A styled table that the notebook shows in a sideways-scrolling box (`SCROLL_BOX`): every table of the
    book fits its text column or scrolls; `to_html()` is the bare table."""

    def _repr_html_(self) -> str:
        return SCROLL_BOX.format(self.to_html())


#: the longest heading of one word a compact table keeps whole
COMPACT_NOWRAP = 24


#: a number as the tables print it: 2.65e-08, −0.93, 1,024, 63 %
_NUMBER = re.compile(r"[+\-−]?[\d.,]+(?:e[+\-]?\d+)?\s?%?")


def _whole_number(text: str) -> str:
    """CSS that keeps a number (2.65e-08, −0.93) on one line instead of breaking it at its hyphen; '' for other
    text, which wraps as it must."""
    return "white-space: nowrap" if _NUMBER.fullmatch(text.strip()) else ""


def _whole_word(text: str) -> str:
    """CSS that keeps a heading of one word ("STS-B", "reproduced") on one line; '' for a heading with spaces."""
    return "white-space: nowrap" if " " not in text.strip() and len(text) <= COMPACT_NOWRAP else ""


def table(df: pd.DataFrame, digits: int = 3, index: bool = False, compact: bool = False) -> Table:
    """A DataFrame styled for reading (`fmt_number` on every cell; a float column of whole numbers as
    integers), without its index unless asked, shown in a box that scrolls sideways on a narrow page.
    `compact`: for a table of many narrow columns, less room between columns, its numbers and its one-word headings
    kept whole, so that it fits the text column without breaking a number at its sign or exponent."""
    sty = Table(df).format(_cell(digits))
    if df.columns.is_unique:
        for name in df.columns:
            if _whole(df[name]):
                sty = sty.format(_cell(digits, whole=True), subset=[name])
    if compact:
        sty = sty.set_table_styles([{"selector": "td, th", "props": [("padding", "0.25em 0.35em")]}], overwrite=False)
        sty = sty.map(lambda v: _whole_number(fmt_number(v, digits)))
        sty = sty.map_index(lambda v: _whole_word(str(v)), axis="columns")

    return sty if index else sty.hide(axis="index")


def scroll(styler):
    """A styled table in a box that scrolls sideways on a narrow page instead of running off it (its key
    columns come first)."""
    from IPython.display import HTML

    return HTML(SCROLL_BOX.format(styler.to_html()))


def _np(a) -> np.ndarray:
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def layer_curves(ax: plt.Axes, curves: Mapping[str, np.ndarray], x0: int = 0, spread: str = "sd",
                 ylabel: str = "", xlabel: str = "block", logy: bool = False, title: str = "",
                 markers: bool = True, x: np.ndarray | None = None, symlog_x: float | None = None) -> plt.Axes:
    """Per-layer (or per-setting) curves: each value is (trials, points) — mean line with a ±1 sd
    (`spread="sd"`) or min–max (`"minmax"`) band — or (points,) for a single curve. `x` gives the
    abscissae (default x0, x0+1, …); `symlog_x` a symlog x-axis with that linear threshold."""
    xs = None if x is None else _np(x)
    for i, (label, arr) in enumerate(curves.items()):
        a = _np(arr)
        color = sns.color_palette()[i % 10]
        if a.ndim == 1:
            x = xs if xs is not None else np.arange(x0, x0 + a.shape[0])
            ax.plot(x, a, label=label, color=color, marker="o" if markers else None, ms=3)
            continue
        x = xs if xs is not None else np.arange(x0, x0 + a.shape[1])
        m = np.nanmean(a, 0)
        sd = np.nanstd(a, 0)
        lo, hi = (m - sd, m + sd) if spread == "sd" else (np.nanmin(a, 0), np.nanmax(a, 0))
        ax.plot(x, m, label=label, color=color, marker="o" if markers else None, ms=3)
        ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)
    if logy:
        ax.set_yscale("log")
    if symlog_x is not None:
        ax.set_xscale("symlog", linthresh=symlog_x)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    return ax


def legend_entries(axes) -> tuple[list, list[str]]:
    """The legend entries of every panel, each label once (first panel first): one legend for a whole figure."""
    handles, labels = [], []
    for ax in np.atleast_1d(axes):
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def trend_panel(ax: plt.Axes, trend, x: Sequence[float] = (), units: np.ndarray | None = None, colour: str = "C0",
                mean_label: str = "mean over seeds", unit_label: str = "each seed",
                band_label: str = "band at the paper's steps", logx: bool = True) -> plt.Axes:
    """A measured trend carried to the paper's point (`core.scale.Extrapolation`, or None where there is none): each
    unit's value at every point of `x` (`units`, units × points; faint), the means the fit took, each form's curve
    from the first point to the paper's (solid for the primary form, dashed after), and the band there (error bar)."""
    xs = np.asarray(x, float)
    for i, row in enumerate(np.empty((0, xs.size)) if units is None else np.asarray(units, float)):
        ax.plot(xs, row, "o", color=colour, alpha=0.3, ms=4, label=unit_label if i == 0 else None)
    if trend is not None:
        ax.plot(trend.x, trend.y, "o", color=colour, ms=6, label=mean_label)
        grid = np.geomspace(min(trend.x), trend.target, 80) if logx else np.linspace(min(trend.x), trend.target, 80)
        for fit, ls in zip(trend.fits, ("-", "--", ":"), strict=False):
            ax.plot(grid, fit.value(grid), ls, color=colour, lw=1.2, label=f"{fit.form} form")
        b = trend.band
        ax.errorbar([trend.target], [b.estimate], yerr=[[b.estimate - b.low], [b.high - b.estimate]], fmt="s",
                    color="black", capsize=4, ms=5, label=band_label)
    if logx:
        ax.set_xscale("log")
    return ax


def spectrum_cdfs(ax: plt.Axes, values_by_layer: Sequence[tuple[str, np.ndarray]], title: str = "",
                  xlabel: str = "normalised singular value x", logx: bool = False) -> plt.Axes:
    """Empirical CDFs F(x) = Pr(λ ≤ x) of normalised singular values, one curve per layer
    (Yan et al. Figs. 1-2), coloured from light (early) to dark (late)."""
    colors = sns.color_palette("viridis_r", len(values_by_layer))
    for (label, vals), c in zip(values_by_layer, colors, strict=True):
        v = np.sort(_np(vals).ravel())
        ax.plot(v, np.arange(1, v.size + 1) / v.size, label=label, color=c, lw=1.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("F(x)")
    if logx:
        ax.set_xscale("log")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


# --- findings -------------------------------------------------------------------------------------

#: how each verdict is shown (the rule itself is `helpers.core.findings.verdict`)
VERDICT_COLOURS = {"reproduced": "#1b7837", "direction only": "#7fbc41", "not detected": "#8c8c8c",
                   "inconclusive": "#bf812d", "contradicted": "#c51b7d", "not testable here": "#4393c3",
                   "not tested here": "#6c6c6c", "mixed": "#762a83", "on one model": "#b35806",
                   "inconclusive at the paper's scale": "#bf812d", "no trend to the paper's scale": "#6c6c6c"}
#: how a finding's kind is said beneath its verdict (a paper's claim says nothing)
KIND_TEXT = {"claim": "", "control": "a control of the method (not counted)", "extension": "the book's own question"}


def verdict_html(verdict: str, text: str | None = None) -> str:
    """A verdict in its colour; `text` (default: the verdict) is what is written, e.g. with its setting."""
    return f'<span style="color:{VERDICT_COLOURS[verdict]};font-weight:600">{text or verdict}</span>'


def findings_table(findings):
    """A chapter's findings as the table its first output cell shows, a row per finding in four columns that fit a
    page: the claim (paper, where and kind beneath, and what is measured), said once for the rows that test it alike;
    the verdict with the setting it was reached at, which names the model it was tested on (and what set the verdict
    aside, or why the test lies outside its claim's scope, beneath); the effect with its interval; a link to the
    section that shows it. The same records the findings page collects."""
    from IPython.display import HTML

    from ..core.findings import PAPERS
    from ..experiments.findings import corrected

    findings = list(findings)
    if not findings:
        return pd.DataFrame()
    df = findings_frame(corrected(findings), local=True)
    small = '<br><small style="color:#555">{}</small>'.format

    def said_once(f, row) -> tuple:
        """What the claim cell says, shared by consecutive findings that test one claim alike."""
        return (f.paper, f.where, f.claim, row["kind"], f.quantity, row["reference"])

    keys = [said_once(f, row) for f, (_, row) in zip(findings, df.iterrows(), strict=True)]
    span = [0] * len(keys)          # rows the claim cell spans, on its first row; 0 on the rows it covers
    i = 0
    while i < len(keys):
        j = i
        while j + 1 < len(keys) and keys[j + 1] == keys[i]:
            j += 1
        span[i] = j - i + 1
        i = j + 1
    rows, said = [], set()
    for f, (_, row), n in zip(findings, df.iterrows(), span, strict=True):
        cells = []
        if n:
            where = f"{PAPERS[f.paper].split(' (')[0]}, {f.where}" + (f"; {row['kind']}" if row["kind"] else "")
            claim = (f"{row['claim']}{small(where)}{small('measured: ' + f.quantity)}"
                     f"{small('reference ' + row['reference'])}")
            rowspan = f' rowspan="{n}"' if n > 1 else ""
            cells.append(f'<td class="claim"{rowspan}>{claim}</td>')
        setting = row["setting"] or ("" if f.verdict == "not testable here" else "at the paper's setting")
        notes = [x if x not in said or ": " not in x else x.split(": ", 1)[0] + " (as above)" for x in row["notes"]]
        said.update(row["notes"])
        verdict = row["verdict"] + (small(setting) if setting else "") + "".join(small(x) for x in notes)
        effect = row["effect"].split(": ", 1)[1] if row["effect"].startswith(f.quantity + ": ") else row["effect"]
        cells += [f'<td class="verdict">{verdict}</td>', f'<td class="effect">{effect}</td>',
                  f'<td class="link">{row["section"]}</td>']
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = ("<thead><tr><th>claim</th><th>verdict, and the model it was tested on</th>"
            "<th>effect [95 % interval]</th><th></th></tr></thead>")
    html = f'<table class="findings-table">{head}<tbody>{"".join(rows)}</tbody></table>'
    return HTML(SCROLL_BOX.format(html))


def findings_frame(findings, link_prefix: str = "", local: bool = False) -> pd.DataFrame:
    """The findings as a table: paper, where, claim, chapter (a link to the section), the effect with its
    interval, the verdict in words (`verdict`), the setting it was reached at (`setting`: "" at the paper's), what
    set the verdict aside or put the test outside its claim's scope (`notes`, a list), the kind, what was measured
    at which scale (`measured`; the scale alone in `scale`). `local`: the links point into the chapter's own page
    (`section`: "→")."""
    from ..core.findings import PAPERS

    rows = []
    for f in findings:
        href = f"{link_prefix}{f.chapter}.html" + (f"#{f.section}" if f.section else "")
        if local:
            href = f"#{f.section}" if f.section else ""
        verdict = verdict_html(f.verdict, f.verdict_words())
        notes = [n for n in (f.cannot_test, f.out_of_scope and f"outside the claim's scope: {f.out_of_scope}",
                             *f.flags()) if n]
        effect = f.effect_text() if f.effect is not None else f"needs {f.needs}: <code>{f.command}</code>"
        if f.corrected_text():
            effect += f"<br><small>read at the family's level: {f.corrected_text()}</small>"
        if f.excludes() and f.verdict in ("not detected", "inconclusive"):
            effect += f"<br><small>{f.excludes()}</small>"
        for name, iv in f.alternatives:
            effect += f"<br><small>{name}: {iv.text(f.digits)}</small>"
        for note in (f.standin and f"stand-in: {f.standin}", f.caveat):
            if note:
                effect += f"<br><small>{note}</small>"
        rows.append({"verdict": verdict, "setting": "" if f.verdict == "not testable here" else f.reduced,
                     "notes": notes, "paper": PAPERS[f.paper].split(" (")[0], "where": f.where,
                     "kind": KIND_TEXT[f.kind],
                     "claim": f.claim, "effect": f"{f.quantity}: {effect}",
                     "reference": f.reference_label + ("" if f.paper_value is None
                                                       else f"; paper {f.paper_value:+.{f.digits}f}"),
                     "measured": f"{f.measured} ({f.scale})" if f.scale else f.measured,
                     "scale": f.scale or f.measured,
                     "chapter": f'<a href="{href}">{f.chapter}</a>',
                     "section": f'<a href="{href}">→</a>' if href else ""})
    return pd.DataFrame(rows)
