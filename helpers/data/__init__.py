"""Datasets: the offline mirror (`../shared/data` or $TOKUNI_DATA) first, the hub through `datasets`
when the mirror is absent, and a clear `DataUnavailable` when neither has it."""

from .loaders import *  # noqa: F403
from .loaders import __all__  # noqa: F401
