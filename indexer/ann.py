"""Dense embeddings of a store and their nearest-neighbour index, kept beside the SQLite file.

Layout (``<store>.dense/`` next to ``<store>.sqlite``; an older ``<store>.hatten/`` is renamed to it
on first open, see :func:`index_folder`):
- ``rows.i64``: one (paper id, content hash) pair per embedded row, append-only;
- ``emb.f32``: the rows' L2-normalised vectors, float32, append-only, same order;
- ``index.hnsw``: the hnswlib cosine index over row numbers (stores under ``exact_below`` papers
  use exact numpy search and have none);
- ``meta.json``: model hash, dimension, rows covered by the saved hnsw index, rows no longer valid.

Why this shape: embedding 100k papers takes minutes, so the work is written chunk by chunk and a
restart continues where it stopped (rows are appended vectors first, ids last, and the vector file
is trimmed to the id file on open). Papers added later are the only ones embedded; a changed paper
(content hash) gets a new row and its old row is marked deleted; a different model (hash) starts
over, because vectors of two models are not comparable.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from citewise import deprecated

from .index_files import file_sha256, pid_alive, replace_file
from .store import Store

if TYPE_CHECKING:
    import hnswlib

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


def _valid_rows(rows: np.ndarray, current: dict[int, str]) -> np.ndarray:
    """Which rows searches may return: rows are append-only, so a changed paper has several; only
    the newest row of a paper that the store still holds, with that content hash, is valid."""
    valid = np.zeros(len(rows), dtype=bool)
    latest: dict[int, int] = {}
    for r, (pid, h) in enumerate(rows):
        if current.get(int(pid)) is not None and _hash64(current[int(pid)]) == int(h):
            latest[int(pid)] = r
    valid[list(latest.values())] = True
    return valid


def _file_problem(path: Path, want: dict) -> str:
    """Why ``path`` is not the file ``want`` records (``index_bytes``, ``index_sha256``); "" if it is."""
    want_size, want_hash = want.get("index_bytes"), want.get("index_sha256")
    if want_size is None or want_hash is None:
        return "no recorded size or checksum"
    if path.stat().st_size != want_size:
        return f"{path.stat().st_size} bytes, {want_size} expected"
    if file_sha256(path) != want_hash:
        return "checksum differs"
    return ""


class AnnIndex:
    """Embeddings + ANN index of one store for one encoder (anything with ``encode_papers`` and ``model_hash``)."""

    def __init__(
        self,
        store: Store,
        encoder,
        *,
        folder: str | os.PathLike[str] | None = None,
        M: int = 16,
        ef_construction: int = 200,
        ef: int = 256,
        exact_below: int = 5000,
        chunk: int = 2048,
        threads: int = 2,
    ) -> None:
        self.store = store
        self.encoder = encoder
        self.folder = Path(folder) if folder else index_folder(store)
        self.M, self.ef_construction, self.ef = M, ef_construction, ef
        self.exact_below = exact_below
        self.chunk = chunk
        self.threads = threads
        self.dim = int(getattr(encoder, "dim", 0)) or None
        self._index = None  # hnswlib.Index or None (exact search)
        self._vecs: np.ndarray | None = None
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

    def _read_rows(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
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

    # -- build --------------------------------------------------------------------------------
    def build(self, progress: Progress | None = None) -> dict:
        """Embed what is missing, then (re)build or extend the index. Returns a summary."""
        t0 = time.time()
        model_hash = self.encoder.model_hash
        meta = self._prepare_folder(self._meta(), model_hash)
        current = dict(self.store.conn.execute("SELECT id, content_hash FROM papers").fetchall())
        dim = int(meta.get("dim") or self.dim or self.encoder.encode_papers([]).shape[1])
        rows, emb_path = self._read_rows(dim)
        have = {(int(pid), int(h)) for pid, h in rows}
        todo = [pid for pid, ch in current.items() if (pid, _hash64(ch)) not in have]
        todo.sort()
        total = len(todo)
        self._embed_and_append(todo, current, emb_path, progress)
        self.embedded_last = total
        rows, _ = self._read_rows(dim)
        vecs = np.fromfile(emb_path, dtype=np.float32).reshape(-1, dim)
        valid = _valid_rows(rows, current)
        self._vecs, self._ids, self._valid = vecs, rows[:, 0].copy(), valid
        n_valid = int(valid.sum())
        index_path = self.folder / "index.hnsw"
        if n_valid < self.exact_below:
            self._index = None
            if index_path.exists():
                index_path.unlink()
            meta_rows = 0
        else:
            self._index = self._update_hnsw(meta, rows, vecs, valid, dim)
            meta_rows = len(rows)
        index_file = self._saved_file if self._index is not None else {}
        self._write_meta(
            {
                "model_hash": model_hash,
                "dim": dim,
                "rows": len(rows),
                "valid": n_valid,
                "index_rows": meta_rows,
                "M": self.M,
                "ef_construction": self.ef_construction,
                "exact": self._index is None,
                "store_generation": self.store.generation,
                **index_file,
            }
        )
        return {
            "embedded": total,
            "rows": len(rows),
            "valid": n_valid,
            "exact": self._index is None,
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
        for stale in self.folder.glob("index.hnsw.tmp*"):  # left by a process killed mid-save
            pid = stale.name.rsplit("tmp", 1)[-1]
            if pid.isdigit() and not pid_alive(int(pid)):
                stale.unlink(missing_ok=True)
        return meta

    def _embed_and_append(
        self, todo: list[int], current: dict, emb_path: Path, progress: Progress | None
    ) -> None:
        """Embed the papers ``todo`` chunk by chunk and append them to the row files.

        Each chunk's vectors are written and fsynced before its ids, so a kill at any point leaves
        at worst a dangling vector that ``_read_rows`` trims; a restart resumes after the last
        whole chunk instead of re-embedding 100k papers."""
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
                pairs = np.array([[p.id, _hash64(current[p.id])] for p in batch], dtype=np.int64).reshape(
                    -1, 2
                )
                rf.write(pairs.tobytes())
                rf.flush()
                done += len(ids)
                if progress:
                    progress(done, total)

    def _update_hnsw(
        self, meta: dict, rows: np.ndarray, vecs: np.ndarray, valid: np.ndarray, dim: int
    ) -> hnswlib.Index:
        """The hnsw index over all ``rows``, extended from the saved one when it can be, and saved.

        Extending (adding only the rows past ``index_rows``) keeps a re-index after a small import
        cheap; the saved file is trusted only when its parameters and checksum match the meta,
        otherwise the index is built from scratch. Rows no longer valid are marked deleted."""
        import hnswlib

        index_path = self.folder / "index.hnsw"
        index = hnswlib.Index(space="cosine", dim=dim)
        meta = self._adopt_pending(meta)
        covered = int(meta.get("index_rows", 0)) if index_path.exists() else 0
        if covered and covered <= len(rows) and meta.get("M") == self.M and self._index_file_ok(meta):
            index.load_index(str(index_path), max_elements=len(rows))
            new = np.arange(covered, len(rows))
        else:
            index.init_index(max_elements=max(len(rows), 1), M=self.M, ef_construction=self.ef_construction)
            new = np.arange(len(rows))
        index.set_num_threads(self.threads)
        if len(new):
            index.add_items(vecs[new], new)
        for r in np.nonzero(~valid)[0]:
            try:
                index.mark_deleted(int(r))
            except RuntimeError:
                pass  # already deleted
        index.set_ef(self.ef)
        # Saved under a temporary name and renamed: a kill mid-save leaves the old file whole. The
        # new file is announced in meta.json first (``pending_index``): a kill between the rename
        # and the final meta.json leaves a file that meta.json still vouches for.
        tmp_path = index_path.with_name(index_path.name + f".tmp{os.getpid()}")
        index.save_index(str(tmp_path))
        self._saved_file = {"index_bytes": tmp_path.stat().st_size, "index_sha256": file_sha256(tmp_path)}
        self._write_meta(
            {
                "model_hash": self.encoder.model_hash,
                "dim": dim,
                **meta,
                "pending_index": {**self._saved_file, "index_rows": len(rows), "M": self.M},
            }
        )
        replace_file(tmp_path, index_path)
        return index

    def _adopt_pending(self, meta: dict) -> dict:
        """The meta of the index file in place: a save killed after renaming its file into place,
        before writing the final meta.json, left that file's size, checksum and rows as pending."""
        pending = meta.get("pending_index")
        path = self.folder / "index.hnsw"
        if not isinstance(pending, dict) or not path.exists() or not _file_problem(path, meta):
            return meta
        return {**meta, **pending} if not _file_problem(path, pending) else meta

    def _index_file_ok(self, meta: dict) -> bool:
        """The saved hnsw file is the one meta.json describes (size and SHA-256); hnswlib must
        never read a truncated or corrupt file (it trusts the bytes, and can crash the process)."""
        path = self.folder / "index.hnsw"
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
        self.build()  # cheap when up to date: only reads the files and re-opens the index
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

    def search(self, vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-``k`` (paper id, cosine) for one L2-normalised query vector."""
        if self._vecs is None:
            raise RuntimeError("index not built: call build() or load() first")
        k = min(k, len(self))
        if k <= 0:
            return []
        vec = np.asarray(vec, dtype=np.float32).reshape(-1)
        if self._index is None:
            sims = self._vecs @ vec
            sims = np.where(self._valid, sims, -np.inf)
            top = np.argpartition(-sims, k - 1)[:k]
            top = top[np.argsort(-sims[top])]
            return [(int(self._ids[r]), float(sims[r])) for r in top]
        want = max(self.ef, k)
        if want != getattr(self, "_cur_ef", None):  # set_ef only when k outgrows it (shared by threads)
            self._index.set_ef(want)
            self._cur_ef = want
        labels, dist = self._index.knn_query(vec[None], k=k)
        return [(int(self._ids[r]), float(1.0 - d)) for r, d in zip(labels[0], dist[0], strict=True)]
