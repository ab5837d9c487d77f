"""A GGUF weight file, de-quantised once into a Hugging Face folder in the weight cache.

transformers reads a GGUF file field by field in Python and parses it three times for one load (tokenizer, config,
weights): SmolLM2-135M's Q4_1 file takes about 20 CPU-seconds on each load. `converted(folder, gguf, ...)` does that
once: it saves what the GGUF load gives — the float32 weights as safetensors, the config, the converted tokenizer —
into `<cache>/<stem>-<sha256 of the file, 16 hex>-tf<transformers version>` (`split_weights.cache_root`) in one
rename, so a cache folder is whole or absent, and later loads read it in about a second. The weights are the ones
the GGUF load gives, bit for bit (a test compares them); a file with other bytes, or another transformers (whose
conversion may differ), gets a folder of its own. The provenance still names the package and the GGUF file's SHA-256.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from .split_weights import cache_root

DONE = "converted.json"


def cache_folder(gguf: Path, sha256: str | None = None) -> Path:
    """The converted folder's path for GGUF file `gguf` (whose SHA-256 is `sha256`, computed when not given): keyed
    by that SHA-256 and transformers' version."""
    import transformers

    from ..data.hublock import file_sha256

    return cache_root() / f"{gguf.stem}-{(sha256 or file_sha256(gguf))[:16]}-tf{transformers.__version__}"


def is_converted(dest: Path) -> bool:
    return (dest / DONE).is_file() and (dest / "config.json").is_file()


def converted(folder: Path, gguf: str, load) -> Path:
    """The cache folder holding `folder/gguf` converted (made now if absent). `load(source, gguf_file)` returns
    (model, tokenizer) as the book loads them from the GGUF file; both are saved as they come."""
    from ..data.hublock import file_sha256

    src = Path(folder) / gguf
    sha = file_sha256(src)
    dest = cache_folder(src, sha)
    if is_converted(dest):
        return dest
    model, tok = load(str(folder), gguf)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        # transformers will not save a model it loaded through its GGUF quantizer: the weights go through
        # safetensors (a tied output layer once) and the config without its quantization entry
        from safetensors.torch import save_model

        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)
        (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
        save_model(model, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        tok.save_pretrained(tmp)
        (tmp / DONE).write_text(json.dumps({"gguf": gguf, "sha256": sha}, indent=1))
        tmp.chmod(0o755)
        try:
            os.replace(tmp, dest)
        except OSError:                  # another process converted it first (a non-empty folder is not replaced)
            if not is_converted(dest):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
