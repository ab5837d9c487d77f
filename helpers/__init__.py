"""Helpers of the token-uniformity book: notebooks narrate, these modules compute.

Layers (STYLE.md; the import rule is tested in tests/test_layers.py): `core` (paper mathematics),
`book` (seeds, devices, parameters, results cache, notebooks), `data`, `hf` (Hugging Face loading,
walking, hooks), `train` (the one training loop and its task adapters), `experiments` (one module per
chapter: Params, Result, run) and `figures` (one module per chapter). Chapters import only
`experiments` and `figures`.
"""

__version__ = "0.2.0"
