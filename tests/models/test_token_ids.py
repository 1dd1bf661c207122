"""Tokenizing only the start of a long text (``biencoder_onnx.token_ids``) gives the ids that
tokenizing all of it and truncating gives: on real ACM-CR papers, and on the texts where a cut could
go wrong (no space to cut at, long words, a cut text that falls short of the limit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from citewise.indexer.bibtex import iter_bibtex
from citewise.indexer.records import PaperRecord
from citewise.models import dense_index
from citewise.models.biencoder_onnx import CHARS_PER_TOKEN, paper_text, token_ids

from ..conftest import ACM_DL, require

MODELS = Path(dense_index.__file__).parent


def _tokenizers() -> list[Tokenizer]:
    """The shipped tokenizers: the bi-encoder's, and the attention bag's (its static bag's)."""
    paths = [MODELS / "dense" / "tokenizer.json", MODELS / "static" / "tokenizer.json"]
    found = [Tokenizer.from_file(str(p)) for p in paths if p.exists()]
    if not found:
        pytest.skip(f"no shipped tokenizer under {MODELS} (dense/, static/)")
    return found


def _full(tok: Tokenizer, texts: list[str], max_len: int) -> list[list[int]]:
    tok.enable_truncation(max_len)
    return [e.ids for e in tok.encode_batch(texts)]


def test_real_acm_papers_get_the_ids_of_their_whole_text() -> None:
    bib = require(ACM_DL / "sigir" / "sigir-2018.bib")
    texts = [paper_text(r.title, r.abstract) for r in iter_bibtex(bib) if isinstance(r, PaperRecord)]
    long = [t for t in texts if len(t) > CHARS_PER_TOKEN * 128]
    assert len(long) > 50, "the sample must hold abstracts long enough to be cut"
    for tok in _tokenizers():
        for max_len in (128, 64):
            assert token_ids(tok, texts, max_len) == _full(tok, texts, max_len)


def test_texts_where_a_cut_could_go_wrong() -> None:
    texts = [
        "x" * 5000,  # no space to cut at: read whole
        "antidisestablishmentarianism " * 200,  # long words: many pieces each
        "a" * 767 + " " + "b" * 2000,  # the only space just before the cut
        ("the " * 100) + "z" * 4000,  # short words, then one huge word past the cut
        "1.2.3.4.5 " * 400,  # punctuation: many tokens a word
        "",
        "short text",
        "Ünïcödé wörds ünd ñ " * 150,
    ]
    for tok in _tokenizers():
        for max_len in (128, 64, 16):
            assert token_ids(tok, texts, max_len) == _full(tok, texts, max_len)
