"""`diagnose(model)`: check every option, the model and the probe, then load the model and several untrained
twins (the same architecture, random weights drawn with seeds seed, seed + 1, …), run the probe through each,
measure every layer with intervals over the probe's inputs, and flag the (layer, measure) cells where the model is
unlike a new draw from its twins (`measures.twin_test`: the twins' spread, the initialisation, beside the probe's
sampling, the inputs; Benjamini–Hochberg over the cells), with the smallest shift the run could have flagged."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..hf import models
from ..machinery.runtime import REPO_ROOT, choose_device, device_description, package_versions, run_seeds
from . import measures as DM
from .capture import capture
from .checks import (
    DiagnoseError,
    check_device,
    check_folder,
    check_memory,
    check_options,
    dims_of,
    looks_like_path,
    modality_of_config,
)
from .probe import MAX_SIZE, Probe, ProbeError, default_probe, read_probe

#: the offline models a diagnosis loads by name (besides hub ids and local folders)
OFFLINE_MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2", "SmolLM2-135M-Instruct", "AntiBERTy", "rxnmapper-ALBERT",
                  "DINOv2-S/14", "EfficientNet-Lite0", "whisper-tiny.en", "whisper-base", "book-mlm-bert")
#: modality of the offline models that are not plain text
_MODALITY = {"AntiBERTy": "protein", "rxnmapper-ALBERT": "chem", "EfficientNet-Lite0": "vision",
             "whisper-tiny.en": "audio", "whisper-base": "audio"}
#: the default number of untrained twins: at least TWINS, then more while they are cheap (`TWIN_BUDGET_S`), up to
#: MAX_TWINS
TWINS = 5
MAX_TWINS = 20
#: the seconds of twin passes (CPU time on a CPU, wall time on a GPU) past which the default takes no more twins
TWIN_BUDGET_S = 30.0
#: the default bound on the vectors of one input (`capture`: a text is cut to its first `max_tokens` tokens)
MAX_TOKENS = 256
#: files whose SHA-256 the JSON records for a model read from disk
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".gguf", ".ckpt")
#: the packages whose versions the JSON records, besides `machinery.runtime.package_versions`'
_MORE_VERSIONS = ("tokenizers", "isoscore", "matplotlib", "safetensors", "huggingface_hub", "token-uniformity-book")


def _offline(name: str) -> bool:
    return name in OFFLINE_MODELS or name in models.OFFLINE_PACKAGES


def kind_of(name: str) -> str:
    """"offline" (a name the book loads without the hub), "folder" (a path), or "hub" (a hub id)."""
    if _offline(name) and not Path(name).is_dir():
        return "offline"
    if looks_like_path(name) or Path(name).exists():
        return "folder"
    return "hub"


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
    """Refuse at once, in one line, a hub id when the hub is switched off or cannot be reached (instead of the
    hub client's minutes of retries)."""
    if kind_of(name) != "hub":
        return
    offline = os.environ.get("HF_HUB_OFFLINE", "0").upper() in ("1", "ON", "YES", "TRUE")
    if offline or not _hub_reachable():
        from ..hf.loading import ModelUnavailable

        why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face hub cannot be reached from here"
        raise ModelUnavailable(f"cannot load {name!r}: not an offline model or a local folder, and {why}; on a "
                               "machine with hub access it downloads by its id, or pass the folder of a downloaded "
                               f"copy. Offline models: {', '.join(OFFLINE_MODELS)}")


def resolve_revision(name: str, revision: str | None) -> str:
    """The commit a hub id's `revision` (branch, tag or commit; None: main) points to now, asked of the hub, so
    that the model is loaded at that commit and the JSON records exactly what was measured."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    from ..hf.loading import ModelUnavailable

    try:
        sha = HfApi().model_info(models.resolve_source(name), revision=revision).sha
    except RevisionNotFoundError:
        raise DiagnoseError(f"--revision {revision}: {name} has no such branch, tag or commit") from None
    except (HfHubHTTPError, OSError, ValueError) as err:
        raise ModelUnavailable(f"cannot resolve {name!r} at revision {revision or 'main'} on the hub "
                               f"({str(err).splitlines()[0][:160]})") from None
    if not sha:
        raise ModelUnavailable(f"the hub gives no commit for {name!r} at revision {revision or 'main'}")
    return sha


def model_config(name: str, revision: str | None = None) -> dict | None:
    """The model's config as a dict, read without running any of its code: a folder's config.json (checked:
    `checks.check_folder`), an offline model's where it ships one, a hub id's through `AutoConfig` with
    `trust_remote_code=False`; None where there is none to read (GGUF, CTranslate2, plain PyTorch weights)."""
    import json

    kind = kind_of(name)
    if kind == "folder":
        return check_folder(name)
    if kind == "offline":
        try:
            folder = models.offline_path(name) if name not in ("whisper-tiny.en", "whisper-base") else None
        except models.ModelUnavailable:
            return None
        for f in (folder / "config.json", folder / "AntiBERTy_md_smooth" / "config.json") if folder else ():
            if f.is_file():
                try:
                    return json.loads(f.read_text(encoding="utf-8"))
                except ValueError:
                    return None
        return None
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(models.resolve_source(name), revision=revision,
                                          trust_remote_code=False).to_dict()
    except ValueError as err:
        if "custom code" in str(err):
            raise DiagnoseError(
                f"{name} needs custom code (an auto_map in its config), which tokuni never runs") from None
        return None
    except OSError:
        return None


def modality_of(name: str, config: dict | None = None) -> str:
    """text | protein | chem | vision | audio: from the book's tables for its offline models, else from the
    model's config (its `model_type`), read without running any of its code."""
    if name in _MODALITY:
        return _MODALITY[name]
    if name in models.MODALITY:
        return models.MODALITY[name]
    if name in OFFLINE_MODELS:
        return "text"
    if config is None:
        try:
            config = model_config(name)
        except DiagnoseError:
            config = None
    return modality_of_config(config or {})


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def weights_record(name: str, loaded, kind: str, revision: str | None = None,
                   commit: str | None = None) -> dict[str, Any]:
    """Where the weights came from, precisely enough to load the same ones again: for a hub id the revision asked
    for and the commit it resolved to (`resolve_revision`; the model was loaded at that commit); for anything
    read from disk (a folder, a weight package, a model split over packages) the SHA-256 of every weight file and
    of config.json, with the pip packages that ship them."""
    if kind == "hub":
        return {"hub_id": loaded.source, "revision": revision or "main", "resolved_commit": commit}
    if name in ("whisper-tiny.en", "whisper-base"):
        from ..hf.whisper import package_dir

        folder = Path(package_dir(name))
    else:
        folder = Path(loaded.source).resolve()
    gguf = models.OFFLINE_PACKAGES.get(name, (None, None, None, None))[3]
    files = [folder / gguf] if gguf else sorted(f for f in folder.rglob("*") if f.is_file() and (
        f.suffix in _WEIGHT_SUFFIXES or f.name == "config.json"))
    out: dict[str, Any] = {"folder": str(folder), "sha256": {str(f.relative_to(folder)): sha256_of(f) for f in files}}
    packages = []
    if name in models.OFFLINE_PACKAGES:
        packages.append(models.OFFLINE_PACKAGES[name][2])
    from ..hf.split_weights import SPLIT

    if name in SPLIT:
        packages += SPLIT[name].specs
        out["assembled_sha256"] = {SPLIT[name].assembled: SPLIT[name].sha256}
    if name == "whisper-tiny.en":
        from ..hf.whisper import PIP_SPEC

        packages.append(PIP_SPEC)
    if packages:
        out["packages"] = packages
    return out


def git_commit() -> dict[str, Any]:
    """The project's commit (full hash) and whether the checkout has uncommitted changes to tracked files; None
    outside a git checkout (an installed wheel)."""
    if not (REPO_ROOT / ".git").exists():
        return {"commit": None, "dirty": None}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": head or None, "dirty": bool(dirty)}


def versions() -> dict[str, str]:
    """The versions the JSON records: the book's list and `_MORE_VERSIONS`."""
    return package_versions(*_MORE_VERSIONS)


@dataclass
class Diagnosis:
    """A model's per-layer measures beside its untrained twins'. `model`: `measures.Measured` (estimate and
    bootstrap draws per measure); `twins`: one `Measured` per twin (seeds `meta["twins"]["seeds"]`), measured on
    the same bootstrap draws; `meta`: what was run and how to run it again (see `to_json`)."""

    meta: dict[str, Any]
    model: DM.Measured
    twins: list[DM.Measured] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    level: float = 0.95

    @property
    def twin(self) -> DM.Measured | None:
        """The first twin (seed `seed`), or None."""
        return self.twins[0] if self.twins else None

    @property
    def layers(self) -> int:
        return len(next(iter(self.model.estimate.values())))

    @property
    def measures(self) -> list[str]:
        return [m for m in DM.MEASURES if m in self.model.estimate]

    @cached_property
    def cells(self) -> int:
        """The (layer, measure) cells the comparison with the twins reads (the false-discovery rule's count)."""
        return int(sum(np.isfinite(self.model.estimate[m]).sum() for m in self.measures))

    @property
    def alpha(self) -> float:
        return 1 - self.level

    @cached_property
    def test(self) -> DM.TwinTest | None:
        """The twin test over every cell (`measures.TwinTest`, the synthesis chapter's too); None with fewer than
        two twins, whose spread cannot be measured."""
        if len(self.twins) < 2:
            return None
        ms = self.measures
        return DM.TwinTest.of(
            {m: self.model.estimate[m] for m in ms}, {m: np.stack([t.estimate[m] for t in self.twins]) for m in ms},
            {m: DM.paired_variance(self.model.draws[m], np.stack([t.draws[m] for t in self.twins])) for m in ms},
            self.level)

    @property
    def _tested(self) -> dict[str, dict[str, np.ndarray]]:
        """Per measure, `measures.twin_test`'s arrays (difference, se, spread, df, t, p); {} without a test."""
        return self.test.tested if self.test else {}

    @property
    def threshold(self) -> float:
        """The p-value at or below which a cell is flagged: Benjamini–Hochberg over every cell of the report at
        false-discovery rate 1 − level (`measures.fdr_threshold`); 0.0 where nothing is flagged."""
        return self.test.threshold if self.test else 0.0

    def curve(self, measure: str, which: str = "model") -> dict[str, np.ndarray]:
        """estimate, low, high per layer of `which`: "model" (95 % bootstrap over the inputs), "twin" (the
        twins' mean with the twin test's 95 % prediction interval for a new draw from the twins,
        `measures.prediction_band`: the model lies outside it where the cell's p-value alone is below 5 %; a single
        twin, whose spread cannot be measured, with its own interval over the inputs), "difference" (model −
        twins' mean, with the interval that excludes 0 exactly where the cell is flagged: ± t·se at the
        report's threshold, or at Bonferroni's α/cells where nothing is flagged)."""
        if which == "difference":
            if self.test:
                return self.test.difference(measure)
            diff = self.model.estimate[measure] - self.twins[0].estimate[measure]   # one twin: no interval to give
            return {"estimate": diff, "low": np.full_like(diff, np.nan), "high": np.full_like(diff, np.nan)}
        if which == "twin" and self.test:
            return self.test.band(measure)
        got = self.twins[0] if which == "twin" else self.model
        est, draws = got.estimate[measure], got.draws[measure]
        lo, hi = DM.interval(draws, est, self.level)
        return {"estimate": est, "low": lo, "high": hi}

    def differs(self, measure: str) -> np.ndarray:
        """Per layer: whether the model is flagged as unlike a random draw of its architecture (`measures.
        twin_test`'s p-value at or below the report's false-discovery threshold); all False without a test."""
        if not self.test:
            return np.zeros(self.layers, dtype=bool)
        return self.test.differs(measure)

    def detectable(self, measure: str) -> dict[str, np.ndarray]:
        """Per layer, the smallest shift from the twins' mean this run flags (`measures.TwinTest.detectable`)."""
        return self.test.detectable(measure)

    def power(self) -> dict[str, Any] | None:
        """The run's power in one statement: the median over cells of the smallest shift flagged in twin standard
        deviations, for one cell moving alone and for every cell moving (`detectable`); None without twins."""
        if not self.test:
            return None
        return {"twins": len(self.twins), "cells": self.cells, **self.test.power()}

    def summary(self) -> list[dict[str, Any]]:
        """Per measure: what its direction of collapse is, the layers where the model is more and less
        collapsed than its twins (by the `differs` rule), and its verdict line (`verdict.measure_line`)."""
        from .verdict import measure_line

        rows = []
        names = self.meta["layer_names"]
        for m in self.measures:
            sign = DM.COLLAPSE_SIGN.get(m, 0)
            row = {"measure": m, "label": DM.MEASURES[m][0],
                   "collapse": {1: "higher", -1: "lower"}.get(sign, "no direction of collapse")}
            if self._tested:
                flagged, est = self.differs(m), self._tested[m]["estimate"]
                up = flagged & (est > 0)
                down = flagged & (est < 0)
                more, less = (up, down) if sign >= 0 else (down, up)
                row["higher"] = [names[i] for i in np.flatnonzero(up)]
                row["lower"] = [names[i] for i in np.flatnonzero(down)]
                if sign:
                    row["more_collapsed"] = [names[i] for i in np.flatnonzero(more)]
                    row["less_collapsed"] = [names[i] for i in np.flatnonzero(less)]
            row["verdict"] = measure_line(self, m)
            rows.append(row)
        return rows

    def to_json(self) -> dict[str, Any]:
        def arr(a):
            if a is None:
                return None
            return [None if not np.isfinite(x) else round(float(x), 6) for x in np.asarray(a, dtype=float)]

        out: dict[str, Any] = {**self.meta, "skipped": self.skipped, "notes": self.notes, "level": self.level,
                               "measures": {}}
        for m in self.measures:
            label, what = DM.MEASURES[m]
            row: dict[str, Any] = {"label": label, "what": what, "collapse_sign": DM.COLLAPSE_SIGN.get(m, 0),
                                   "model": {k: arr(v) for k, v in self.curve(m, "model").items()},
                                   "model_draws": [arr(r) for r in self.model.draws[m]]}
            if self._tested:
                band = self.curve(m, "twin")
                row["twin"] = {k: arr(band[k]) for k in ("estimate", "low", "high")}
                row["twin_spread"] = arr(band["spread"])
                row["twins"] = [arr(t.estimate[m]) for t in self.twins]
                row["difference"] = {k: arr(v) for k, v in self.curve(m, "difference").items()}
                row["differs"] = [bool(x) for x in self.differs(m)]
                t = self._tested[m]
                row["test"] = {"se": arr(t["se"]), "df": arr(t["df"]), "t": arr(t["t"]), "p": arr(t["p"])}
                row["detectable"] = {k: arr(v) for k, v in self.detectable(m).items()}
            out["measures"][m] = row
        from .verdict import disagreement, headline, power_line

        out["headline"] = headline(self)
        out["summary"] = self.summary()
        out["disagreement"] = disagreement(self)
        if self._tested:
            out["threshold_p"] = self.threshold
            out["power"] = {**self.power(), "text": power_line(self)}
        if self.model.qk_heads is not None:
            out["qk_heads"] = {"model": [arr(r) for r in self.model.qk_heads]}
            if self.twin is not None and self.twin.qk_heads is not None:
                out["qk_heads"]["twin"] = [arr(r) for r in self.twin.qk_heads]
        iso = {"model": arr(self.model.isoscore)}
        if self.twins:
            iso["twins"] = [arr(t.isoscore) for t in self.twins]
        out["isoscore"] = iso
        out["dims"], out["vectors"] = self.model.dims, self.model.vectors
        return out


def _batch(modality: str, device: torch.device) -> int:
    base = {"text": 32, "protein": 16, "chem": 16, "vision": 16, "audio": 8}[modality]
    return base * 4 if device.type == "cuda" else base


def _vectors_per_input(probe: Probe, modality: str, max_tokens: int) -> int:
    """An upper bound on the vectors one input gives (for the memory estimate): a text's bytes (no tokenizer
    makes more tokens than that, specials aside), else `max_tokens`."""
    if modality in ("text", "protein", "chem"):
        return min(max_tokens, max(len(s.encode()) for s in probe.items))
    return max_tokens


def _description(name: str, kind: str, loaded, config: dict | None) -> str:
    """What the model is, as far as the tool can know: the book's line for its offline models; for a folder or
    a hub id its architecture, never a claim that its weights are trained."""
    if kind == "offline":
        return loaded.description
    known = models.HUB_DESCRIPTIONS.get(loaded.source) or models.DESCRIPTIONS.get(name)
    if known:
        return known
    arch = (config or {}).get("model_type") or type(loaded.model).__name__
    if kind == "folder":
        return (f"a {arch} model read from a local folder; whether its weights are trained, the tool cannot "
                "tell")
    return f"{name}: a {arch} model from the Hugging Face hub, weights as published there"


def diagnose(model: str, probe: Probe | str | os.PathLike | None = None, *, twins: int | None = None,
             n: int | None = None,
             seed: int = 0, draws: int = 200, device: str = "auto", max_tokens: int = MAX_TOKENS,
             revision: str | None = None, command: str | None = None, argv: list[str] | None = None,
             label: str = "model") -> Diagnosis:
    """Diagnose `model` (a hub id, a local folder, or one of `OFFLINE_MODELS`) layer by layer on `probe` (a
    `Probe`, a probe file, or None: the modality's default probe of `n` inputs), beside `twins` untrained twins
    (same config, random weights drawn with seeds seed, seed + 1, …; 0: none; None, the default: `TWINS`, then
    more while the twins so far took under `TWIN_BUDGET_S` seconds, up to `MAX_TWINS`). Every option, the model (its
    folder's files, or the hub) and the probe are checked before any model is loaded (`_checked`): a refusal raises
    `checks.DiagnoseError`, `probe.ProbeError` or `hf.loading.ModelUnavailable`, each with a one-line message.
    `label` names the model on the progress bars ("model"; a run of several models names each)."""
    t0, c0 = time.perf_counter(), time.process_time()
    job = _checked(model, probe, n=n, twins=twins, seed=seed, draws=draws, device=device, max_tokens=max_tokens,
                   revision=revision)
    got = _measure_model(job, label)
    twin_got = _measure_twins(job, got["W"], got["want_qk"], label)
    seeds = run_seeds(seed, len(twin_got)) if twin_got else []
    meta = _meta(job, got, seeds, command, argv)
    d = Diagnosis(meta, got["measured"], twin_got, got["skipped"], got["notes"])
    d.meta["seconds"] = {"diagnose_wall": round(time.perf_counter() - t0, 1),
                         "diagnose_cpu": round(time.process_time() - c0, 1)}
    d.meta["written_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return d


@dataclass
class _Job:
    """What a diagnosis was asked to do, checked (`_checked`): the model and how it is read, the probe, the
    options, the device and the memory estimate."""

    model: str
    kind: str
    revision: str | None
    commit: str | None
    config: dict | None
    modality: str
    probe: Probe
    twins: int | None
    seed: int
    draws: int
    device: str
    dev: torch.device
    max_tokens: int
    need: int | None

    @property
    def tok_modality(self) -> str:
        return "text" if self.modality in ("protein", "chem") else self.modality

    @property
    def batch(self) -> int:
        return _batch(self.modality, self.dev)


def _checked(model: str, probe, *, n, twins, seed, draws, device, max_tokens, revision) -> _Job:
    """Every option, the model and the probe checked, in this order, before anything is loaded."""
    check_options(draws, twins, max_tokens, seed)
    check_device(device)
    kind = kind_of(model)
    if revision is not None and kind != "hub":
        raise DiagnoseError(f"--revision {revision}: applies to a hub id only, and {model} is "
                            f"{'a local folder' if kind == 'folder' else 'an offline model'}")
    check_available(model)
    commit = resolve_revision(model, revision) if kind == "hub" else None
    config = model_config(model, commit)
    modality = modality_of(model, config)
    if probe is None:
        probe = default_probe(modality, n, seed)
    elif n is not None:
        raise DiagnoseError("-n sets the size of the default probe and a probe file's lines are its inputs: give "
                            "one of -n and --probe")
    elif not isinstance(probe, Probe):
        probe = read_probe(probe, modality)
    if probe.modality != modality and not {probe.modality, modality} <= {"text", "protein", "chem"}:
        raise ProbeError(f"the probe holds {probe.modality} inputs; {model} takes {modality}")
    if len(probe) > MAX_SIZE[probe.modality]:
        raise ProbeError(f"the probe holds {len(probe)} inputs; a {probe.modality} probe holds at most "
                         f"{MAX_SIZE[probe.modality]}")
    need = check_memory(len(probe), _vectors_per_input(probe, modality, max_tokens), dims_of(config or {}), draws)
    return _Job(model, kind, revision, commit, config, modality, probe, twins, seed, draws, device,
                choose_device(device), max_tokens, need)


def _measure_model(job: _Job, label: str) -> dict[str, Any]:
    """The model itself: loaded, the probe through it, every layer measured on the run's bootstrap draws `W`;
    what the record keeps of it (its weights' record, its description, what was skipped)."""
    loaded = models.load(job.model, device=job.dev, modality=job.tok_modality, revision=job.commit)
    cap = capture(loaded, job.probe, job.dev, job.batch, job.max_tokens, label=label)
    W = DM.bootstrap_weights(cap.n_inputs, job.draws, job.seed)
    got = DM.measure(cap.layers, W, cap.qk, label=label)
    skipped = {} if cap.qk is not None else {"qk_cos": cap.qk_skipped}
    if np.isnan(got.isoscore).all():
        skipped["isoscore"] = "the `isoscore` package is not installed (`pip install --no-deps isoscore`)"
    return {"measured": got, "W": W, "skipped": skipped, "want_qk": cap.qk is not None, "layers": len(cap.layers),
            "units": cap.units, "notes": cap.notes, "cut": cap.cut,
            "weights": weights_record(job.model, loaded, job.kind, job.revision, job.commit),
            "description": _description(job.model, job.kind, loaded, job.config)}


def _measure_twins(job: _Job, W, want_qk: bool, label: str) -> list[DM.Measured]:
    """The untrained twins, one at a time, on the same draws `W`: `job.twins` of them, or by default `TWINS`, then
    as many as fit in `TWIN_BUDGET_S` of twin passes (CPU time on a CPU, wall time on a GPU), up to `MAX_TWINS`."""
    twin_got: list[DM.Measured] = []
    clock = time.perf_counter if job.dev.type == "cuda" else time.process_time
    t_twins = clock()
    target = TWINS if job.twins is None else job.twins
    while len(twin_got) < target:
        s = job.seed + len(twin_got)
        twin_loaded = models.load(job.model, untrained=True, device=job.dev, modality=job.tok_modality,
                                  revision=job.commit, seed=s)
        which = f"twin {len(twin_got) + 1} of {target}" + ("" if job.twins is not None or target == MAX_TWINS else "+")
        which = which if label == "model" else f"{label}, {which}"
        tcap = capture(twin_loaded, job.probe, job.dev, job.batch, job.max_tokens, qk=want_qk, label=which)
        del twin_loaded
        twin_got.append(DM.measure(tcap.layers, W, tcap.qk, label=which))
        del tcap
        if job.twins is None and len(twin_got) == target and target < MAX_TWINS:
            per = (clock() - t_twins) / len(twin_got)
            target = max(TWINS, min(MAX_TWINS, int(TWIN_BUDGET_S // max(per, 1e-9))))
    return twin_got


def _meta(job: _Job, got: dict[str, Any], seeds: list[int], command: str | None,
          argv: list[str] | None) -> dict[str, Any]:
    """What was run and how to run it again (the JSON's record; `Diagnosis.to_json`)."""
    text = job.modality in ("text", "protein", "chem")
    truncation = {"max_tokens": job.max_tokens, "inputs_cut": got["cut"],
                  "rule": ("each input cut to its first max_tokens tokens before the forward pass (special tokens "
                           "added beyond, within the model's length limit)" if text
                           else "the whole input goes through the model; at most max_tokens of its "
                                f"{got['units']} are kept, evenly spaced")}
    twins = {"count": len(seeds), "seeds": seeds,
             "what": "the same config with random weights drawn after torch.manual_seed(seed) for each seed",
             "chosen": (f"{job.twins} asked for" if job.twins is not None else
                        f"the default: {TWINS}, then as many as fit in {TWIN_BUDGET_S:.0f} s of twin passes "
                        f"({'wall' if job.dev.type == 'cuda' else 'CPU'} time), up to {MAX_TWINS}"),
             "rule": differs_rule(len(seeds))} if seeds else None
    weights = got["weights"]
    source = str(Path(job.model).expanduser().resolve()) if job.kind == "folder" else job.model
    return {
        "tool": "tokuni diagnose", "tool_version": _version(), "git": git_commit(), "written_at": None,
        "model": job.model, "kind": job.kind, "description": got["description"],
        "source": weights.get("hub_id") or weights.get("folder"), "weights": weights,
        "modality": job.modality, "units": got["units"],
        "layer_names": ["embeddings"] + [f"block {i}" for i in range(1, got["layers"])],
        "probe": job.probe.to_json(), "truncation": truncation, "seed": job.seed, "draws": job.draws,
        "twins": twins, "device": device_description(job.dev), "device_used": str(job.dev),
        "memory_estimate_gib": round(job.need / 2**30, 2) if job.need else None,
        "versions": versions(),
        "argv": argv or rerun_argv(source, job.probe, twins=len(seeds), seed=job.seed, draws=job.draws,
                                   max_tokens=job.max_tokens, revision=job.revision, device=job.device),
        "command": command or "python: helpers.diagnose.diagnose(" + repr(job.model) + ")",
        "seconds": None,
    }


def differs_rule(twins: int, level: float = 0.95) -> str:
    """The rule that flags a cell, in words."""
    return (f"a cell (layer, measure) is flagged where the model is unlike a new draw from its K = {twins} twins: "
            "t = (model − twins' mean)/√(s²(1 + 1/K) + v), s² the twins' variance (the initialisation), v the "
            "bootstrap variance over the probe's inputs, read as Student-t's (K − 1 degrees of freedom where the "
            "twins' spread dominates, more where the inputs' does even against the twins' variance at its upper "
            "bound: Welch–Satterthwaite), its two-sided p-values "
            f"over every cell of the report held to a false-discovery rate of {1 - level:.0%} (Benjamini–Hochberg): "
            f"where no cell differs, the chance of any flag is about {1 - level:.0%}")


def _version() -> str:
    import helpers  # the package's one version (pyproject reads it too)

    return helpers.__version__


def rerun_argv(model: str, probe: Probe, *, twins: int, seed: int, draws: int, max_tokens: int,
               revision: str | None, device: str) -> list[str]:
    """The `tokuni` arguments that make the same measurement again (the report's prefix aside): a default probe
    by its size, a probe file by its path."""
    argv = ["diagnose", model]
    default = probe.made.get("default")
    if default:
        argv += ["-n", str(default["n"])]
    elif probe.made.get("path"):
        argv += ["--probe", probe.made["path"]]
    argv += ["--twins", str(twins), "--seed", str(seed), "--draws", str(draws), "--max-tokens", str(max_tokens),
             "--device", device]
    if revision:
        argv += ["--revision", revision]
    return argv


def default_out(model: str) -> Path:
    """`tokuni-<model>` in the working folder (a path's separators as underscores)."""
    stem = model.rstrip("/").replace("/", "_").replace(":", "_").lstrip("._~")
    return Path("tokuni-" + (stem or "model"))


__all__ = ["OFFLINE_MODELS", "TWINS", "MAX_TOKENS", "Diagnosis", "diagnose", "modality_of", "model_config",
           "kind_of", "weights_record", "resolve_revision", "git_commit", "rerun_argv", "default_out", "differs_rule"]
