"""A BERT-style WordPiece vocabulary trained with the ``tokenizers`` library on the pretraining corpus.

Shared by the text papers (ELECTRA, Funnel). ELECTRA uses BERT's uncased WordPiece vocabulary; we cannot download
it, so we train one of the same kind on the text we pretrain on (lower-cased, accents stripped, BERT
pre-tokenisation, ``##`` continuations) and save it beside
the run as ``tokenizer.json``. Special tokens take ids 0-4: ``[PAD] [UNK] [CLS] [SEP] [MASK]``, every other token
the next id in sorted order. (The ``tokenizers`` trainer learns the same token set in every process but numbers it in
hash-map order, huggingface/tokenizers#1794, so without renumbering two trainings on the same text disagree on ids.
Four processes training on 3,000 IMDB reviews now write identical vocabularies; on a tiny corpus, ties at the
vocabulary-size cutoff can still change which tokens are learned.)

Pretraining examples (:func:`pack_documents`) are ``[CLS] chunk [SEP]`` windows cut from each document's token
stream, padded to ``seq_len``; fine-tuning examples (:func:`encode_batch`) are ``[CLS] text [SEP]`` truncated.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

__all__ = ["SPECIAL_TOKENS", "train_wordpiece", "load_tokenizer", "special_ids", "encode_batch", "pack_documents",
           "clean_text"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def clean_text(text: str) -> str:
    """IMDB reviews carry HTML line breaks; replace them with spaces."""
    return _BR.sub(" ", text)


def train_wordpiece(texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2,
                    path: str | os.PathLike | None = None):
    """Train a lower-cased WordPiece tokenizer on ``texts``; save it to ``path`` (a ``tokenizer.json``) if given.

    Returns a ``tokenizers.Tokenizer`` whose post-processor adds ``[CLS] ... [SEP]`` (and ``... [SEP]`` for pairs).
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    if not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be an int > {len(SPECIAL_TOKENS)}, got {vocab_size!r}")
    wordpiece = dict(unk_token="[UNK]", max_input_chars_per_word=100, continuing_subword_prefix="##")
    tok = Tokenizer(models.WordPiece(**wordpiece))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                        special_tokens=list(SPECIAL_TOKENS), continuing_subword_prefix="##",
                                        show_progress=False)
    tok.train_from_iterator((clean_text(t) for t in texts), trainer=trainer)
    learned = tok.get_vocab()
    ids = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *sorted(set(learned) - set(SPECIAL_TOKENS))])}
    tok.model = models.WordPiece(vocab=ids, **wordpiece)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tok.save(str(path))
    return tok


def load_tokenizer(path: str | os.PathLike):
    """A tokenizer saved by :func:`train_wordpiece`."""
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"expected a tokenizer.json file, got {path} (not found)")
    return Tokenizer.from_file(str(path))


def special_ids(tok) -> dict[str, int]:
    """``{"pad", "unk", "cls", "sep", "mask"}`` -> id."""
    out = {}
    for t in SPECIAL_TOKENS:
        i = tok.token_to_id(t)
        if i is None:
            raise ValueError(f"tokenizer has no {t} token; train it with train_wordpiece")
        out[t.strip("[]").lower()] = i
    return out


def encode_batch(tok, texts: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] text [SEP]`` for each text, truncated/padded to ``max_len``: ids and attention mask (N, max_len)."""
    if max_len < 3:
        raise ValueError(f"max_len must be >= 3, got {max_len}")
    ids = special_ids(tok)
    enc = tok.encode_batch([clean_text(t) for t in texts], add_special_tokens=False)
    out = torch.full((len(texts), max_len), ids["pad"], dtype=torch.long)
    mask = torch.zeros((len(texts), max_len), dtype=torch.long)
    for i, e in enumerate(enc):
        row = [ids["cls"], *e.ids[: max_len - 2], ids["sep"]]
        out[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    return out, mask


def pack_documents(tok, texts: Sequence[str], seq_len: int, min_tokens: int = 8,
                   max_examples: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pretraining examples: each document's tokens cut into ``seq_len - 2`` windows as ``[CLS] w [SEP]``.

    The last window of a document is padded (kept when it holds at least ``min_tokens`` tokens), so batches
    contain padding as real data does. Returns ids and attention mask, (N, seq_len) int64.
    """
    if seq_len < 3:
        raise ValueError(f"seq_len must be >= 3, got {seq_len}")
    ids = special_ids(tok)
    w = seq_len - 2
    rows: list[list[int]] = []
    for e in tok.encode_batch([clean_text(t) for t in texts], add_special_tokens=False):
        toks = e.ids
        for s in range(0, len(toks), w):
            chunk = toks[s:s + w]
            if len(chunk) >= min_tokens:
                rows.append([ids["cls"], *chunk, ids["sep"]])
        if max_examples is not None and len(rows) >= max_examples:
            rows = rows[:max_examples]
            break
    if not rows:
        raise ValueError("no pretraining example: the texts are empty or shorter than min_tokens")
    out = torch.full((len(rows), seq_len), ids["pad"], dtype=torch.long)
    mask = torch.zeros((len(rows), seq_len), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return out, mask
