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


def test_readme_cost_table_is_the_committed_gpu_bench():
    """Every committed paper-shape GPU bench (`results/bench/gpu-<card>.json`) is the one the README's cost
    table quotes: each loop's eager and compiled s/step and peak GiB, SoftDecay's two forms, the packing."""
    import re

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## What a `paper` run costs"):]
    section = section[:section.index("\n## ", 5)]
    benches = [p for p in sorted((ROOT / "results" / "bench").glob("gpu-*.json"))
               if json.loads(p.read_text())["size"] == "paper"]
    assert benches, "no paper-shape GPU bench committed"
    rec = json.loads(benches[-1].read_text())
    assert benches[-1].name in section
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ")}
    labels = {"vit-standard": rec["loops"]["vit-standard"]["label"], "vit-algorithm1": "same, Algorithm 1 blocks",
              "lm": rec["loops"]["lm"]["label"], "mlm": rec["loops"]["mlm"]["label"]}
    for name, label in labels.items():
        row, loop = rows[label], rec["loops"][name]
        cells = [c.strip() for c in row.split("|")[2:6]]
        assert cells[0] == f"{loop['eager']['seconds_per_step']:.3f}", (name, cells)
        assert cells[1] == f"{loop['compiled']['seconds_per_step']:.3f}", (name, cells)
        assert cells[2] == f"{loop['compile_s']:.1f}", (name, cells)
        assert cells[3] == f"{loop['compiled']['peak_gib']:.1f}", (name, cells)
    for method in ("gram", "poly"):
        m = rec["softdecay"]["methods"][method]
        row = next(line for line in rows.values() if f'method="{method}"' in line)
        assert re.search(rf"\| {m['forward_s']:.3f} \| {m['inference_x']:.2f} \| {m['forward_backward_s']:.3f} "
                         rf"\| {m['training_x']:.2f} \|", row), row
    assert f"{rec['packed']['seconds_per_step_each']:.3f} s per step" in section
