"""Loaders for the anisotropy chapter's non-English-text and non-Transformer models, each shipped in a
PyPI weight package (see ../shared/MODELS.md): AntiBERTy (a masked-LM BERT over antibody residues),
rxnmapper's ALBERT (a masked-LM ALBERT over atom-level reaction SMILES) and EfficientNet-Lite0 (an
ImageNet CNN). `helpers.hf.models.load` dispatches here for these names; each returns (model,
tokenizer-or-preprocessor). Untrained twins: the same config with seeded random weights (seed 0 unless asked)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

#: rxnmapper's own SMILES regex (rxnmapper/smiles_utils.py): bracket atoms such as `[C@H]` are one token
SMILES_REGEX = re.compile(r"(\[[^\]]+]|Br?|Cl?|N|O|S|P|F|I|b|c|n|o|s|p|\(|\)|\.|=|#|-|\+|\\|\/|:|~|@|\?|>>?|\*|\$|"
                          r"\%[0-9]{2}|[0-9])")


class VocabTokenizer:
    """A tokenizer over a fixed `vocab.txt` (one token per line, id = line number) that splits its
    input with `split(text) -> list[str]`; unknown pieces map to [UNK]. Called like a Hugging Face
    tokenizer: `tok(text, add_special_tokens=False)["input_ids"]`."""

    bos_token_id = eos_token_id = None

    def __init__(self, vocab_file: str | Path, split) -> None:
        tokens = Path(vocab_file).read_text(encoding="utf-8").splitlines()
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.split = split
        self.pad_token_id, self.unk_token_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls_token_id, self.sep_token_id, self.mask_token_id = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]"))
        self.all_special_ids = [self.pad_token_id, self.unk_token_id, self.cls_token_id, self.sep_token_id,
                                self.mask_token_id]

    def __len__(self) -> int:
        return len(self.vocab)

    def tokenize(self, text: str) -> list[str]:
        return self.split(text)

    def convert_tokens_to_ids(self, tokens: list[str]) -> list[int]:
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def __call__(self, text, add_special_tokens: bool = False, **_ignored) -> dict:
        if not isinstance(text, str):
            return {"input_ids": [self(t, add_special_tokens)["input_ids"] for t in text]}
        ids = self.convert_tokens_to_ids(self.tokenize(text))
        return {"input_ids": [self.cls_token_id, *ids, self.sep_token_id] if add_special_tokens else ids}


def smiles_tokens(smiles: str) -> list[str]:
    """rxnmapper's atom-level SMILES tokenisation."""
    return SMILES_REGEX.findall(smiles)


def residue_tokens(sequence: str) -> list[str]:
    """One token per amino-acid residue (AntiBERTy's vocabulary: the 20 standard one-letter codes)."""
    return list(sequence.replace(" ", "").upper())


def _seeded(build, seed: int = 0):
    from .loading import quiet_loading

    torch.manual_seed(seed)
    with quiet_loading():
        return build()


def _masked_lm(config_cls, model_cls, weights: Path, untrained: bool, seed: int):
    """A Hugging Face masked-LM class from its package folder: the weights, or (`untrained`) the same config
    with random weights drawn after `torch.manual_seed(seed)`. Never runs code from the folder."""
    if untrained:
        return _seeded(lambda: model_cls(config_cls.from_pretrained(weights, attn_implementation="eager",
                                                                    trust_remote_code=False)), seed)
    return _seeded(lambda: model_cls.from_pretrained(weights, attn_implementation="eager", dtype=torch.float32,
                                                     trust_remote_code=False), seed)


def load_antiberty(folder: Path, untrained: bool, seed: int = 0):
    """AntiBERTy (Ruffolo et al. 2021): `BertForMaskedLM`, 8 layers, 512 wide, vocabulary of 25."""
    from transformers import BertConfig, BertForMaskedLM

    model = _masked_lm(BertConfig, BertForMaskedLM, folder / "AntiBERTy_md_smooth", untrained, seed)
    return model, VocabTokenizer(folder / "vocab.txt", residue_tokens)


def load_rxn_albert(folder: Path, untrained: bool, seed: int = 0):
    """rxnmapper's ALBERT (Schwaller et al. 2021): `AlbertForMaskedLM`, 12 layers sharing one set of
    weights, 256 wide, 591 atom-level SMILES tokens."""
    from transformers import AlbertConfig, AlbertForMaskedLM

    model = _masked_lm(AlbertConfig, AlbertForMaskedLM, folder, untrained, seed)
    return model, VocabTokenizer(folder / "vocab.txt", smiles_tokens)


class CNNPreprocessor:
    """PIL images -> (B, 3, size, size) pixel values as EfficientNet-Lite expects: bilinear upsampling
    to `size` (CIFAR-10's 32 px to 224 px) and (x − 127)/128. Called like an image processor."""

    def __init__(self, size: int = 224) -> None:
        self.size = size

    def __call__(self, images, return_tensors: str = "pt") -> dict:
        from ..core.efficientnet_lite import normalise_pixels

        x = torch.stack([torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1) for im in images]).float()
        x = torch.nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return {"pixel_values": normalise_pixels(x)}


def load_efficientnet_lite0(folder: Path, untrained: bool, seed: int = 0):
    """EfficientNet-Lite0 with the package's ImageNet weights (strict key match), or seeded random ones."""
    from ..core.efficientnet_lite import EfficientNetLite0

    model = _seeded(EfficientNetLite0, seed)
    if not untrained:
        state = torch.load(folder / "efficientnet-lite0-57934424.pth", map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
    return model, CNNPreprocessor()


#: model name -> loader(package folder, untrained, seed) -> (model, tokenizer or preprocessor)
LOADERS = {"AntiBERTy": load_antiberty, "rxnmapper-ALBERT": load_rxn_albert,
           "EfficientNet-Lite0": load_efficientnet_lite0}
