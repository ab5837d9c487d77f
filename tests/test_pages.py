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
    limits have one (the book's: the findings page alone)."""
    tall = '<div style="height:5000px">a long list</div>'
    folded = '<details><summary>Show the list</summary><div style="height:5000px">a long list</div></details>'
    site = _site(tmp_path, index=tall, other=tall, folded=folded)
    report = check_pages.check_site(site, max_height={"index.html": 3000, "folded.html": 3000})
    assert _kinds(report, "index") == ["tall page"], check_pages.format_report(report)
    assert "3,000 px" in report["index.html"][0]["what"]
    assert report["other.html"] == [] and report["folded.html"] == [], check_pages.format_report(report)
    assert check_pages.STATS[str(site.resolve())]["folded.html"]["height"] < 3000
    assert list(check_pages.MAX_HEIGHT) == ["book/findings.html"]
    assert check_pages.MAX_HEIGHT["book/findings.html"] <= 12_000


@browser
def test_wide_figure_fails(tmp_path):
    report = check_pages.check_site(_site(tmp_path, index=WIDE_IMAGE))
    assert "wide figure" in _kinds(report, "index"), check_pages.format_report(report)


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
