"""Smaller things a user of `tokuni diagnose` meets: two runs on one --out (the second refused while the first
holds it), a huge probe refused before it is read, labelled progress bars, the JSON to stdout (`--format json`,
`--out -`), "95%" in --help, whole-number ticks on the per-head maps, and a run without twins that never speaks
of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from helpers import diagnose as D
from helpers.diagnose import checks, cli, measures, probe, report, run

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from test_diagnose import tiny_bert, word_probe  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    base = tmp_path_factory.mktemp("small")
    return tiny_bert(base / "bert", seed=3, layers=2), word_probe(base / "probe.txt", n=16)


def _argv(small, *more):
    return ["diagnose", str(small[0]), "--probe", str(small[1]), "--draws", "20", *more]


# ------------------------------------------------------------------------------------------------ --out lock


def test_a_second_run_on_the_same_out_is_refused_while_the_first_holds_it(small, tmp_path, capsys):
    out = tmp_path / "sub" / "r"
    with checks.OutLock(out):
        assert (tmp_path / "sub" / ".r.tokuni-lock").read_text().split()[0] == str(os.getpid())
        rc = cli.main(_argv(small, "--twins", "0", "--out", str(out)))
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "another tokuni run is writing" in err and "\n" not in err
    assert not (tmp_path / "sub").exists()                  # the lock's folder, made for it, is gone with it
    assert cli.main(_argv(small, "--twins", "0", "--out", str(out))) == 0
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["r.html", "r.json"]   # lock released


def test_two_processes_on_one_out_one_refused(small, tmp_path):
    """A second process started on an --out another process holds exits 2 saying so (nothing lost silently); once
    the first lets go, the same command writes. The first holder is this process, so the two always overlap."""
    from helpers.diagnose.checks import OutLock

    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKUNI_NO_PROGRESS": "1", "HF_HUB_OFFLINE": "1"}
    args = [sys.executable, "-m", "helpers.diagnose", *_argv(small, "--twins", "0", "--out", str(tmp_path / "r"))]
    with OutLock(tmp_path / "r"):
        held = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert held.returncode == 2 and "another tokuni run is writing" in held.stderr, held.stderr
    assert not list(tmp_path.glob("r.*"))
    free = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert free.returncode == 0, free.stderr
    assert sorted(p.name for p in tmp_path.glob("r.*")) == ["r.html", "r.json"]
    assert not list(tmp_path.glob(".r.tokuni-lock"))


def test_a_stale_lock_is_taken_over(small, tmp_path):
    lock = tmp_path / ".r.tokuni-lock"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    import socket

    lock.write_text(f"{gone.pid} {socket.gethostname()}\n")
    with checks.OutLock(tmp_path / "r"):
        assert lock.read_text().split()[0] == str(os.getpid())
    assert not lock.exists()


# ------------------------------------------------------------------------------------------------ the probe


def test_a_huge_probe_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "zeros.txt"
    with open(big, "wb") as f:
        f.truncate(2**30)                                  # 1 GiB of zero bytes (sparse)
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(probe.ProbeError, match="at most 32 MiB"):
        probe.read_lines(big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 1 and peak < 2**20


def test_a_probe_without_a_size_is_read_no_further_than_the_limit():
    with pytest.raises(probe.ProbeError, match="more than 32 MiB"):
        probe.read_lines("/dev/zero")


# ------------------------------------------------------------------------------------------------ output


def test_format_json_and_out_dash_write_the_json_to_stdout(small, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for more in (["--format", "json"], ["--out", "-"]):
        capsys.readouterr()
        assert cli.main(_argv(small, "--twins", "2", *more)) == 0
        out = capsys.readouterr().out
        data = json.loads(out)
        assert data["model"] == str(small[0]) and len(data["measures"]["cos"]["model"]["estimate"]) == 3
    assert not list(tmp_path.iterdir())                    # no "-.html", "-.json" nor tokuni-*.json
    assert cli.main(_argv(small, "--twins", "2", "--format", "json", "--out", str(tmp_path / "j"))) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.json"]


def test_help_says_95_percent(capsys):
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["diagnose", "--help"])
    text = capsys.readouterr().out
    assert "95% intervals" in " ".join(text.split()) and "%%" not in text


def test_progress_bars_say_what_they_measure(small, monkeypatch):
    seen = []
    real = run.models.load

    def spy(iterable, desc="", total=None, **kw):
        seen.append(desc)
        return iter(iterable)

    monkeypatch.setattr(measures, "progress", spy)
    from helpers.diagnose import capture

    monkeypatch.setattr(capture, "progress", spy)
    monkeypatch.setattr(run.models, "load", real)
    D.diagnose(str(small[0]), str(small[1]), twins=3, draws=20)
    assert seen == ["model: forward passes", "model: measures per layer"] + [
        f"twin {i} of 3: {what}" for i in (1, 2, 3) for what in ("forward passes", "measures per layer")]


def test_several_models_name_each_on_its_bars(small, tmp_path, monkeypatch):
    seen = []
    from helpers.diagnose import capture

    monkeypatch.setattr(capture, "progress", lambda it, desc="", total=None, **kw: (seen.append(desc), iter(it))[1])
    assert cli.main(["diagnose", str(small[0]), str(small[0]), "--probe", str(small[1]), "--twins", "2", "--draws",
                     "20", "--out", str(tmp_path / "ab")]) == 2       # one model twice: the same report twice
    other = tmp_path / "other"
    import shutil

    shutil.copytree(small[0], other)
    assert cli.main(["diagnose", str(small[0]), str(other), "--probe", str(small[1]), "--twins", "2", "--draws", "20",
                     "--out", str(tmp_path / "ab")]) == 0
    assert seen == [f"{name}{what}: forward passes" for name in (small[0].name, "other")
                    for what in ("", ", twin 1 of 2", ", twin 2 of 2")]


def test_the_default_twin_count_labels_its_bars_and_records_its_choice(small, monkeypatch):
    seen = []
    from helpers.diagnose import capture

    monkeypatch.setattr(capture, "progress", lambda it, desc="", total=None, **kw: (seen.append(desc), iter(it))[1])
    monkeypatch.setattr(run, "TWIN_BUDGET_S", 0.0)            # nothing is cheap: the default stops at five
    d = D.diagnose(str(small[0]), str(small[1]), draws=20)
    assert len(d.twins) == run.TWINS and seen[1] == "twin 1 of 5+: forward passes"
    assert d.meta["argv"][d.meta["argv"].index("--twins") + 1] == "5" and "the default" in d.meta["twins"]["chosen"]


# ------------------------------------------------------------------------------------------------ the page


def test_per_head_maps_have_whole_number_ticks():
    heads = np.random.default_rng(0).uniform(-1, 1, (4, 4))
    heads[0] = np.nan
    m = measures.Measured({"cos": np.zeros(4)}, {"cos": np.zeros((5, 4))}, qk_heads=heads)
    d = run.Diagnosis({"seed": 0, "layer_names": ["embeddings", "block 1", "block 2", "block 3"]}, m, [m])
    fig = report.heads_figure(d)
    fig.canvas.draw()
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        for ticks in (ax.get_xticks(), ax.get_yticks()):
            shown = [t for t in ticks if ax.get_xlim()[0] - 1 <= t <= 10]
            assert shown and all(float(t).is_integer() for t in shown), ticks


def test_no_twins_no_twins_in_the_title_and_captions(small):
    d = D.diagnose(str(small[0]), str(small[1]), twins=0, draws=20)
    page = report.render_html(d)
    title = page[page.index("<h1>"):page.index("</h1>")]
    assert "twin" not in title
    assert "twin" not in report.curves_caption(d) and "Where the model differs" not in page
    assert "--twins 0" in report.summary_html(d)


# ------------------------------------------------------------------------------------------------ the device


def test_auto_places_the_model_and_every_twin_on_the_accelerator(small, monkeypatch):
    """`--device auto` on a machine with an accelerator (the placeholder device, `devicecheck`: torch's meta
    device with made-up readbacks): the model and every twin are loaded onto it, every tensor handed to their
    forward passes is on it, and the run goes through. The JSON records the device used."""
    from devicecheck import META, meta_tensors, on_placeholder

    placed, inputs = [], set()
    real = run.models.load

    def seen(module, args, kwargs):
        inputs.update(v.device.type for v in (*args, *kwargs.values()) if hasattr(v, "device"))

    def load(*a, **k):
        got = real(*a, **k)
        placed.append((k.get("untrained", False), k["device"], meta_tensors(got.model)))
        got.model.register_forward_pre_hook(seen, with_kwargs=True)
        return got

    monkeypatch.setattr(run, "choose_device", lambda device="auto": META if device == "auto" else
                        __import__("torch").device(device))
    monkeypatch.setattr(run, "device_description", lambda dev: str(dev))
    monkeypatch.setattr(run.models, "load", load)
    with on_placeholder() as rb:
        d = D.diagnose(str(small[0]), str(small[1]), twins=2, draws=20, device="auto")
    assert [p[0] for p in placed] == [False, True, True]
    assert all(dev == META and on_meta for _, dev, on_meta in placed)
    assert inputs == {"meta"}
    assert rb.readbacks > 0 and d.meta["device_used"] == "meta" and len(d.twins) == 2
