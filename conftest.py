"""Repository-wide pytest set-up: nbval over the MyST chapters (see helpers/nbplugin.py)."""

pytest_plugins = ["helpers.machinery.nbplugin"]
