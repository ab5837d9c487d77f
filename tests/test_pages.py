"""The browser check of the built book (scripts/check_pages.py) on small planted pages, and the table helpers
every chapter's tables go through (a scroll container around each, which a table must not need; whole numbers
printed as integers).

The planted pages are served locally and read by Chromium as the book's pages are (`make test-pages` runs the
check over the whole build). Without Debian's `chromium` or the `playwright` package the browser tests skip."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_pages", REPO_ROOT / "scripts" / "check_pages.py")
check_pages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_pages)

browser = pytest.mark.skipif(
    importlib.util.find_spec("playwright") is None or not os.path.exists(check_pages.CHROMIUM),
    reason="needs the playwright package (the test extra) and Chromium (apt-get install chromium)")

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; }} article.bd-article {{ width: 700px; margin-left: 200px; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 2px 8px; }}
</style></head><body><main><article class="bd-article">
<section id="top"><h1>A planted page</h1>
{body}
</section></article></main></body></html>"""

WIDE_TABLE = ("<table><caption>Twelve wide columns</caption><thead><tr>{}</tr></thead><tbody><tr>{}</tr></tbody>"
              "</table>").format("".join(f"<th>column number {i}</th>" for i in range(12)),
                                 "".join(f"<td>{i}.25</td>" for i in range(12)))
NARROW_TABLE = ("<table><caption>Three columns</caption><thead><tr><th>set</th><th>raw</th><th>SoftDecay</th></tr>"
                "</thead><tbody><tr><td>STS-B</td><td>0.25</td><td>0.50</td></tr></tbody></table>")
#: a 10 × 10 SVG image, drawn 1000 px wide
WIDE_IMAGE = ('<figure><img alt="plot" style="width:1000px;height:50px" src="data:image/svg+xml,%3Csvg '
              'xmlns=%27http://www.w3.org/2000/svg%27 width=%2710%27 height=%2710%27/%3E">'
              '<figcaption>A wide plot</figcaption></figure>')


def _site(tmp_path: Path, **pages: str) -> Path:
    for name, body in pages.items():
        (tmp_path / f"{name}.html").write_text(PAGE.format(body=body))
    return tmp_path


def _kinds(report: dict, page: str) -> list[str]:
    return [p["kind"] for p in report[f"{page}.html"]]


@browser
def test_clean_page_passes(tmp_path):
    site = _site(tmp_path, index='<p>Text with a <a href="other.html#results">link</a>.</p>'
                                  '<div style="overflow-x:auto">' + NARROW_TABLE + "</div>"
                                  '<details><summary>Show the table</summary>' + NARROW_TABLE + "</details>"
                                  '<table><tr><td>768</td><td>0.250</td></tr><tr><td>1,024</td><td>1.000</td></tr></table>',
                 other='<section id="results"><p>Results.</p></section>')
    report = check_pages.check_site(site)
    assert report == {"index.html": [], "other.html": []}, check_pages.format_report(report)


@browser
def test_overflowing_table_fails(tmp_path):
    report = check_pages.check_site(_site(tmp_path, index=WIDE_TABLE))
    assert _kinds(report, "index") == ["wide table"], check_pages.format_report(report)
    assert "Twelve wide columns" in report["index.html"][0]["what"]


@browser
def test_table_that_needs_its_scroll_box_fails(tmp_path):
    """A scroll box keeps a wide table from breaking the page, but a reader still scrolls sideways to read it:
    the page fails, and the report counts the table as scrolling."""
    site = _site(tmp_path, index='<div class="table-scroll" style="overflow-x:auto;max-width:100%">' + WIDE_TABLE
                                 + "</div>")
    report = check_pages.check_site(site)
    assert _kinds(report, "index") == ["scrolling table"], check_pages.format_report(report)
    assert "Twelve wide columns" in report["index.html"][0]["what"]
    assert check_pages.STATS[str(site.resolve())]["index.html"]["scrolling"] == 1


@browser
def test_tables_in_collapsed_blocks_are_opened_and_checked(tmp_path):
    """A table in a closed <details> (a dropdown, a hidden cell output) has no width until it is opened: the check
    opens every such block, so a wide or scrolling table inside one fails as it would outside."""
    closed = '<details class="hide above-input"><summary>Show the table</summary>{}</details>'
    site = _site(tmp_path, index=closed.format(WIDE_TABLE),
                 other=closed.format('<div style="overflow-x:auto">' + WIDE_TABLE + "</div>"))
    report = check_pages.check_site(site)
    assert _kinds(report, "index") == ["wide table"], check_pages.format_report(report)
    assert _kinds(report, "other") == ["scrolling table"], check_pages.format_report(report)
    assert check_pages.STATS[str(site.resolve())]["index.html"]["opened"] == 1


@browser
def test_a_page_taller_than_its_limit_fails_and_only_pages_with_a_limit_are_held_to_one(tmp_path):
    """The height is the page as a reader first sees it (collapsed blocks closed); only the pages named in the
    limits have one (the book's: the findings page and the STS chapter)."""
    tall = '<div style="height:5000px">a long list</div>'
    folded = '<details><summary>Show the list</summary><div style="height:5000px">a long list</div></details>'
    site = _site(tmp_path, index=tall, other=tall, folded=folded)
    report = check_pages.check_site(site, max_height={"index.html": 3000, "folded.html": 3000})
    assert _kinds(report, "index") == ["tall page"], check_pages.format_report(report)
    assert "3,000 px" in report["index.html"][0]["what"]
    assert report["other.html"] == [] and report["folded.html"] == [], check_pages.format_report(report)
    assert check_pages.STATS[str(site.resolve())]["folded.html"]["height"] < 3000
    assert list(check_pages.MAX_HEIGHT) == ["book/findings.html", "book/sts.html"]
    assert check_pages.MAX_HEIGHT["book/findings.html"] <= 14_000 and check_pages.MAX_HEIGHT["book/sts.html"] <= 20_000


@browser
def test_wide_figure_fails(tmp_path):
    report = check_pages.check_site(_site(tmp_path, index=WIDE_IMAGE))
    assert "wide figure" in _kinds(report, "index"), check_pages.format_report(report)


def _figure_png(tmp_path: Path, name: str, width_in: float, fontsize: float, fixed: bool = False) -> Path:
    """A chart drawn as `figures.common.figure` glues it (at 120 dpi, cropped, its smallest text recorded in the PNG);
    `fixed`: made legible at the text column's width first, as `common.figure` does."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.figures import common

    fig, ax = plt.subplots(figsize=(width_in, 3), dpi=120)
    ax.plot([0, 1, 2], [1, 3, 2], label="a planted curve")
    ax.set_xlabel("step", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ax.legend(fontsize=fontsize)
    if fixed:
        common.legible(fig)
    _, sizes = common._drawn(fig)
    png, _ = common._drawn(fig, metadata={common.TEXT_KEY: f"{min(sizes) * fig.dpi / 72:.2f}"})
    plt.close(fig)
    (tmp_path / name).write_bytes(png)
    return tmp_path / name


ALT = "Line chart of a planted curve against the step"
FIGURE = ('<figure id="fig-planted" style="margin:0 14px"><a class="reference internal" href="{src}">'
          '<img alt="{alt}" src="{src}" style="max-width:100%"></a><figcaption>A planted chart</figcaption></figure>')


@browser
def test_a_figure_shrunk_until_its_text_is_illegible_fails_and_the_same_made_legible_passes(tmp_path):
    """An 11-inch chart with 9 pt text is drawn about 1,100 px wide and shown in a 700 px column: its labels show
    at about 8 px. The same chart made legible (`figures.common.legible`: every text raised to what shows as
    11 px) passes; so does a chart as narrow as the column with the small text, which the page does not shrink."""
    _figure_png(tmp_path, "small.png", 11, 9)
    _figure_png(tmp_path, "fixed.png", 11, 9, fixed=True)
    _figure_png(tmp_path, "narrow.png", 4.5, 9)
    site = _site(tmp_path, index=FIGURE.format(src="small.png", alt=ALT),
                 fixed=FIGURE.format(src="fixed.png", alt=ALT),
                 narrow=FIGURE.format(src="narrow.png", alt=ALT))
    report = check_pages.check_site(site)
    assert _kinds(report, "index") == ["small figure text"], check_pages.format_report(report)
    assert "A planted chart" in report["index.html"][0]["what"]
    assert report["fixed.html"] == [] and report["narrow.html"] == [], check_pages.format_report(report)
    stats = check_pages.STATS[str(site.resolve())]
    assert stats["index.html"]["shrunk"] == 1 and stats["index.html"]["smallest_text"] < 11
    assert stats["fixed.html"]["smallest_text"] >= 11


@browser
def test_a_figure_without_alt_text_or_a_link_to_its_full_size_fails(tmp_path):
    """Alt text says what a figure shows: none, the file's path (what a glued figure gets by default) or a word or
    two fails; so does an image that does not link to its own full-size file. An image that records no text size
    fails where the page shrinks it more than 1.5 times."""
    _figure_png(tmp_path, "fig.png", 4.5, 11)
    bare = '<figure><img alt="{alt}" src="fig.png"><figcaption>A planted chart</figcaption></figure>'
    other = FIGURE.replace('href="{src}"', 'href="other.png"')
    (tmp_path / "other.png").write_bytes((tmp_path / "fig.png").read_bytes())
    site = _site(tmp_path, index=FIGURE.format(src="fig.png", alt=""),
                 path=FIGURE.format(src="fig.png", alt="../_images/fig.png"),
                 short=FIGURE.format(src="fig.png", alt="plot"), nolink=bare.format(alt=ALT),
                 wrong=other.format(src="fig.png", alt=ALT), good=FIGURE.format(src="fig.png", alt=ALT))
    report = check_pages.check_site(site)
    for page in ("index", "path", "short"):
        assert _kinds(report, page) == ["no alt text"], check_pages.format_report(report)
    assert _kinds(report, "nolink") == ["no full-size link"], check_pages.format_report(report)
    assert _kinds(report, "wrong") == ["no full-size link"], check_pages.format_report(report)
    assert report["good.html"] == [], check_pages.format_report(report)
    # a screenshot (no text size recorded) shown at a third of its width
    from PIL import Image

    Image.new("RGB", (2100, 300), "white").save(tmp_path / "shot.png")
    report = check_pages.check_site(_site(tmp_path, shot=FIGURE.format(src="shot.png", alt=ALT)), only=["shot"])
    assert _kinds(report, "shot") == ["shrunk figure"], check_pages.format_report(report)


def test_the_book_build_links_every_figure_to_its_full_size_image(tmp_path):
    """`helpers.machinery.sphinx_figures` (the book's Sphinx extension): a figure's image is wrapped in a link to its
    copy in `_images/`, which Sphinx itself does only for an image resized by an option."""
    from sphinx.application import Sphinx

    src = tmp_path / "src"
    src.mkdir()
    _figure_png(src, "chart.png", 4, 11)
    (src / "conf.py").write_text("extensions = ['helpers.machinery.sphinx_figures']\n")
    (src / "index.rst").write_text("Title\n=====\n\n.. figure:: chart.png\n   :alt: " + ALT + "\n\n   A caption.\n")
    app = Sphinx(str(src), str(src), str(tmp_path / "html"), str(tmp_path / "doctrees"), "html", status=None,
                 warning=None, freshenv=True)
    app.build()
    html = (tmp_path / "html" / "index.html").read_text()
    import re

    link = re.search(r'<a class="([^"]*)" href="([^"]+)"><img alt="Line chart', html)
    assert link and "figure-full-size" in link.group(1).split(), html[html.find("<figure"):][:400]
    assert link.group(2) == "_images/chart.png" and (tmp_path / "html" / "_images" / "chart.png").is_file()


@browser
def test_clipped_cell_fails(tmp_path):
    cell = '<td style="max-width:60px;overflow:hidden;white-space:nowrap">a long cell that is cut off</td>'
    report = check_pages.check_site(_site(tmp_path, index=f"<table><tr>{cell}<td>1</td></tr></table>"))
    assert _kinds(report, "index") == ["clipped cell"], check_pages.format_report(report)


@browser
@pytest.mark.parametrize("raw", ["{glue:text}`vit-steps`", "as {cite}`yan2022` shows", "see {numref}`fig-vit`",
                                 "<pre>```{glue:figure} vit-fig6\n```</pre>"])
def test_raw_role_fails(tmp_path, raw):
    report = check_pages.check_site(_site(tmp_path, index=f"<p>The model trains for {raw} steps.</p>"))
    assert _kinds(report, "index") == ["raw MyST"], check_pages.format_report(report)


@browser
def test_traceback_and_warning_in_output_fail(tmp_path):
    outputs = ('<div class="cell_output"><div class="output stderr"><pre>UserWarning: slow</pre></div></div>'
               '<div class="cell_output"><div class="output text_plain"><pre>Traceback (most recent call last):\n'
               '  File "x"</pre></div></div>')
    report = check_pages.check_site(_site(tmp_path, index=outputs))
    assert _kinds(report, "index") == ["output", "output"], check_pages.format_report(report)


@browser
def test_broken_link_and_anchor_fail(tmp_path):
    site = _site(tmp_path, index='<p><a href="other.html#nowhere">a</a> <a href="missing.html">b</a> '
                                 '<a href="#top">c</a></p>',
                 other="<p>no anchors</p>")
    report = check_pages.check_site(site)
    assert sorted(_kinds(report, "index")) == ["broken anchor", "broken link"], check_pages.format_report(report)


@browser
def test_integer_count_as_float_fails(tmp_path):
    rows = "".join(f"<tr><td>model {i}</td><td>{w}.000</td><td>0.{i}12</td></tr>" for i, w in enumerate((768, 1024)))
    report = check_pages.check_site(_site(tmp_path, index=f"<table><thead><tr><th>model</th><th>width</th>"
                                          f"<th>cos</th></tr></thead><tbody>{rows}</tbody></table>"))
    assert _kinds(report, "index") == ["integer as float"], check_pages.format_report(report)


@browser
def test_common_table_scrolls_and_prints_counts_as_integers(tmp_path):
    """A table from `figures.common.table` sits in a scroll container, so a wide one never breaks the page but
    fails as a table to scroll sideways; a count column that pandas turned into floats (a missing value) prints
    as integers."""
    from helpers.figures import common

    df = pd.DataFrame({f"a long column name {i}": np.linspace(0.1, 0.7, 3) + i for i in range(12)})
    df.insert(0, "d_model", [768.0, 1024.0, np.nan])
    html = common.table(df)._repr_html_()
    assert "768.000" not in html and ">768<" in html and ">1,024<" in html
    narrow = common.table(df.iloc[:, :3])._repr_html_()
    report = check_pages.check_site(_site(tmp_path, index=narrow, wide=html))
    assert report["index.html"] == [], check_pages.format_report(report)
    assert _kinds(report, "wide") == ["scrolling table"], check_pages.format_report(report)


def test_table_formats_whole_columns_as_integers():
    from helpers.figures import common

    df = pd.DataFrame({"n": [768.0, np.nan], "cos": [1.0, 0.25], "frac": [0.0, 0.0], "name": ["a", "b"]})
    html = common.table(df).to_html()
    assert ">768<" in html and "768.000" not in html
    assert ">1.000<" in html and ">0.250<" in html  # a column with a fraction keeps its decimals
    assert ">0.000<" in html  # zeros alone are not counts


@browser
def test_redirect_page_is_checked_by_its_target(tmp_path):
    (tmp_path / "index.html").write_text('<meta http-equiv="Refresh" content="0; url=book/intro.html" />')
    report = check_pages.check_site(tmp_path)
    assert _kinds(report, "index") == ["broken link"], check_pages.format_report(report)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "intro.html").write_text(PAGE.format(body="<p>The book.</p>"))
    report = check_pages.check_site(tmp_path)
    assert report == {"book/intro.html": [], "index.html": []}, check_pages.format_report(report)


@browser
def test_value_printed_as_its_repr_fails(tmp_path):
    report = check_pages.check_site(_site(tmp_path, index="<p>MiniLM scores np.float64(77.18) raw.</p>"))
    assert _kinds(report, "index") == ["raw value"], check_pages.format_report(report)


def test_build_warnings_fail_their_page(tmp_path):
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "sts.html").write_text("<p>page</p>")
    log = ("\x1b[91m/repo/book/sts.md:87: WARNING: Failed to format text/plain data: could not convert string to "
           "float: 'np.float64(77.18)' [mystnb.glue]\x1b[39;49;00m\n"
           "[IPKernelApp] WARNING | Kernel is running over TCP without encryption.\n")
    found = check_pages.build_warnings(log, tmp_path)
    assert list(found) == ["book/sts.html"] and "Failed to format" in found["book/sts.html"][0]["what"]


def test_publish_hands_numpy_scalars_over_as_python_numbers(monkeypatch):
    from helpers.figures import common

    pasted = {}
    monkeypatch.setattr(common, "_paste", lambda: lambda key, value, display: pasted.update({key: value}))
    common.publish({"x": np.float64(77.18), "n": np.int64(3), "s": "text"})
    assert pasted == {"x": 77.18, "n": 3, "s": "text"} and type(pasted["x"]) is float and type(pasted["n"]) is int
