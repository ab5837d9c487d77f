"""The keys between a chapter's text and its numbers, checked both ways on the chapter's `ci` Result:
every `{glue:...}` key a chapter's text uses is published by its `figures.<chapter>.publish` (the book
build only warns about a missing key and renders a blank), every key it publishes is used, and every
key is written out whole, as a string literal, in `helpers/figures/` — so `grep` finds where a number
on the page comes from. Likewise every finding key is written out whole, once, in the code that makes findings
(`helpers/` outside `helpers/figures/`, which reads findings by key): a literal, never an f-string."""

import json
import re
from pathlib import Path

import pytest
from testutil import ci_result

from helpers import experiments, figures
from helpers.core.findings import finding_key
from helpers.figures import common

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted(p.stem for p in BOOK.glob("*.md")
                  if hasattr(figures, p.stem) and hasattr(getattr(experiments, p.stem, None), "Params"))
ROLE = re.compile(r"\{glue:(?:text|any|md)\}`([^`:]+)(?::[^`]*)?`")
DIRECTIVE = re.compile(r"^```\{glue:(?:figure|any|math)\}\s+(\S+)", re.M)
#: chapters not yet moved to the findings shape, whose publish may still assemble keys or glue sentences
NOT_YET_LITERAL = {c for c in CHAPTERS if not hasattr(getattr(experiments, c).Result, "findings")}


def used_keys(text: str) -> set[str]:
    """The glue keys a chapter's MyST text refers to (roles and directives)."""
    return set(ROLE.findall(text)) | set(DIRECTIVE.findall(text))


def test_used_keys_finds_roles_with_formats_and_figure_directives():
    text = ("a {glue:text}`vit-order` b {glue:text}`vit-final-train-pre-norm:.3f`\n"
            "```{glue:figure} vit-fig6\n:name: x\n```")
    assert used_keys(text) == {"vit-order", "vit-final-train-pre-norm", "vit-fig6"}


def pages(chapter: str) -> list[Path]:
    """A chapter's page and its companion pages (`book/<chapter>-tables.md`: the tables a reader consults, which run
    the chapter's experiment and publish its keys too)."""
    return [BOOK / f"{chapter}.md", *sorted(BOOK.glob(f"{chapter}-*.md"))]


#: what each chapter's publish glued, once per chapter (two tests read it: its figures are drawn once)
_PUBLISHED: dict[str, dict[str, object]] = {}


def published(chapter: str, monkeypatch) -> dict[str, object]:
    if chapter not in _PUBLISHED:
        glued: dict[str, object] = {}

        def recorder(name, value, display=True):
            glued[name] = value
        with monkeypatch.context() as m:
            m.setattr(common, "_paste", lambda: recorder)
            res = ci_result(getattr(experiments, chapter))
            getattr(figures, chapter).publish(res)
        _PUBLISHED[chapter] = glued
    return _PUBLISHED[chapter]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_page_keys_both_ways(chapter, monkeypatch):
    glued = published(chapter, monkeypatch)
    used = set().union(*(used_keys(page.read_text()) for page in pages(chapter)))
    missing = used - set(glued)
    assert not missing, f"{chapter}.md uses keys its publish does not publish at ci scale: {sorted(missing)}"
    if chapter in NOT_YET_LITERAL:
        pytest.xfail(f"{chapter}: publish not yet one literal dict (its Result has no findings() yet)")
    unused = set(glued) - used
    assert not unused, f"figures.{chapter}.publish publishes keys {chapter}.md never uses: {sorted(unused)}"


COMPANIONS = sorted(p for p in BOOK.glob("*-tables.md") if p.stem.rsplit("-", 1)[0] in CHAPTERS)


@pytest.mark.parametrize("page", COMPANIONS, ids=lambda p: p.stem)
def test_a_companion_page_runs_on_its_chapters_result(page, monkeypatch):
    """A chapter's companion page (`book/<chapter>-tables.md`) is not run under nbval, which would run the chapter's
    experiment a second time: its cells run here, in order, on the chapter's `ci` Result (read back from the run the
    chapter saved this session), the cell that runs the experiment given that Result; a cell that fails fails."""
    import jupytext

    chapter = page.stem.rsplit("-", 1)[0]
    module = getattr(experiments, chapter)
    res = ci_result(module)
    monkeypatch.setattr(common, "_paste", lambda: lambda name, value, display=True: None)
    monkeypatch.setattr(module, "run", lambda p: res)
    cells = [c for c in jupytext.read(str(page)).cells if c.cell_type == "code"]
    assert any(f"experiments.{chapter}.run(" in c.source for c in cells), f"{page.name} runs no experiment"
    namespace: dict = {}
    for cell in cells:
        exec(compile(cell.source, str(page), "exec"), namespace)
    assert namespace["res"] is res


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_glue_key_is_a_literal_and_no_sentence_is_glued(chapter, monkeypatch):
    if chapter in NOT_YET_LITERAL:
        pytest.xfail(f"{chapter}: publish not yet one literal dict (its Result has no findings() yet)")
    source = "\n".join(p.read_text() for p in (ROOT / "helpers" / "figures").glob("*.py"))
    used = used_keys((BOOK / f"{chapter}.md").read_text())
    assembled = sorted(k for k in used if f'"{k}"' not in source)
    assert not assembled, f"{chapter}: keys not written whole in helpers/figures/ (grep finds nothing): {assembled}"
    from IPython.display import Markdown

    glued = published(chapter, monkeypatch)
    def prose(text: str) -> bool:        # a list of names ("STS12, STS13 and SICK-R") is not a sentence
        return sum(w.isalpha() and w.islower() for w in re.split(r"[\s,;()]+", text)) > 3
    sentences = sorted(k for k, v in glued.items() if isinstance(v, Markdown) and prose(str(v.data)))
    assert not sentences, f"{chapter}: glued sentences (write them in the .md; glue numbers): {sentences}"


#: every finding the book's committed runs produce (`scripts/golden_findings.py` writes the file)
BOOK_FINDING_KEYS = sorted(json.loads((ROOT / "tests" / "golden" / "findings-book.json").read_text())["findings"])
#: a section anchor may share its finding's name (`section="qk-centring"`): that is not the key written again
KEY_LITERAL = r'(?<!section=)"{}"'


def finding_sources() -> dict[str, str]:
    """The code that makes findings: every module of `helpers/` outside `helpers/figures/`, by path."""
    helpers = ROOT / "helpers"
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(helpers.rglob("*.py"))
            if "figures" not in p.relative_to(helpers).parts}


def key_problems(keys, sources: dict[str, str]) -> list[str]:
    """Each key of `keys` not written as a quoted literal exactly once over `sources`, and each f-string key."""
    out = []
    for k in keys:
        where = {path: n for path, text in sources.items()
                 if (n := len(re.findall(KEY_LITERAL.format(re.escape(k)), text)))}
        if sum(where.values()) != 1:
            out.append(f"{k}: written {sum(where.values())} times {where}")
    out += [f"{path}: an f-string key" for path, text in sources.items() if 'key=f"' in text or "key=f'" in text]
    return out


def test_key_problems_catches_a_key_written_twice_an_unwritten_one_and_an_f_string():
    planted = {"a.py": 'Finding(key="x-one", section="x-one")\nFinding(key="x-two")\n',
               "b.py": 'GAIN_KEYS = {"bert": "x-two"}\nFinding(key=f"x-{tag}")\n'}
    problems = key_problems(["x-one", "x-two", "x-three"], planted)
    assert problems == ["x-two: written 2 times {'a.py': 1, 'b.py': 1}", "x-three: written 0 times {}",
                        "b.py: an f-string key"]
    assert key_problems(["x-one"], {"a.py": 'Finding(key="x-one", section="x-one")'}) == []


def test_every_finding_key_is_a_literal_written_once():
    problems = key_problems(BOOK_FINDING_KEYS, finding_sources())
    assert not problems, "finding keys not written whole exactly once in helpers/: " + "; ".join(problems)


def test_a_case_without_a_finding_key_raises_naming_it():
    with pytest.raises(KeyError, match=r"sts.GAIN_KEYS has no finding key for 'albert'"):
        finding_key({"bert": "sts-gain-bert"}, "albert", "sts.GAIN_KEYS")
