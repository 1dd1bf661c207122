"""Training data for HAtten: the authors' released layout, and self-supervised pairs from any paper store.

Both sources end as the same thing: a :class:`Corpus` of tokenised papers (title + abstract split in
sentences) and :class:`Example` queries (local context + citing title + citing abstract, token ids)
whose positive is a corpus index. The trainer never sees text again, so tokenising happens once.

1. Supervised (``load_release``): the layout of the HAtten authors' release (ACL-200, RefSeer, arXiv):
   ``papers.json`` {id: {title, abstract}}, ``contexts.json`` {context_id: {masked_text | text,
   citing_id}}, ``train.json`` / ``val.json`` / ``test.json`` lists of {context_id, positive_ids}.

2. Self-supervised (``SelfSupervised``), because no citation labels exist offline for ACM or ACL.
   Recipe, per example:
   - target paper P (any paper with an abstract of >= 2 sentences, never a blacklisted citing paper);
   - pseudo local context: one sentence of P's abstract (70 %), P's keywords (15 %) or P's title (15 %);
     that text is *removed* from P's document side, so the model must match a paraphrase-like
     fragment to the rest of the paper instead of copying tokens;
   - pseudo citing paper (global context): a textual neighbour Q of P (rank 3-30 by an idf-weighted
     GloVe centroid, preferring a neighbour from the same venue, i.e. a paper that could plausibly
     cite P), its title + abstract; dropped in 15 % of the examples so the local context must carry
     the ranking on its own.
   Negatives and Jaccard positives are mined by the trainer (``hatten_train``) from the current
   model's top-K; round 0 uses the GloVe centroid neighbours of P.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from citewise.models.vocab import FIRST_WORD, Vocab

_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_MARKERS = re.compile(r"\b(?:TARGETCIT|OTHERCIT)\b|\[[0-9,;\s\-–]+\]")


def split_sentences(text: str) -> list[str]:
    return [s for s in (p.strip() for p in _SENT.split(text or "")) if s]


@dataclass
class Corpus:
    """Tokenised papers: ``title[i]`` ids, ``sents[i]`` list of sentence id arrays, ``keys[i]`` external id."""

    keys: list[str]
    title: list[np.ndarray]
    sents: list[list[np.ndarray]]
    keywords: list[np.ndarray]
    venue: list[str]
    words: list[frozenset[int]] = field(default_factory=list)  # content token ids, for Jaccard mining

    def __len__(self) -> int:
        return len(self.keys)

    def abstract(self, i: int, drop: int = -1, max_len: int = 128) -> np.ndarray:
        parts = [s for j, s in enumerate(self.sents[i]) if j != drop]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(parts)[:max_len]


def tokenise_corpus(
    vocab: Vocab,
    rows: Iterable[tuple[str, str, str, str, str]],
    max_title: int = 24,
) -> Corpus:
    """Corpus from (key, title, abstract, keywords, venue) rows."""
    keys, titles, abstracts, keywords, venues = [], [], [], [], []
    for key, title, abstract, kw, venue in rows:
        keys.append(key)
        titles.append(title or "")
        abstracts.append(abstract or "")
        keywords.append((kw or "").replace(",", " "))
        venues.append(venue or "")
    title_ids = vocab.encode(titles, max_title)
    kw_ids = vocab.encode(keywords, 32)
    sents: list[list[np.ndarray]] = []
    flat: list[str] = []
    bounds: list[tuple[int, int]] = []
    for a in abstracts:
        ss = split_sentences(a)
        bounds.append((len(flat), len(flat) + len(ss)))
        flat.extend(ss)
    flat_ids = vocab.encode(flat, 10_000)
    for lo, hi in bounds:
        sents.append([flat_ids[j] for j in range(lo, hi) if len(flat_ids[j])])
    words = [
        frozenset(int(t) for t in np.concatenate([title_ids[i], *sents[i]]) if t >= FIRST_WORD)
        for i in range(len(keys))
    ]
    return Corpus(keys, title_ids, sents, kw_ids, venues, words)


@dataclass
class Example:
    """A training query and its positive (a corpus index); ``drop`` = abstract sentence removed from it."""

    local: np.ndarray
    citing_title: np.ndarray
    citing_abstract: np.ndarray
    positive: int
    drop: int = -1  # sentence of the positive's abstract hidden from its document side
    drop_title: bool = False
    local_words: frozenset[int] = frozenset()  # content token ids, for Jaccard mining
    extra_positives: tuple[int, ...] = ()  # other cited papers of the same context (never negatives)


# -- 1. the authors' release layout ----------------------------------------------------------------


@dataclass
class Release:
    corpus: Corpus
    splits: dict[str, list[Example]]


def _clean_context(text: str) -> str:
    return re.sub(r"\s+", " ", _MARKERS.sub(" ", text or "")).strip()


def load_release(folder: str | Path, vocab: Vocab, max_local: int = 48, max_abstract: int = 128) -> Release:
    """Load ``papers.json``, ``contexts.json`` and whichever of train/val/test.json exist."""
    folder = Path(folder)
    papers = json.loads((folder / "papers.json").read_text())
    contexts = json.loads((folder / "contexts.json").read_text())
    ids = list(papers)
    index = {pid: i for i, pid in enumerate(ids)}
    corpus = tokenise_corpus(
        vocab,
        (
            (pid, p.get("title", ""), p.get("abstract", ""), p.get("keywords", ""), p.get("venue", ""))
            for pid, p in papers.items()
        ),
    )
    splits: dict[str, list[Example]] = {}
    for name in ("train", "val", "test"):
        path = folder / f"{name}.json"
        if not path.exists():
            continue
        items = json.loads(path.read_text())
        texts, metas = [], []
        for item in items:
            ctx = contexts.get(str(item["context_id"]))
            if ctx is None:
                continue
            positives = [index[p] for p in item.get("positive_ids", []) if p in index]
            if not positives:
                continue
            texts.append(_clean_context(ctx.get("masked_text") or ctx.get("text") or ctx.get("context", "")))
            metas.append((ctx.get("citing_id"), positives))
        local_ids = vocab.encode(texts, max_local)
        examples = []
        for ids_, (citing, positives) in zip(local_ids, metas, strict=True):
            ci = index.get(citing) if citing is not None else None
            ct = corpus.title[ci] if ci is not None else np.zeros(0, dtype=np.int64)
            ca = corpus.abstract(ci, max_len=max_abstract) if ci is not None else np.zeros(0, dtype=np.int64)
            words = frozenset(int(t) for t in ids_ if t >= FIRST_WORD)
            for p in positives:
                examples.append(Example(ids_, ct, ca, p, local_words=words, extra_positives=tuple(positives)))
        splits[name] = examples
    return Release(corpus, splits)


# -- 2. self-supervised pairs from a paper store -----------------------------------------------------


def store_rows(store, exclude_dois: set[str] | None = None) -> list[tuple[str, str, str, str, str]]:
    """(key, title, abstract, keywords, venue) of every paper of a store, blacklisted DOIs left out."""
    exclude = {d.lower() for d in (exclude_dois or set())}
    rows = []
    for p in store.iter_papers():
        if p.doi and p.doi.lower() in exclude:
            continue
        rows.append((str(p.id), p.title, p.abstract, p.keywords, p.venue))
    return rows


def centroid_vectors(corpus: Corpus, base: np.ndarray) -> np.ndarray:
    """idf-weighted mean of base vectors over title + abstract: a cheap teacher for neighbours."""
    n, v = len(corpus), base.shape[0]
    df = np.zeros(v, dtype=np.float64)
    docs = []
    for i in range(n):
        ids = np.concatenate([corpus.title[i], *corpus.sents[i]]) if corpus.sents[i] else corpus.title[i]
        u = np.unique(ids)
        df[u] += 1
        docs.append(ids)
    idf = np.log((n + 1) / (df + 1)).astype(np.float32)
    idf[:3] = 0.0
    out = np.zeros((n, base.shape[1]), dtype=np.float32)
    for i, ids in enumerate(docs):
        if len(ids):
            out[i] = (base[ids] * idf[ids, None]).sum(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-6)


def knn(vectors: np.ndarray, k: int, threads: int = 2) -> np.ndarray:
    """Approximate k nearest neighbours (cosine) of every row, itself excluded where found.

    usearch's HNSW (a core dependency with wheels; hnswlib, used here before, needs a compiler)."""
    from usearch.index import Index

    n, d = vectors.shape
    k = max(1, min(k, n - 1))
    index = Index(ndim=d, metric="cos", dtype="f32", connectivity=16, expansion_add=100)
    index.expansion_search = max(2 * k, 64)
    index.add(np.arange(n), np.ascontiguousarray(vectors, dtype=np.float32), threads=threads)
    found = index.search(np.ascontiguousarray(vectors, dtype=np.float32), min(k + 1, n), threads=threads)
    labels, counts = np.atleast_2d(found.keys), np.atleast_1d(found.counts)
    out = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        row = [int(j) for j in labels[i, : counts[i]] if j != i][:k]
        out[i, : len(row)] = row
    return out


class SelfSupervised:
    """Draws self-supervised examples (recipe in the module docstring)."""

    def __init__(
        self,
        corpus: Corpus,
        neighbours: np.ndarray,
        max_local: int = 48,
        max_abstract: int = 128,
        seed: int = 0,
        p_no_global: float = 0.15,
        rank_lo: int = 2,
        rank_hi: int = 30,
    ) -> None:
        self.c = corpus
        self.nb = neighbours
        self.max_local = max_local
        self.max_abstract = max_abstract
        self.rng = random.Random(seed)
        self.p_no_global = p_no_global
        self.rank_lo, self.rank_hi = rank_lo, min(rank_hi, neighbours.shape[1])
        self.targets = [i for i in range(len(corpus)) if len(corpus.sents[i]) >= 2]

    def citing_for(self, p: int) -> int:
        cands = [int(j) for j in self.nb[p, self.rank_lo : self.rank_hi] if j != p]
        same = [j for j in cands if self.c.venue[j] and self.c.venue[j] == self.c.venue[p]]
        pool = same if same and self.rng.random() < 0.5 else cands
        return self.rng.choice(pool) if pool else int(self.nb[p, 0])

    def example(self, p: int | None = None) -> Example:
        rng, c = self.rng, self.c
        if p is None:
            p = rng.choice(self.targets)
        r = rng.random()
        drop, drop_title = -1, False
        if r < 0.15 and len(c.keywords[p]) >= 2:
            local = c.keywords[p]
        elif r < 0.30 and len(c.title[p]) >= 3:
            local, drop_title = c.title[p], True
        else:
            long = [j for j, s in enumerate(c.sents[p]) if len(s) >= 5] or list(range(len(c.sents[p])))
            drop = rng.choice(long)
            local = c.sents[p][drop]
        local = local[: self.max_local]
        empty = np.zeros(0, dtype=np.int64)
        if rng.random() < self.p_no_global:
            ct, ca = empty, empty
        else:
            q = self.citing_for(p)
            ct, ca = c.title[q], c.abstract(q, max_len=self.max_abstract)
        return Example(
            local,
            ct,
            ca,
            p,
            drop=drop,
            drop_title=drop_title,
            local_words=frozenset(int(t) for t in local if t >= FIRST_WORD),
        )

    def examples(self, n: int) -> list[Example]:
        return [self.example() for _ in range(n)]
