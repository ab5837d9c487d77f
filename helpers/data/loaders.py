"""Dataset loaders: the offline mirror (`../shared/data`, or $TOKUNI_DATA) first, the hub through
`datasets` when the mirror is absent and the hub is reachable, and a clear error when neither."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

from ..machinery.runtime import REPO_ROOT
from .hublock import RevisionMoved, load_hub_dataset, record_mirror_file


class DataUnavailable(RuntimeError):
    """Neither the offline mirror nor the hub can provide a dataset."""


def data_root() -> Path | None:
    """The offline mirror: $TOKUNI_DATA if set (a path that is not a folder switches the mirror off),
    else `../shared/data` beside the repository."""
    env = os.environ.get("TOKUNI_DATA")
    if env:
        return Path(env) if Path(env).is_dir() else None
    candidates = []
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
    if split not in files and source == "mirror":
        raise DataUnavailable(
            f"{task} split {split!r} is not in the offline mirror (it has {sorted(files)}); "
            f"it needs the hub: datasets.load_dataset('{GLUE_HUB_ID}', '{hub_name}', split='{split}')"
        )
    root = data_root()
    if (source in ("auto", "mirror") and root is not None and split in files
            and (root / "glue" / folder / files[split]).is_file()):
        path = root / "glue" / folder / files[split]
        record_mirror_file(path, f"GLUE {task}/{split}", root)
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
        ds = load_hub_dataset(GLUE_HUB_ID, hub_name, split=split)
    except RevisionMoved:
        raise
    except Exception as err:  # noqa: BLE001 - we re-raise with the full story
        raise DataUnavailable(
            f"GLUE {task}/{split}: no offline mirror (set TOKUNI_DATA or place it at ../shared/data) and the "
            f"hub is unreachable ({type(err).__name__}: {str(err)[:200]})"
        ) from None
    return _glue_from_hub(task, split, ds)


# --- hub GLUE: the canonical repo id, and each task's columns by name (QNLI's first
# sentence is `question`); a missing column raises instead of silently dropping a sentence.
GLUE_HUB_ID = "nyu-mll/glue"
#: task -> (first sentence column, second sentence column or None) in nyu-mll/glue
GLUE_HUB_COLUMNS = {"CoLA": ("sentence", None), "SST-2": ("sentence", None), "MRPC": ("sentence1", "sentence2"),
                    "RTE": ("sentence1", "sentence2"), "QNLI": ("question", "sentence")}


def _glue_from_hub(task: str, split: str, ds) -> SentenceSet:
    """A `SentenceSet` from a hub GLUE split; RTE/QNLI labels as the mirror's strings (ClassLabel names)."""
    k1, k2 = GLUE_HUB_COLUMNS[task]
    missing = [k for k in (k1, k2, "label") if k is not None and k not in ds.column_names]
    if missing:
        raise DataUnavailable(f"GLUE {task}/{split} on the hub has columns {ds.column_names}; expected "
                              f"{[k for k in (k1, k2, 'label') if k]} (missing {missing})")
    labels = hub_column(ds, "label")
    if task in ("RTE", "QNLI"):
        names = ds.features["label"].names
        labels = [names[i] if i >= 0 else i for i in labels]
    return SentenceSet(task, split, hub_column(ds, k1), hub_column(ds, k2) if k2 else None, labels)


def load_wikitext103(split: str = "validation", raw: bool = True, source: str = "auto") -> str:
    """WikiText-103 text of one split as a single string (mirror: `wikitext/raw/wiki.{valid,test}.raw`,
    or the tokenised `.tokens` files with `raw=False`; hub: Salesforce/wikitext's wikitext-103-raw-v1, that
    split's parquet file streamed — about 1.3 MB, not the ~300 MB training split)."""
    short = {"validation": "valid", "valid": "valid", "test": "test"}.get(split)
    if short is None:
        raise DataUnavailable(f"WikiText-103 split {split!r}: the mirror has validation and test only; "
                              "the training split needs the hub "
                              "(datasets 'Salesforce/wikitext', 'wikitext-103-raw-v1')")
    root = data_root()
    path = (root / "wikitext" / ("raw" if raw else "wikitext-103") / f"wiki.{short}.{'raw' if raw else 'tokens'}"
            if root else None)
    if source in ("auto", "mirror") and path is not None and path.is_file():
        record_mirror_file(path, f"WikiText-103 {split}", root)
        return path.read_text(encoding="utf-8")
    if source == "mirror":
        raise DataUnavailable(f"WikiText-103 {split}: offline mirror not found (looked for {path})")
    try:       # streamed: `load_dataset(split=...)` would download and prepare every split (train: ~300 MB)
        ds = load_hub_dataset("Salesforce/wikitext", "wikitext-103-raw-v1" if raw else "wikitext-103-v1",
                              split="validation" if short == "valid" else "test", streaming=True)
        return "".join(ex["text"] for ex in ds)
    except RevisionMoved:
        raise
    except Exception as err:  # noqa: BLE001
        raise DataUnavailable(f"WikiText-103 {split}: no offline mirror and the hub is unreachable "
                              f"({type(err).__name__})") from None


CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


#: CIFAR-10's images per split (Krizhevsky 2009): what a preset's 0 ("all") stands for
CIFAR10_IMAGES = {"train": 50_000, "test": 10_000}


def load_cifar10(split: str = "test", n: int | None = None, seed: int = 0, source: str = "auto"):
    """CIFAR-10 images (PIL, 32×32 RGB) and labels, read straight from the mirror's zip of JPEGs
    (`cifar10/cifar10-jpg.zip`: `train|test/<class>/NNNN.jpg`), or torchvision's download when online.
    `n` draws a class-balanced-in-expectation random subset with `seed`."""
    import random
    import zipfile

    from PIL import Image

    if split not in ("train", "test"):
        raise ValueError(f"CIFAR-10 split {split!r}: use 'train' or 'test'")
    root = data_root()
    zpath = root / "cifar10" / "cifar10-jpg.zip" if root else None
    if source in ("auto", "mirror") and zpath is not None and zpath.is_file():
        record_mirror_file(zpath, "CIFAR-10", root)
        with zipfile.ZipFile(zpath) as zf:
            names = sorted(m for m in zf.namelist() if m.startswith(f"{split}/") and m.endswith(".jpg"))
            if n is not None:
                names = random.Random(seed).sample(names, min(n, len(names)))
            images, labels = [], []
            for name in names:
                with zf.open(name) as fh:
                    images.append(Image.open(fh).convert("RGB"))
                labels.append(CIFAR10_CLASSES.index(name.split("/")[1]))
        return images, labels
    if source == "mirror":
        raise DataUnavailable(f"CIFAR-10: offline mirror not found (looked for {zpath})")
    hub = _cifar10_hub(split, n, seed)            # the hub's parquet copy first
    if hub is not None:
        return hub
    try:
        import torchvision  # noqa: F401  (not a dependency: only the online path uses it)
        from torchvision.datasets import CIFAR10

        ds = CIFAR10(root=str(Path.home() / ".cache" / "cifar10"), train=split == "train", download=True)
    except Exception as err:  # noqa: BLE001
        raise DataUnavailable(
            f"CIFAR-10: no offline mirror and no torchvision download ({type(err).__name__})"
        ) from None
    idx = list(range(len(ds)))
    if n is not None:
        idx = random.Random(seed).sample(idx, min(n, len(idx)))
    return [ds[i][0] for i in idx], [ds[i][1] for i in idx]


#: CIFAR-10 on the hub (parquet): repo id, column of the images, column of the labels
CIFAR10_HUB = ("uoft-cs/cifar10", "img", "label")


def _cifar10_hub(split: str, n: int | None, seed: int):
    """CIFAR-10 (PIL images, labels) from the hub's parquet repo, or None when the hub cannot give it."""
    import random

    repo, img, lab = CIFAR10_HUB
    try:
        ds = load_hub_dataset(repo, split=split)
    except RevisionMoved:
        raise
    except Exception:  # noqa: BLE001 - the caller tries torchvision next
        return None
    idx = list(range(len(ds)))
    if n is not None:
        idx = random.Random(seed).sample(idx, min(n, len(idx)))
    sub = ds.select(idx)
    return [im.convert("RGB") for im in sub[img]], list(sub[lab])


def load_common_voice(n: int, language: str = "en", seed: int = 0) -> tuple[list, int]:
    """Kept for its callers: Common Voice 11.0 on the hub is a loading script that current `datasets`
    refuses (and Mozilla has since withdrawn it from the hub), so this now returns `n` LibriSpeech
    utterances (`load_librispeech`). `language` must be "en"."""
    if language != "en":
        raise DataUnavailable(f"speech in {language!r}: only English (LibriSpeech) is available through the hub")
    return load_librispeech(n, seed=seed)


#: a parquet speech dataset on the hub: repo id, config, split
LIBRISPEECH_HUB = ("openslr/librispeech_asr", "clean", "validation")


def _decode_audio(data: bytes, rate: int = 16_000):
    """Waveform (float32 numpy) at `rate` from encoded audio bytes (FLAC, as LibriSpeech ships, or WAV),
    decoded with `soundfile` (a dependency); resampled with scipy when the rate differs. A file that
    does not decode raises (never `DataUnavailable`, which would leave the audio models out silently)."""
    import io

    import soundfile

    try:
        x, sr = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as err:  # noqa: BLE001 - re-raised with what was being read
        raise RuntimeError(f"audio bytes ({data[:4]!r}…, {len(data):,} bytes) do not decode with soundfile "
                           f"{soundfile.__version__} (libsndfile {soundfile.__libsndfile_version__}): {err}") from err
    x = x.mean(axis=1)
    if sr != rate:
        from math import gcd

        from scipy.signal import resample_poly

        g = gcd(int(sr), rate)
        x = resample_poly(x, rate // g, int(sr) // g).astype("float32")
    return x


def load_librispeech(n: int, seed: int = 0) -> tuple[list, int]:
    """`n` LibriSpeech clean validation utterances (waveforms at 16 kHz) through `datasets`, streamed
    from the parquet repo `openslr/librispeech_asr` — hub only (not in the offline mirror). The audio
    column is read undecoded and decoded here, so `torchcodec` is not needed."""
    repo, config, split = LIBRISPEECH_HUB
    try:
        import datasets

        ds = load_hub_dataset(repo, config, split=split, streaming=True)
        ds = ds.cast_column("audio", datasets.Audio(decode=False)).shuffle(seed=seed)
        raw = [ex["audio"]["bytes"] for _, ex in zip(range(n), ds, strict=False)]
    except RevisionMoved:
        raise
    except Exception as err:  # noqa: BLE001
        raise DataUnavailable(
            f"LibriSpeech ({repo}, {config}/{split}) is not in the offline mirror and the hub is unreachable "
            f"({type(err).__name__}: {str(err)[:200]}); the audio models of the paper preset need hub access"
        ) from None
    return [_decode_audio(b) for b in raw], 16_000


#: the seven STS test sets of Yan et al. Table 1: name -> (WhiteningBERT file, official folder)
STS_SETS = {
    "STS-B": ("sts-b-test.csv", "STS-B"), "STS12": ("sts12-test.csv", "STS12"), "STS13": ("sts13-test.csv", "STS13"),
    "STS14": ("sts14-test.csv", "STS14"), "STS15": ("sts15-test.csv", "STS15"), "STS16": ("sts16-test.csv", "STS16"),
    "SICK-R": ("sickr-test.csv", "SICK"),
}


#: the WhiteningBERT files keep each year's subsets as contiguous blocks, in this order and with these
#: sizes (checked against the official per-subset gold files in `../shared/data/sts/STS1x/` by
#: `tests/test_sts_protocol.py`). STS-B and SICK-R are scored whole, as the evaluation scripts do.
STS_SUBSET_BLOCKS = {
    "STS12": (("MSRpar", 750), ("MSRvid", 750), ("SMTeuroparl", 459), ("surprise.OnWN", 750),
              ("surprise.SMTnews", 399)),
    "STS13": (("FNWN", 189), ("headlines", 750), ("OnWN", 561)),
    "STS14": (("deft-forum", 450), ("deft-news", 300), ("headlines", 750), ("images", 750), ("OnWN", 750),
              ("tweet-news", 750)),
    "STS15": (("answers-forums", 375), ("answers-students", 750), ("belief", 375), ("headlines", 750),
              ("images", 750)),
    "STS16": (("answer-answer", 254), ("headlines", 249), ("plagiarism", 230), ("postediting", 244),
              ("question-question", 209)),
}


def sts_subset_labels(name: str, n: int) -> list[str]:
    """The subset of each row of a WhiteningBERT file (`STS_SUBSET_BLOCKS`); the set's own name for
    STS-B and SICK-R, which the paper's protocol scores whole."""
    blocks = STS_SUBSET_BLOCKS.get(name)
    if blocks is None:
        return [name] * n
    if sum(k for _, k in blocks) != n:
        raise ValueError(f"{name}: {n} rows, but the subset blocks add up to {sum(k for _, k in blocks)}")
    return [s for s, k in blocks for _ in range(k)]


@dataclass
class STSSet:
    name: str
    sentence1: list[str]
    sentence2: list[str]
    scores: list[float]
    subsets: list[str]

    def __len__(self) -> int:
        return len(self.scores)


def hub_column(ds, name: str) -> list:
    """Column `name` of a `datasets.Dataset` as a list, read from its Arrow table in one call (iterating
    `ds[name]` decodes row by row: a hundred times slower on an STS set)."""
    return ds.with_format("arrow")[name].to_pylist()


def load_sts(name: str, source: str = "whiteningbert") -> STSSet:
    """An STS test set with gold scores. `source`:

    * `whiteningbert` — the processed files the SoftDecay paper evaluated on (all subsets of a year in
      one file, lower-cased and tokenised; score in column 5, sentences in 6 and 7); `subsets` from
      the contiguous blocks of `STS_SUBSET_BLOCKS`;
    * `official` — the official SemEval/STS-B/SICK files, untokenised, with the subset of each pair
      (blank gold lines skipped, as SentEval does);
    * `hub` — `datasets` (mteb/sts12-sts … mteb/sickr-sts), when online, with the same per-subset
      protocol: the mteb copies carry no subset column, and `subsets` come from the same contiguous
      blocks (`STS_SUBSET_BLOCKS`), each block checked by content against the official gold scores'
      fingerprints (`check_sts_blocks`); SICK-R is cut to its 4,927 test pairs (`sick_test_rows`: the
      hub copy holds all 9,927 pairs of SICK). A copy that does not match raises `DataUnavailable`;
    * `auto` — `whiteningbert` where the mirror is, `hub` otherwise (a Colab or fresh-venv run).
    """
    if name not in STS_SETS:
        raise ValueError(f"unknown STS set {name!r}; known: {list(STS_SETS)}")
    wfile, folder = STS_SETS[name]
    root = data_root()
    if source == "auto":
        source = "whiteningbert" if root is not None else "hub"
    if source == "hub":
        return _load_sts_hub(name)
    if root is None:
        raise DataUnavailable(f"{name}: offline mirror not found (set TOKUNI_DATA or place it at ../shared/data); "
                              "use source='hub' on a machine with hub access")
    if source == "whiteningbert":
        record_mirror_file(root / "sts" / "whiteningbert" / wfile, f"{name} (WhiteningBERT)", root)
        text = (root / "sts" / "whiteningbert" / wfile).read_text(encoding="utf-8")
        rows = [r.split("\t") for r in text.splitlines()]
        rows = [r for r in rows if len(r) >= 7]
        return STSSet(name, [r[5] for r in rows], [r[6] for r in rows], [float(r[4]) for r in rows],
                      sts_subset_labels(name, len(rows)))
    if source != "official":
        raise ValueError(f"source {source!r}: use whiteningbert, official, hub or auto")
    base = root / "sts" / folder
    s1, s2, sc, sub = [], [], [], []
    if name == "STS-B":
        record_mirror_file(base / "sts-test.csv", f"{name} (official)", root)
        for line in (base / "sts-test.csv").read_text(encoding="utf-8").splitlines():
            r = line.split("\t")
            s1.append(r[5]); s2.append(r[6]); sc.append(float(r[4])); sub.append(r[1])  # noqa: E702
    elif name == "SICK-R":
        record_mirror_file(base / "SICK_test_annotated.txt", f"{name} (official)", root)
        for line in (base / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()[1:]:
            r = line.split("\t")
            s1.append(r[1]); s2.append(r[2]); sc.append(float(r[3])); sub.append("SICK")  # noqa: E702
    else:
        for gs in sorted(base.glob("*.gs.*.txt")):
            if gs.name.endswith(".ALL.txt"):
                continue
            subset = gs.name.split(".gs.")[1][:-4]
            inp = base / gs.name.replace(".gs.", ".input.")
            if not inp.is_file():
                continue   # STS13 SMT: no input in the public release
            record_mirror_file(gs, f"{name} {subset} gold (official)", root)
            record_mirror_file(inp, f"{name} {subset} input (official)", root)
            golds = gs.read_text(encoding="utf-8").splitlines()
            pairs = inp.read_text(encoding="utf-8").splitlines()
            for g, p in zip(golds, pairs, strict=False):
                if not g.strip():
                    continue
                a, b = p.split("\t")[:2]
                s1.append(a); s2.append(b); sc.append(float(g)); sub.append(subset)  # noqa: E702
    return STSSet(name, s1, s2, sc, sub)


#: the mteb copies of the STS test sets on the hub
STS_HUB_IDS = {"STS-B": "mteb/stsbenchmark-sts", "SICK-R": "mteb/sickr-sts", "STS12": "mteb/sts12-sts",
               "STS13": "mteb/sts13-sts", "STS14": "mteb/sts14-sts", "STS15": "mteb/sts15-sts",
               "STS16": "mteb/sts16-sts"}
#: tolerance on a block's mean and standard deviation of gold scores (the copies round differently)
STS_BLOCK_TOLERANCE = 5e-4


#: the checked sets already built in this process, by (name, the hub copy's fingerprint)
_STS_HUB_SETS: dict = {}


def _load_sts_hub(name: str) -> STSSet:
    """An mteb copy, checked by content against the official files' fingerprints (`sts_reference`):
    STS12–16 block by block (pairs, mean and sd of the gold scores in the WhiteningBERT block order), and
    SICK-R cut to its SemEval-2014 test pairs (mteb/sickr-sts holds all 9,927 pairs of SICK: train, trial
    and test), found by content; anything that does not match raises `DataUnavailable` naming it."""
    hub = STS_HUB_IDS[name]
    try:
        ds = load_hub_dataset(hub, split="test")
    except RevisionMoved:
        raise
    except Exception as err:  # noqa: BLE001
        raise DataUnavailable(f"{name}: the hub ({hub}) is unreachable ({type(err).__name__})") from None
    missing = {"sentence1", "sentence2", "score"} - set(ds.column_names)
    if missing:
        raise DataUnavailable(f"{name}: the hub copy {hub} has columns {ds.column_names}; missing {sorted(missing)}")
    key = (name, getattr(ds, "_fingerprint", None))
    if key[1] is not None and key in _STS_HUB_SETS:
        kept = _STS_HUB_SETS[key]
        return STSSet(name, list(kept.sentence1), list(kept.sentence2), list(kept.scores), list(kept.subsets))
    s1, s2 = hub_column(ds, "sentence1"), hub_column(ds, "sentence2")
    scores = [float(x) for x in hub_column(ds, "score")]
    if name == "SICK-R":
        keep = sick_test_rows(s1, s2, scores, hub)
        s1, s2, scores = [s1[i] for i in keep], [s2[i] for i in keep], [scores[i] for i in keep]
    try:
        subsets = sts_subset_labels(name, len(scores))
    except ValueError as err:
        raise DataUnavailable(f"{name}: the hub copy {hub} does not split into the official subsets ({err})") from None
    check_sts_blocks(name, scores, hub)
    out = STSSet(name, s1, s2, scores, subsets)
    if key[1] is not None:
        _STS_HUB_SETS[key] = out
    return out


def sick_test_rows(s1: list[str], s2: list[str], scores: list[float], where: str = "the copy") -> list[int]:
    """Indices of SICK's 4,927 SemEval-2014 test pairs among the rows of a copy of SICK, by content
    (`sts_reference.pair_key`: sentences and gold score), in the copy's order; a pair that occurs again in
    train or trial with the same score is taken once per occurrence in test. Raises `DataUnavailable`
    unless every test pair is found."""
    from .sts_reference import pair_key, sick_test_keys

    want = sick_test_keys()
    left = dict(want)
    keep = []
    for i, (a, b, sc) in enumerate(zip(s1, s2, scores, strict=True)):
        k = pair_key(a, b, sc)
        if left.get(k, 0) > 0:
            left[k] -= 1
            keep.append(i)
    lost = sum(left.values())
    if lost:
        raise DataUnavailable(
            f"SICK-R: {where} ({len(scores):,} rows) holds {len(keep):,} of the {sum(want.values()):,} SemEval-2014 "
            f"test pairs of SICK ({lost:,} not found by sentences and gold score); the book scores that test "
            "split, as Yan et al. did — not the whole SICK")
    return keep


def check_sts_blocks(name: str, scores: list[float], where: str = "the copy") -> None:
    """The gold scores of each subset block of an STS12–16 copy against the official files' fingerprints
    (`sts_reference.STS_GOLD_BLOCKS`: pairs, mean, sd); raises `DataUnavailable` naming each block that
    differs (rows in another order than the WhiteningBERT blocks, other rows, other scores). STS-B and
    SICK-R have one block and pass."""
    from .sts_reference import STS_GOLD_BLOCKS, block_stats

    ref = STS_GOLD_BLOCKS.get(name)
    if ref is None:
        return
    start, bad = 0, []
    for sub, n, mean, sd in ref:
        got = block_stats(scores[start:start + n])
        if got[0] != n or abs(got[1] - mean) > STS_BLOCK_TOLERANCE or abs(got[2] - sd) > STS_BLOCK_TOLERANCE:
            bad.append(f"{sub} (rows {start}-{start + n - 1}: mean {got[1]:.4f}, sd {got[2]:.4f}; "
                       f"official {mean:.4f}, {sd:.4f})")
        start += n
    if bad:
        raise DataUnavailable(
            f"{name}: the gold scores of {where} do not match the official subsets block by block — the rows are "
            f"not in the order {[s for s, *_ in ref]} (or are other rows); per-subset scores would be wrong: "
            + "; ".join(bad))


def sts_reference_from_mirror() -> tuple[dict, str]:
    """(`sts_reference.STS_GOLD_BLOCKS`, `sts_reference.SICK_TEST_KEYS`) recomputed from the offline
    mirror's official files: what the committed fingerprints must equal (`tests/test_hub_standin.py`)."""
    import base64

    from .sts_reference import block_stats, pair_key

    blocks = {}
    for name, subsets in STS_SUBSET_BLOCKS.items():
        o = load_sts(name, "official")
        blocks[name] = tuple((sub, *block_stats([s for s, u in zip(o.scores, o.subsets, strict=True) if u == sub]))
                             for sub, _ in subsets)
    o = load_sts("SICK-R", "official")
    keys = sorted(pair_key(a, b, s) for a, b, s in zip(o.sentence1, o.sentence2, o.scores, strict=True))
    return blocks, base64.b64encode(b"".join(k.to_bytes(4, "big") for k in keys)).decode()


__all__ = [
    "DataUnavailable",
    "data_root",
    "SentenceSet",
    "load_glue",
    "load_wikitext103",
    "load_cifar10",
    "load_common_voice",
    "load_librispeech",
    "CIFAR10_HUB",
    "LIBRISPEECH_HUB",
    "GLUE_HUB_ID",
    "GLUE_HUB_COLUMNS",
    "STSSet",
    "load_sts",
    "CIFAR10_CLASSES",
    "STS_SETS",
    "STS_SUBSET_BLOCKS",
    "STS_HUB_IDS",
    "sts_subset_labels",
    "sick_test_rows",
    "check_sts_blocks",
    "sts_reference_from_mirror",
]
