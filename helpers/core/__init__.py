"""Paper mathematics: the papers' equations as torch/numpy functions and modules. This layer imports
nothing else of `helpers` (tested in tests/test_layers.py)."""
