"""One module per chapter: the figures and tables drawn from that chapter's `Result`, and `publish(res)`
that hands the numbers its prose quotes to the page; `common` holds the theme, the recurring figure types
and the findings' rendering; `findings` draws the book's findings page. Every module of this package is
imported here (no hand-kept list)."""

import pkgutil
from importlib import import_module

for _m in pkgutil.iter_modules(__path__):
    globals()[_m.name] = import_module(f"{__name__}.{_m.name}")

__all__ = sorted(m.name for m in pkgutil.iter_modules(__path__))
