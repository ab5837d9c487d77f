"""Results with provenance and the heavy-run cache.

A chapter's `run(params)` calls `cached(params, name, compute, ...)`: at `book` scale a committed
file `results/<chapter>/book/<name>.json` whose recorded key equals `params.cache_key(...)` is read
back; otherwise `compute()` runs and, at `book` scale, its result is written there with provenance
(parameters, seed, versions, device, git commit, wall time, command) to be committed. At `ci`
scale it always recomputes (that is what proves the code). The key is derived from the Params
dataclass (`ChapterParams.cache_key`), never listed by hand.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from .runtime import REPO_ROOT, _git_commit, device_description, package_versions, timer


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
    key: dict[str, Any] | None = None,
) -> Path:
    """Write `results` as JSON with full provenance: parameters (seed and scale among them),
    package versions, device, git commit, wall time and the command that reproduces it (and the cache
    `key`, for a heavy run), in one atomic write."""
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
    if key is not None:
        record["key"] = _jsonable(key)
    path = Path(folder) / f"{name}.json"
    write_atomic(path, json.dumps(record, indent=1))
    return path


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to `path` so that a reader sees the old file or the new one, never half of one: a
    temporary file in the same folder, flushed to disk, then renamed over `path` (a kill mid-write leaves
    the old file intact and a stray `.tmp` file)."""
    import tempfile

    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class CorruptResults(RuntimeError):
    """A results file that cannot be read (truncated, not JSON, no `results`)."""


def load_results(path: str | os.PathLike) -> dict[str, Any]:
    """A results record, or one clear error naming the file and how to make it again."""
    path = Path(path)
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rec, dict) or "results" not in rec:
            raise ValueError("no 'results' entry")
    except (ValueError, UnicodeDecodeError) as err:
        chapter = path.parent.parent.name if path.parent.parent.parent.name == "results" else "<chapter>"
        raise CorruptResults(
            f"{path} is not a readable results file ({type(err).__name__}: {err}). Restore the committed copy "
            f"(`git checkout -- {path}`) or delete it and make it again: "
            f"`make rerun CHAPTER={chapter} SCALE={path.parent.name}`") from err
    return rec


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
    recorded key equals `key` is read back — `<name>.json`, or `<name>@<hash of key>.json` for a run
    with other settings than the committed one; otherwise `compute()` runs and, at `book` scale, its
    result is written with provenance: to `<name>.json` when no run of that name is committed, else to
    `<name>@<hash>.json`, so that a book-scale run with overridden settings never overwrites the
    committed run the chapter reads (to replace that one, delete its file). Returns (results,
    came_from_cache)."""
    path = committed_results_path(chapter, name, scale)
    key_j = _jsonable(key)
    variant = path.with_name(f"{name}@{settings_hash(key)}.json")
    if scale == "book":
        for candidate in (path, variant):
            if candidate.is_file():
                rec = load_results(candidate)
                if rec.get("key") == key_j:
                    return rec["results"], True
    with timer() as t:
        res = compute()
    if scale == "book":
        target = variant if path.is_file() else path
        target.parent.mkdir(parents=True, exist_ok=True)
        written = save_results(target.stem, res, params, target.parent, wall_time_s=t["seconds"], command=command,
                               key=key_j)
        return load_results(written)["results"], False
    return _jsonable(res), False


def checkpoint_dir(chapter: str, key: dict[str, Any]) -> Path:
    """Where a run's training checkpoints live: `_build/checkpoints/<chapter>/<hash of key>/`, outside
    `results/` (never committed) and independent of the output folder, so `make rerun` resumes too."""
    path = REPO_ROOT / "_build" / "checkpoints" / chapter / settings_hash(key)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(params: Any, name: str, compute: Callable[[], Any], drop: tuple[str, ...] = (),
           **extra: Any) -> tuple[Any, bool]:
    """One heavy run through the committed-results cache. The key is `params.cache_key(drop, **extra)`:
    the whole Params minus what does not change results, with `drop`ped fields (say `seeds`,
    `variants`) replaced by this run's own values in `extra` (say `seed=1, variant="pre-norm"`).
    Returns (results as JSON-able data, came_from_cache)."""
    key = params.cache_key(drop=drop, **extra)
    command = getattr(params, "command", None) or f"make rerun CHAPTER={params.CHAPTER} SCALE={params.scale}"
    return cached_run(params.CHAPTER, name, params, key, compute, params.scale, command=command)


R = TypeVar("R", bound="Result")


def variant_runs(params: Any, variants: Sequence[str], seeds: Sequence[int],
                 train: Callable[[str, int, Path | None], dict[str, Any]], prefix: str = ""
                 ) -> tuple[dict[str, list[dict]], list[bool]]:
    """The training chapters' grid: for every variant and run seed, `train(variant, seed, checkpoint)`
    through the committed-results cache (`cached`, named `<prefix><variant>-seed<seed>`, keyed by the
    Params minus `variants` and `seeds` plus this run's variant and seed). `checkpoint` is a file under
    `checkpoint_dir(<chapter>, key)` where a killed run resumes (None at `ci` scale: ci starts afresh).
    Returns ({variant: [history per seed]}, [cache hit per run])."""
    histories: dict[str, list[dict]] = {}
    hits: list[bool] = []
    for variant in variants:
        histories[variant] = []
        for s in seeds:
            extra = dict(variant=variant, run_seed=s)
            key = params.cache_key(drop=("variants", "seeds"), **extra)
            ckpt = None if params.scale == "ci" else checkpoint_dir(params.CHAPTER, key) / f"{variant}.pt"
            hist, hit = cached(params, f"{prefix}{variant}-seed{s}", lambda v=variant, s=s, c=ckpt: train(v, s, c),
                               drop=("variants", "seeds"), **extra)
            histories[variant].append(hist)
            hits.append(hit)
    return histories, hits


@dataclasses.dataclass
class Result:
    """Base of every chapter's typed result: JSON-able fields, `to_json` / `from_json`, and `save`
    (the chapter's record with provenance in the run's output folder)."""

    def to_json(self) -> dict[str, Any]:
        return _jsonable(asdict(self))

    @classmethod
    def from_json(cls: type[R], data: dict[str, Any]) -> R:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, params: Any, wall_time_s: float | None = None) -> Path:
        """Write this result with full provenance to the run's output folder (`make rerun` gives
        one; otherwise `_build/results/<chapter>/<scale>/`)."""
        folder = results_dir_for(params.CHAPTER, params.scale, params.results_dir)
        command = getattr(params, "command", None) or f"make rerun CHAPTER={params.CHAPTER} SCALE={params.scale}"
        return save_results(params.CHAPTER, self.to_json(), params, folder, wall_time_s=wall_time_s, command=command)
