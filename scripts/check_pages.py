"""Open every page of the built book in a headless browser and report what a reader would see broken.

    python scripts/check_pages.py _build/html          (make test-pages: builds the book first)

Each page is served from a local HTTP server and read by Chromium (Debian's `chromium`, driven by
Playwright; no browser is downloaded) at 1280 px wide. Its height is measured as a reader first sees it; then
every collapsed block (`<details>`: a dropdown, a hidden cell output, a claim's "how it was tested") is opened,
so that what it holds is checked too. A page fails on:

* a table, figure, image or displayed equation wider than its text column (or running past its right edge)
  without a horizontal scroll container around it, or cut off by a container that hides its overflow;
* a table that needs its scroll container: wider than the box it sits in, so that a reader scrolls sideways
  to read it (the box keeps the page from breaking; the table should still fit its column);
* a figure whose smallest text shows under `MIN_TEXT_PX` px: the PNG a book figure is glued as records its
  smallest text in px of the image (`figures.common.TEXT_KEY`), which the page shrinks with the image; an image
  that records none fails where the page shrinks it more than `MAX_SHRINK` times;
* a figure with no alt text that says what it shows (none, a file name, or under three words), or one that
  does not link to its full-size image;
* a page taller than its limit in `MAX_HEIGHT` (px at 1280 px wide, collapsed blocks closed): only the pages
  named there have one;
* a clipped table cell: content wider than a cell (or a box inside it) whose overflow is hidden;
* a raw MyST role or directive left in the text (`{glue:…}`, `{cite}`, `{numref}`, ```` ```{ ````, …);
* a traceback, a warning or a stderr stream in a cell output, or a docutils error left in the page;
* an integer count printed with decimals in a table ("768.000": every number of a column whole, one ≥ 10);
* a broken internal link: a page or file that was not built, or an anchor its page does not have.

Exit status 1 when any page fails; the report lists every problem per page and the time the check took.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

WIDTH = 1280
HEIGHT = 900
#: the smallest text a figure may show, in px at `WIDTH` (the figure's own record, scaled as the page shows it)
MIN_TEXT_PX = 11.0
#: the most a page may shrink an image that records no text size
MAX_SHRINK = 1.5
#: the PNG text chunk in which a book figure records its smallest text (`helpers.figures.common.TEXT_KEY`)
TEXT_KEY = "Smallest text px"
#: the tallest a page may be, in px at `WIDTH` with its collapsed blocks closed: the findings page lists every
#: claim of three papers and stays a page a reader scrolls through, not a register (each paper's headline screen,
#: its claims at the book's and at the paper's setting, comes first and takes about a thousand px of it; the figure
#: of every tested claim, a row per deciding test, about 1,600); the STS chapter keeps its argument on the page and its
#: consulted tables on its companion page (`book/sts-tables.md`), a chapter a reader gets through at under 20,000 px
#: (its findings table alone, 25 rows, takes about 6,000)
MAX_HEIGHT = {"book/findings.html": 14_000, "book/sts.html": 20_000}
#: Debian's Chromium (`apt-get install chromium`); $CHROMIUM overrides it
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: folders of the build that hold assets, not pages
SKIP_DIRS = {"_static", "_sources", "_images", "_sphinx_design_static", "mathjax", "_panels_static"}
#: a MyST role or directive that was not rendered: {glue:text}`key`, {cite}`x`, ```{figure}
RAW_MYST = re.compile(r"\{(?:glue|cite|numref|ref|eq|doc|download|term|math|abbr|sub|sup)(?::[\w-]+)?\}`"
                      r"|\{glue:|\{cite[:}]|\{numref\}|```\{|:::\{")
#: a value pasted as its Python repr instead of its text: np.float64(77.18), tensor(0.5)
RAW_VALUE = re.compile(r"\b(?:np|numpy)\.(?:float|int|uint|bool_|str_)\w*\(|\btensor\(|\barray\(\[")
#: a warning of the book build (Sphinx, myst-nb): `book/sts.md:87: WARNING: Failed to format …` — a glued value
#: that failed leaves a gap in the sentence, which the page alone does not show
BUILD_WARNING = re.compile(r"^(?P<where>\S+?):?(?P<line>\d+)?: WARNING: (?P<msg>.*)$", re.MULTILINE)
#: what a traceback or a warning looks like in a cell's output
OUTPUT_ALARM = re.compile(r"Traceback \(most recent call last\)|\b[A-Z]\w*(?:Warning|Error)\b|\bWarning\b|"
                          r"\bWARNING\b")

#: run in the page before anything is measured: its height as a reader first sees it, then every collapsed block
#: (`<details>`) opened, so that the tables and figures it holds are laid out and checked
OPEN_JS = r"""
() => {
  const height = Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0);
  const closed = [...document.querySelectorAll('details:not([open])')];
  for (const d of closed) d.open = true;
  return {height, opened: closed.length};
}
"""

#: run in the page: every problem of layout and text, the page's anchors and its links
PAGE_JS = r"""
(opts) => {
  const problems = [];
  const article = document.querySelector('article.bd-article') || document.querySelector('main') ||
                  document.body;
  const colRect = article.getBoundingClientRect();
  const cs = getComputedStyle(article);
  const colLeft = colRect.left + parseFloat(cs.paddingLeft);
  const colRight = colRect.right - parseFloat(cs.paddingRight);
  const colWidth = colRight - colLeft;
  const tol = 1.5;
  const describe = (el) => {
    const cap = el.querySelector && el.querySelector('caption');
    const fig = el.closest('figure');
    const figcap = fig && fig.querySelector('figcaption');
    const sec = el.closest('section[id]');
    let name = el.tagName.toLowerCase();
    if (el.id) name += '#' + el.id;
    if (cap && cap.textContent.trim()) name += ' "' + cap.textContent.trim().slice(0, 70) + '"';
    else if (figcap && figcap.textContent.trim()) name += ' "' + figcap.textContent.trim().slice(0, 70) + '"';
    else {
      const head = el.tagName === 'TABLE' && el.querySelector('thead, tr');
      if (head) name += ' [' + [...head.querySelectorAll('th, td')].map((c) => c.textContent.trim())
                                  .join(' | ').replace(/\s+/g, ' ').slice(0, 70) + ']';
      else if (el.getAttribute && el.getAttribute('alt')) name += ' (' + el.getAttribute('alt').slice(0, 50) + ')';
    }
    if (sec) name += ' in §' + sec.id;
    return name;
  };
  const scrolls = (el) => {
    const o = getComputedStyle(el).overflowX;
    return o === 'auto' || o === 'scroll';
  };
  const hides = (el) => {
    const o = getComputedStyle(el).overflowX;
    return o === 'hidden' || o === 'clip';
  };
  // how far the drawn content of `el` runs past its right (or left) edge: its descendants' boxes and text,
  // less what is hidden on purpose (MathJax's assistive MathML, screen-reader text); scrollWidth alone counts those
  const overrun = (el) => {
    const r = el.getBoundingClientRect();
    const es = getComputedStyle(el);
    const left = r.left + parseFloat(es.borderLeftWidth), right = r.right - parseFloat(es.borderRightWidth);
    let over = 0;
    const walk = (node) => {
      for (const child of node.childNodes) {
        if (child.nodeType === Node.TEXT_NODE) {
          if (!child.textContent.trim()) continue;
          const range = document.createRange();
          range.selectNodeContents(child);
          for (const cr of range.getClientRects())
            if (cr.width > 0) over = Math.max(over, cr.right - right, left - cr.left);
        } else if (child.nodeType === Node.ELEMENT_NODE) {
          if (child.matches('mjx-assistive-mml, .sr-only, .visually-hidden, script, style')) continue;
          const cs = getComputedStyle(child);
          if (cs.display === 'none' || cs.visibility === 'hidden' || cs.clip !== 'auto') continue;
          const cr = child.getBoundingClientRect();
          if (cr.width > 0 && cr.height > 0) over = Math.max(over, cr.right - right, left - cr.left);
          walk(child);
        }
      }
    };
    walk(el);
    return over;
  };
  const visible = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && el.getClientRects().length > 0;
  };
  // 1. wide things: tables, figures, images, plots, displayed equations
  const stats = {tables: article.querySelectorAll('table').length, scrolling: 0,
                 figures: article.querySelectorAll('img, figure svg, canvas').length};
  const wide = article.querySelectorAll('table, figure, img, svg, canvas, video, iframe, ' +
                                        'mjx-container[display="true"], div.math, .cell_output pre');
  for (const el of wide) {
    if (!visible(el)) continue;
    if (el.tagName.toLowerCase() === 'svg' && el.closest('mjx-container, button, a, .headerlink')) continue;
    const r = el.getBoundingClientRect();
    const over = r.width > colWidth + tol || r.right > colRight + tol || r.left < colLeft - tol;
    // is it (or an ancestor inside the column) a scroll container that holds it within the column?
    let box = null, clip = null;
    for (let a = el; a && a !== article.parentElement; a = a.parentElement) {
      const ar = a.getBoundingClientRect();
      if (a !== el || el.tagName === 'TABLE' || el.tagName === 'PRE') {
        if (scrolls(a) && ar.right <= colRight + tol && ar.left >= colLeft - tol) { box = a; break; }
        if (hides(a) && a.scrollWidth > a.clientWidth + 1 && a !== article && overrun(a) > tol) { clip = a; break; }
      }
    }
    if (el.tagName === 'TABLE' && box && box.scrollWidth > box.clientWidth + 1) {
      stats.scrolling += 1;
      problems.push({kind: 'scrolling table', what: describe(el) + ' needs a sideways scroll: ' +
                     Math.round(box.scrollWidth) + ' px of table in a ' + Math.round(box.clientWidth) +
                     ' px box (fewer or narrower columns, shorter labels, or split it)'});
    }
    if (clip) {
      problems.push({kind: 'clipped', what: describe(el) + ' is cut off by a container that hides its ' +
                     'overflow (' + Math.round(clip.scrollWidth) + ' px of content in ' +
                     Math.round(clip.clientWidth) + ' px)'});
    } else if (over && !box) {
      const kind = el.tagName === 'TABLE' ? 'wide table' : 'wide figure';
      problems.push({kind, what: describe(el) + ' is ' + Math.round(r.width) + ' px wide (spans ' +
                     Math.round(r.left - colLeft) + '..' + Math.round(r.right - colLeft) + ') in a ' +
                     Math.round(colWidth) + ' px text column, with no scroll container around it'});
    }
  }
  // 2. clipped cells: content wider than a cell (or a box inside one) whose overflow is hidden
  for (const cell of article.querySelectorAll('td, th, td *, th *')) {
    if (!visible(cell)) continue;
    const s = getComputedStyle(cell);
    const hidden = ['hidden', 'clip'].includes(s.overflowX) || s.textOverflow === 'ellipsis';
    if (hidden && cell.scrollWidth > cell.clientWidth + 1 && overrun(cell) > tol) {
      const table = cell.closest('table');
      problems.push({kind: 'clipped cell', what: 'a cell of ' + describe(table) + ' shows ' +
                     Math.round(cell.clientWidth) + ' px of ' + Math.round(cell.scrollWidth) + ' px: "' +
                     cell.textContent.trim().slice(0, 60) + '"'});
    }
  }
  // 3. text: the page without its code inputs (a chapter's code may spell a role), and each cell output
  const clone = article.cloneNode(true);
  for (const el of clone.querySelectorAll('.cell_input, div.highlight-python, div.highlight-ipython3, script, style'))
    el.remove();
  const text = clone.textContent;
  const outputs = [];
  for (const out of article.querySelectorAll('.cell_output .output, .cell_output > div, div.output')) {
    const cls = out.className || '';
    outputs.push({stderr: /\bstderr\b/.test(cls) || /\btraceback\b/.test(cls) || /\berror\b/.test(cls),
                  cls, text: out.textContent.slice(0, 4000)});
  }
  const problematic = [...article.querySelectorAll('.problematic, .system-message')]
      .map((el) => el.textContent.trim().slice(0, 100));
  // 4. anchors and links
  const ids = [...document.querySelectorAll('[id]')].map((el) => el.id)
      .concat([...document.querySelectorAll('a[name]')].map((el) => el.getAttribute('name')));
  const links = [...document.querySelectorAll('a[href], link[rel="stylesheet"][href], img[src], script[src]')]
      .map((el) => ({href: el.getAttribute('href') || el.getAttribute('src'), url: el.href || el.src,
                     text: (el.textContent || el.getAttribute('alt') || '').trim().slice(0, 50),
                     inArticle: article.contains(el)}));
  // 5. images: how large each is drawn against its own size, its alt text, and the link around it
  const images = [];
  for (const img of article.querySelectorAll('img')) {
    if (!visible(img) || img.closest('mjx-container, button, .headerlink')) continue;
    const a = img.closest('a[href]');
    images.push({what: describe(img.closest('figure') || img), url: img.currentSrc || img.src,
                 src: img.getAttribute('src') || '', natural: img.naturalWidth,
                 shown: img.getBoundingClientRect().width, alt: img.getAttribute('alt'), link: a ? a.href : null});
  }
  return {problems, text, outputs, problematic, ids, links, colWidth, stats, images};
}
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request log on the console
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """`root` over HTTP on a free local port (MathJax and the theme's scripts need http, not file:)."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def pages(root: Path) -> list[str]:
    """Every built HTML page under `root`, as paths relative to it (assets' folders left out)."""
    out = []
    for path in sorted(root.rglob("*.html")):
        rel = path.relative_to(root)
        if not SKIP_DIRS.intersection(rel.parts[:-1]):
            out.append(rel.as_posix())
    return out


def _text_problems(info: dict) -> list[dict]:
    problems = []
    for m in sorted({m.group(0) for m in RAW_MYST.finditer(info["text"])}):
        at = info["text"].find(m)
        around = " ".join(info["text"][max(0, at - 40): at + 60].split())
        problems.append({"kind": "raw MyST", "what": f"{m!r} left in the page: …{around}…"})
    for m in sorted({m.group(0) for m in RAW_VALUE.finditer(info["text"])}):
        at = info["text"].find(m)
        around = " ".join(info["text"][max(0, at - 40): at + 60].split())
        problems.append({"kind": "raw value", "what": f"a value printed as its Python repr: …{around}…"})
    for out in info["outputs"]:
        alarm = OUTPUT_ALARM.search(out["text"])
        if out["stderr"] or alarm:
            what = alarm.group(0) if alarm else f"a {out['cls'].strip()} output"
            first = " ".join(out["text"].split())[:120]
            problems.append({"kind": "output", "what": f"a cell output shows {what!r}: {first}"})
    for text in info["problematic"]:
        problems.append({"kind": "docutils", "what": f"an unresolved element in the page: {text!r}"})
    return problems


def png_text(path: Path) -> dict[str, str]:
    """The tEXt chunks of a PNG file ({} for another format or an unreadable file)."""
    import struct
    import zlib

    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        return {}
    out, at = {}, 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"tEXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt" and b"\0" in body:
            key, value = body.split(b"\0", 1)
            out[key.decode("latin-1")] = zlib.decompress(value[1:]).decode("latin-1")
        elif kind == b"IEND":
            break
        at += 12 + length
    return out


#: an alt text that is only a file's name or path: "../_images/3f…e2.png", "plot.png"
_FILE_ALT = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|gif|svg|webp)$", re.IGNORECASE)


def _figure_problems(root: Path, base: str, images: list[dict], stats: dict) -> list[dict]:
    """Every image of a page: its smallest text as shown (from the figure's own record), or how much the page
    shrinks it where it records none; its alt text; the link to its full-size file."""
    problems = []
    stats.update(shrunk=0, smallest_text=None)
    for im in images:
        what = im["what"]
        scale = im["shown"] / im["natural"] if im["natural"] else 1.0
        if scale < 1 / MAX_SHRINK:
            stats["shrunk"] += 1
        path = None
        if im["url"].startswith(base):
            path = root / unquote(urlparse(im["url"]).path)[1:]
        record = png_text(path).get(TEXT_KEY) if path is not None else None
        if record is not None:
            shown = float(record) * min(scale, 1.0)
            stats["smallest_text"] = min(shown, stats["smallest_text"] or shown)
            if shown < MIN_TEXT_PX - 0.05:
                problems.append({"kind": "small figure text",
                                 "what": f"{what}: its smallest text shows at {shown:.1f} px ({float(record):.1f} px "
                                         f"drawn, shown at {scale:.2f} of its {im['natural']} px width; at least "
                                         f"{MIN_TEXT_PX:g} px: fewer panels, a figure sized for the column, or "
                                         f"larger text)"})
        elif scale < 1 / MAX_SHRINK:
            problems.append({"kind": "shrunk figure",
                             "what": f"{what}: shown at {scale:.2f} of its {im['natural']} px width, and it records "
                                     f"no text size ({TEXT_KEY!r}) that would show it legible"})
        alt = (im["alt"] or "").strip()
        if len(alt.split()) < 3 or _FILE_ALT.search(alt) or alt == im["src"]:
            problems.append({"kind": "no alt text",
                             "what": f"{what}: alt text {alt!r} does not say what it shows (a sentence: what is "
                                     f"drawn against what, for which models)"})
        if not im["link"] or urldefrag(im["link"])[0] != urldefrag(im["url"])[0]:
            problems.append({"kind": "no full-size link",
                             "what": f"{what} does not link to its full-size image"})
    return problems


#: a number printed with decimals that are all zero: 768.000, 1,024.00
_WHOLE = re.compile(r"^[+-−]?\d{1,3}(?:,\d{3})*\.0+$|^[+-−]?\d+\.0+$")

#: every table's columns as text, to find integer counts printed with decimals
TABLES_JS = r"""
() => {
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const out = [];
  for (const table of article.querySelectorAll('table')) {
    const rows = [...table.querySelectorAll('tbody tr')].map((tr) =>
        [...tr.querySelectorAll('td, th')].map((c) => c.textContent.trim()));
    const head = [...table.querySelectorAll('thead th')].map((c) => c.textContent.trim());
    const cap = table.querySelector('caption');
    const sec = table.closest('section[id]');
    out.push({rows, head, caption: cap ? cap.textContent.trim().slice(0, 70) : '', section: sec ? sec.id : ''});
  }
  return out;
}
"""


def _number_problems(tables: list[dict]) -> list[dict]:
    """A column (or a row of a transposed table) whose numbers are all whole but printed with decimals,
    one of them ≥ 10: a count printed as a float ("768.000")."""
    problems = []
    for t in tables:
        rows = [r for r in t["rows"] if r]
        lines = {}
        width = max((len(r) for r in rows), default=0)
        for j in range(width):
            lines[f"column {j + 1}"] = [r[j] for r in rows if j < len(r)]
        for i, r in enumerate(rows):
            lines[f"row {i + 1} ({r[0][:30]})"] = r[1:]
        for where, cells in lines.items():
            nums = [c for c in cells if re.fullmatch(r"[+-−]?[\d,]+(?:\.\d+)?", c)]
            if len(nums) < 2 or len(nums) < len([c for c in cells if c not in ("", "–", "nan")]):
                continue
            if all(_WHOLE.match(c) for c in nums) and any(abs(float(c.replace(",", "").replace("−", "-"))) >= 10
                                                          for c in nums):
                name = f'"{t["caption"]}"' if t["caption"] else "[" + " | ".join(t["head"])[:60] + "]"
                sec = f" in §{t['section']}" if t["section"] else ""
                problems.append({"kind": "integer as float",
                                 "what": f"table {name}{sec}, {where}: whole numbers printed with decimals "
                                         f"({', '.join(nums[:4])})"})
    return problems


#: a page that only sends the reader on: <meta http-equiv="Refresh" content="0; url=book/intro.html">
_REFRESH = re.compile(r'<meta[^>]+http-equiv="refresh"[^>]+url=([^"\s>]+)', re.IGNORECASE)


def _wait_ready(page) -> None:
    page.wait_for_load_state("load")
    try:  # MathJax typesets after load: widths of tables with math change with it
        page.evaluate("() => (window.MathJax && MathJax.startup && MathJax.startup.promise) || null")
    except Exception:  # noqa: BLE001 - a page without MathJax or with a failing one is still checked
        pass
    page.evaluate("() => document.fonts ? document.fonts.ready.then(() => null) : null")


#: what each page held ({root: {page: {"tables", "scrolling", "figures", "height", "opened"}}}), for the report
STATS: dict[str, dict[str, dict]] = {}


def check_site(root: Path, width: int = WIDTH, only: list[str] | None = None,
               executable: str = CHROMIUM, max_height: dict[str, int] | None = None) -> dict[str, list[dict]]:
    """Every page of the build at `root` in Chromium at `width` px: {page: [problem, ...]} (empty: fine).
    `max_height`: {page: px} in place of `MAX_HEIGHT`."""
    from playwright.sync_api import sync_playwright

    root = Path(root).resolve()
    names = pages(root)
    if only:
        names = [n for n in names if n in only or Path(n).stem in only]
    report: dict[str, list[dict]] = {}
    anchors: dict[str, set[str]] = {}
    links: dict[str, list[dict]] = {}
    seen = STATS.setdefault(str(root), {})
    with serve(root) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": width, "height": HEIGHT})
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        for name in names:
            refresh = _REFRESH.search((root / name).read_text(errors="replace")[:2000])
            if refresh:  # a redirect (the book's index.html): its target is checked as a page of its own
                landed = (Path(name).parent / unquote(refresh.group(1).split("#")[0])).as_posix()
                report[name] = [] if (root / landed).is_file() else [
                    {"kind": "broken link", "what": f"redirects to {landed}: not built"}]
                continue
            failed.clear()
            page.goto(base + name, wait_until="load")
            _wait_ready(page)
            shape = page.evaluate(OPEN_JS)
            _wait_ready(page)
            info = page.evaluate(PAGE_JS, {})
            info["stats"].update(shape)
            problems = list(info["problems"])
            limit = (MAX_HEIGHT if max_height is None else max_height).get(name)
            if limit is not None and shape["height"] > limit:
                problems.append({"kind": "tall page", "what": f"{shape['height']:,} px tall at {width} px wide "
                                                              f"(its limit: {limit:,} px)"})
            problems += _text_problems(info)
            problems += _figure_problems(root, base, info["images"], info["stats"])
            problems += _number_problems(page.evaluate(TABLES_JS))
            for url in sorted(set(failed)):
                problems.append({"kind": "broken link", "what": f"the page loads {url[len(base):]}: not built"})
            report[name] = problems
            seen[name] = info["stats"]
            anchors[name] = set(info["ids"])
            links[name] = info["links"]
        browser.close()
        _check_links(root, base, report, anchors, links)
    return report


def _check_links(root: Path, base: str, report: dict, anchors: dict[str, set[str]],
                 links: dict[str, list[dict]]) -> None:
    """Every internal link resolves: its file was built and, for a page, its anchor is on that page."""
    for name, items in links.items():
        seen = set()
        for link in items:
            href, url = link["href"], link["url"]
            if not href or not url or href.startswith(("mailto:", "javascript:", "data:", "tel:")):
                continue
            if not url.startswith(base):
                continue  # external: not checked (no network)
            target, frag = urldefrag(url)
            rel = unquote(urlparse(target).path)[1:] or "index.html"
            if rel.endswith("/"):
                rel += "index.html"
            if (href, rel) in seen:
                continue
            seen.add((href, rel))
            where = " (in the text)" if link["inArticle"] else ""
            if not (root / rel).is_file():
                report[name].append({"kind": "broken link", "what": f"{href!r}{where} → {rel}: not built"})
                continue
            frag = unquote(frag)
            if frag and rel.endswith(".html"):
                ids = anchors.get(rel)
                if ids is None:
                    ids = set(re.findall(r'\b(?:id|name)="([^"]+)"', (root / rel).read_text(errors="replace")))
                    anchors[rel] = ids
                if frag not in ids:
                    label = f" ({link['text']!r})" if link["text"] else ""
                    report[name].append({"kind": "broken anchor",
                                         "what": f"{href!r}{label}{where}: {rel} has no #{frag}"})


def _n(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def build_warnings(log: str, root: Path) -> dict[str, list[dict]]:
    """The book build's warnings (its log, ANSI colours and all), by the page they concern."""
    log = re.sub(r"\x1b\[[0-9;]*m", "", log)
    out: dict[str, list[dict]] = {}
    for m in BUILD_WARNING.finditer(log):
        where = m.group("where")
        page = "(the build)"
        for name in pages(root):
            if where.endswith(name[: -len(".html")] + ".md") or where.endswith(name[: -len(".html")] + ".ipynb"):
                page = name
        line = f" (line {m.group('line')})" if m.group("line") else ""
        out.setdefault(page, []).append({"kind": "build warning", "what": f"{m.group('msg').strip()}{line}"})
    return out


def format_report(report: dict[str, list[dict]], stats: dict[str, dict] | None = None) -> str:
    lines = []
    for name, problems in report.items():
        st = (stats or {}).get(name)
        held = ""
        if st and (st["tables"] or st["figures"]):
            held = f"{_n(st['tables'], 'table')}, {st['scrolling']} scrolling sideways; {_n(st['figures'], 'figure')}"
            if st.get("smallest_text") is not None:
                held += f", smallest text {st['smallest_text']:.1f} px"
            held += f", {st.get('shrunk', 0)} shrunk over {MAX_SHRINK:g}×; " if st["figures"] else "; "
        if st and "height" in st:
            held = f"  ({held}{st['height']:,} px tall" + (f", {st['opened']} collapsed blocks opened)"
                                                         if st.get("opened") else ")")
        if not problems:
            lines.append(f"ok    {name}{held}")
            continue
        lines.append(f"FAIL  {name}: {len(problems)} problem{'s' if len(problems) > 1 else ''}{held}")
        for p in problems:
            lines.append(f"      - {p['kind']}: {p['what']}")
    bad = sum(1 for p in report.values() if p)
    lines.append(f"{len(report)} pages, {bad} failing, {sum(len(p) for p in report.values())} problems")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default="_build/html", help="the built book (default: _build/html)")
    ap.add_argument("--width", type=int, default=WIDTH, help="viewport width in px (default: 1280)")
    ap.add_argument("--page", action="append", help="check only this page (name or file); repeatable")
    ap.add_argument("--json", help="also write the report as JSON to this file")
    ap.add_argument("--build-log", help="the book build's output: its warnings fail the page they concern (a "
                                        "glued value that could not be formatted leaves a gap in a sentence)")
    args = ap.parse_args(argv)
    root = Path(args.root)
    if not (root / "index.html").is_file() and not pages(root):
        print(f"no built book at {root}: run `make book` first", file=sys.stderr)
        return 2
    if not Path(CHROMIUM).exists():
        print(f"no Chromium at {CHROMIUM}: `apt-get install chromium` (or set $CHROMIUM)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    report = check_site(root, width=args.width, only=args.page)
    if args.build_log:
        for name, problems in build_warnings(Path(args.build_log).read_text(errors="replace"), root).items():
            report.setdefault(name, []).extend(problems)
    print(format_report(report, STATS.get(str(root.resolve()))))
    print(f"checked in {time.perf_counter() - t0:.1f} s at {args.width} px")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 1 if any(report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
