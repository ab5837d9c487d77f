"""`scripts/bench_gpu.py` (`make bench-gpu`) at tiny shapes on the CPU, as it runs on a machine without a
GPU: every loop is timed, the grid-cost columns are filled, SoftDecay's two forms are timed and agree with
the float64 result, and the record names the device and the command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def test_bench_gpu_runs_at_tiny_shapes_on_the_cpu(tmp_path):
    import bench_gpu

    out = tmp_path / "gpu-cpu.json"
    assert bench_gpu.main(["--device", "cpu", "--size", "tiny", "--no-compile", "--pack", "1", "--steps", "3",
                           "--out", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["card"] == "cpu" and rec["size"] == "tiny" and rec["command"].startswith("python scripts/bench_gpu.py")
    assert set(rec["loops"]) == set(bench_gpu.LOOPS)
    for row in rec["loops"].values():
        assert row["eager"]["seconds_per_step"] > 0 and row["eager"]["finite"]
        assert row["grid_gpu_hours"] == row["run_hours"] * row["runs"] > 0
    sd = rec["softdecay"]
    assert sd["poly"]["certified"] and sd["poly"]["degree"] >= 2
    for m in ("gram", "poly"):
        assert sd["methods"][m]["max_error_over_sigma_max"] < 1e-6
        assert sd["methods"][m]["training_x"] > 1 and sd["methods"][m]["ops_forward"] > 0
