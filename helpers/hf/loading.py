"""What every model loader shares: the error for a model that cannot be found, and silencing the
libraries' load reports. Its own module so that `models` imports its loaders (`sequence_models`,
`whisper`) and they import this, with no import circle."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: transformers, loading a `.bin`-only hub repo (MultiBERT, HuBERT), starts a background thread that asks
#: the hub's commits and discussions API for a safetensors conversion PR and may open one through the
#: SFconvertbot Space — requests a reader did not ask for, to hosts a firewall may not allow. Off unless
#: the reader turns it on (read at each load: `transformers.utils.is_env_variable_true`).
os.environ.setdefault("DISABLE_SAFETENSORS_CONVERSION", "1")


class ModelUnavailable(RuntimeError):
    """A model can be found neither offline nor on the hub."""


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Silence transformers' load reports, weight-loading bars and the GGUF de-quantisation bar (they
    would end up in the rendered book) for the duration of the block."""
    import functools
    import importlib

    from transformers.utils import logging as tlog

    level = tlog.get_verbosity()
    bars = tlog.is_progress_bar_enabled()
    tlog.set_verbosity_error()
    tlog.disable_progress_bar()
    gguf = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    gguf_tqdm = gguf.tqdm
    gguf.tqdm = functools.partial(gguf_tqdm, disable=True)
    try:
        yield
    finally:
        gguf.tqdm = gguf_tqdm
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


__all__ = ["ModelUnavailable", "quiet_loading"]
