"""Building the BM25 index from a store in bounded memory (issue 28): block runs on disk, merged
term range by term range into the same files :mod:`citewise.indexer.bm25_files` saves.

Why: the in-memory build (:meth:`BM25Index.build`) keeps every posting as Python ints and floats
in per-term lists until the end, ~70 bytes a posting: 9.3 GB at a million papers. Here the papers
are read from the store in blocks; each block's postings are counted into flat typed arrays (16
bytes a posting), sorted by term and written to disk as a *run*. When every block is counted, the
collection statistics (N, mean lengths, document frequencies) are known, and the final posting
and impact arrays are written sequentially, one range of terms at a time, each range gathered
from the runs (each run is sorted by term, so its part of the range is one contiguous slice).
Peak memory is the per-paper arrays (20 bytes a paper), the vocabulary, one block and one merge
range: the block size and the range size follow ``budget_mb``, not the corpus.

The result is the very index the in-memory build makes: the same vocabulary order (terms are
numbered as first met, papers are read in id order), the same postings in the same order (runs
are concatenated in block order, so each term's postings stay in paper order), and the impacts
computed by the same float operations; ``tests/indexer/test_bm25_build.py`` compares the two
on ACM-CR and the ACL store with citation data, array for array.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .bm25 import BM25Params, Doc, Tokenizer, expanded_docs
from .index_files import clean_orphans
from .store import Store

Progress = Callable[[int, int], None]  # (done, total)

# Bytes of memory a paper of a block costs while counting (four 4-byte arrays a posting, ~60
# postings a paper, the numpy copies made when the block is sorted), and a posting while merging.
_BLOCK_BYTES_PER_DOC = 4096
_MERGE_BYTES_PER_POSTING = 64
DEFAULT_BUDGET_MB = 512


@dataclass
class BuildStats:
    """What a bounded build did (``citewise index`` and the scale bench print it)."""

    papers: int = 0
    postings: int = 0
    terms: int = 0
    blocks: int = 0
    merge_ranges: int = 0
    block_docs: int = 0


@dataclass
class _Run:
    """One block's postings on disk, sorted by term id."""

    folder: Path
    size: int

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.npy"


class _Counter:
    """Counts blocks of papers into runs, numbering terms as first met across all blocks."""

    def __init__(self, params: BM25Params, work: Path) -> None:
        self.params = params
        self.work = work
        self.tok = Tokenizer()
        self.vocab: dict[str, int] = {}
        self.df = np.zeros(1024, dtype=np.int64)
        self.runs: list[_Run] = []
        self.ids: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []
        self.citing_lengths: list[np.ndarray] = []
        self.citing_counts: list[np.ndarray] = []
        self.n = 0

    def _tid(self, term: str) -> int:
        tid = self.vocab.get(term)
        if tid is None:
            tid = self.vocab[term] = len(self.vocab)
        return tid

    def add_block(self, docs: Iterable[Doc], on_doc: Callable[[], None] | None) -> None:
        """Count one block (the per-paper semantics of :func:`citewise.indexer.bm25._count_terms`:
        every (term, paper) pair once, with its own-field and citing-field frequencies)."""
        p = self.params
        tids, poss, tfs, ctfs = array("i"), array("i"), array("f"), array("f")
        ids: list[int] = []
        lengths: list[float] = []
        clengths: list[float] = []
        ccounts: list[int] = []
        pos = self.n
        for pid, title, abstract, keywords, *citing in docs:
            counts: Counter[str] = Counter()
            for text, w in ((title, p.w_title), (abstract, p.w_abstract), (keywords, p.w_keywords)):
                if w and text:
                    for t in self.tok(text):
                        counts[t] += w  # type: ignore[assignment]  # typeshed types Counter values as int; float weights are documented
            cc = Counter(self.tok(citing[0])) if citing and citing[0] and p.w_citing else Counter()
            ids.append(pid)
            lengths.append(sum(counts.values()))
            clengths.append(float(sum(cc.values())))
            ccounts.append(int(citing[1]) if len(citing) > 1 else 0)
            slot: dict[str, int] = {}
            for term, tf in counts.items():
                slot[term] = len(tids)
                tids.append(self._tid(term))
                poss.append(pos)
                tfs.append(tf)
                ctfs.append(0.0)
            for term, ctf in cc.items():
                i = slot.get(term)
                if i is not None:
                    ctfs[i] = float(ctf)
                    continue
                tids.append(self._tid(term))
                poss.append(pos)
                tfs.append(0.0)
                ctfs.append(float(ctf))
            pos += 1
            if on_doc is not None:
                on_doc()
        if not ids:
            return
        self.n = pos
        self.ids.append(np.asarray(ids, dtype=np.int64))
        self.lengths.append(np.asarray(lengths, dtype=np.float32))
        self.citing_lengths.append(np.asarray(clengths, dtype=np.float32))
        self.citing_counts.append(np.asarray(ccounts, dtype=np.int32))
        self._write_run(tids, poss, tfs, ctfs)

    def _write_run(self, tids: array, poss: array, tfs: array, ctfs: array) -> None:
        """The block's postings sorted by term (within a term, paper order is kept), to disk,
        and its terms' document frequencies added."""
        t = np.frombuffer(tids, dtype=np.int32)
        order = np.argsort(t, kind="stable")
        run = _Run(self.work / f"run{len(self.runs):05d}", int(t.shape[0]))
        run.folder.mkdir()
        np.save(run.path("tids"), t[order])
        np.save(run.path("pos"), np.frombuffer(poss, dtype=np.int32)[order])
        np.save(run.path("tf"), np.frombuffer(tfs, dtype=np.float32)[order])
        np.save(run.path("ctf"), np.frombuffer(ctfs, dtype=np.float32)[order])
        self.runs.append(run)
        if len(self.vocab) > self.df.shape[0]:
            self.df = np.concatenate(
                [self.df, np.zeros(len(self.vocab) * 2 - self.df.shape[0], dtype=np.int64)]
            )
        self.df[: len(self.vocab)] += np.bincount(t, minlength=len(self.vocab))


def _npy_writer(path: Path, dtype: str, n: int):
    """An open ``.npy`` file of ``n`` values, header written: the values are appended in order."""
    f = open(path, "wb")  # noqa: SIM115 - closed by the caller after the last chunk
    np.lib.format.write_array_header_1_0(
        f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (n,)}
    )
    return f


def _range_parts(runs: list[_Run], t0: int, t1: int) -> list[tuple[np.ndarray, ...]]:
    """Each run's postings of the terms ``[t0, t1)`` (term ids, positions, tf, citing tf): one
    contiguous slice of each run, since a run is sorted by term."""
    parts: list[tuple[np.ndarray, ...]] = []
    for run in runs:
        tids = np.load(run.path("tids"), mmap_mode="r")
        lo, hi = np.searchsorted(tids, [t0, t1])
        if hi > lo:
            columns = (
                np.array(np.load(run.path(name), mmap_mode="r")[lo:hi]) for name in ("pos", "tf", "ctf")
            )
            parts.append((np.array(tids[lo:hi]), *columns))
        del tids
    return parts


def _merge(
    counter: _Counter, out: Path, chunk_postings: int, stats: BuildStats, on_merge: Progress | None = None
) -> tuple[float, float]:
    """Write offsets, postings and impacts from the runs; returns (avgdl, avgcl). ``on_merge(done,
    total)``: postings written after each range of terms (seconds apart on a big store, after the
    papers' count is complete: a progress bar at 100% would otherwise sit still meanwhile)."""
    p = counter.params
    n_terms = len(counter.vocab)
    df = counter.df[:n_terms]
    dl = np.concatenate(counter.lengths) if counter.lengths else np.zeros(0, dtype=np.float32)
    cl = np.concatenate(counter.citing_lengths) if counter.citing_lengths else np.zeros(0, dtype=np.float32)
    n = int(dl.shape[0])
    avgdl = float(dl.mean()) if n else 1.0
    avgcl = float(cl[cl > 0].mean()) if bool((cl > 0).any()) else 1.0
    own_norm = 1.0 - p.b + p.b * dl / max(avgdl, 1e-9)
    citing_norm = 1.0 - p.b + p.b * cl / max(avgcl, 1e-9)
    del dl, cl
    offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=offsets[1:])
    total = int(offsets[-1])
    np.save(out / "offsets.npy", offsets)
    idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))  # Lucene's non-negative idf, per term
    fp = _npy_writer(out / "postings.npy", "<i4", total)
    fi = _npy_writer(out / "impacts.npy", "<f4", total)
    if on_merge is not None:
        on_merge(0, total)
    try:
        t0 = 0
        while t0 < n_terms:
            # The next range of terms holding at most ``chunk_postings`` postings (at least one term).
            t1 = int(np.searchsorted(offsets, offsets[t0] + chunk_postings, side="right")) - 1
            t1 = min(max(t1, t0 + 1), n_terms)
            parts = _range_parts(counter.runs, t0, t1)
            if parts:
                tids_c, pos_c, tf_c, ctf_c = (np.concatenate(col) for col in zip(*parts, strict=True))
                del parts
                order = np.argsort(tids_c, kind="stable")  # by term; runs (blocks) stay in order
                tids_c, pos_c, tf_c, ctf_c = tids_c[order], pos_c[order], tf_c[order], ctf_c[order]
                tf = tf_c / own_norm[pos_c]
                cited = ctf_c > 0
                if cited.any():
                    tf[cited] += p.w_citing * ctf_c[cited] / citing_norm[pos_c[cited]]
                impacts = (idf[tids_c] * tf * (p.k1 + 1.0) / (tf + p.k1)).astype(np.float32)
                fp.write(pos_c.astype("<i4").tobytes())
                fi.write(impacts.astype("<f4").tobytes())
            stats.merge_ranges += 1
            t0 = t1
            if on_merge is not None:
                on_merge(int(offsets[t1]), total)
    finally:
        fp.close()
        fi.close()
    stats.postings = total
    return avgdl, avgcl


def _write_documents(counter: _Counter, out: Path, stats: BuildStats) -> None:
    """The per-paper arrays and the vocabulary, in the files ``bm25_files.save_index`` writes."""
    ids = np.concatenate(counter.ids) if counter.ids else np.zeros(0, dtype=np.int64)
    np.save(out / "doc_ids.npy", ids)
    counts = np.concatenate(counter.citing_counts) if counter.citing_counts else np.zeros(0, dtype=np.int32)
    np.save(out / "citing_counts.npy", counts)
    terms = [""] * len(counter.vocab)
    for t, i in counter.vocab.items():
        terms[i] = t
    (out / "terms.txt").write_text("\n".join(terms), encoding="utf-8")
    stats.papers, stats.terms = int(ids.shape[0]), len(terms)


def build_index_folder(
    store: Store,
    folder: str | os.PathLike[str],
    params: BM25Params | None = None,
    on_doc: Callable[[], None] | None = None,
    budget_mb: int = DEFAULT_BUDGET_MB,
    *,
    index_version: int,
    block_docs: int | None = None,
    chunk_postings: int | None = None,
    on_merge: Progress | None = None,
) -> BuildStats:
    """Build the store's BM25 index into ``folder`` (replaced atomically), within about
    ``budget_mb`` of working memory beyond the per-paper arrays and the vocabulary
    (``block_docs`` and ``chunk_postings`` override the sizes the budget gives). Progress:
    ``on_doc()`` per paper counted, then ``on_merge(done, total)`` per range of postings written."""
    params = params or BM25Params()
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    clean_orphans(folder)
    generation, built_at = store.generation, store.clock()
    budget = max(budget_mb, 16) * 1024 * 1024
    block_docs = block_docs or max(1000, budget // 2 // _BLOCK_BYTES_PER_DOC)
    chunk_postings = chunk_postings or max(100_000, budget // 2 // _MERGE_BYTES_PER_POSTING)
    stats = BuildStats(block_docs=block_docs)
    tmp = Path(tempfile.mkdtemp(prefix=f"{folder.name}.tmp{os.getpid()}.", dir=folder.parent))
    try:
        work = tmp / "runs"
        work.mkdir()
        counter = _Counter(params, work)
        cursor = store.conn.execute("SELECT id, title, abstract, keywords FROM papers ORDER BY id")
        while rows := cursor.fetchmany(block_docs):
            counter.add_block(expanded_docs(store, rows, params, [r[0] for r in rows]), on_doc)
            stats.blocks += 1
        avgdl, avgcl = _merge(counter, tmp, chunk_postings, stats, on_merge)
        shutil.rmtree(work)
        _write_documents(counter, tmp, stats)
        sizes = {f.name: f.stat().st_size for f in tmp.iterdir()}
        meta = {
            "version": index_version,
            "generation": generation,
            "params": params.__dict__,
            "avgdl": avgdl,
            "avgcl": avgcl,
            "built_at": built_at,
            "sizes": sizes,
        }
        (tmp / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return stats


def swap_in(tmp: Path, folder: Path) -> None:
    """Put the complete folder ``tmp`` in place of ``folder`` (two renames; a kill between them
    leaves the old one as ``.old<pid>``, which :func:`citewise.indexer.index_files.restore_orphan`
    puts back)."""
    old = None
    if folder.exists():
        old = folder.with_name(folder.name + f".old{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        folder.rename(old)
    tmp.rename(folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
