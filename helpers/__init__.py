"""Helpers of the token-uniformity book: notebooks narrate, these modules compute.

Layers (STYLE.md; the import rule is tested in tests/test_layers.py): `core` (paper mathematics),
`book` (seeds, devices, parameters, results cache, notebooks), `data`, `hf` (Hugging Face loading,
walking, hooks), `train` (the one training loop and its task adapters), `experiments` (one module per
chapter: Params, Result, run) and `figures` (one module per chapter). Chapters import only
`experiments` and `figures`.
"""

#: the one version of the package: pyproject.toml reads it from here (`[tool.setuptools.dynamic]`), so the
#: installed package, `tokuni --version` and every diagnosis's JSON say the same
__version__ = "0.3.0"

import warnings as _warnings

# tqdm.auto, imported by transformers/datasets, warns with its install path when a kernel has no
# ipywidgets; progress bars then fall back to text, so the warning only clutters executed notebooks
_warnings.filterwarnings("ignore", message="IProgress not found")
