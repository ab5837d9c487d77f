"""One module per chapter: the figures and tables drawn from that chapter's `Result`; `common` holds
the theme and the recurring figure types."""
