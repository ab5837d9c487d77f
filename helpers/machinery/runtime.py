"""Runtime plumbing: seeding (one derivation of every seed), device choice, progress bars, timing."""

from __future__ import annotations

import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
_VERSIONED = ("torch", "transformers", "numpy", "scipy", "datasets", "jupyter-book")


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch (CPU and CUDA) and return a torch Generator seeded alike.

    CPU reruns with the same seed are bit-identical: we also ask torch for deterministic kernels
    where it has them (warn-only, so ops without a deterministic variant still run). On CUDA those
    include cuBLAS GEMMs only with a fixed workspace: `CUBLAS_WORKSPACE_CONFIG=:4096:8` is set here
    (unless the user set it), which works only before the process's first cuBLAS call — so the chapters
    call this first thing in `run`. (Set on every machine: harmless without CUDA.)
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    # cuBLAS needs a fixed workspace for deterministic GEMMs (set before the first CUDA matmul)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    _deterministic_kernels()
    return torch.Generator().manual_seed(seed)


def _deterministic_kernels() -> None:
    """`torch.use_deterministic_algorithms(True, warn_only=True)` without its import of the inductor (about
    3 CPU seconds in every process that seeds): the flag is set directly, and the inductor's own
    `deterministic` setting is set where the inductor is loaded, else through the variable it reads when it is."""
    os.environ["TORCHINDUCTOR_DETERMINISTIC"] = "1"
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = True
    torch._C._set_deterministic_algorithms(True, warn_only=True)


def run_seeds(seed: int, seeds: int) -> list[int]:
    """The seeds of a chapter that repeats a run `seeds` times from base seed `seed`: seed, seed+1, ….
    Every chapter derives its run seeds here (STYLE.md)."""
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    return [seed + i for i in range(seeds)]


def stream_seed(seed: int, stream: str, index: int = 0) -> int:
    """A seed for one random stream of a run (data order of epoch `index`, a held-out draw, …),
    derived from the run seed and the stream's name: independent of other streams, stable across
    Python sessions (no `hash()` randomisation)."""
    import zlib

    return (seed * 1_000_003 + zlib.crc32(stream.encode()) + 7919 * index) % 2**31


def choose_device(device: str | None = "auto") -> torch.device:
    """`auto` takes CUDA when present, else CPU; anything else is passed to torch.device."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device!r} asked for, but torch sees no CUDA device")
    return dev


def native_bf16(device: str | torch.device | None = "auto") -> bool:
    """Whether `device` computes bf16 matmuls natively: a CUDA GPU with bf16 support (Ampere and later), or
    a CPU with AVX-512-BF16 or AMX, as oneDNN reports it. Elsewhere PyTorch emulates bf16 on the CPU, and a
    bf16 matmul is one to two orders of magnitude *slower* than fp32 (measured on an AVX2-only EPYC:
    1.0 against 96 GFLOP/s, one thread)."""
    dev = choose_device(device) if device in (None, "auto") else torch.device(device)
    if dev.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if dev.type != "cpu":
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):                 # a build without oneDNN: read the CPU's flags
        try:
            flags = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags


def choose_precision(precision: str = "auto", device: str | torch.device | None = "auto") -> str:
    """`auto`: "bf16" where `device` computes it natively (`native_bf16`), else "fp32"; "fp32" and "bf16"
    are kept as asked."""
    if precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', got {precision!r}")
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def progress(iterable: Iterable, desc: str = "", total: int | None = None, **kw: Any) -> Iterator:
    """A progress bar: a notebook widget where ipywidgets is installed (Colab, JupyterLab), plain text
    otherwise (no `TqdmWarning` in a kernel without widgets); silenced when TOKUNI_NO_PROGRESS=1 (the
    book build, CI logs)."""
    disable = os.environ.get("TOKUNI_NO_PROGRESS") == "1"
    return iter(_tqdm()(iterable, desc=desc, total=total, disable=disable, leave=False, **kw))


def _tqdm():
    try:
        import ipywidgets  # noqa: F401
        from tqdm.auto import tqdm
    except ImportError:
        from tqdm.std import tqdm
    return tqdm


def package_versions(*more: str) -> dict[str, str]:
    """Python's version and each recorded package's ("absent" where it is not installed); `more`: packages to
    record besides the book's own list."""
    out = {"python": sys.version.split()[0]}
    for name in (*_VERSIONED, *more):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def head_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5
        ).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_description(device: torch.device | str | None = None) -> str:
    """The device a run with `device` (a Params value: "auto", "cpu", "cuda[:i]") actually computes on,
    resolved as the chapters resolve it (`choose_device`), for provenance: "cuda:0 NVIDIA H100 80GB HBM3"
    (index and name of the card; a bare "cuda" is torch's current card), "cpu:x86_64 x2" (processor and
    logical cores), "meta" (the placeholder device of tests/test_device.py)."""
    dev = choose_device(device if device is not None else "auto")
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    if dev.type == "cpu":
        return f"cpu:{platform.processor() or platform.machine()} x{os.cpu_count()}"
    return str(dev)


@contextmanager
def timer() -> Iterator[dict[str, float]]:
    """`with timer() as t: ...` then `t["seconds"]`."""
    box: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield box
    finally:
        box["seconds"] = time.perf_counter() - start
