"""One training core: a loop (`fit`) that every training experiment uses through a small task adapter,
and one checkpoint format (atomic, every RNG state, settings check, resume)."""
