"""`diagnose(model)`: load a model and its untrained twin, run a probe through both, measure every layer with
intervals over the probe's inputs, and say which layers differ from the twin beyond their intervals."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..book.runtime import choose_device, device_description, package_versions
from ..hf import models
from . import measures as DM
from .capture import capture
from .probe import Probe, default_probe, read_probe

#: the offline models a diagnosis loads by name (besides hub ids and local folders)
OFFLINE_MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2", "SmolLM2-135M-Instruct", "AntiBERTy", "rxnmapper-ALBERT",
                  "DINOv2-S/14", "EfficientNet-Lite0", "whisper-tiny.en", "whisper-base", "book-mlm-bert")
#: modality of the offline models that are not plain text
_MODALITY = {"AntiBERTy": "protein", "rxnmapper-ALBERT": "chem", "EfficientNet-Lite0": "vision",
             "whisper-tiny.en": "audio", "whisper-base": "audio"}
_VISION_TYPES = ("vit", "deit", "beit", "dinov2", "dinov2_with_registers", "convnext", "resnet", "swin",
                 "data2vec-vision", "efficientnet", "mobilevit")
_AUDIO_TYPES = ("whisper", "wav2vec2", "hubert", "wavlm", "data2vec-audio")


def modality_of(name: str) -> str:
    """text | protein | chem | vision | audio: from the book's tables for its offline models, else from the
    model's config (its `model_type`)."""
    if name in _MODALITY:
        return _MODALITY[name]
    if name in models.MODALITY:
        return models.MODALITY[name]
    if name in OFFLINE_MODELS:
        return "text"
    try:
        from transformers import AutoConfig

        kind = AutoConfig.from_pretrained(models.resolve_source(name)).model_type
    except Exception:  # noqa: BLE001 - the load that follows gives the one-line refusal
        return "text"
    return "vision" if kind in _VISION_TYPES else "audio" if kind in _AUDIO_TYPES else "text"


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub's endpoint (HF_ENDPOINT, else huggingface.co) answers a TCP connection."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout):
            return True
    except OSError:
        return False


def check_available(name: str) -> None:
    """Refuse at once, in one line, a model that is neither offline, nor a local folder, nor on a reachable hub
    (instead of the hub client's minutes of retries)."""
    if name in OFFLINE_MODELS or name in models.OFFLINE_PACKAGES or Path(name).is_dir():
        return
    offline = os.environ.get("HF_HUB_OFFLINE", "0").upper() in ("1", "ON", "YES", "TRUE")
    if offline or not _hub_reachable():
        from ..hf.loading import ModelUnavailable

        why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face hub cannot be reached from here"
        raise ModelUnavailable(f"cannot load {name!r}: not an offline model or a local folder, and {why}; on a "
                               "machine with hub access it downloads by its id, or pass the folder of a downloaded "
                               f"copy. Offline models: {', '.join(OFFLINE_MODELS)}")


def revision_of(loaded) -> str:
    """The hub commit the weights came from, else the version of the package that ships them, else the folder."""
    commit = getattr(getattr(loaded.model, "config", None), "_commit_hash", None)
    if commit:
        return str(commit)
    pkg = models.OFFLINE_PACKAGES.get(loaded.name)
    if pkg:
        return pkg[2]
    return loaded.source


@dataclass
class Diagnosis:
    """A model's per-layer measures beside its untrained twin's. `model` / `twin`: `measures.Measured`
    (estimate and bootstrap draws per measure); `meta`: model id, revision, probe, seed, versions, command."""

    meta: dict[str, Any]
    model: DM.Measured
    twin: DM.Measured | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def layers(self) -> int:
        return len(next(iter(self.model.estimate.values())))

    @property
    def measures(self) -> list[str]:
        return [m for m in DM.MEASURES if m in self.model.estimate]

    def curve(self, measure: str, which: str = "model") -> dict[str, np.ndarray]:
        """estimate, low, high per layer of `which` ("model", "twin", or "difference": model − twin, paired)."""
        if which == "difference":
            est = self.model.estimate[measure] - self.twin.estimate[measure]
            draws = self.model.draws[measure] - self.twin.draws[measure]
        else:
            got = self.model if which == "model" else self.twin
            est, draws = got.estimate[measure], got.draws[measure]
        lo, hi = DM.interval(draws, est)
        return {"estimate": est, "low": lo, "high": hi}

    def differs(self, measure: str) -> np.ndarray:
        """Per layer: whether model − twin's interval excludes 0 (False where either is undefined)."""
        c = self.curve(measure, "difference")
        with np.errstate(invalid="ignore"):
            return np.asarray((c["low"] > 0) | (c["high"] < 0))

    def to_json(self) -> dict[str, Any]:
        def arr(a):
            return [None if not np.isfinite(x) else round(float(x), 6) for x in np.asarray(a, dtype=float)]

        out: dict[str, Any] = {**self.meta, "skipped": self.skipped, "notes": self.notes, "measures": {}}
        for m in self.measures:
            label, what = DM.MEASURES[m]
            row: dict[str, Any] = {"label": label, "what": what}
            for which in ("model", "twin", "difference") if self.twin is not None else ("model",):
                row[which] = {k: arr(v) for k, v in self.curve(m, which).items()}
            if self.twin is not None:
                row["differs"] = [bool(x) for x in self.differs(m)]
            out["measures"][m] = row
        if self.model.qk_heads is not None:
            out["qk_heads"] = {"model": [arr(r) for r in self.model.qk_heads]}
            if self.twin is not None and self.twin.qk_heads is not None:
                out["qk_heads"]["twin"] = [arr(r) for r in self.twin.qk_heads]
        iso = {"model": arr(self.model.isoscore)}
        if self.twin is not None:
            iso["twin"] = arr(self.twin.isoscore)
        out["isoscore"] = iso
        out["dims"], out["vectors"] = self.model.dims, self.model.vectors
        return out


def _batch(modality: str, device: torch.device) -> int:
    base = {"text": 32, "protein": 16, "chem": 16, "vision": 16, "audio": 8}[modality]
    return base * 4 if device.type == "cuda" else base


def diagnose(model: str, probe: Probe | str | os.PathLike | None = None, *, twin: bool = True, n: int | None = None,
             seed: int = 0, draws: int = 200, device: str = "auto", max_tokens: int = 256,
             command: str | None = None) -> Diagnosis:
    """Diagnose `model` (a hub id, a local folder, or one of `OFFLINE_MODELS`) layer by layer on `probe` (a
    `Probe`, a probe file, or None: the modality's default probe of `n` inputs), beside its untrained twin
    (same config, seeded random weights) unless `twin=False`. Raises `hf.loading.ModelUnavailable` for a model
    that cannot be had, `probe.ProbeError` for an empty or undecodable probe file."""
    t0 = time.perf_counter()
    dev = choose_device(device)
    check_available(model)
    modality = modality_of(model)
    loaded = models.load(model, device=dev, modality="text" if modality in ("protein", "chem") else modality)
    if probe is None:
        probe = default_probe(modality, n, seed)
    elif not isinstance(probe, Probe):
        probe = read_probe(probe, modality)
    if probe.modality != modality and not {probe.modality, modality} <= {"text", "protein", "chem"}:
        raise ValueError(f"the probe holds {probe.modality} inputs; {model} takes {modality}")
    bs = _batch(modality, dev)
    cap = capture(loaded, probe, dev, bs, max_tokens)
    W = DM.bootstrap_weights(cap.n_inputs, draws, seed)
    got = DM.measure(cap.layers, W, cap.qk)
    skipped = {} if cap.qk is not None else {"qk_cos": cap.qk_skipped}
    if np.isnan(got.isoscore).all():
        skipped["isoscore"] = "the `isoscore` package is not installed (`pip install --no-deps isoscore`)"
    rev, description, source = revision_of(loaded), loaded.description, loaded.source
    twin_got = None
    if twin:
        del loaded
        twin_loaded = models.load(model, untrained=True, device=dev,
                                  modality="text" if modality in ("protein", "chem") else modality)
        tcap = capture(twin_loaded, probe, dev, bs, max_tokens, qk=cap.qk is not None)
        twin_got = DM.measure(tcap.layers, W, tcap.qk)
    n_layers = len(cap.layers)
    meta = {
        "tool": "tokuni diagnose",
        "model": model,
        "description": description,
        "source": source,
        "revision": rev,
        "modality": modality,
        "units": cap.units,
        "layer_names": ["embeddings"] + [f"block {i}" for i in range(1, n_layers)],
        "probe": probe.to_json(),
        "seed": seed,
        "draws": draws,
        "level": 0.95,
        "twin": "same config, seeded random weights (torch.manual_seed(0))" if twin else None,
        "device": device_description(dev),
        "versions": package_versions(),
        "command": command or "python: helpers.diagnose.diagnose(" + repr(model) + ")",
        "seconds": None,
    }
    d = Diagnosis(meta, got, twin_got, skipped, cap.notes)
    d.meta["seconds"] = round(time.perf_counter() - t0, 1)
    return d


def command_line(argv: list[str] | None = None) -> str:
    return "tokuni " + " ".join(sys.argv[1:] if argv is None else argv)


def default_out(model: str) -> Path:
    return Path("tokuni-" + model.replace("/", "_").replace(":", "_"))


__all__ = ["OFFLINE_MODELS", "Diagnosis", "diagnose", "modality_of", "revision_of", "default_out"]
