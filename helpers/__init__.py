"""Helpers of the token-uniformity book: notebooks narrate, these modules compute.

Modules: `measures` (every scalar diagnostic), `blocks` (Yu & Zhang's blocks), `tse` and
`subspace` (the computations behind those chapters), `models`, `data`, `runtime`, `params`
(chapter parameters and scale presets), `plotting`.
"""

__version__ = "0.1.0"
