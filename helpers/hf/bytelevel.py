"""A byte-level tokenizer (256 byte values + [PAD], [CLS], [SEP], [MASK]) with the attributes the book's
MLM pretraining code and the anisotropy walkers use: the English character-level counterpart of
Godey et al. Figure 2 (CANINE, ByT5), trained here (`helpers.experiments.anisotropy.byte_mlm`)."""

from __future__ import annotations

#: ids 0..255 are the UTF-8 bytes; the specials follow
PAD, CLS, SEP, MASK = 256, 257, 258, 259
VOCAB_SIZE = 260


class ByteTokenizer:
    """UTF-8 bytes as token ids (one token per byte, no unknown token). Called like a Hugging Face
    tokenizer on a string or a list of strings, it returns {"input_ids": ...} (no specials added)."""

    pad_token_id, cls_token_id, sep_token_id, mask_token_id = PAD, CLS, SEP, MASK
    bos_token_id = eos_token_id = None
    pad_token = "[PAD]"
    all_special_ids = [PAD, CLS, SEP, MASK]

    def __len__(self) -> int:
        return VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")

    def __call__(self, text, add_special_tokens: bool = False, **_ignored) -> dict:
        if isinstance(text, str):
            ids = self.encode(text)
            return {"input_ids": [CLS, *ids, SEP] if add_special_tokens else ids}
        return {"input_ids": [self(t, add_special_tokens)["input_ids"] for t in text]}
