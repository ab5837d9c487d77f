"""A local stand-in for the Hugging Face hub: `start()` serves, under their real ids, small
random-weight models of the real architectures and small datasets with the real schemas and split
names, over the hub's HTTP API (see `server.py` for the routes, `content.py` for what is served);
`environment(hub, home)` is what points huggingface_hub / transformers / datasets at it."""

from __future__ import annotations

import os
from pathlib import Path

from .content import dataset_repos, model_ids, model_repos
from .server import Hub, Repo


def start(models: list[str] | None = None, faults: dict | None = None, pinned: bool = True) -> Hub:
    """A running stand-in serving `models` (default: every model id) and every dataset, with `faults`
    (`{"rename": {config_or_repo: {old: new}}, "drop_split": {config: [split]}}`) applied to the datasets.
    With `pinned`, each repository's `main` is at the commit the lock (`helpers.data.hublock.lock_path()`, read
    now) pins it to, where it pins one, so the book's loaders find the commits they ask for."""
    import dataclasses

    from helpers.data import hublock
    from helpers.hf.models import CANONICAL_IDS

    hub = Hub(aliases=CANONICAL_IDS)
    for repo in model_repos(models) + dataset_repos(faults):
        commit = hublock.pin(repo.kind, repo.repo_id) if pinned else None
        hub.add(dataclasses.replace(repo, commit=commit) if commit else repo)
    return hub.start()


def environment(hub: Hub, home: str | Path, data: str | Path | None = None) -> dict[str, str]:
    """Environment for a process that must load through the stand-in: the hub endpoint, online mode,
    a fresh HF_HOME, no token, and TOKUNI_DATA at a folder that does not exist (no offline mirror)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0", TRANSFORMERS_OFFLINE="0",
               HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1",
               HF_HUB_DISABLE_IMPLICIT_TOKEN="1", HF_HUB_ETAG_TIMEOUT="30", HF_HUB_DOWNLOAD_TIMEOUT="60",
               TOKUNI_DATA=str(data or Path(home) / "no-mirror"), NO_PROXY="127.0.0.1,localhost",
               no_proxy="127.0.0.1,localhost", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


__all__ = ["Hub", "Repo", "start", "environment", "model_ids", "model_repos", "dataset_repos"]
