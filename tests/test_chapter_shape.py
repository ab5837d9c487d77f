"""The shape STYLE.md gives a chapter: it opens with its findings (computed, the same records
the findings page collects), has one "How this differs from the paper" block, no changelog remarks and
no visible bookkeeping cell; every finding links to a section of its chapter."""

import re
from pathlib import Path

import pytest
from testutil import ci_result

from helpers import experiments
from helpers.core.findings import Finding

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted(p.stem for p in BOOK.glob("*.md") if hasattr(getattr(experiments, p.stem, None), "Params"))
#: a book states what is true now: remarks about earlier versions of a chapter belong in git
CHANGELOG = re.compile(r"earlier version|previous version|as this chapter did|this chapter (?:used to|once)|"
                       r"was wrong|no longer|used to (?:say|read|claim|show)|we (?:now|previously)|"
                       r"(?:since|until) (?:the last|this) (?:session|commit|version)", re.I)


def converted(chapter: str) -> bool:
    return hasattr(getattr(experiments, chapter).Result, "findings")


def cells(chapter: str) -> list[tuple[str, list[str], str]]:
    """The chapter's cells as (kind, tags, source), kind 'code' or 'markdown'."""
    from helpers.machinery.notebooks import read_chapter

    nb = read_chapter(BOOK / f"{chapter}.md")
    return [(c.cell_type, list(c.metadata.get("tags", [])), c.source) for c in nb.cells]


def test_the_changelog_pattern_catches_remarks_and_spares_prose():
    assert CHANGELOG.search("as this chapter did before, we")
    assert CHANGELOG.search("Earlier versions of this chapter said")
    assert not CHANGELOG.search("the model no sooner learns than it forgets; previous layers")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_changelog_remarks(chapter):
    if not converted(chapter):
        pytest.xfail(f"{chapter}: not yet in the findings shape (its Result has no findings() yet)")
    hits = [m.group(0) for m in CHANGELOG.finditer((BOOK / f"{chapter}.md").read_text())]
    assert not hits, f"{chapter}.md: {hits}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapter_opens_with_its_findings(chapter):
    if not converted(chapter):
        pytest.xfail(f"{chapter}: not yet in the findings shape (its Result has no findings() yet)")
    cs = cells(chapter)
    first_heading = next(i for i, (k, _, src) in enumerate(cs) if k == "markdown" and re.search(r"^## ", src, re.M))
    shown = [i for i, (k, tags, src) in enumerate(cs) if k == "code" and "findings_table(res.findings())" in src]
    assert shown and shown[0] < first_heading, f"{chapter}: the findings cell must come before the first section"
    assert "remove-input" in cs[shown[0]][1]
    for k, tags, src in cs:
        if k == "code" and "res.save(" in src:
            assert "remove-cell" in tags, f"{chapter}: the save cell is bookkeeping: tag it remove-cell"
    text = (BOOK / f"{chapter}.md").read_text()
    assert len(re.findall(r"^## How this differs from the paper", text, re.M)) == 1, chapter
    titles = [line for k, _, src in cs if k == "markdown" for line in src.splitlines() if line.startswith("# ")]
    assert len(titles) == 1, f"{chapter}: one title, found {titles}"
    assert len(titles[0].split()) <= 25, f"{chapter}: a title of {len(titles[0].split())} words: {titles[0]}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_findings_are_records_that_link_to_their_sections(chapter):
    if not converted(chapter):
        pytest.xfail(f"{chapter}: not yet in the findings shape (its Result has no findings() yet)")
    fs = ci_result(getattr(experiments, chapter)).findings()
    assert fs, f"{chapter}: a chapter opens with its findings, all of them"
    assert all(isinstance(f, Finding) for f in fs)
    assert len({f.key for f in fs}) == len(fs) and all(f.key.startswith(f"{chapter}-") for f in fs)
    assert all(f.chapter == chapter for f in fs)
    labels = set(re.findall(r"^\(([\w-]+)\)=", (BOOK / f"{chapter}.md").read_text(), re.M))
    missing = sorted(f.section for f in fs if f.section and f.section not in labels)
    assert not missing, f"{chapter}: findings link to sections the chapter does not label: {missing}"
    from helpers import figures
    df = figures.common.findings_frame(fs, local=True)            # the opening table, a row per finding
    assert len(df) == len(fs) and list(df["claim"]) == [f.claim for f in fs]
    assert all(f'href="#{f.section}"' in s for f, s in zip(fs, df["section"], strict=True) if f.section)
    assert all(f.verdict in v for f, v in zip(fs, df["verdict"], strict=True))
    html = figures.common.findings_table(fs).data
    assert html.count("<tr") == len(fs) + 1 and "findings-table" in html
