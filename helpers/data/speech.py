"""Real English speech offline: the Free Spoken Digit Dataset (FSDD) from the mirror
(`speech/fsdd/recordings/{digit}_{speaker}_{index}.wav`, 8 kHz mono 16-bit; 6 speakers × 10 digits ×
50 repetitions), returned as float32 waveforms resampled to 16 kHz for speech transformers.

FSDD is short isolated digits, not the Common Voice sentences of Godey et al.; a speech model here is
measured on digits, and said so. Whisper transcribes isolated 0.3–0.6 s clips poorly, so
`digit_sequences` joins several clips of one speaker with short silences (see ../shared/MODELS.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path

import numpy as np

from .loaders import DataUnavailable, data_root

#: sampling rate of the FSDD recordings and the rate speech transformers (Whisper) expect
FSDD_RATE = 8_000
SPEECH_RATE = 16_000
DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def fsdd_root() -> Path:
    """The mirror's FSDD folder (holding `recordings/` and `speakers.json`), or `DataUnavailable`."""
    root = data_root()
    folder = root / "speech" / "fsdd" if root else None
    if folder is None or not (folder / "recordings").is_dir():
        raise DataUnavailable(
            "Free Spoken Digit Dataset: offline mirror not found (looked for speech/fsdd/recordings under "
            "$TOKUNI_DATA and ../shared/data); it comes from github.com/Jakobovski/free-spoken-digit-dataset "
            "(CC BY-SA 4.0)"
        )
    return folder


def fsdd_speakers() -> dict[str, dict]:
    """Speaker name -> {gender, accent, language}, from the mirror's `speakers.json`."""
    return json.loads((fsdd_root() / "speakers.json").read_text())


def resample(wave: np.ndarray, rate: int, target: int = SPEECH_RATE) -> np.ndarray:
    """`wave` at `rate` Hz resampled to `target` Hz (polyphase, scipy.signal.resample_poly), float32."""
    from scipy.signal import resample_poly

    if rate == target:
        return np.asarray(wave, dtype=np.float32)
    g = gcd(rate, target)
    return resample_poly(np.asarray(wave, dtype=np.float64), target // g, rate // g).astype(np.float32)


def read_wav(path: Path, target: int = SPEECH_RATE) -> np.ndarray:
    """A mono WAV file as float32 in [-1, 1) at `target` Hz."""
    from scipy.io import wavfile

    rate, data = wavfile.read(path)
    if data.ndim > 1:
        data = data.mean(axis=1)
    if np.issubdtype(data.dtype, np.integer):
        data = data.astype(np.float64) / float(np.iinfo(data.dtype).max + 1)
    return resample(data, rate, target)


@dataclass
class SpokenDigits:
    """FSDD clips: waveform (float32, `sampling_rate` Hz), spoken digit, speaker and repetition index."""

    waveforms: list[np.ndarray]
    digits: list[int]
    speakers: list[str]
    indices: list[int]
    sampling_rate: int = SPEECH_RATE

    def __len__(self) -> int:
        return len(self.waveforms)


def load_fsdd(speakers: list[str] | None = None, digits: list[int] | None = None,
              indices: list[int] | None = None, sampling_rate: int = SPEECH_RATE) -> SpokenDigits:
    """FSDD clips of the given speakers, digits and repetition indices (all when None), sorted by
    speaker, digit, index; resampled from 8 kHz to `sampling_rate`. FSDD's official test split is
    indices 0–4."""
    rec = fsdd_root() / "recordings"
    known = fsdd_speakers()
    if speakers is not None and (bad := sorted(set(speakers) - set(known))):
        raise ValueError(f"unknown FSDD speakers {bad}; known: {sorted(known)}")
    rows = []
    for path in rec.glob("*.wav"):
        d, s, i = path.stem.split("_")
        if ((speakers is None or s in speakers) and (digits is None or int(d) in digits)
                and (indices is None or int(i) in indices)):
            rows.append((s, int(d), int(i), path))
    rows.sort()
    return SpokenDigits([read_wav(p, sampling_rate) for *_, p in rows], [d for _, d, _, _ in rows],
                        [s for s, *_ in rows], [i for _, _, i, _ in rows], sampling_rate)


def join_clips(waveforms: list[np.ndarray], gap_s: float = 0.25, sampling_rate: int = SPEECH_RATE,
               edge_s: float = 0.0) -> np.ndarray:
    """The clips one after another with `gap_s` seconds of silence between them and `edge_s` seconds
    before the first and after the last."""
    gap = np.zeros(int(round(gap_s * sampling_rate)), dtype=np.float32)
    edge = np.zeros(int(round(edge_s * sampling_rate)), dtype=np.float32)
    parts: list[np.ndarray] = [edge]
    for k, w in enumerate(waveforms):
        if k:
            parts.append(gap)
        parts.append(np.asarray(w, dtype=np.float32))
    return np.concatenate(parts + [edge])


@dataclass
class DigitSequence:
    """Several FSDD clips of one speaker joined with silences: what Whisper transcribes well."""

    waveform: np.ndarray
    digits: list[int]
    speaker: str
    indices: list[int] = field(default_factory=list)
    sampling_rate: int = SPEECH_RATE


def digit_sequences(n_per_speaker: int = 1, length: int = 5, speakers: list[str] | None = None,
                    seed: int = 0, gap_s: float = 0.25, sampling_rate: int = SPEECH_RATE,
                    edge_s: float = 0.0) -> list[DigitSequence]:
    """`n_per_speaker` sequences of `length` random digits (repetition index drawn too) for each
    speaker, each the speaker's clips joined by `gap_s` s of silence (and `edge_s` s before and after:
    FSDD clips are trimmed, and Whisper tends to drop or mishear a digit that starts at 0 s);
    reproducible from `seed`."""
    speakers = sorted(fsdd_speakers()) if speakers is None else list(speakers)
    rng = np.random.default_rng(seed)
    rec = fsdd_root() / "recordings"
    out = []
    for s in speakers:
        for _ in range(n_per_speaker):
            digs = [int(x) for x in rng.integers(0, 10, size=length)]
            idx = [int(x) for x in rng.integers(0, 50, size=length)]
            waves = [read_wav(rec / f"{d}_{s}_{i}.wav", sampling_rate) for d, i in zip(digs, idx, strict=True)]
            out.append(DigitSequence(join_clips(waves, gap_s, sampling_rate, edge_s), digs, s, idx, sampling_rate))
    return out


_WORD_DIGIT = {w: i for i, w in enumerate(DIGIT_WORDS)}


def spoken_digits(text: str) -> list[int]:
    """A transcript read as a digit sequence: digit words ("two") and numerals ("2", "73498" → 7 3 4 9 8)
    become digits, case and punctuation are ignored, and any other word becomes -1 (an error that
    still counts in `digit_accuracy`)."""
    out: list[int] = []
    for word in re.sub(r"[^0-9a-z]+", " ", text.lower()).split():
        if word.isdigit():
            out += [int(c) for c in word]
        else:
            out.append(_WORD_DIGIT.get(word, -1))
    return out


def edit_distance(a: list, b: list) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions cost 1)."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def digit_accuracy(truth: list[int], predicted: list[int]) -> float:
    """1 − (edit distance / number of spoken digits), floored at 0: the digit accuracy of a transcript
    (1 − the digit error rate); a long hallucination scores 0, not partial credit."""
    return max(0.0, 1.0 - edit_distance(list(truth), list(predicted)) / max(1, len(truth)))
