"""Chapter parameters: the base of every chapter's frozen `Params` dataclass and its presets.

Each `helpers.experiments.<chapter>.Params` subclasses `ChapterParams`, names its `CHAPTER` and
its `ci` / `book` / `paper` `PRESETS`, and is registered here by that name. A chapter's
parameters cell holds `scale` and an `overrides` mapping; `Params.resolve(scale, **overrides)`
starts from the preset, applies the overrides and validates names, types (`Literal[...]` included)
and values, failing with one message that names the offending parameter. `scripts/rerun.py` runs
the same validation before it starts papermill.

`cache_key()` is what a result depends on: every field but those in `NOT_RESULTS` (scale, device,
output folder, command) and the class's own `CACHE_EXCLUDE`; a field added after runs were committed
(`KEYED_UNLESS_DEFAULT`) enters it only away from its default. It is derived from the dataclass,
never listed by hand.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Literal

SCALES = ("ci", "book", "paper")
#: fields that never change a result: left out of every cache key
NOT_RESULTS = ("scale", "device", "results_dir", "command", "train_missing")
#: every chapter's Params class, by chapter name (filled by ChapterParams.__init_subclass__)
CHAPTERS: dict[str, type[ChapterParams]] = {}


class ParameterError(ValueError):
    """A chapter parameter is unknown, of the wrong type, or impossible."""


def _check_type(name: str, value: Any, annotation: Any) -> Any:
    """Check (and lightly coerce: int -> float, list -> tuple) one value against its annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arg in typing.get_args(annotation):
            if arg is type(None):
                if value is None:
                    return None
                continue
            try:
                return _check_type(name, value, arg)
            except ParameterError as err:
                errors.append(str(err))
        raise ParameterError(errors[0] if errors else f"parameter {name!r}: bad value {value!r}")
    if origin is Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            raise ParameterError(f"parameter {name!r} must be one of {list(allowed)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ParameterError(f"parameter {name!r} must be a list, got {type(value).__name__} {value!r}")
        (item_type, *_rest) = typing.get_args(annotation)
        return tuple(_check_type(f"{name}[{i}]", v, item_type) for i, v in enumerate(value))
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ParameterError(f"parameter {name!r} must be a number, got {type(value).__name__} {value!r}")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"parameter {name!r} must be an integer, got {type(value).__name__} {value!r}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ParameterError(f"parameter {name!r} must be True or False, got {value!r}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ParameterError(f"parameter {name!r} must be a string, got {type(value).__name__} {value!r}")
        return value
    return value


@dataclass(frozen=True)
class ChapterParams:
    """Base class: the knobs every chapter has.

    `seed` is the base seed; a chapter that repeats a run over seeds has a field `seeds: int` (how
    many) and runs `run_seeds(seed, seeds)` = seed, seed+1, ... (see `helpers.machinery.runtime`)."""

    scale: str = "book"
    seed: int = 0
    device: str = "auto"
    results_dir: str | None = None
    command: str | None = None
    #: whether `run` trains heavy runs the cache lacks (True), or names them and the command that makes them
    #: (`machinery.grid.MissingRuns`; False: what the book build and a reader on a laptop want). Default: the
    #: environment's `TOKUNI_TRAIN_MISSING` ("0" for False; `make book` sets it), else True
    train_missing: bool = field(default_factory=lambda: os.environ.get("TOKUNI_TRAIN_MISSING", "1") != "0")

    CHAPTER: ClassVar[str] = ""
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}
    #: fields of this chapter that do not change its results (besides NOT_RESULTS)
    CACHE_EXCLUDE: ClassVar[tuple[str, ...]] = ()
    #: fields added after runs were committed: left out of the key while at their default (which is what the
    #: committed runs ran with), so those runs keep their keys; any other value is keyed
    KEYED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ()
    #: (field, predicate, message) triples checked after types
    RULES: ClassVar[tuple[tuple[str, Any, str], ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.CHAPTER:
            CHAPTERS[cls.CHAPTER] = cls

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = _check_type(f.name, getattr(self, f.name), hints[f.name])
            object.__setattr__(self, f.name, value)
        if self.scale not in SCALES:
            raise ParameterError(f"parameter 'scale' must be one of {SCALES}, got {self.scale!r}")
        if self.seed < 0:
            raise ParameterError(f"parameter 'seed' must be >= 0, got {self.seed}")
        if self.device != "auto" and not (self.device in ("cpu", "meta") or self.device.startswith("cuda")):
            raise ParameterError(f"parameter 'device' must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")
        for name, ok, message in self.RULES:
            if not ok(getattr(self, name)):
                raise ParameterError(f"parameter {name!r} = {getattr(self, name)!r}: {message}")
        if getattr(self, "precision", None) == "auto":
            # resolved here, so that the cache key records the precision the runs are computed in
            from .runtime import choose_precision

            object.__setattr__(self, "precision", choose_precision("auto", self.device))

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def resolve(cls, scale: str = "book", **overrides: Any):
        """The `scale` preset with `overrides` applied (a None override keeps the preset's value)."""
        if scale not in SCALES:
            raise ParameterError(f"parameter 'scale' must be one of {SCALES}, got {scale!r}")
        unknown = sorted(set(overrides) - set(cls.names()))
        if unknown:
            raise ParameterError(
                f"unknown parameter(s) {unknown} for chapter {cls.CHAPTER!r}; known: {sorted(cls.names())}"
            )
        if "scale" in overrides:
            raise ParameterError("give the scale as `scale`, not inside the overrides")
        values = dict(cls.PRESETS.get(scale, {}))
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["scale"] = scale
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def cache_key(self, drop: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
        """The settings a result depends on: every field but NOT_RESULTS, CACHE_EXCLUDE and `drop`
        (fields a per-run cache replaces by the run's own values, given as `extra`), and a field of
        KEYED_UNLESS_DEFAULT at its default."""
        skip = set(NOT_RESULTS) | set(self.CACHE_EXCLUDE) | set(drop)
        defaults = {f.name: f.default for f in fields(self) if f.name in self.KEYED_UNLESS_DEFAULT}
        skip |= {k for k, d in defaults.items() if getattr(self, k) == d}
        key = {k: v for k, v in self.as_dict().items() if k not in skip}
        key.update(extra)
        return key

    def with_(self, **changes: Any):
        """A copy with `changes` (validated like any Params)."""
        return dataclasses.replace(self, **changes)


def for_chapter(chapter: str) -> type[ChapterParams]:
    """The Params class of `chapter` (registered when `helpers.experiments` is imported)."""
    try:
        return CHAPTERS[chapter]
    except KeyError:
        raise ParameterError(f"unknown chapter {chapter!r}; chapters: {sorted(CHAPTERS)}") from None


def check_heads(params: Any) -> None:
    """The width must split into heads: `d_model` divisible by `n_heads` (ParameterError naming both)."""
    if params.d_model % params.n_heads:
        raise ParameterError(f"parameter 'd_model' = {params.d_model} must be divisible by "
                             f"n_heads = {params.n_heads}")


positive = (lambda v: v > 0, "must be > 0")
nonneg = (lambda v: v >= 0, "must be >= 0")


def rules(**spec: tuple[Any, str]) -> tuple[tuple[str, Any, str], ...]:
    """RULES from `name=(predicate, message)` pairs."""
    return tuple((name, pred, msg) for name, (pred, msg) in spec.items())


__all__ = ["SCALES", "NOT_RESULTS", "CHAPTERS", "ParameterError", "ChapterParams", "for_chapter", "check_heads",
           "positive",
           "nonneg", "rules", "field", "dataclass", "ClassVar", "Any", "Literal"]
