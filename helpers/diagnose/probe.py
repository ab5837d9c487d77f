"""The inputs a diagnosis runs on: a default probe set from the offline mirror for each modality, or the
user's file. A probe is a list of inputs (sentences, antibody chains, SMILES, images, waveforms); every
measure's interval is over them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: the modalities a probe can hold, with what one input is
MODALITIES = {"text": "a sentence", "protein": "an antibody chain (one-letter residues)",
              "chem": "a reaction SMILES", "vision": "an image", "audio": "a 16 kHz waveform"}
#: default probe sizes: MiniLM and its five twins on 128 sentences take about a minute on 2 CPU cores
DEFAULT_SIZE = {"text": 128, "protein": 64, "chem": 64, "vision": 48, "audio": 32}
#: the most inputs a probe may hold (a default probe's `-n`, or a probe file's lines): every layer of the model
#: and of each twin keeps every input's vectors in memory, and the measures' cost grows with the inputs
MAX_SIZE = {"text": 2048, "protein": 1024, "chem": 1024, "vision": 512, "audio": 256}
#: the largest probe file read (checked before reading): 2,048 lines of 16 KiB
MAX_BYTES = 32 * 2**20


class ProbeError(ValueError):
    """A probe file that is empty or cannot be decoded (the message is one line naming the file)."""


@dataclass
class Probe:
    """`items`: the inputs; `source`: "default" or the probe file's path; `made`: how a default probe is made
    again (modality, n, seed), or the file's own SHA-256."""

    modality: str
    items: list
    description: str
    source: str = "default"
    labels: list[str] = field(default_factory=list)
    made: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.items)

    def fingerprint(self) -> str:
        """sha256 (64 hex) over the inputs, each followed by a NUL byte (text as UTF-8, a waveform as float32, an
        image as its RGB bytes): two reports on the same probe show the same value."""
        h = hashlib.sha256()
        for x in self.items:
            if isinstance(x, str):
                h.update(x.encode())
            elif isinstance(x, np.ndarray):
                h.update(np.ascontiguousarray(x, dtype=np.float32).tobytes())
            else:                                   # a PIL image
                h.update(np.asarray(x.convert("RGB")).tobytes())
            h.update(b"\0")
        return h.hexdigest()

    def to_json(self) -> dict:
        """What the probe was and how to have it again: the inputs themselves for text-like probes, the file's
        path (and its SHA-256) or the default probe's recipe for images and recordings."""
        out = {"modality": self.modality, "inputs": len(self.items), "description": self.description,
               "source": self.source, "sha256": self.fingerprint(), **self.made}
        if self.modality in ("text", "protein", "chem"):
            out["items"] = list(self.items)
        return out


def _spread(n_total: int, n: int) -> list[int]:
    """`n` indices spread evenly over range(n_total) (all of them when n ≥ n_total)."""
    if n >= n_total:
        return list(range(n_total))
    return sorted({int(round(x)) for x in np.linspace(0, n_total - 1, n)})


def wikitext_sentences(n: int, min_words: int = 8, max_words: int = 40) -> list[str]:
    """`n` sentences of WikiText-103 validation (8 to 40 words, headings left out), spread evenly over the
    split."""
    from ..data import load_wikitext103

    text = load_wikitext103("validation")
    sents = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        for s in re.split(r"(?<=[.!?]) (?=[A-Z])", line):
            if min_words <= len(s.split()) <= max_words:
                s = s.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
                sents.append(re.sub(r"\( ", "(", re.sub(r" ([,.;:!?')])", r"\1", s)))
    return [sents[i] for i in _spread(len(sents), n)]


def default_probe(modality: str, n: int | None = None, seed: int = 0) -> Probe:
    """The default probe of a modality, from the offline mirror (or the hub where the mirror is absent)."""
    if modality not in MODALITIES:
        raise ProbeError(f"unknown modality {modality!r}: use one of {sorted(MODALITIES)}")
    n = DEFAULT_SIZE[modality] if n is None else n
    if not 2 <= n <= MAX_SIZE[modality]:
        raise ProbeError(f"-n {n}: a {modality} probe holds 2 to {MAX_SIZE[modality]} inputs")
    probe = _default(modality, n, seed)
    probe.made = {"default": {"modality": modality, "n": n, "seed": seed}}
    return probe


def _default(modality: str, n: int, seed: int) -> Probe:
    if modality == "text":
        items = wikitext_sentences(n)
        return Probe("text", items, f"{len(items)} WikiText-103 validation sentences (8-40 words, spread over "
                                    "the split)")
    if modality == "protein":
        from ..data.sequences import load_antibody_chains

        chains = load_antibody_chains()
        items = [chains[i][2] for i in _spread(len(chains), n)]
        return Probe("protein", items, f"{len(items)} antibody variable-domain chains (Jain et al. 2017)")
    if modality == "chem":
        from ..data.sequences import load_uspto50k_reactions

        items = load_uspto50k_reactions(n, seed)
        return Probe("chem", items, f"{len(items)} USPTO-50K test reactions (atom maps stripped)")
    if modality == "vision":
        from ..data import load_cifar10

        items = load_cifar10("test", n, seed)[0]
        return Probe("vision", items, f"{len(items)} CIFAR-10 test images")
    if modality == "audio":
        from ..data.speech import load_fsdd

        clips = load_fsdd(indices=[0, 1, 2])
        pick = _spread(len(clips), n)
        items = [clips.waveforms[i].astype(np.float32) for i in pick]
        return Probe("audio", items, f"{len(items)} FSDD spoken-digit recordings (16 kHz)")
    raise ProbeError(f"unknown modality {modality!r}: use one of {sorted(MODALITIES)}")


def read_lines(path: str | Path) -> tuple[list[str], str]:
    """The non-empty lines of a probe file and the file's SHA-256; `ProbeError` (one line naming the file) when
    it cannot be read, is larger than `MAX_BYTES` (its size checked before it is read, and no more than that read
    from a file without one), is not UTF-8, holds fewer than 2 inputs or more than any modality allows."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ProbeError(f"probe file {path}: {size / 1e6:,.0f} MB; a probe file holds at most "
                             f"{MAX_BYTES // 2**20} MiB (one input per line)")
        with open(path, "rb") as f:                 # a device or a pipe has no size: read at most one byte more
            raw = f.read(MAX_BYTES + 1)
    except OSError as err:
        raise ProbeError(f"probe file {path}: cannot be read ({err.strerror or err})") from None
    if len(raw) > MAX_BYTES:
        raise ProbeError(f"probe file {path}: more than {MAX_BYTES // 2**20} MiB; a probe file holds at most that "
                         "(one input per line)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeError(f"probe file {path}: not UTF-8 text (one input per line)") from None
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if len(lines) < 2:
        raise ProbeError(f"probe file {path}: holds {len(lines)} input(s); a probe needs at least 2, one per line")
    return lines, hashlib.sha256(raw).hexdigest()


def read_probe(path: str | Path, modality: str) -> Probe:
    """The user's probe: a UTF-8 text file with one input per line — the input itself for text, protein and
    chem, the path of an image or a WAV file (relative to the file) for vision and audio. Raises `ProbeError`
    with one line naming the file when it is missing, empty or cannot be decoded."""
    path = Path(path)
    lines, digest = read_lines(path)
    if len(lines) > MAX_SIZE.get(modality, 0):
        raise ProbeError(f"probe file {path}: holds {len(lines)} inputs; a {modality} probe holds at most "
                         f"{MAX_SIZE.get(modality, 0)}")
    made = {"path": str(path.resolve()), "file_sha256": digest}
    if modality in ("text", "protein", "chem"):
        return Probe(modality, lines, f"{len(lines)} inputs from {path.name}", source=str(path), made=made)
    items = []
    for line in lines:
        f = (path.parent / line) if not Path(line).is_absolute() else Path(line)
        try:
            if modality == "vision":
                from PIL import Image

                with Image.open(f) as im:
                    items.append(im.convert("RGB"))
            else:
                from ..data.speech import read_wav

                items.append(read_wav(f).astype(np.float32))
        except Exception as err:  # noqa: BLE001 - any decoder error is the same refusal
            raise ProbeError(f"probe file {path}: {line} cannot be decoded as "
                             f"{'an image' if modality == 'vision' else 'a WAV file'} ({type(err).__name__})") from None
    return Probe(modality, items, f"{len(items)} {'images' if modality == 'vision' else 'recordings'} listed in "
                                  f"{path.name}", source=str(path), made=made)


__all__ = ["MODALITIES", "DEFAULT_SIZE", "MAX_SIZE", "MAX_BYTES", "Probe", "ProbeError", "default_probe", "read_probe",
           "read_lines", "wikitext_sentences"]
