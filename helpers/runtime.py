"""Runtime plumbing: seeding, device choice, progress bars, results I/O with provenance."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, is_dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

REPO_ROOT = Path(__file__).resolve().parent.parent
_VERSIONED = ("torch", "transformers", "numpy", "scipy", "datasets", "jupyter-book")


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch (CPU and CUDA) and return a torch Generator seeded alike.

    CPU reruns with the same seed are bit-identical: we also ask torch for deterministic kernels
    where it has them (warn-only, so ops without a deterministic variant still run).
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def choose_device(device: str | None = "auto") -> torch.device:
    """`auto` takes CUDA when present, else CPU; anything else is passed to torch.device."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} asked for, but torch sees no CUDA device")
    return dev


def progress(iterable: Iterable, desc: str = "", total: int | None = None, **kw: Any) -> Iterator:
    """`tqdm.auto` progress bar; silenced when TOKUNI_NO_PROGRESS=1 (used by CI logs)."""
    disable = os.environ.get("TOKUNI_NO_PROGRESS") == "1"
    return iter(tqdm(iterable, desc=desc, total=total, disable=disable, leave=False, **kw))


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_description(device: torch.device | str | None = None) -> str:
    dev = choose_device(device if device is not None else "auto")
    if dev.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(dev)}"
    return f"cpu:{platform.processor() or platform.machine()} x{os.cpu_count()}"


@contextmanager
def timer() -> Iterator[dict[str, float]]:
    """`with timer() as t: ...` then `t["seconds"]`."""
    box: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["seconds"] = time.perf_counter() - start


def _jsonable(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return _jsonable(obj.detach().cpu().tolist())
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None if np.isnan(obj) else (1e308 if obj > 0 else -1e308)
    return obj


def results_dir_for(chapter: str, scale: str, results_dir: str | os.PathLike | None) -> Path:
    """Where a chapter writes its results: the given folder (from `make rerun`), else
    `_build/results/<chapter>/<scale>/` (ignored by git)."""
    path = Path(results_dir) if results_dir else REPO_ROOT / "_build" / "results" / chapter / scale
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_results(
    name: str,
    results: dict[str, Any],
    params: Any,
    folder: Path,
    wall_time_s: float | None = None,
    command: str | None = None,
) -> Path:
    """Write `results` as JSON with full provenance: parameters (seed and scale among them),
    package versions, device, git commit, wall time and the command that reproduces it."""
    p = _jsonable(params)
    record = {
        "name": name,
        "params": p,
        "seed": p.get("seed") if isinstance(p, dict) else None,
        "scale": p.get("scale") if isinstance(p, dict) else None,
        "provenance": {
            "versions": package_versions(),
            "device": device_description(p.get("device") if isinstance(p, dict) else None),
            "git_commit": _git_commit(),
            "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "wall_time_s": wall_time_s,
            "command": command,
        },
        "results": _jsonable(results),
    }
    path = Path(folder) / f"{name}.json"
    path.write_text(json.dumps(record, indent=1))
    return path


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def settings_hash(key: dict[str, Any]) -> str:
    """A short stable hash of a settings dict (for checkpoint file names)."""
    import hashlib

    return hashlib.sha256(json.dumps(_jsonable(key), sort_keys=True).encode()).hexdigest()[:12]


def committed_results_path(chapter: str, name: str, scale: str) -> Path:
    """Where heavy `book`-scale runs keep their committed results: `results/<chapter>/<scale>/<name>.json`."""
    return REPO_ROOT / "results" / chapter / scale / f"{name}.json"


def cached_run(chapter: str, name: str, params: Any, key: dict[str, Any], compute, scale: str,
               command: str | None = None) -> tuple[dict[str, Any], bool]:
    """Heavy-run cache (DESIGN: "at book scale a chapter reads the committed results when their
    parameters match and recomputes otherwise; at ci scale it always recomputes").

    `key` holds every setting the result depends on. At `book` scale, a committed file whose
    recorded key equals `key` is read back; otherwise `compute()` runs and, at `book` scale, its
    result is written there with provenance (commit it). Returns (results, came_from_cache).
    """
    path = committed_results_path(chapter, name, scale)
    key_j = _jsonable(key)
    if scale == "book" and path.is_file():
        rec = load_results(path)
        if rec.get("key") == key_j:
            return rec["results"], True
    with timer() as t:
        res = compute()
    if scale == "book":
        path.parent.mkdir(parents=True, exist_ok=True)
        save_results(name, res, params, path.parent, wall_time_s=t["seconds"], command=command)
        rec = load_results(path)
        rec["key"] = key_j
        path.write_text(json.dumps(rec, indent=1))
        return rec["results"], False
    return _jsonable(res), False
