"""One module per chapter: the figures and tables drawn from that chapter's `Result`; `common` holds
the theme and the recurring figure types."""


def __getattr__(name: str):
    """`figures.<chapter>` imports that chapter's module on first use (chapters write
    `from helpers import figures` and then `figures.vit.publish(res)`)."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"{__name__}.{name}":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        raise
