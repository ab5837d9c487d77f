"""Every `{glue:...}` key a chapter's text uses is glued by its `figures.<chapter>.publish` on the
chapter's `ci` Result (the book build only warns about a missing key and renders a blank)."""

import re
from pathlib import Path

import pytest
from testutil import ci_result

from helpers import experiments, figures
from helpers.figures import common

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(p.stem for p in BOOK.glob("*.md") if hasattr(experiments, p.stem))
ROLE = re.compile(r"\{glue:(?:text|any|md)\}`([^`:]+)(?::[^`]*)?`")
DIRECTIVE = re.compile(r"^```\{glue:(?:figure|any|math)\}\s+(\S+)", re.M)


def used_keys(text: str) -> set[str]:
    """The glue keys a chapter's MyST text refers to (roles and directives)."""
    return set(ROLE.findall(text)) | set(DIRECTIVE.findall(text))


def test_used_keys_finds_roles_with_formats_and_figure_directives():
    text = ("a {glue:text}`vit-order` b {glue:text}`vit-final-train-pre-norm:.3f`\n"
            "```{glue:figure} vit-fig6\n:name: x\n```")
    assert used_keys(text) == {"vit-order", "vit-final-train-pre-norm", "vit-fig6"}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_glue_key_the_chapter_uses_is_published(chapter, monkeypatch):
    glued: set[str] = set()

    def recorder(name, value, display=True):
        glued.add(name)
    monkeypatch.setattr(common, "_glue", lambda: recorder)
    res = ci_result(getattr(experiments, chapter))
    getattr(figures, chapter).publish(res)
    missing = used_keys((BOOK / f"{chapter}.md").read_text()) - glued
    assert not missing, f"{chapter}.md uses glue keys its publish does not glue at ci scale: {sorted(missing)}"
