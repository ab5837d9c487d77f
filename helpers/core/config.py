"""Configuration dataclasses in the book's vocabulary (STYLE.md: `d_model`, `n_heads`, `d_ff`, `batch_size`),
stored under the names their runs were first keyed with.

Some cache keys and checkpoint folders are hashes of a configuration's fields. The fields were renamed to the
book's vocabulary after the runs were made; where the old names are in a committed run's key (the MLM pretraining,
`train.mlm.PretrainConfig`), `STORED_AS` keeps them and `stored()` gives the configuration under them, so every
key stays what it was (`tests/test_config_names.py` pins the hashes). A configuration that enters no key is stored
under its own names.

A string mode (a pooling, an initialisation, a variant) is typed as a `Literal` and checked where it enters by
`choice`, which names the parameter, the value and the choices."""

from __future__ import annotations

import typing
from dataclasses import asdict, fields
from typing import Any, ClassVar


class StoredNames:
    """Mixin for a dataclass: `STORED_AS` maps a field to the name it is stored under."""

    STORED_AS: ClassVar[dict[str, str]] = {}
    #: fields added after runs were stored: left out of `stored()` while at their default (what those runs ran
    #: with), so their keys and checkpoints stay what they were
    STORED_UNLESS_DEFAULT: ClassVar[tuple[str, ...]] = ()

    def stored(self) -> dict[str, Any]:
        """`dataclasses.asdict(self)` with the stored names, in field order: what keys and results hold (a field of
        `STORED_UNLESS_DEFAULT` only away from its default)."""
        skip = {f.name for f in fields(self) if f.name in self.STORED_UNLESS_DEFAULT
                and getattr(self, f.name) == f.default}
        return {self.STORED_AS.get(k, k): v for k, v in asdict(self).items() if k not in skip}


def choice(name: str, value: Any, modes: Any) -> Any:
    """`value` if it is one of the `Literal` type `modes` (or a tuple of choices); else a `ValueError` naming the
    parameter, the value and every choice."""
    allowed = modes if isinstance(modes, tuple) else typing.get_args(modes)
    if value not in allowed:
        raise ValueError(f"{name} {value!r}: use one of {allowed}")
    return value
