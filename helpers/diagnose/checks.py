"""What `tokuni diagnose` checks before it loads a model: its options, the folder the report goes to, the model
(an offline name, a Hugging Face folder that holds what a load needs, or a hub id) and the memory the run needs.
Each refusal is one line (`DiagnoseError`, or `hf.loading.ModelUnavailable` for a model that cannot be had),
raised before any work."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

#: the bounds of the options (inclusive)
LIMITS = {"draws": (20, 10_000), "twins": (0, 50), "max_tokens": (2, 4096), "seed": (0, 2**31 - 1)}
#: files of a Hugging Face folder, by what they are
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin", "*.gguf", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "spiece.model",
                   "tokenizer.model", "sentencepiece.bpe.model")
PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json")


class DiagnoseError(ValueError):
    """A run refused before any work, or a model it cannot measure: the message is one line."""


def check_options(draws: int, twins: int | None, max_tokens: int, seed: int) -> None:
    """Every numeric option within its bounds (`LIMITS`; `twins` None: the default), and never one twin: the
    spread of random initialisations needs two at least, and a comparison without it reads two random models
    as different."""
    if twins == 1 and not isinstance(twins, bool):
        raise DiagnoseError("--twins 1: one twin cannot show how far random initialisations lie apart, so no "
                            "comparison would be interpretable; give 0 (no twins) or 2 to 50 (default: 5, more "
                            "while they are cheap)")
    for name, value in (("draws", draws), ("twins", twins), ("max_tokens", max_tokens), ("seed", seed)):
        if name == "twins" and value is None:
            continue
        lo, hi = LIMITS[name]
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            flag = "--" + name.replace("_", "-")
            raise DiagnoseError(f"{flag} {value}: takes a whole number from {lo:,} to {hi:,}")


def check_device(device: str) -> None:
    """`auto`, `cpu`, or a CUDA device torch can see."""
    import torch

    if device in ("auto", "cpu"):
        return
    if not device.startswith("cuda"):
        raise DiagnoseError(f"--device {device}: use auto, cpu or cuda")
    if not torch.cuda.is_available():
        raise DiagnoseError(f"--device {device}: torch sees no CUDA device here (use --device cpu or auto)")
    try:
        index = torch.device(device).index
    except RuntimeError:
        raise DiagnoseError(f"--device {device}: not a device name (cuda or cuda:N)") from None
    if index is not None and index >= torch.cuda.device_count():
        raise DiagnoseError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s)")


def check_out(out: str | os.PathLike) -> None:
    """The report's folder exists or can be made, is a folder, and takes a new file (tried: a temporary file is
    made and removed), and neither `<out>.html` nor `<out>.json` is a folder. Nothing is left behind."""
    out = Path(out)
    for f in (out.with_name(out.name + ".html"), out.with_name(out.name + ".json")):
        if f.is_dir():
            raise DiagnoseError(f"--out {out}: {f} is a folder")
    folder = out.parent
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise DiagnoseError(f"--out {out}: {probe} is a file, so no report can be written under it")
    if probe != folder:
        if not os.access(probe, os.W_OK | os.X_OK):
            raise DiagnoseError(f"--out {out}: {folder} does not exist and {probe} is not writable")
        return
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tokuni-check-", dir=folder)
    except OSError as err:
        raise DiagnoseError(f"--out {out}: cannot write in {folder} ({err.strerror or err})") from None
    os.close(fd)
    os.unlink(tmp)


class OutLock:
    """The report's prefix held for one run: `<folder>/.<name>.tokuni-lock`, made with O_EXCL and holding the
    process id and host, removed when the run ends (any way it ends). A second run on the same prefix is refused
    in one line; a lock whose process on this host is gone is taken over. A folder the lock had to make is removed
    again when nothing else was written in it. Not `machinery.results.run_lock`: that one waits for a training run on an
    `flock` of a file it keeps beside the checkpoint; this one refuses at once and leaves nothing behind, which an
    `flock` cannot do safely (a lock file removed while a second process holds it open lets a third take a new one)."""

    def __init__(self, out: str | os.PathLike) -> None:
        self.out = Path(out)
        self.path = self.out.with_name("." + self.out.name + ".tokuni-lock")
        self.made: list[Path] = []

    def __enter__(self) -> OutLock:
        import socket

        folder = self.path.parent
        missing = []
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        for f in reversed(missing):
            f.mkdir()
            self.made.append(f)
        me = f"{os.getpid()} {socket.gethostname()}"
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if self._stale():
                    self.path.unlink(missing_ok=True)
                    continue
                self._unmake()
                raise DiagnoseError(f"--out {self.out}: another tokuni run is writing this report (lock "
                                    f"{self.path}); wait for it, or choose another --out") from None
            with os.fdopen(fd, "w") as f:
                f.write(me + "\n")
            return self
        self._unmake()
        raise DiagnoseError(f"--out {self.out}: cannot take the lock {self.path}")

    def _stale(self) -> bool:
        """The lock's process is gone (same host, no such process id)."""
        import socket

        try:
            pid, host = self.path.read_text().split()
            pid_ = int(pid)
        except (OSError, ValueError):
            return False
        if host != socket.gethostname():
            return False
        try:
            os.kill(pid_, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def _unmake(self) -> None:
        for f in reversed(self.made):
            try:
                f.rmdir()
            except OSError:
                break

    def __exit__(self, *exc) -> None:
        self.path.unlink(missing_ok=True)
        self._unmake()


def looks_like_path(name: str) -> bool:
    """A model name written as a path (absolute, ./, ../, ~) rather than a hub id ("org/name")."""
    return name.startswith(("/", "./", "../", "~", ".\\")) or name in (".", "..")


def _has(folder: Path, patterns: tuple[str, ...]) -> bool:
    return any(next(folder.glob(p), None) is not None for p in patterns)


def check_folder(folder: str | os.PathLike, modality: str | None = None) -> dict:
    """A local folder holds what a load needs — config.json (readable JSON, a model type transformers knows
    without the folder's own code), weights, and a tokenizer (text) or a processor (images, speech) — or one
    line saying what is missing. Returns the folder's config."""
    folder = Path(folder).expanduser()
    if not folder.exists():
        raise DiagnoseError(f"{folder}: no such folder")
    if not folder.is_dir():
        raise DiagnoseError(f"{folder} is a file; give the folder that holds config.json, the weights and the "
                            "tokenizer or processor")
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise DiagnoseError(f"{folder} is not a model folder: it has no config.json (a Hugging Face model folder "
                            "holds config.json, the weights and a tokenizer or processor)")
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError
    except (OSError, ValueError):
        raise DiagnoseError(f"{cfg_file}: not a readable JSON object") from None
    kind = cfg.get("model_type")
    from transformers import CONFIG_MAPPING

    if cfg.get("auto_map") and kind not in CONFIG_MAPPING:
        raise DiagnoseError(f"{folder} needs custom code (config.json's auto_map names the folder's own Python "
                            f"files for model type {kind!r}), which tokuni never runs")
    if kind is None or kind not in CONFIG_MAPPING:
        raise DiagnoseError(f"{folder}: config.json's model_type {kind!r} is not one transformers knows")
    if not _has(folder, WEIGHT_FILES):
        raise DiagnoseError(f"{folder} has config.json but no weights (model.safetensors, pytorch_model.bin or a "
                            ".gguf file)")
    modality = modality or modality_of_config(cfg)
    if modality in ("vision", "audio"):
        if not _has(folder, PROCESSOR_FILES):
            raise DiagnoseError(f"{folder} has no {'image processor' if modality == 'vision' else 'feature extractor'}"
                                f" (preprocessor_config.json), which a {modality} model's inputs need")
    elif not _has(folder, TOKENIZER_FILES):
        raise DiagnoseError(f"{folder} has no tokenizer (tokenizer.json, tokenizer_config.json, vocab.txt, "
                            "vocab.json or a sentencepiece model)")
    return cfg


_VISION_TYPES = ("vit", "deit", "beit", "dinov2", "dinov2_with_registers", "convnext", "resnet", "swin",
                 "data2vec-vision", "efficientnet", "mobilevit")
_AUDIO_TYPES = ("whisper", "wav2vec2", "hubert", "wavlm", "data2vec-audio")


def modality_of_config(cfg: dict) -> str:
    kind = cfg.get("model_type", "")
    return "vision" if kind in _VISION_TYPES else "audio" if kind in _AUDIO_TYPES else "text"


# ---------------------------------------------------------------------------------------------- memory


def available_memory() -> int | None:
    """Bytes this process may still take: MemAvailable, within a cgroup's limit where one is set; None when
    neither can be read."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit != "max":
            left = int(limit) - used
            avail = left if avail is None else min(avail, left)
    except (OSError, ValueError):
        pass
    return avail


def dims_of(cfg: dict) -> tuple[int, int, int] | None:
    """(width, blocks, vocabulary) from a config's usual names, or None."""
    def first(*keys):
        for k in keys:
            v = cfg.get(k)
            if isinstance(v, int) and v > 0:
                return v
        return None

    width = first("hidden_size", "d_model", "n_embd", "dim", "embed_dim")
    blocks = first("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "n_layers")
    if width is None or blocks is None:
        return None
    return width, blocks, first("vocab_size") or 0


def estimate_bytes(inputs: int, vectors: int, width: int, blocks: int, vocab: int, draws: int) -> int:
    """Peak memory of a run, roughly: every layer's vectors of the model and of one twin at a time (float32), the
    measures' per-input second moments (inputs × width², float32, and their Gram matrix) and per-draw products
    (draws × inputs × vectors, float64), double copies of one layer, and the weights of two models."""
    layers = blocks + 1
    captured = 2 * layers * inputs * vectors * width * 4
    moments = inputs * width * width * 4 * 2 + inputs * inputs * 8
    per_draw = (draws + 1) * inputs * vectors * 8 * 2
    copies = 4 * inputs * vectors * width * 8
    weights = 2 * 4 * (12 * blocks * width * width + vocab * width)
    return int(captured + moments + per_draw + copies + weights + 1.5e9)      # + the runtime itself


def check_memory(inputs: int, vectors: int, dims: tuple[int, int, int] | None, draws: int,
                 available: int | None = None) -> int | None:
    """Refuse a run whose estimated peak memory (`estimate_bytes`) exceeds what is available; return the
    estimate (None when the model's width and depth cannot be read from its config)."""
    if dims is None:
        return None
    need = estimate_bytes(inputs, vectors, *dims, draws)
    avail = available_memory() if available is None else available
    if avail is not None and need > avail:
        raise DiagnoseError(f"this run needs about {need / 2**30:.1f} GiB of memory and {avail / 2**30:.1f} GiB "
                            "are available: use fewer inputs (-n or a shorter probe), --max-tokens or --draws")
    return need


__all__ = ["DiagnoseError", "LIMITS", "check_options", "check_device", "check_out", "check_folder", "check_memory",
           "estimate_bytes", "available_memory", "dims_of", "looks_like_path", "modality_of_config"]


def write_pair(out: Path, page: str, data: str) -> tuple[Path, Path]:
    """Write `<out>.html` (`page`) and `<out>.json` (`data`), each atomically, the JSON first and removed again if
    the HTML cannot be written, so that a failure or an interrupt leaves neither (or the previous pair) behind;
    both readable like any other file written here (a report to share). Returns (html, json)."""
    from ..machinery.results import write_atomic

    html_path, json_path = out.with_name(out.name + ".html"), out.with_name(out.name + ".json")
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_path, data)
    try:
        write_atomic(html_path, page)
    except BaseException:
        json_path.unlink(missing_ok=True)
        raise
    for f in (html_path, json_path):
        f.chmod(0o644)
    return html_path, json_path
