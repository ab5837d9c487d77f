"""One module per chapter: the figures and tables drawn from that chapter's `Result`, and `publish(res)`
that glues the numbers its prose quotes; `common` holds the theme and the recurring figure types."""

from . import anisotropy, common, deeplm, drift, glue, qk, sts, subspace, tse, vit

__all__ = ["anisotropy", "common", "deeplm", "drift", "glue", "qk", "sts", "subspace", "tse", "vit"]
