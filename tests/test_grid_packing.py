"""Several runs per card (`run_grid(..., gpus=..., jobs_per_gpu=N)`, `scripts/grid.py --jobs-per-gpu N`):
the packed grid's results equal the sequential run's bit for bit (on the CPU: each job is its own process,
pinned to its card by `CUDA_VISIBLE_DEVICES`), and the progress line says how many jobs share each card."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gridtoy
import pytest

from helpers.machinery import grid

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent / "scripts"))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKUNI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def test_packed_jobs_equal_the_sequential_run_bit_for_bit(cache, monkeypatch):
    p = gridtoy.Params.resolve("ci")
    lines: list[str] = []
    rep = grid.run_grid(gridtoy.runs(p), grid.executor("local", cache / "logs"), gpus=[0], jobs_per_gpu=4,
                        report=lines.append, poll_s=0.2)
    assert rep.count("done") == 4 and not rep.failures
    assert any("4 per GPU" in ln for ln in lines)
    assert any("GPU 0: 4; up to 4 a card" in ln for ln in lines), lines          # all four shared the card
    got = gridtoy.run(p)
    monkeypatch.delenv("TOKUNI_CACHE_DIR")
    assert all(got["hits"]) and got["histories"] == gridtoy.run(p)["histories"]


def test_slots_fill_every_card_before_doubling_up():
    assert grid.gpu_slots([0, 1], 3) == [0, 1, 0, 1, 0, 1]
    assert grid.gpu_slots([2], 1) == [2]
    with pytest.raises(ValueError):
        grid.gpu_slots([0], 0)


def test_the_command_line_refuses_packing_without_cards(capsys):
    import grid as grid_script

    assert grid_script.main(["vit", "--scale", "ci", "--jobs-per-gpu", "2"]) == 2
    assert "--gpus" in capsys.readouterr().err
    assert grid_script.main(["vit", "--scale", "ci", "--gpus", "0", "--jobs-per-gpu", "2",
                             "--gib-per-job", "4"]) == 2
