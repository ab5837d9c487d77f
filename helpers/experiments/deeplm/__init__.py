"""The deep causal language model chapter (Yu & Zhang §3.4, Figure 7), as its one module before it is split."""

from .compute import *  # noqa: F403
from .compute import VARIANTS, __all__  # noqa: F401
