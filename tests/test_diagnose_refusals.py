"""`tokuni diagnose` is safe on any folder and refuses every bad input before any work, in one line.

* A folder that needs its own code (an `auto_map` in config.json, a model type transformers does not know) is
  refused, and its code never runs: no prompt, no marker file, even with "y" on stdin — through the console entry
  point and through the loader itself; every `from_pretrained` in the loaders passes `trust_remote_code=False`.
* Each bad option, output folder, model folder and probe: exit 2, one line on stderr, nothing on stdout, no
  traceback, no model loaded (the loader is replaced by one that fails the test), nothing written.
* Ctrl-C: "interrupted, nothing written", exit 130.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from helpers.diagnose import checks, cli, run

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_diagnose import tiny_bert, word_probe  # noqa: E402

CUSTOM_CODE = """
import pathlib
pathlib.Path(__file__).with_name("MARKER").write_text("the folder's code ran")
from transformers import PretrainedConfig, PreTrainedModel
class PlantedConfig(PretrainedConfig):
    model_type = "tokuni-planted"
class PlantedModel(PreTrainedModel):
    config_class = PlantedConfig
"""


def custom_code_folder(folder: Path) -> Path:
    """A model folder whose config, model and tokenizer all point at its own code, which would leave a marker
    file beside it if it ran."""
    folder.mkdir(parents=True)
    auto = {"AutoConfig": "configuration_planted.PlantedConfig", "AutoModel": "modeling_planted.PlantedModel"}
    (folder / "config.json").write_text(json.dumps({"model_type": "tokuni-planted", "auto_map": auto,
                                                    "hidden_size": 8, "num_hidden_layers": 1}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"auto_map": {"AutoTokenizer": ["tokenization_planted.PlantedTokenizer", None]}}))
    for name in ("configuration_planted.py", "modeling_planted.py", "tokenization_planted.py"):
        (folder / name).write_text(CUSTOM_CODE)
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def child_env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO)}
    env.pop("TRANSFORMERS_TRUST_REMOTE_CODE", None)
    return env


def test_a_folder_that_needs_its_own_code_is_refused_and_its_code_never_runs(tmp_path):
    folder = custom_code_folder(tmp_path / "custom")
    r = subprocess.run([sys.executable, "-m", "helpers.diagnose", "diagnose", str(folder), "--out",
                        str(tmp_path / "r")], input="y\ny\n", capture_output=True, text=True, timeout=300, cwd=REPO,
                       env=child_env(tmp_path))
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""                                        # no "Do you wish to run the custom code?" prompt
    err = r.stderr.strip()
    assert "\n" not in err and err.startswith("tokuni: ") and "custom code" in err and "never runs" in err
    assert not (folder / "MARKER").exists() and not list(tmp_path.glob("r.*"))


def test_the_loaders_never_run_a_folders_code(tmp_path):
    """Past the tool's own check: `hf.models.load` (tokenizer, config, model) on the same folder refuses it,
    with "y" on stdin, without a prompt and without running it."""
    folder = custom_code_folder(tmp_path / "custom")
    code = textwrap.dedent(f"""
        from helpers.hf import models
        for untrained in (False, True):
            try:
                models.load({str(folder)!r}, untrained=untrained)
            except models.ModelUnavailable as err:
                print("refused:", err)
        """)
    r = subprocess.run([sys.executable, "-c", code], input="y\ny\ny\ny\n", capture_output=True, text=True,
                       timeout=300, cwd=REPO, env=child_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("refused:") == 2 and "its own code" in r.stdout and "[y/N]" not in r.stdout
    assert not (folder / "MARKER").exists()


def _calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("from_pretrained", "from_config"):
            yield node


LOADING = ("helpers/hf", "helpers/diagnose", "helpers/train")


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for folder in LOADING
                                        for p in (REPO / folder).glob("*.py")))
def test_every_from_pretrained_passes_trust_remote_code_false(path):
    """Each `from_pretrained` / `from_config` call names `trust_remote_code=False`, or passes `**kw` where the
    function sets `kw["trust_remote_code"] = False`."""
    source = (REPO / path).read_text()
    for call in _calls(REPO / path):
        named = {k.arg: k.value for k in call.keywords if k.arg}
        if "trust_remote_code" in named:
            assert isinstance(named["trust_remote_code"], ast.Constant) and named["trust_remote_code"].value is False
        else:
            assert any(k.arg is None for k in call.keywords), f"{path}:{call.lineno}"
            assert 'kw["trust_remote_code"] = False' in source, f"{path}:{call.lineno}"


# ------------------------------------------------------------------------------------------ bad inputs


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A real (random, 1-block) BERT folder and a probe of its words."""
    base = tmp_path_factory.mktemp("model")
    return tiny_bert(base / "bert", seed=1, layers=1), word_probe(base / "probe.txt", n=12)


@pytest.fixture
def no_load(monkeypatch):
    """Loading a model fails the test: every refusal below comes before any model is loaded."""
    def load(*a, **k):
        raise AssertionError("a model was loaded before the refusal")
    monkeypatch.setattr(run.models, "load", load)


def refused(capsys, argv, out_dir: Path) -> str:
    capsys.readouterr()                                         # what the fixtures printed
    rc = cli.main(argv)
    got = capsys.readouterr()
    err = got.err.strip()
    assert rc == 2, (rc, got.err)
    assert got.out == "" and "\n" not in err and err.startswith("tokuni: ") and "Traceback" not in err, got.err
    assert not [p for p in out_dir.rglob("*") if p.name.startswith("r.") or p.name.startswith(".r.")]
    return err


@pytest.mark.parametrize("draws, why", [("0", "--draws 0"), ("-1", "--draws -1"), ("1000000000", "--draws 1000000000")])
def test_draws_out_of_bounds(capsys, tmp_path, folder, no_load, draws, why):
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "--draws", draws,
                           "--out", str(tmp_path / "r")], tmp_path)
    assert why in err and "20" in err and "10,000" in err


@pytest.mark.parametrize("flag, value", [("--twins", "-1"), ("--twins", "51"), ("--max-tokens", "0"),
                                         ("--seed", "-3")])
def test_other_numbers_out_of_bounds(capsys, tmp_path, folder, no_load, flag, value):
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), flag, value,
                           "--out", str(tmp_path / "r")], tmp_path)
    assert f"{flag} {value}" in err


def test_a_number_that_is_not_one(capsys, tmp_path, folder, no_load):
    err = refused(capsys, ["diagnose", str(folder[0]), "--draws", "many", "--out", str(tmp_path / "r")], tmp_path)
    assert "--draws" in err and "many" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda(capsys, tmp_path, folder, no_load):
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "--device", "cuda",
                           "--out", str(tmp_path / "r")], tmp_path)
    assert "no CUDA device" in err


def test_an_out_in_a_read_only_folder(capsys, tmp_path, folder, no_load):
    """A folder no file can be made in: a read-only one (as root, who writes anywhere, /proc stands in)."""
    if os.geteuid() == 0:
        target = Path("/proc/tokuni-report")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "r"
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "--out", str(target)], tmp_path)
    assert "--out" in err and ("cannot write" in err or "not writable" in err)


def test_an_out_under_an_existing_file(capsys, tmp_path, folder, no_load):
    (tmp_path / "file").write_text("a file")
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "--out",
                           str(tmp_path / "file" / "sub" / "r")], tmp_path)
    assert "is a file" in err


def test_n_with_a_probe_file(capsys, tmp_path, folder, no_load):
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "-n", "20",
                           "--out", str(tmp_path / "r")], tmp_path)
    assert "-n" in err and "--probe" in err


@pytest.mark.parametrize("n", ["0", "1", "100000"])
def test_n_out_of_bounds(capsys, tmp_path, folder, no_load, n):
    err = refused(capsys, ["diagnose", str(folder[0]), "-n", n, "--out", str(tmp_path / "r")], tmp_path)
    assert f"-n {n}" in err and "2048" in err


def test_a_probe_of_one_token_lines(capsys, tmp_path, folder, monkeypatch):
    """Every line one token: refused after the tokenizer reads it, before any forward pass."""
    probe = tmp_path / "one.txt"
    probe.write_text("w1\nw2\nw3\nw4\n")
    monkeypatch.setattr(run.DM, "measure", lambda *a, **k: (_ for _ in ()).throw(AssertionError("measured")))
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(probe), "--out", str(tmp_path / "r")], tmp_path)
    assert "1 token(s) at most" in err and "two tokens" in err


def test_an_empty_probe_file(capsys, tmp_path, folder, no_load):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(empty), "--out", str(tmp_path / "r")], tmp_path)
    assert str(empty) in err and "holds 0 input" in err


def test_a_probe_file_that_is_not_text(capsys, tmp_path, folder, no_load):
    binary = tmp_path / "probe.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(binary), "--out", str(tmp_path / "r")],
                  tmp_path)
    assert "not UTF-8" in err


def test_a_probe_of_undecodable_images(tmp_path):
    from helpers import diagnose as D

    images = tmp_path / "images.txt"
    images.write_text("a.png\nb.png\n")
    for f in ("a.png", "b.png"):
        (tmp_path / f).write_bytes(b"not an image")
    with pytest.raises(D.ProbeError, match="a.png cannot be decoded as an image") as e:
        D.read_probe(images, "vision")
    assert "\n" not in str(e.value)


def test_a_folder_without_config_json(capsys, tmp_path, no_load):
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "model.safetensors").write_bytes(b"")
    err = refused(capsys, ["diagnose", str(tmp_path / "weights"), "--out", str(tmp_path / "r")], tmp_path)
    assert "no config.json" in err and "hub" not in err


def test_a_folder_without_a_tokenizer(capsys, tmp_path, folder, no_load):
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("config.json", "model.safetensors"):
        (bare / f).write_bytes((folder[0] / f).read_bytes())
    err = refused(capsys, ["diagnose", str(bare), "--out", str(tmp_path / "r")], tmp_path)
    assert "no tokenizer" in err and "tokenizer.json" in err


def test_a_folder_without_weights(capsys, tmp_path, folder, no_load):
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        if (folder[0] / f).exists():
            (bare / f).write_bytes((folder[0] / f).read_bytes())
    err = refused(capsys, ["diagnose", str(bare), "--out", str(tmp_path / "r")], tmp_path)
    assert "no weights" in err


def test_a_vision_folder_without_a_processor(capsys, tmp_path, no_load):
    bare = tmp_path / "vit"
    bare.mkdir()
    (bare / "config.json").write_text('{"model_type": "dinov2"}')
    (bare / "model.safetensors").write_bytes(b"")
    err = refused(capsys, ["diagnose", str(bare), "--out", str(tmp_path / "r")], tmp_path)
    assert "preprocessor_config.json" in err


def test_a_path_that_does_not_exist(capsys, tmp_path, no_load, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, ["diagnose", "./no-such-model", "--out", str(tmp_path / "r")], tmp_path)
    assert "no such folder" in err


def test_a_hub_id_with_the_hub_switched_off(capsys, tmp_path, no_load, monkeypatch):
    monkeypatch.setattr(run, "_hub_reachable", lambda timeout=3.0: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    err = refused(capsys, ["diagnose", "someone/not-here", "--out", str(tmp_path / "r")], tmp_path)
    assert "someone/not-here" in err and "hub" in err
    assert all(m in err for m in run.OFFLINE_MODELS)                # the whole list, whisper and the book's own


def test_a_revision_for_a_model_that_is_not_a_hub_id(capsys, tmp_path, folder, no_load):
    err = refused(capsys, ["diagnose", str(folder[0]), "--revision", "main", "--out", str(tmp_path / "r")],
                  tmp_path)
    assert "--revision" in err and "hub id" in err


def test_a_run_larger_than_the_memory(capsys, tmp_path, folder, no_load, monkeypatch):
    monkeypatch.setattr(checks, "available_memory", lambda: 2**30)
    err = refused(capsys, ["diagnose", str(folder[0]), "--probe", str(folder[1]), "--out", str(tmp_path / "r")],
                  tmp_path)
    assert "GiB of memory" in err and "-n" in err


def test_memory_estimate_grows_with_inputs_and_draws():
    small = checks.estimate_bytes(128, 64, 384, 6, 30_000, 200)
    assert checks.estimate_bytes(100_000, 64, 384, 6, 30_000, 200) > 100 * small
    assert checks.estimate_bytes(128, 64, 384, 6, 30_000, 10**9) > 2**40


def test_no_command(capsys):
    assert cli.main([]) == 2
    assert capsys.readouterr().err.strip().startswith("tokuni: give a command")


def test_ctrl_c_writes_nothing_and_exits_130(tmp_path, folder):
    """SIGINT while the model's layers are being measured: one line, exit 130, no report."""
    ready = tmp_path / "measuring"
    code = textwrap.dedent(f"""
        import pathlib, signal, sys, time
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from helpers.diagnose import cli, run
        def slow(*a, **k):
            pathlib.Path({str(ready)!r}).write_text("")
            time.sleep(120)
        run.DM.measure = slow
        sys.exit(cli.main(["diagnose", {str(folder[0])!r}, "--probe", {str(folder[1])!r},
                           "--out", {str(tmp_path / "r")!r}]))
        """)
    p = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=child_env(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not ready.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert ready.exists(), p.communicate()[1][-2000:]
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130 and out == "" and err.strip().splitlines()[-1] == "tokuni: interrupted, nothing written"
    assert "Traceback" not in err and not list(tmp_path.glob("r.*")) and not list(tmp_path.glob(".r.*"))
