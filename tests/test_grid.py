"""The grid runner (`helpers.machinery.grid`, `scripts/grid.py`): a chapter's heavy runs as submitit jobs, one writer
per run, resumable, with the same numbers as the sequential `run(p)`; a chapter that may not train names what
is missing and the command; submitit's SLURM executor writes the sbatch script we expect. Exercised on a toy
chapter (`tests/gridtoy.py`) and, in `tests/test_claims_*`-style runs, on the chapters' own grids."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

import gridtoy
import pytest
from testutil import SMALL

from helpers.machinery import grid, results

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache folder (results and checkpoints), and job processes that can import the toy chapter."""
    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def sequential(**kw):
    """The toy grid run the ordinary way, in this process, with nothing cached."""
    old = os.environ.pop("TOKUNI_CACHE_DIR", None)
    try:
        return gridtoy.run(gridtoy.Params.resolve("ci", **kw))
    finally:
        if old is not None:
            os.environ["TOKUNI_CACHE_DIR"] = old


def test_the_grid_through_local_jobs_equals_the_sequential_run_bit_for_bit(cache):
    p = gridtoy.Params.resolve("ci")
    rep = grid.run_grid(gridtoy.runs(p), grid.executor("local", cache / "logs"), parallel=2, report=lambda s: None)
    assert rep.count("done") == 4 and not rep.failures
    got = gridtoy.run(p)
    assert all(got["hits"]) and got["histories"] == sequential()["histories"]
    again = grid.run_grid(gridtoy.runs(p), grid.executor("local", cache / "logs"), report=lambda s: None)
    assert again.count("cached") == 4 and again.count("done") == 0      # a second grid run makes nothing


def _pid_of(spec, timeout=60.0) -> int:
    """The pid of the job that holds the run's lock, once it has written a checkpoint."""
    t = time.time()
    while time.time() - t < timeout:
        ck = spec.checkpoint()
        if ck is not None and ck.is_file() and spec.lock_path().is_file():
            text = spec.lock_path().read_text().strip()
            if text:
                return int(text)
        time.sleep(0.1)
    raise AssertionError(f"{spec.name}: no checkpoint within {timeout} s")


def test_a_job_killed_mid_run_resumes_to_the_same_numbers(cache):
    p = gridtoy.Params.resolve("ci", variants=("a",), seeds=1, step_s=0.05)
    (spec,) = gridtoy.runs(p)
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(rep=grid.run_grid(
        [spec], grid.executor("local", cache / "logs"), report=lambda s: None)))
    t.start()
    os.kill(_pid_of(spec), signal.SIGKILL)
    t.join(120)
    assert box["rep"].count("failed") == 1 and not spec.done()
    ck = spec.checkpoint()
    assert ck.is_file() and 0 < __import__("torch").load(ck)["step"] < p.steps      # killed part-way
    rep = grid.run_grid([spec], grid.executor("local", cache / "logs"), report=lambda s: None)
    assert rep.count("done") == 1
    resumed = results.load_results(results.cached_path("gridtoy", spec.name, spec.key, "ci"))["results"]
    assert resumed == sequential(variants=("a",), seeds=1)["histories"]["a"][0]


def test_two_runners_on_one_grid_train_no_run_twice(cache):
    p = gridtoy.Params.resolve("ci", step_s=0.02)
    reports: list = []

    def runner(i):
        reports.append(grid.run_grid(gridtoy.runs(p), grid.executor("local", cache / f"logs{i}"), parallel=2,
                                     report=lambda s: None))
    threads = [threading.Thread(target=runner, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
        time.sleep(0.3)
    for th in threads:
        th.join(180)
    made = [n for r in reports for n, s in r.statuses.items() if s == "done"]
    assert sorted(made) == sorted(s.name for s in gridtoy.runs(p)), reports      # each run made exactly once
    assert not any(r.failures for r in reports)
    assert gridtoy.run(p)["histories"] == sequential(step_s=0.02)["histories"]


def test_a_run_held_by_another_process_is_waited_for_by_a_chapter(cache):
    """A grid job skips a run whose lock is held; a chapter's `run` waits for it and reads what was made."""
    (spec,) = gridtoy.runs(gridtoy.Params.resolve("ci", variants=("b",), seeds=1))
    with grid.run_lock(spec):
        with pytest.raises(grid.RunLocked, match="another process"):
            grid.execute(spec, wait=False)
        assert grid.job(spec)["status"] == "skipped"
    holder = threading.Thread(target=lambda: grid.execute(spec))       # waits for the lock, then trains it
    with grid.run_lock(spec):
        holder.start()
        time.sleep(3.0)
        assert holder.is_alive() and not spec.done()                    # waiting: nothing trained under the lock
    holder.join(60)
    assert not holder.is_alive() and spec.done()                        # it trained once the lock was free
    out, hit = grid.execute(spec, wait=True)
    assert hit and out["final"] > 0


def test_a_chapter_that_may_not_train_names_the_missing_runs_and_the_command(cache):
    p = gridtoy.Params.resolve("ci", train_missing=False)
    with pytest.raises(grid.MissingRuns) as err:
        gridtoy.run(p)
    assert err.value.names == ["a-seed0", "a-seed1", "b-seed0", "b-seed1"]
    assert "make grid CHAPTER=gridtoy SCALE=ci" in str(err.value)
    gridtoy.run(gridtoy.Params.resolve("ci"))                     # made once, then read back without training
    assert all(gridtoy.run(p)["hits"])


def test_the_book_build_does_not_train(monkeypatch):
    """`make book` sets TOKUNI_TRAIN_MISSING=0: every chapter's Params then has train_missing False."""
    from helpers.experiments import deeplm

    monkeypatch.setenv("TOKUNI_TRAIN_MISSING", "0")
    assert deeplm.Params.resolve("book").train_missing is False
    monkeypatch.delenv("TOKUNI_TRAIN_MISSING")
    assert deeplm.Params.resolve("book").train_missing is True
    assert "TOKUNI_TRAIN_MISSING = 0" in (TESTS.parent / "Makefile").read_text()


def test_submitit_writes_the_sbatch_script_we_expect(tmp_path, monkeypatch):
    """No SLURM here: stand-ins for `srun` and `sbatch` on the PATH; `sbatch` keeps the script it is handed
    and answers with a job id. The array script submitit writes asks for what the command line gave."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    kept = tmp_path / "submitted.sh"
    (bin_ / "srun").write_text("#!/bin/sh\nexit 0\n")
    (bin_ / "sbatch").write_text(f'#!/bin/sh\ncp "$1" {kept}\necho "Submitted batch job 4242"\n')
    for f in bin_.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path / "cache"))
    ex = grid.executor("slurm", tmp_path / "logs", timeout_min=720, gpus_per_job=1, cpus_per_job=4,
                       partition="gpu", array_parallelism=2)
    specs = gridtoy.runs(gridtoy.Params.resolve("ci"))
    jobs = ex.map_array(grid.job, specs)
    assert len(jobs) == 4 and jobs[0].job_id.startswith("4242")
    script = kept.read_text()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=4",
                 "#SBATCH --time=720", "#SBATCH --array=0-3%2"):
        assert line in script, script
    assert sys.executable in script and "submitit.core._submit" in script
    assert json.dumps(str(tmp_path / "logs")).strip('"') in script


#: the ci grid of a chapter, cut where a full one would only repeat itself (vit's ci grid is 30 runs of seconds
#: each: here its main sweep and one standard-block depth, 8 runs of two block types; qk: one seed, plain and
#: centred; glue: one task, its α₀ selected before its comparison runs can be named — a grid in two rounds;
#: deeplm, the one in `make test`: every run of its grid but the budget curve's, each cut to a few steps of a
#: small model, `SMALL`)
GRID_OVERRIDES = {"vit": {"depths": [], "standard_depths": [2], "ablation_depth": 0, "confirm_depths": []},
                  "qk": {"seeds": 1}, "glue": {"tasks": ["RTE"], "lrs": [0.0001]},
                  # without the constant-rate curve's 3 runs (the same jobs, one more keyed field)
                  "deeplm": SMALL["deeplm"] | {"curve_budgets": 0}}
TRAINING = sorted(c for c, m in __import__("helpers.experiments", fromlist=["CHAPTERS"]).CHAPTERS.items()
                  if hasattr(m, "runs"))


#: in `make test` (CI's 12 minutes): deeplm's grid; `make test-grid` runs every training chapter's
IN_MAKE_TEST = {"deeplm"}


@pytest.mark.parametrize("chapter", [pytest.param(c, marks=() if c in IN_MAKE_TEST else pytest.mark.grid)
                                     for c in TRAINING])
def test_a_chapters_ci_grid_through_make_grid_equals_its_sequential_run(chapter, tmp_path, monkeypatch):
    """`make grid CHAPTER=<chapter> SCALE=ci` (scripts/grid.py: two local submitit jobs at a time) makes the
    chapter's ci runs; the chapter then reads them back, and its Result equals the sequential `run(p)`'s
    bit for bit (the JSON of both)."""
    import importlib

    sys.path.insert(0, str(TESTS.parent / "scripts"))
    import grid as grid_script
    import torch

    module = importlib.import_module(f"helpers.experiments.{chapter}")
    monkeypatch.delenv("TOKUNI_CACHE_DIR", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)                   # as a job (TOKUNI_JOB_THREADS=1): the same order of sums
    try:
        overrides = GRID_OVERRIDES.get(chapter, {})
        sequential_json = json.dumps(module.run(module.Params.resolve("ci", **overrides)).to_json(), sort_keys=True)
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path / "cache"))
    args = [a for k, v in overrides.items() for a in ("-p", k, json.dumps(v))]
    assert grid_script.main([chapter, "--scale", "ci", "--parallel", "2", "--folder", str(tmp_path / "logs"),
                             *args]) == 0
    p = module.Params.resolve("ci", train_missing=False, **overrides)   # read back only: nothing trains here
    assert all(s.done() for s in module.runs(p))
    gridded = module.run(p)
    diffs = _differences(json.loads(sequential_json), gridded.to_json())
    assert not diffs, diffs[:10]


#: what may differ between two makings of the same run: how long it took, and where it came from
TIMING = {"seconds", "from_cache", "epoch_seconds", "s/epoch"}


def _timing(key: str) -> bool:
    return key in TIMING or key.endswith("time_s")


def _differences(a, b, path="") -> list[str]:
    """Paths at which two JSON values differ, timing fields aside (floats compared exactly: bit for bit)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only on one side" for k in set(a) ^ set(b) if not _timing(k)]
        for k in set(a) & set(b):
            if not _timing(k):
                out += _differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: lengths {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b or (a != a and b != b) else [f"{path}: {a!r} != {b!r}"]


def test_a_recipe_is_a_named_set_of_overrides(tmp_path, monkeypatch, capsys):
    """`scripts/grid.py qk --recipe long` lists the long pretraining's runs (other keys than the book's); an
    unknown recipe is refused with the recipes there are."""
    sys.path.insert(0, str(TESTS.parent / "scripts"))
    import grid as grid_script

    from helpers.experiments import qk

    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path))
    assert grid_script.main(["qk", "--scale", "book", "--recipe", "long", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed.count("missing") == len(qk.runs(qk.Params.resolve("book"))) and "cached" not in listed
    assert grid_script.main(["qk", "--scale", "book", "--recipe", "short", "--list"]) == 2
    assert "recipes: ['long']" in capsys.readouterr().err
