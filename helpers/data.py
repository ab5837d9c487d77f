"""Dataset loaders: the offline mirror (`../shared/data`, or $TOKUNI_DATA) first, the hub through
`datasets` when the mirror is absent and the hub is reachable, and a clear error when neither."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from .runtime import REPO_ROOT


class DataUnavailable(RuntimeError):
    """Neither the offline mirror nor the hub can provide a dataset."""


def data_root() -> Path | None:
    """The offline mirror: $TOKUNI_DATA if set, else `../shared/data` beside the repository."""
    env = os.environ.get("TOKUNI_DATA")
    candidates = [Path(env)] if env else []
    candidates += [REPO_ROOT.parent / "shared" / "data", REPO_ROOT / "shared" / "data"]
    for c in candidates:
        if c.is_dir():
            return c
    return None


@dataclass
class SentenceSet:
    """Sentences (one or two per example) with their labels."""

    name: str
    split: str
    sentence1: list[str]
    sentence2: list[str] | None
    labels: list

    def __len__(self) -> int:
        return len(self.sentence1)

    def texts(self) -> list[str]:
        """Every sentence, first and second of each pair, for representation studies."""
        out = list(self.sentence1)
        if self.sentence2 is not None:
            out += self.sentence2
        return out


# task: (folder, {split: file}, (s1 col, s2 col, label col), has_header, hub config)
_GLUE = {
    "CoLA": ("CoLA", {"train": "train.tsv", "validation": "dev.tsv"}, (3, None, 1), False, "cola"),
    "MRPC": ("MRPC", {"train": "train.tsv", "validation": "dev.tsv"}, (3, 4, 0), True, "mrpc"),
    "RTE": ("RTE", {"train": "train.tsv", "validation": "dev.tsv"}, (1, 2, 3), True, "rte"),
    "SST-2": ("SST-2", {"train": "train.tsv", "validation": "dev.tsv"}, (0, None, 1), True, "sst2"),
    "QNLI": ("QNLI", {"validation": "dev.tsv"}, (1, 2, 3), True, "qnli"),
}


def load_glue(task: str, split: str = "validation", source: str = "auto") -> SentenceSet:
    """A GLUE task split. `source`: `mirror`, `hub` (datasets' glue/<task>), or `auto` (mirror if
    present, else hub). Labels are kept as in the files (ints, or strings for RTE/QNLI)."""
    if task not in _GLUE:
        raise ValueError(f"unknown GLUE task {task!r}; known: {sorted(_GLUE)}")
    folder, files, (c1, c2, cl), header, hub_name = _GLUE[task]
    if split not in files and source != "hub":
        raise DataUnavailable(
            f"{task} split {split!r} is not in the offline mirror (it has {sorted(files)}); "
            f"it needs the hub: datasets.load_dataset('glue', '{hub_name}', split='{split}')"
        )
    root = data_root()
    if source in ("auto", "mirror") and root is not None and (root / "glue" / folder / files[split]).is_file():
        path = root / "glue" / folder / files[split]
        with open(path, encoding="utf-8-sig", newline="") as fh:
            rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
        if header:
            rows = rows[1:]
        rows = [r for r in rows if len(r) > max(c for c in (c1, c2, cl) if c is not None)]
        s1 = [r[c1] for r in rows]
        s2 = [r[c2] for r in rows] if c2 is not None else None
        labels = [int(r[cl]) if r[cl].lstrip("-").isdigit() else r[cl] for r in rows]
        return SentenceSet(task, split, s1, s2, labels)
    if source == "mirror":
        raise DataUnavailable(f"offline mirror not found (looked for $TOKUNI_DATA and ../shared/data) for {task}")
    try:
        import datasets

        ds = datasets.load_dataset("glue", hub_name, split=split)
    except Exception as err:  # noqa: BLE001 - we re-raise with the full story
        raise DataUnavailable(
            f"GLUE {task}/{split}: no offline mirror (set TOKUNI_DATA or place it at ../shared/data) and the "
            f"hub is unreachable ({type(err).__name__}: {str(err)[:200]})"
        ) from None
    keys = [k for k in ("sentence", "sentence1", "question") if k in ds.column_names]
    k2 = [k for k in ("sentence2", "sentence") if k in ds.column_names and k not in keys[:1]]
    return SentenceSet(task, split, list(ds[keys[0]]), list(ds[k2[0]]) if k2 else None, list(ds["label"]))
