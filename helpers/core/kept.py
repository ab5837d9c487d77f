"""Values a run computes more than once, kept for the length of a run: a store that is active only inside its
`scope()` (so nothing outlives the run that filled it) and lets its oldest entries go beyond a size budget."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any


class Kept:
    """A store of computed values by key, active inside `scope()` and empty (inactive) outside it. `size(value)`
    gives an entry's bytes; after each `put` the oldest entries are let go while more than `keep_at_least` are held
    and together they pass the scope's byte budget."""

    def __init__(self, max_bytes: int, size: Callable[[Any], int], keep_at_least: int = 1) -> None:
        self.max_bytes, self.size, self.keep_at_least = max_bytes, size, keep_at_least
        self._store: OrderedDict | None = None
        self._budget = max_bytes

    @contextmanager
    def scope(self, max_bytes: int | None = None) -> Iterator[None]:
        """Keep values within this block (a nested block starts empty; the outer one's come back after it)."""
        before = self._store, self._budget
        self._store, self._budget = OrderedDict(), self.max_bytes if max_bytes is None else max_bytes
        try:
            yield
        finally:
            self._store, self._budget = before

    @property
    def active(self) -> bool:
        return self._store is not None

    def __len__(self) -> int:
        return len(self._store) if self._store is not None else 0

    def __contains__(self, key: Hashable) -> bool:
        return self._store is not None and key in self._store

    def get(self, key: Hashable) -> Any:
        """The value kept under `key` (now the newest), or None."""
        if self._store is None or key not in self._store:
            return None
        self._store.move_to_end(key)
        return self._store[key]

    def put(self, key: Hashable, value: Any) -> None:
        """Keep `value` under `key` (no-op outside a scope), then let the oldest go beyond the budget."""
        if self._store is None:
            return
        self._store[key] = value
        self._store.move_to_end(key)
        while len(self._store) > self.keep_at_least and sum(map(self.size, self._store.values())) > self._budget:
            self._store.popitem(last=False)


__all__ = ["Kept"]
