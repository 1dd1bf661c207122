"""Dense embeddings of a store and their nearest-neighbour index, kept beside the SQLite file.

Layout (``<store>.dense/`` next to ``<store>.sqlite``; an older ``<store>.hatten/`` is renamed to it
on first open, see :func:`index_folder`):
- ``rows.i64``: one (paper id, content hash) pair per embedded row, append-only;
- ``emb.f32``: the rows' L2-normalised vectors, float32, append-only, same order;
- ``index.f32.usearch``: the usearch HNSW cosine index over row numbers, float32 (stores under
  ``exact_below`` papers use exact numpy search and have none), or, for stores whose float32
  vectors pass ``quantize_above`` bytes (issue 28), ``index.i8.usearch``: a usearch HNSW index over
  int8 vectors, memory-mapped when served, whose candidates are re-scored from ``emb.f32``
  (memory-mapped too). An ``index.hnsw`` (hnswlib, earlier releases) is replaced by the float32
  usearch index on first use, rebuilt from ``emb.f32``;
- ``meta.json``: model hash, dimension, the index ``kind`` (``exact``, ``usearch-f32``,
  ``usearch-i8``), rows covered by the saved index file (its size and SHA-256), rows no longer valid.

Why this shape: embedding 100k papers takes minutes, so the work is written chunk by chunk and a
restart continues where it stopped (rows are appended vectors first, ids last, and the vector file
is trimmed to the id file on open). Papers added later are the only ones embedded; a changed paper
(content hash) gets a new row and its old row is marked deleted; a different model (hash) starts
over, because vectors of two models are not comparable. The index build checkpoints itself every
``checkpoint_rows`` rows, so a build of millions of rows killed midway resumes from its last save.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from citewise import deprecated

from .index_files import file_sha256, remove_dead_temporaries, replace_file
from .store import Store

Progress = Callable[[int, int], None]
log = logging.getLogger(__name__)


def index_folder(store: Store) -> Path:
    """``<store>.dense/``, the folder of the store's embeddings and ANN index.

    A store embedded before issue 24 has ``<store>.hatten/`` (the dense model was called "hatten"):
    it is renamed to ``.dense/`` the first time it is looked for, with a one-line notice, so its
    embeddings (half an hour for 110k papers) are kept and the next release needs no old name.
    ``rename`` is atomic on one file system, and a process that loses the race finds the new
    folder; when the rename is refused (a read-only folder) the old folder is used where it is."""
    new = store.path.with_name(store.path.name + ".dense")
    old = store.path.with_name(store.path.name + deprecated.OLD_INDEX_SUFFIX)
    if new.exists() or not old.is_dir():
        return new
    try:
        old.rename(new)
    except OSError as exc:
        if new.exists():  # another process renamed it first
            return new
        deprecated.warn_once(
            f"citewise: using the dense index folder {old} under its old name: renaming it to "
            f"{new.name} failed ({exc.strerror or exc}); rename it by hand, the next release reads only {new.name}"
        )
        return old
    deprecated.warn_once(
        f"citewise: renamed the dense index folder {old} to {new.name} (its old name; the embeddings are kept)"
    )
    return new


def _hash64(content_hash: str) -> int:
    return int(content_hash[:15] or "0", 16)


def _current(store: Store) -> tuple[np.ndarray, np.ndarray]:
    """(paper ids, 64-bit content hashes) of the store's papers, sorted by id.

    Read in blocks into arrays: at 10M papers a dict of id -> hash string held ~1.5 GB while
    building, and the server builds it on every open."""
    ids: list[np.ndarray] = [np.zeros(0, np.int64)]
    hashes: list[np.ndarray] = [np.zeros(0, np.int64)]
    cur = store.conn.execute("SELECT id, content_hash FROM papers ORDER BY id")
    while block := cur.fetchmany(100_000):
        ids.append(np.fromiter((r[0] for r in block), np.int64, len(block)))
        hashes.append(np.fromiter((_hash64(r[1] or "") for r in block), np.int64, len(block)))
    return np.concatenate(ids), np.concatenate(hashes)


def _matching(rows: np.ndarray, cur_ids: np.ndarray, cur_h: np.ndarray) -> np.ndarray:
    """Per row: the store still holds its paper, with that content hash."""
    if not len(rows) or not len(cur_ids):
        return np.zeros(len(rows), dtype=bool)
    at = np.searchsorted(cur_ids, rows[:, 0]).clip(max=len(cur_ids) - 1)
    return (cur_ids[at] == rows[:, 0]) & (cur_h[at] == rows[:, 1])


def _valid_rows(rows: np.ndarray, matching: np.ndarray) -> np.ndarray:
    """Which rows searches may return: rows are append-only, so a changed paper has several; only
    the newest row of a paper that the store still holds, with that content hash, is valid."""
    valid = np.zeros(len(rows), dtype=bool)
    newest_first = np.nonzero(matching)[0][::-1]
    _, first = np.unique(rows[newest_first, 0], return_index=True)
    valid[newest_first[first]] = True
    return valid


def _file_problem(path: Path, want: dict) -> str:
    """Why ``path`` is not the file ``want`` records (``index_bytes``, ``index_sha256``); "" if it is."""
    want_size, want_hash = want.get("index_bytes"), want.get("index_sha256")
    if want_size is None or want_hash is None:
        return "no recorded size or checksum"
    if not path.exists():
        return "missing"
    if path.stat().st_size != want_size:
        return f"{path.stat().st_size} bytes, {want_size} expected"
    if file_sha256(path) != want_hash:
        return "checksum differs"
    return ""


# -- the index kinds (issue 28) ---------------------------------------------------------------------
# A store's vectors are searched exactly below ``exact_below`` papers; above, by a usearch HNSW
# graph: over float32 while the float32 vectors fit ``quantize_above`` bytes, else over int8
# (scalar-quantized) vectors, memory-mapped when served, their candidates re-scored in float32.
# Measured in docs/scaling.md ("Dense vectors at scale", bench/bench_ann_scale.py): on ACM-CR and on
# 1M vectors the int8 index, re-scored, keeps float32's recall@10/@100 at a third of its bytes a
# vector but answers more slowly (1 against 0.6 ms at 1M), so it waits until float32 is big: past
# 1 GiB of float32 (~700k papers at 384 dimensions).
#
# The float32 graph was hnswlib's until hnswlib, which ships only a source archive, made
# ``pip install citewise`` need a C++ compiler (4.5 minutes of it where one exists). usearch, already
# here for the int8 kind, ships wheels everywhere and measured the same recall at the same graph
# parameters (docs/install.md, "The float32 index"). A folder still holding an hnswlib
# ``index.hnsw`` (:data:`LEGACY_INDEX_FILES`) is rebuilt from its saved vectors on first use.
KIND_EXACT, KIND_F32, KIND_I8 = "exact", "usearch-f32", "usearch-i8"
INDEX_FILES = {KIND_F32: "index.f32.usearch", KIND_I8: "index.i8.usearch"}
# Index kinds of earlier releases, no longer read: their files are deleted and the index rebuilt
# from ``emb.f32`` (the vectors are kept, nothing is re-embedded).
KIND_HNSWLIB = "hnsw"
LEGACY_INDEX_FILES = {KIND_HNSWLIB: "index.hnsw"}
QUANTIZE_ABOVE = 1 << 30
RESCORE_HEAD = 100  # the int8 kind re-scores 2 x min(k, this) candidates in float32
CHECKPOINT_ROWS = 1_000_000  # a long index build saves itself this often, so a kill resumes there
# The graph's beam while it is built (usearch's expansion_add). 200 made the graph two thirds of
# the CPU after an ACM-CR import (199 CPU s of usearch for 109,569 vectors); at 64 it took 65 CPU s
# for recall@10 0.9949 against exact search instead of 0.9973 (514 ACM-CR dev queries,
# bench/bench_ann_build.py; docs/indexing.md). A saved graph built at 200 is extended at 64.
EF_CONSTRUCTION = 64
ADD_BLOCK_ROWS = 16_384  # vectors handed to the graph at a time (24 MB of float32 at 384 dimensions)


def _read_block(emb_path: Path, start: int, end: int, dim: int) -> np.ndarray:
    """Rows ``start:end`` of the float32 vector file, read into a fresh array.

    Why not a slice of the memory-mapped file: every page of a mapped file that is read stays in
    the process's resident set until the mapping goes, so building the graph of 109,569 ACM-CR
    vectors held all 168 MB of them beside the graph's own copy (and a 150 MB block copied out of
    them); read block by block, the process holds one block."""
    with open(emb_path, "rb") as fh:
        fh.seek(start * dim * 4)
        return np.fromfile(fh, dtype=np.float32, count=(end - start) * dim).reshape(-1, dim)


def _meta_kind(meta: dict) -> str | None:
    """The index kind ``meta`` records (meta.json from before issue 28: hnswlib unless exact)."""
    if "kind" in meta:
        return meta["kind"]
    if "exact" in meta:
        return KIND_EXACT if meta["exact"] else KIND_HNSWLIB
    return None


class _Usearch:
    """A usearch HNSW index (cosine) over row numbers, its vectors stored as ``dtype``.

    ``mapped``: whether the saved file is served memory-mapped (``view``) rather than read into
    the heap. The float32 kind is read into memory: a store of its size (under 1 GiB of vectors)
    fits, and a mapped file cannot be replaced on Windows while a server maps it, which the
    server's own reindex does after every import. The int8 kind is for stores too big for that."""

    kind = KIND_F32
    dtype = "f32"
    mapped = False

    min_ef_construction = 0  # a kind whose graph needs a wider beam than the index's default

    def __init__(self, dim: int, M: int, ef_construction: int) -> None:
        self.dim, self.M = dim, M
        self.ef_construction = max(ef_construction, self.min_ef_construction)

    def create(self, n: int):
        from usearch.index import Index

        return Index(  # grows as rows are added
            ndim=self.dim,
            metric="cos",
            dtype=self.dtype,
            connectivity=self.M,
            expansion_add=self.ef_construction,
        )

    def load(self, path: Path, n: int, view: bool):
        from usearch.index import Index

        index = Index.restore(str(path), view=view and self.mapped)
        if index is None or index.ndim != self.dim or str(index.dtype).split(".")[-1].lower() != self.dtype:
            raise ValueError(f"{path}: not a usearch {self.dtype} index of {self.dim} dimensions")
        # usearch declares the setter apart from its property, so type checkers see it read-only.
        index.expansion_add = self.ef_construction  # type: ignore[misc]  # not saved in the file
        return index

    def add(self, index, vecs: np.ndarray, rows: np.ndarray, threads: int) -> None:
        index.add(rows, vecs, threads=threads)

    def remove(self, index, rows: np.ndarray) -> None:
        if len(rows):
            index.remove(rows)

    def save(self, index, path: Path) -> None:
        index.save(str(path))

    def query(self, index, vec: np.ndarray, k: int, ef: int) -> tuple[np.ndarray, np.ndarray]:
        if index.expansion_search != ef:  # usearch searches max(ef, k) candidates, as hnswlib did
            index.expansion_search = ef
        found = index.search(vec, k)
        return found.keys, 1.0 - found.distances


class _UsearchF32(_Usearch):
    """usearch over float32: 1,536 bytes a 384-d vector plus the graph, read into memory."""


class _UsearchI8(_Usearch):
    """usearch HNSW over int8 vectors (cosine): 384 bytes a 384-d vector instead of 1,536, and the
    saved file is memory-mapped when served (``view``), so the server's RSS holds only the pages
    that searches touch."""

    kind = KIND_I8
    dtype = "i8"
    mapped = True
    # int8 distances misorder near neighbours while the graph is built, too: at a beam of 64 the
    # graph's recall@10 on ACM-CR fell to 0.944 (0.994 in float32), so this kind keeps 200.
    min_ef_construction = 200


BACKENDS: dict[str, type[_Usearch]] = {KIND_F32: _UsearchF32, KIND_I8: _UsearchI8}


class AnnIndex:
    """Embeddings + ANN index of one store for one encoder (anything with ``encode_papers`` and ``model_hash``)."""

    def __init__(
        self,
        store: Store,
        encoder,
        *,
        folder: str | os.PathLike[str] | None = None,
        M: int = 16,
        ef_construction: int = EF_CONSTRUCTION,
        ef: int = 256,
        exact_below: int = 5000,
        quantize_above: int = QUANTIZE_ABOVE,
        checkpoint_rows: int = CHECKPOINT_ROWS,
        chunk: int = 2048,
        threads: int = 2,
    ) -> None:
        self.store = store
        self.encoder = encoder
        self.folder = Path(folder) if folder else index_folder(store)
        self.M, self.ef_construction, self.ef = M, ef_construction, ef
        self.exact_below = exact_below
        self.quantize_above = quantize_above  # bytes of float32 vectors past which int8 is built
        self.checkpoint_rows = checkpoint_rows
        self.chunk = chunk
        self.threads = threads
        self.dim = int(getattr(encoder, "dim", 0)) or None
        self.kind = KIND_EXACT
        self._index = None  # the backend's usearch index, None for exact search
        self._backend: _Usearch | None = None
        self._vecs: np.ndarray | None = None  # in RAM for exact search, else memory-mapped
        self._ids: np.ndarray | None = None
        self._valid: np.ndarray | None = None
        self.embedded_last = 0  # papers embedded by the last build (tests and progress reports)
        self.rebuilt_last = False
        self._saved_file: dict = {}  # size and SHA-256 of the index file the last build saved

    # -- files --------------------------------------------------------------------------------
    @property
    def meta_path(self) -> Path:
        return self.folder / "meta.json"

    def _meta(self) -> dict:
        """The saved meta; ``{"damaged": why}`` when unreadable (the index is then rebuilt)."""
        if not self.meta_path.exists():
            return {}
        try:
            meta = json.loads(self.meta_path.read_text())
        except (OSError, ValueError) as exc:
            return {"damaged": f"meta.json unreadable: {exc}"}
        return meta if isinstance(meta, dict) else {"damaged": "meta.json is not an object"}

    def _write_meta(self, meta: dict) -> None:
        tmp = self.meta_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(meta, indent=2) + "\n")
        tmp.replace(self.meta_path)

    def _read_rows(self, dim: int) -> tuple[np.ndarray, Path]:
        rows_path, emb_path = self.folder / "rows.i64", self.folder / "emb.f32"
        rows = np.fromfile(rows_path, dtype=np.int64) if rows_path.exists() else np.zeros(0, np.int64)
        rows = rows[: len(rows) - len(rows) % 2].reshape(-1, 2)  # a torn last pair (kill mid-write)
        n_vec = emb_path.stat().st_size // (4 * dim) if emb_path.exists() else 0
        n = min(len(rows), n_vec)
        if rows_path.exists() and rows_path.stat().st_size != n * 16:
            # Interrupted between the two appends (or mid-pair): drop the dangling ids.
            rows = rows[:n]
            with open(rows_path, "r+b") as fh:
                fh.truncate(n * 16)
        if emb_path.exists() and emb_path.stat().st_size != n * dim * 4:  # a torn vector too
            with open(emb_path, "r+b") as fh:
                fh.truncate(n * dim * 4)
        return rows, emb_path

    def _open_vectors(self, emb_path: Path, n: int, dim: int) -> np.ndarray:
        """The float32 rows: read into RAM for exact search (under ``exact_below`` papers), else
        memory-mapped (read only when building or exporting; the ANN index has its own copy)."""
        if self.kind == KIND_EXACT or n == 0:
            return np.fromfile(emb_path, dtype=np.float32, count=n * dim).reshape(n, dim)
        return np.memmap(emb_path, dtype=np.float32, mode="r", shape=(n, dim))

    def choose_kind(self, n_valid: int, dim: int) -> str:
        """The index kind for ``n_valid`` vectors: exact, usearch float32 or usearch int8, by the
        size of the float32 vectors (``quantize_above`` bytes; see :data:`QUANTIZE_ABOVE`)."""
        if n_valid == 0 or n_valid < self.exact_below:
            return KIND_EXACT
        return KIND_I8 if n_valid * dim * 4 > self.quantize_above else KIND_F32

    # -- build --------------------------------------------------------------------------------
    def build(self, progress: Progress | None = None, *, keep_kind: bool = False) -> dict:
        """Embed what is missing, then (re)build or extend the index. Returns a summary.

        ``keep_kind`` (what :meth:`load` passes): serve the kind the folder holds, as built by
        ``citewise index``, rather than switching kinds (a rebuild) when the size crosses the line."""
        t0 = time.time()
        model_hash = self.encoder.model_hash
        meta = self._prepare_folder(self._meta(), model_hash)
        cur_ids, cur_h = _current(self.store)
        dim = int(meta.get("dim") or self.dim or self.encoder.encode_papers([]).shape[1])
        rows, emb_path = self._read_rows(dim)
        todo = cur_ids[~np.isin(cur_ids, rows[_matching(rows, cur_ids, cur_h), 0])]
        self._embed_and_append(todo.tolist(), (cur_ids, cur_h), emb_path, progress)
        self.embedded_last = total = len(todo)
        rows, _ = self._read_rows(dim)
        valid = _valid_rows(rows, _matching(rows, cur_ids, cur_h))
        n_valid = int(valid.sum())
        kind = self.choose_kind(n_valid, dim)
        held = _meta_kind(meta)
        if keep_kind and kind != KIND_EXACT and held is not None and held in INDEX_FILES:
            kind = held
        self.kind = kind
        self._vecs, self._ids, self._valid = self._open_vectors(emb_path, len(rows), dim), rows[:, 0], valid
        self._backend = BACKENDS[kind](dim, self.M, self.ef_construction) if kind in BACKENDS else None
        self._drop_legacy_index(meta, n_valid)
        self._index = self._update_index(meta, rows, valid, dim) if self._backend else None
        for other, name in INDEX_FILES.items():  # the index of another kind (the size crossed the line)
            if other != kind:
                (self.folder / name).unlink(missing_ok=True)
        self._write_meta(
            {
                "model_hash": model_hash,
                "dim": dim,
                "rows": len(rows),
                "valid": n_valid,
                "kind": kind,
                "index_rows": len(rows) if self._backend else 0,
                "index_invalid": len(rows) - n_valid if self._backend else 0,
                "M": self.M,
                "ef_construction": self._backend.ef_construction if self._backend else self.ef_construction,
                "exact": kind == KIND_EXACT,
                "store_generation": self.store.generation,
                **(self._saved_file if self._backend else {}),
            }
        )
        return {
            "embedded": total,
            "rows": len(rows),
            "valid": n_valid,
            "exact": kind == KIND_EXACT,
            "kind": kind,
            "rebuilt": self.rebuilt_last,
            "seconds": round(time.time() - t0, 2),
        }

    def _prepare_folder(self, meta: dict, model_hash: str) -> dict:
        """Make the folder ready for appending and return the meta still in force.

        Vectors of another model are not comparable with this one's, so a model change wipes the
        folder and starts over (``rebuilt_last`` tells the caller). Temporary index files of
        processes killed mid-save are removed here, but only when their writer is gone: another
        live process may still be saving its own."""
        self.rebuilt_last = False
        if meta.get("damaged"):
            log.warning("%s: embedding index damaged (%s); rebuilding it", self.folder, meta["damaged"])
        if meta and meta.get("model_hash") != model_hash:
            shutil.rmtree(self.folder)
            meta = {}
            self.rebuilt_last = True
        self.folder.mkdir(parents=True, exist_ok=True)
        remove_dead_temporaries(self.folder, "index.*.tmp*")  # left by a process killed mid-save
        return meta

    def _embed_and_append(
        self,
        todo: list[int],
        current: tuple[np.ndarray, np.ndarray],
        emb_path: Path,
        progress: Progress | None,
    ) -> None:
        """Embed the papers ``todo`` chunk by chunk and append them to the row files.

        Each chunk's vectors are written and fsynced before its ids, so a kill at any point leaves
        at worst a dangling vector that ``_read_rows`` trims; a restart resumes after the last
        whole chunk instead of re-embedding 100k papers. ``current``: the store's (sorted ids,
        content hashes), the hash each row is recorded with."""
        cur_ids, cur_h = current
        total = len(todo)
        done = 0
        if progress:
            progress(0, total)
        with open(emb_path, "ab") as ef, open(self.folder / "rows.i64", "ab") as rf:
            for s in range(0, total, self.chunk):
                ids = todo[s : s + self.chunk]
                papers = self.store.get_many(ids)
                batch = [papers[i] for i in ids if i in papers]
                vecs = np.ascontiguousarray(self.encoder.encode_papers(batch), dtype=np.float32)
                ef.write(vecs.tobytes())
                ef.flush()
                os.fsync(ef.fileno())
                pids = np.array([p.id for p in batch], dtype=np.int64)
                pairs = np.stack([pids, cur_h[np.searchsorted(cur_ids, pids)]], axis=1)
                rf.write(pairs.tobytes())
                rf.flush()
                done += len(ids)
                if progress:
                    progress(done, total)

    def _drop_legacy_index(self, meta: dict, n_valid: int) -> None:
        """Delete an index file of an earlier release (hnswlib's ``index.hnsw``), saying so when
        a new index is built in its place.

        Why rebuild rather than read it: hnswlib ships no wheels (installing it needs a C++
        compiler), and its graph file is not usearch's. The vectors it was built from are kept in
        ``emb.f32``, so nothing is re-embedded: the graph alone is rebuilt, once (about a minute for
        100k papers on two cores), by whichever of ``citewise index`` or the server opens it first."""
        for old_kind, name in LEGACY_INDEX_FILES.items():
            path = self.folder / name
            if not path.exists():
                continue
            if self._backend is not None:
                log.warning(
                    "%s: %s index written by an earlier citewise, no longer read; building the %s index "
                    "of its %d saved vectors in its place (nothing is re-embedded)",
                    path,
                    "an hnswlib" if old_kind == KIND_HNSWLIB else f"a {old_kind}",
                    self._backend.kind,
                    n_valid,
                )
            path.unlink(missing_ok=True)

    def _update_index(self, meta: dict, rows: np.ndarray, valid: np.ndarray, dim: int):
        """The index of ``self.kind`` over all ``rows``, extended from the saved one when it can
        be, saved, and reopened for serving (usearch: memory-mapped).

        Extending (adding only the rows past ``index_rows``) keeps a re-index after a small import
        cheap, and lets a build killed after a checkpoint resume there; the saved file is trusted
        only when its kind, parameters and checksum match the meta, otherwise the index is built
        from scratch. Rows no longer valid are removed from the graph."""
        backend = self._backend
        assert backend is not None
        path = self.folder / INDEX_FILES[self.kind]
        meta = self._adopt_pending(meta, path)
        covered = int(meta.get("index_rows", 0)) if path.exists() and _meta_kind(meta) == self.kind else 0
        n_invalid = len(rows) - int(valid.sum())
        index = None
        if covered and covered <= len(rows) and meta.get("M") == self.M and self._index_file_ok(meta, path):
            if covered == len(rows) and meta.get("index_invalid") == n_invalid:  # nothing to change
                self._saved_file = {k: meta[k] for k in ("index_bytes", "index_sha256")}
                return backend.load(path, len(rows), view=True)
            index = backend.load(path, len(rows), view=False)
        else:
            covered = 0
        index = index if index is not None else backend.create(len(rows))
        meta = {"model_hash": self.encoder.model_hash, "dim": dim, **meta}
        for s in range(covered, len(rows), self.checkpoint_rows):
            end = min(len(rows), s + self.checkpoint_rows)
            for b in range(s, end, ADD_BLOCK_ROWS):
                e = min(end, b + ADD_BLOCK_ROWS)
                backend.add(
                    index, _read_block(self.folder / "emb.f32", b, e, dim), np.arange(b, e), self.threads
                )
            if end < len(rows):  # a checkpoint: a build killed later resumes from here
                meta = self._save_index(index, path, meta, end, -1)
        backend.remove(index, np.nonzero(~valid)[0])
        self._save_index(index, path, meta, len(rows), n_invalid)
        if not backend.mapped:
            return index
        del index  # int8: drop the in-memory copy and serve the saved file, memory-mapped
        return backend.load(path, len(rows), view=True)

    def _save_index(self, index, path: Path, meta: dict, covered: int, n_invalid: int) -> dict:
        """Save ``index`` (covering ``covered`` rows) over ``path`` crash-safely; the meta now in force.

        Saved under a temporary name and renamed: a kill mid-save leaves the old file whole. The
        new file is announced in meta.json first (``pending_index``): a kill between the rename
        and the next meta.json leaves a file that meta.json still vouches for."""
        assert self._backend is not None
        tmp_path = path.with_name(path.name + f".tmp{os.getpid()}")
        self._backend.save(index, tmp_path)
        self._saved_file = {"index_bytes": tmp_path.stat().st_size, "index_sha256": file_sha256(tmp_path)}
        fields = {**self._saved_file, "kind": self.kind, "index_rows": covered, "M": self.M}
        fields["index_invalid"] = n_invalid
        self._write_meta({**meta, "pending_index": fields})
        replace_file(tmp_path, path)
        meta = {**{k: v for k, v in meta.items() if k != "pending_index"}, **fields}
        self._write_meta(meta)
        return meta

    def _adopt_pending(self, meta: dict, path: Path) -> dict:
        """The meta of the index file in place: a save killed after renaming its file into place,
        before writing the next meta.json, left that file's size, checksum and rows as pending."""
        pending = meta.get("pending_index")
        if not isinstance(pending, dict) or not path.exists() or not _file_problem(path, meta):
            return meta
        return {**meta, **pending} if not _file_problem(path, pending) else meta

    def _index_file_ok(self, meta: dict, path: Path) -> bool:
        """The saved index file is the one meta.json describes (size and SHA-256); usearch must
        never read a truncated or corrupt file (it trusts the bytes, and can crash the process)."""
        problem = _file_problem(path, meta)
        if not problem:
            return True
        log.warning("%s: ANN index damaged (%s); rebuilding it from the saved vectors", path, problem)
        return False

    def load(self) -> bool:
        """Open the saved index without embedding anything; False when it is missing or stale."""
        meta = self._meta()
        if not meta or meta.get("model_hash") != self.encoder.model_hash:
            return False
        if any((self.folder / name).exists() for name in LEGACY_INDEX_FILES.values()):
            return self._load_exact(meta)
        self.build(keep_kind=True)  # cheap when up to date: reads the row files, maps the index
        return True

    def _load_exact(self, meta: dict) -> bool:
        """Serve an earlier release's folder by exact search over its saved vectors, building
        nothing: its graph (hnswlib's) is no longer read, and rebuilding it takes minutes, which
        opening a store in the server must never cost. ``citewise index`` rebuilds the graph
        (:meth:`_drop_legacy_index`); until then every search is exact (tens of milliseconds at
        100k papers), so results are as good, only slower."""
        dim = int(meta.get("dim") or 0)
        if not dim:
            return False
        cur_ids, cur_h = _current(self.store)
        rows, emb_path = self._read_rows(dim)
        valid = _valid_rows(rows, _matching(rows, cur_ids, cur_h))
        self.kind, self._backend, self._index = KIND_EXACT, None, None
        self._vecs, self._ids, self._valid = self._open_vectors(emb_path, len(rows), dim), rows[:, 0], valid
        log.warning(
            "%s: an index written by an earlier citewise; searching its %d saved vectors exactly until "
            "`citewise index` rebuilds it (a few minutes, once)",
            self.folder,
            int(valid.sum()),
        )
        return True

    # -- search -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return 0 if self._valid is None else int(self._valid.sum())

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(paper ids, vectors) of the rows searches may return: what a remote engine (Milvus)
        copies, so papers are embedded once, here, and never again on the server side."""
        if self._vecs is None or self._ids is None or self._valid is None:
            raise RuntimeError("index not built: call build() or load() first")
        return self._ids[self._valid], np.asarray(self._vecs[self._valid], dtype=np.float32)

    def search_query(self, query, k: int) -> list[tuple[int, float]]:
        """Top-``k`` for a :class:`~citewise.models.query.ContextQuery` (the prefetch's DenseSource)."""
        return self.search(self.encoder.encode_query(query), k)

    def search_vector(self, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-``k`` for a query vector made by the caller (a placeholder's focused vector,
        models/focus.py): :meth:`search` under the prefetch's DenseSource name."""
        return self.search(vec, k)

    def search(self, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-``k`` (paper id, cosine) for one L2-normalised query vector.

        A deep search (the prefetch asks for 1,000) widens the beam to 1.5 times the depth: on a
        graph built with a beam of 64 (:data:`EF_CONSTRUCTION`), recall@1000 against exact search
        was 0.963 at a beam of 1,000 and 0.982 at 1,500 (0.982 for the earlier graph built at 200),
        for 10.6 instead of 7.1 CPU ms a query (ACM-CR, bench/bench_ann_build.py).

        The int8 index's first ``2 min(k, 100)`` candidates are re-scored with their float32 vectors
        (see :meth:`_rescore`): int8 distances misorder near neighbours (recall@10 0.94 on ACM-CR
        without, 0.998 with; docs/scaling.md, "Dense vectors at scale")."""
        if self._vecs is None or self._valid is None or self._ids is None:
            raise RuntimeError("index not built: call build() or load() first")
        k = min(k, len(self))
        if k <= 0:
            return []
        vec = np.asarray(vec, dtype=np.float32).reshape(-1)
        if self._index is None or self._backend is None:
            sims = self._vecs @ vec
            sims = np.where(self._valid, sims, -np.inf)
            top = np.argpartition(-sims, k - 1)[:k]
            top = top[np.argsort(-sims[top])]
            return [(int(self._ids[r]), float(sims[r])) for r in top]
        head = 2 * min(k, RESCORE_HEAD)  # candidates re-scored in float32 (int8 kind)
        want = min(max(k, head), len(self._valid)) if self.kind == KIND_I8 else k
        rows, sims = self._backend.query(self._index, vec, want, max(self.ef, want + want // 2))
        rows = np.asarray(rows, dtype=np.int64)
        keep = (rows >= 0) & (rows < len(self._valid))
        rows, sims = rows[keep], sims[keep]
        rows, sims = rows[self._valid[rows]], sims[self._valid[rows]]
        if self.kind == KIND_I8 and len(rows):
            rows, sims = self._rescore(rows, np.asarray(sims, dtype=np.float32), vec, head, k)
        return [(int(self._ids[r]), float(s)) for r, s in zip(rows, sims, strict=True)]

    def _rescore(self, rows: np.ndarray, sims: np.ndarray, vec: np.ndarray, head: int, k: int):
        """The top ``k`` after re-scoring the first ``head`` candidates with their float32 rows
        (read from the memory-mapped file in file order); the rest keep their int8 order behind
        them. Bounded so that a deep list (the prefetch asks for 1,000) reads at most 200 rows:
        at 10M papers the float32 file (15 GB) is on disk, not in memory."""
        assert self._vecs is not None
        top = rows[:head]
        order = np.argsort(top)
        exact = np.empty(len(top), dtype=np.float32)
        exact[order] = np.asarray(self._vecs[top[order]]) @ vec
        best = np.argsort(-exact, kind="stable")
        rows = np.concatenate([top[best], rows[head:]])[:k]
        sims = np.concatenate([exact[best], sims[head:]])[:k]
        return rows, sims
