"""One module per chapter: its `Params` (presets), `run(params) -> Result`, and the computations only
that chapter needs; `findings` collects every chapter's findings for the book's findings page. Chapters
import this layer and `helpers.figures`, nothing else.

Every module of this package is imported here; a chapter is a module whose `Params` registers itself
(`helpers.machinery.params.CHAPTERS`), so `CHAPTERS` lists them without a hand-kept list."""

import pkgutil
from importlib import import_module

from ..hf.models import WIDTH, about  # what each encoder is, written once, for the chapters' prose
from ..machinery.params import CHAPTERS as _REGISTRY

for _m in pkgutil.iter_modules(__path__):
    globals()[_m.name] = import_module(f"{__name__}.{_m.name}")

#: the chapters with an experiment (name → module), from the Params registry
CHAPTERS = {name: globals()[name] for name in sorted(_REGISTRY) if name in globals()}

__all__ = sorted(CHAPTERS) + ["findings", "CHAPTERS", "WIDTH", "about"]
