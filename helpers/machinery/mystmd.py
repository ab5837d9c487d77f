"""The chapters' MyST Markdown as plain Jupyter Markdown, for the generated notebooks (what a chapter's Colab
link opens), so that their text reads as the book's page does:

* `{glue:text}` roles become the value the book shows (the `text/plain` the chapter published, formatted
  with the role's format spec as myst-nb does);
* a `{glue:figure}` directive becomes a code cell that shows the figure of the reader's own run
  (`figures.common.show("<key>")`) followed by its numbered caption;
* `(label)=` targets become HTML anchors (`<a id="label"></a>`, which the findings tables' links reach);
  `{cite:t}` / `{cite:p}` read "Yan et al. (2022)" / "(Yan et al., 2022)"
  (`book/references.bib`); `{numref}`, `{ref}`, `{doc}`, links to a label and links to another chapter's
  `.md` become links to the rendered book's pages (`book_url`);
* a `{literalinclude}` with `:pyobject:` (a chapter's core functions, included from the source) becomes a
  Python code block of that function, read from the source as Sphinx reads it; an admonition of class
  `dropdown` becomes a collapsed `<details>` block;
* any other directive (an admonition, a note) becomes a blockquote with a bold title; math stays `$…$`.

Text only: no chapter is run here (the values come in as a dict), so the notebooks can be regenerated and
checked cheaply.
"""

from __future__ import annotations

import ast
import re
from ast import literal_eval
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: a MyST role: {name}`content` (name: letters, digits, ':', '-', '_')
ROLE = re.compile(r"\{([A-Za-z][\w:-]*)\}`([^`]*)`")
#: a role, or an inline code span (left as it is)
ROLE_OR_CODE = re.compile(r"\{([A-Za-z][\w:-]*)\}`([^`]*)`|(`+)[^`].*?\3")
#: a MyST target line: (label)=
TARGET = re.compile(r"^\(([^()\s]+)\)=\s*$")
#: the opening line of a directive fence: ```{name} argument  or  :::{name} argument
FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[A-Za-z][\w:-]*)\}\s*(?P<arg>.*)$")
#: an ordinary code fence (```python) inside the prose
CODE_FENCE = re.compile(r"^(`{3,}|~{3,})")
#: a Markdown link whose target is another page (`tse.md`, `tse.md#x`) or a bare label (`#x`, `x`)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
#: how the book prints a figure number (Sphinx's numfig_format default)
FIG_FORMAT = "Fig. {}"


# --- the book's labels, pages and numbers ----------------------------------------------------------------


@dataclass
class Label:
    page: str            # the page's stem: "vit" for book/vit.md
    title: str           # the section's heading, or the figure's caption (MyST: may hold roles)
    number: str = ""     # a figure's number as the book prints it ("8.1"); "" for a section


@dataclass
class BookIndex:
    """Where every label of the book lives, each page's title and each chapter's number."""
    base_url: str
    titles: dict[str, str] = field(default_factory=dict)
    labels: dict[str, Label] = field(default_factory=dict)
    bib: dict[str, tuple[str, str]] = field(default_factory=dict)   # key -> (authors as cited, year)

    def page_url(self, page: str, anchor: str = "") -> str:
        return f"{self.base_url}book/{page}.html" + (f"#{anchor}" if anchor else "")


def book_url(root: Path = ROOT) -> str:
    """The rendered book's address: `html.baseurl` of `_config.yml`, else the GitHub Pages address of the
    repository it names (`https://<owner>.github.io/<name>/`, where the book is published)."""
    import yaml

    cfg = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    base = (cfg.get("html") or {}).get("baseurl")
    if not base:
        owner, name = cfg["repository"]["url"].rstrip("/").split("github.com/", 1)[1].split("/")[:2]
        base = f"https://{owner}.github.io/{name}/"
    return base.rstrip("/") + "/"


def chapter_numbers(root: Path = ROOT) -> dict[str, int]:
    """Each numbered chapter's number, in `_toc.yml` order (the figures are numbered `<chapter>.<k>`)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    numbers, n = {}, 0
    for part in toc.get("parts", []):
        for ch in part.get("chapters", []):
            if part.get("numbered"):
                n += 1
                numbers[Path(ch["file"]).stem] = n
    return numbers


def book_index(root: Path = ROOT) -> BookIndex:
    """Read every page of `book/`: titles, section labels (`(label)=` before a heading) and figure labels
    (`:name:` of a `{glue:figure}` or `{figure}`, numbered in page order as the book numbers them)."""
    index = BookIndex(base_url=book_url(root), bib=read_bib(root / "book" / "references.bib"))
    numbers = chapter_numbers(root)
    for md in sorted((root / "book").glob("*.md")):
        page, lines = md.stem, md.read_text(encoding="utf-8").splitlines()
        pending, k, i = None, 0, 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("# ") and page not in index.titles:
                index.titles[page] = line[2:].strip()
            if m := TARGET.match(line):
                pending = m.group(1)
                index.labels[pending] = Label(page, pending)
            elif pending and line.startswith("#"):
                index.labels[pending].title = line.lstrip("#").strip()
                pending = None
            elif (m := FENCE.match(line)) and m.group("name") in ("glue:figure", "figure"):
                body, i = _fence_body(lines, i, m.group("fence"))
                opts, caption = _options(body)
                k += 1
                number = f"{numbers[page]}.{k}" if page in numbers else str(k)
                if "name" in opts:
                    index.labels[opts["name"]] = Label(page, " ".join(caption), number)
                continue
            elif line.strip():
                pending = None
            i += 1
    return index


def read_bib(path: Path) -> dict[str, tuple[str, str]]:
    """key -> (the authors as an author-year citation names them, year): "Yan et al.", "Yu and Zhang"."""
    text = path.read_text(encoding="utf-8")
    out = {}
    for m in re.finditer(r"@\w+\s*\{\s*([^,\s]+)\s*,", text):
        body = _braced_fields(text, m.end())
        authors = [a.strip() for a in re.split(r"\s+and\s+", body.get("author", "")) if a.strip()]
        last = [_latex_plain(a.split(",")[0] if "," in a else a.split()[-1]) for a in authors]
        who = (last[0] if len(last) == 1 else f"{last[0]} and {last[1]}" if len(last) == 2
               else f"{last[0]} et al.")
        out[m.group(1)] = (who, _latex_plain(body.get("year", "")))
    return out


def _braced_fields(text: str, start: int) -> dict[str, str]:
    """The `name = {value}` fields of one bib entry starting at `start` (values may nest braces)."""
    fields, i = {}, start
    while i < len(text):
        m = re.compile(r"\s*(\w+)\s*=\s*").match(text, i)
        if not m:
            break
        i = m.end()
        if text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            fields[m.group(1).lower()], i = text[i + 1:j], j + 1
        else:
            v = re.compile(r"[^,}]*").match(text, i)
            fields[m.group(1).lower()], i = v.group(0).strip().strip('"'), v.end()
        i = re.compile(r"\s*,?").match(text, i).end()
        if i < len(text) and text[i] == "}":
            break
    return fields


_ACCENTS = {"'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "c": "\u0327"}


def _latex_plain(s: str) -> str:
    """`{\\'E}ric` -> Éric, `{BERT}` -> BERT, `{\\L}` -> Ł (enough for the names and years of a bib file)."""
    import unicodedata

    s = s.replace("{\\L}", "Ł").replace("{\\l}", "ł").replace("{\\o}", "ø").replace("{\\ss}", "ß")
    s = re.sub(r"\{?\\([`'^\"~c])\s*\{?(\w)\}?\}?",
               lambda m: unicodedata.normalize("NFC", m.group(2) + _ACCENTS[m.group(1)]), s)
    return s.replace("{", "").replace("}", "").strip()


# --- glue values ---------------------------------------------------------------------------------------------


def format_plain_text(text: str, fmt_spec: str) -> str:
    """A glued value's `text/plain` as `{glue:text}` prints it (myst-nb's `format_plain_text`)."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt_spec == "":
        return str(value)
    type_char = fmt_spec[-1]
    if type_char == "s":
        value = str(value)
    elif type_char in ("b", "c", "d", "o", "x", "X"):
        value = int(value)
    elif type_char in ("e", "E", "f", "F", "g", "G", "n", "%"):
        value = float(value)
    return format(value, fmt_spec)


def glue_text(content: str, values: dict[str, str]) -> str:
    """The text of one `{glue:text}` role (`key` or `key:fmt`) from the published `text/plain` values."""
    key, _, fmt = content.rpartition(":") if ":" in content else (content, "", "s")
    if key not in values:
        raise KeyError(f"no published value for glue key {key!r}: run `make notebooks`")
    try:
        return format_plain_text(values[key], fmt)
    except (TypeError, ValueError) as e:   # myst-nb fails on it too: the page would show nothing there
        raise ValueError(f"glue key {key!r}: {values[key]!r} cannot be formatted as {fmt!r} ({e}); "
                         "publish a plain Python number") from e


def _escape(text: str) -> str:
    """A pasted value as literal Markdown text (the book prints it as text, never as markup); brackets
    stay as they are ("[-0.11, +0.05]" makes no link: no "(" or "[" follows it)."""
    text = re.sub(r"([\\`*_$<|])", r"\\\1", text)
    return re.sub(r"\](?=[(\[])", r"\\]", text)


# --- converting a chapter's Markdown --------------------------------------------------------------------------


def _fence_body(lines: list[str], i: int, fence: str) -> tuple[list[str], int]:
    """The lines inside the directive opened at `lines[i]` and the index after its closing fence."""
    body, j = [], i + 1
    while j < len(lines):
        close = lines[j].strip()
        if len(close) >= len(fence) and set(close) == {fence[0]}:
            break
        body.append(lines[j])
        j += 1
    return body, j + 1


def _options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    """A directive's `:key: value` options and the rest of its body (leading blank lines dropped)."""
    opts, i = {}, 0
    while i < len(body) and (m := re.match(r"^:([\w-]+):\s*(.*)$", body[i])):
        opts[m.group(1)], i = m.group(2).strip(), i + 1
    rest = body[i:]
    while rest and not rest[0].strip():
        rest = rest[1:]
    while rest and not rest[-1].strip():
        rest = rest[:-1]
    return opts, rest


def pyobject_source(path: str | Path, name: str) -> str:
    """The source of the function or class `name` ("Class.method" for a method) in the Python file `path`, as
    Sphinx's `literalinclude :pyobject:` shows it (decorators and docstring included)."""
    source = Path(path).read_text()
    body, node = ast.parse(source).body, None
    for part in name.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == part), None)
        if node is None:
            raise ValueError(f"{path}: no function or class {name!r}")
        body = node.body
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines()[first - 1:node.end_lineno]
    indent = len(lines[0]) - len(lines[0].lstrip())
    return "\n".join(x[indent:] for x in lines)


@dataclass
class Converter:
    """Converts the Markdown cells of one page (`page`, e.g. "vit") with the values it published."""
    page: str
    values: dict[str, str]
    index: BookIndex
    used: set[str] = field(default_factory=set)          # glue keys this page's text used
    figures: list[str] = field(default_factory=list)     # glue figure keys, in order

    # inline ------------------------------------------------------------------------------------------
    def _cite(self, keys: str, parenthetical: bool) -> str:
        refs = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.index.bib:
                raise KeyError(f"{self.page}: no entry {key!r} in references.bib")
            refs.append(self.index.bib[key])
        if parenthetical:
            return "(" + "; ".join(f"{who}, {year}" for who, year in refs) + ")"
        return "; ".join(f"{who} ({year})" for who, year in refs)

    def _label_link(self, label: str, text: str | None = None, numbered: bool = False) -> str:
        if label not in self.index.labels:
            raise KeyError(f"{self.page}: no label {label!r} in the book")
        lab = self.index.labels[label]
        if text is None:
            text = FIG_FORMAT.format(lab.number) if numbered and lab.number else self.plain(lab.title)
        elif "%s" in text or "{number}" in text:
            text = text.replace("%s", lab.number).replace("{number}", lab.number)
        return f"[{text}]({self.index.page_url(lab.page, label)})"

    def _role(self, m: re.Match) -> str:
        name, content = m.group(1), m.group(2)
        explicit = re.match(r"^(.*?)\s*<([^<>]+)>$", content, re.S)
        text, target = (explicit.group(1), explicit.group(2)) if explicit else (None, content)
        if name in ("glue:text", "glue", "glue:any", "glue:md"):
            self.used.add(content.rpartition(":")[0] if ":" in content and name == "glue:text" else content)
            return _escape(glue_text(content if name == "glue:text" else content + ":s", self.values))
        if name in ("cite:t", "cite:p", "cite"):
            return self._cite(content, parenthetical=name != "cite:t")
        if name == "numref":
            return self._label_link(target, text, numbered=True)
        if name == "ref":
            return self._label_link(target, text)
        if name == "doc":
            page = Path(target).stem
            return f"[{text or self.plain(self.index.titles.get(page, page))}]({self.index.page_url(page)})"
        if name in ("math", "m"):
            return f"${content}$"
        if name in ("sub", "sup", "abbr", "term", "kbd", "code", "samp", "file", "guilabel", "download"):
            return f"`{target}`" if name in ("code", "samp", "file", "kbd") else (text or target)
        raise ValueError(f"{self.page}: no plain-Markdown form for the role {{{name}}}")

    def _link(self, m: re.Match) -> str:
        text, target = m.group("text"), m.group("target")
        if re.match(r"^[a-z][\w+.-]*:", target):           # http:, https:, mailto:
            return m.group(0)
        path, _, anchor = target.partition("#")
        if path.endswith(".md"):
            return f"[{text}]({self.index.page_url(Path(path).stem, anchor)})"
        label = anchor if not path else path
        if label in self.index.labels:
            return f"[{text}]({self.index.page_url(self.index.labels[label].page, label)})"
        return m.group(0)

    def plain(self, text: str) -> str:
        """Another place's heading as a link's text: its glued values pasted, its other roles converted (the
        keys it uses are not this page's)."""
        used = set(self.used)
        try:
            return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", self.inline(text))
        finally:
            self.used = used

    def inline(self, text: str) -> str:
        """Roles and links of prose; inline code spans stay as they are."""
        def sub(m: re.Match) -> str:
            return self._role(m) if m.group(1) else m.group(0)
        return LINK.sub(self._link, ROLE_OR_CODE.sub(sub, text))

    # blocks ---------------------------------------------------------------------------------------------
    def cells(self, source: str) -> list[tuple[str, str]]:
        """One Markdown cell's source as plain cells: ("markdown", text) and ("code", source) for figures."""
        lines, out, buf, i = source.splitlines(), [], [], 0

        def flush():
            text = "\n".join(buf).strip("\n")
            if text.strip():
                out.append(("markdown", text))
            buf.clear()

        while i < len(lines):
            line = lines[i]
            if m := TARGET.match(line):                 # an anchor a link in an output (a findings row) can reach
                buf.extend([f'<a id="{m.group(1)}"></a>', ""])
                i += 1
                continue
            if CODE_FENCE.match(line) and not FENCE.match(line):       # a plain code block: verbatim
                fence = CODE_FENCE.match(line).group(1)
                j = i + 1
                while j < len(lines) and not lines[j].startswith(fence):
                    j += 1
                buf.extend(lines[i:j + 1])
                i = j + 1
                continue
            m = FENCE.match(line)
            if not m:
                buf.append(self.inline(line))
                i += 1
                continue
            body, i = _fence_body(lines, i, m.group("fence"))
            name, arg = m.group("name"), m.group("arg").strip()
            opts, rest = _options(body)
            if name in ("glue:figure", "glue"):
                flush()
                self.figures.append(arg)
                out.append(("code", f'figures.common.show("{arg}")'))
                label = self.index.labels.get(opts.get("name", ""))
                caption = "\n".join(self.cells_text(rest))
                head = f"**{FIG_FORMAT.format(label.number)}.**" if label and label.number else ""
                if caption or head:
                    out.append(("markdown", f"{head} {caption}".strip()))
            elif name in ("math",):
                buf.extend(["$$", *rest, "$$"])
            elif name in ("code", "code-block", "sourcecode"):
                buf.extend([f"```{arg}", *rest, "```"])
            elif name == "literalinclude":
                obj = opts.get("pyobject")
                if not obj:
                    raise ValueError(f"{self.page}: a literalinclude without :pyobject: ({arg})")
                code = pyobject_source(ROOT / "book" / arg, obj)
                buf.extend([f"```{opts.get('language', 'python')}", *code.splitlines(), "```"])
            elif name in ("bibliography", "tableofcontents", "toctree"):
                continue
            elif name == "admonition" and "dropdown" in opts.get("class", "").split():
                inner = self.cells_text(rest)
                buf.extend(["<details>", f"<summary>{self.inline(arg)}</summary>", "", *inner, "", "</details>", ""])
            else:                                        # an admonition or any other directive: a blockquote
                title = arg if name == "admonition" else (name.capitalize() + (f": {arg}" if arg else ""))
                inner = self.cells_text(rest)
                buf.append(f"> **{self.inline(title)}.** " + (inner[0] if inner else ""))
                buf.extend("> " + x if x.strip() else ">" for x in inner[1:])
        flush()
        return out

    def cells_text(self, lines: list[str]) -> list[str]:
        """Lines of a directive's body converted as prose (a nested figure is not expected there)."""
        out = []
        for kind, text in self.cells("\n".join(lines)):
            if kind != "markdown":
                raise ValueError(f"{self.page}: a figure inside a directive")
            out.extend(text.splitlines())
        return out


#: what counts as raw MyST in a generated notebook's Markdown: a role, a directive fence, a target
RAW_MYST = re.compile(r"\{[A-Za-z][\w:-]*\}`|^[ \t]*(`{3,}|:{3,})\{[A-Za-z][\w:-]*\}|^\([^()\s]+\)=\s*$"
                      r"|\]\([^)\s]*\.md(#[^)]*)?\)", re.M)


def raw_myst(markdown: str) -> list[str]:
    """The raw MyST roles, directives, targets and links to `.md` pages left in a Markdown text (fenced code
    blocks are not prose and are skipped)."""
    text = re.sub(r"^(`{3,}|~{3,})(?!\{).*?^\1\s*$", "", markdown, flags=re.M | re.S)
    return [m.group(0) for m in RAW_MYST.finditer(text)]
