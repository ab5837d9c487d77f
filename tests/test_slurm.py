"""The grid runner on a real SLURM cluster: a single node started on this machine from Debian's packages
(`tests/slurm_local.py`). Opt-in: `make test-slurm` (about 2 min); never part of `make test`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import slurm_local
from test_grid import GRID_OVERRIDES, _differences

pytestmark = pytest.mark.slurm
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    why = slurm_local.unavailable()
    if why:
        pytest.skip(why)
    with slurm_local.local_slurm(tmp_path / "slurm") as env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        yield tmp_path


def test_the_vit_ci_grid_on_slurm_equals_its_sequential_run(cluster, monkeypatch):
    """`make grid CHAPTER=vit SCALE=ci GRID_ARGS='--cluster slurm --partition debug'`: submitit's SLURM executor
    submits the runs as one sbatch array to the local node; the jobs write the cache (the shared file system
    here is the local disk); the chapter reads them back, and its Result equals the sequential run's bit for bit."""
    import torch

    sys.path.insert(0, str(TESTS.parent / "scripts"))
    import grid as grid_script

    from helpers.experiments import vit

    overrides = GRID_OVERRIDES["vit"]
    monkeypatch.delenv("TOKUNI_CACHE_DIR", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sequential = json.dumps(vit.run(vit.Params.resolve("ci", **overrides)).to_json(), sort_keys=True)
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(cluster / "cache"))
    args = [a for k, v in overrides.items() for a in ("-p", k, json.dumps(v))]
    logs = cluster / "logs"
    assert grid_script.main(["vit", "--scale", "ci", "--cluster", "slurm", "--partition", "debug",
                             "--time-min", "30", "--folder", str(logs), *args]) == 0
    scripts = sorted(logs.rglob("*_submission.sh"))
    assert scripts and "#SBATCH --partition=debug" in scripts[0].read_text()
    p = vit.Params.resolve("ci", train_missing=False, **overrides)
    assert all(s.done() for s in vit.runs(p))
    diffs = _differences(json.loads(sequential), vit.run(p).to_json())
    assert not diffs, diffs[:10]
